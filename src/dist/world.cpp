// world.cpp: the local (one-process) communicator and the choice of this process's
// communicator (distributed.h).
#include <unistd.h>

#include <cstdlib>
#include <mutex>

#include "mixprec/dist/distributed.h"
#ifdef MIXPREC_WITH_MPI
#include "dist/mpi_communicator.h"
#include "dist/watchdog.h"
#endif

namespace mixprec::dist {

namespace {

class LocalCommunicator final : public Communicator {
  struct Done final : PendingCollective {  // one rank's sum is its own data: complete at once
    bool test() override { return true; }
    Status wait() override { return Status::ok(); }
  };

 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "local"; }
  std::string host() const override {
    char name[256] = {};
    return gethostname(name, sizeof name - 1) == 0 ? name : "localhost";
  }
  Status allreduce_sum(std::span<float>, const std::string&) override { return Status::ok(); }
  Status allreduce_sum(std::span<double>, const std::string&) override { return Status::ok(); }
  StatusOr<std::unique_ptr<PendingCollective>> start_allreduce_sum(std::span<float>, const std::string&) override {
    return std::unique_ptr<PendingCollective>(std::make_unique<Done>());
  }
  StatusOr<std::unique_ptr<PendingCollective>> start_allreduce_sum_bf16(std::span<uint16_t>,
                                                                        const std::string&) override {
    return std::unique_ptr<PendingCollective>(std::make_unique<Done>());
  }
  Status allreduce_max(std::span<int64_t>, const std::string&) override { return Status::ok(); }
  Status broadcast(std::span<uint8_t>, const std::string&) override { return Status::ok(); }
  StatusOr<std::vector<uint64_t>> allgather(uint64_t value, const std::string&) override {
    return std::vector<uint64_t>{value};
  }
  StatusOr<StepAgreement> agree_on_step(int64_t, int64_t samples) override { return StepAgreement{samples}; }
  [[noreturn]] void abort(int exit_code) override { std::exit(exit_code); }
};

// The launcher's word for "this process is one of several": OpenMPI's mpirun sets both.
int launched_world_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE"})
    if (const char* v = std::getenv(var)) return std::atoi(v);
  return std::getenv("PMIX_RANK") ? 2 : 1;
}

std::mutex g_mu;
std::unique_ptr<Communicator> g_world;
bool g_mpi = false;

}  // namespace

std::unique_ptr<Communicator> make_local_communicator() { return std::make_unique<LocalCommunicator>(); }

bool mpi_available() {
#ifdef MIXPREC_WITH_MPI
  return true;
#else
  return false;
#endif
}

Status init_world() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_world) return Status::ok();
  const int launched = launched_world_size();
#ifdef MIXPREC_WITH_MPI
  if (launched > 1 || std::getenv("OMPI_COMM_WORLD_SIZE")) {
    auto mpi = make_mpi_communicator();
    if (!mpi.is_ok()) return mpi.status();
    g_world = std::move(mpi).value();
    g_mpi = true;
    return Status::ok();
  }
#else
  if (launched > 1)
    return Status(StatusCode::distributed,
                  "this process is one of " + std::to_string(launched) +
                      " started by mpirun, but this mixprec was built without MPI (each rank would train alone); "
                      "install libopenmpi-dev (scripts/setup) and rebuild");
#endif
  g_world = make_local_communicator();
  return Status::ok();
}

Communicator& world() {
  if (!g_world) throw_if_error(init_world());
  return *g_world;
}

void finalize_world() {
  std::lock_guard<std::mutex> lock(g_mu);
#ifdef MIXPREC_WITH_MPI
  if (g_mpi) {
    // MPI_Finalize waits for the other ranks: a rank that hangs at the very end must not keep
    // this one (and mpirun) waiting forever either.
    const std::string who = "rank " + std::to_string(g_world->rank());
    const double seconds = g_world->timeout();
    g_world.reset();
    Watchdog dog(who, 7);
    Watchdog::Watch watch(dog, "the end of the job (MPI_Finalize, waiting for the other ranks)", seconds);
    finalize_mpi();
  }
#endif
  g_world.reset();
  g_mpi = false;
}

}  // namespace mixprec::dist

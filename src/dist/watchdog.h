// watchdog.h: ends this process when a blocking collective outlives its deadline.
//
// A blocking MPI collective cannot be interrupted, and one rank that died or hangs would keep
// every other rank in it forever. Before such a call, a Watch arms the watchdog with a
// deadline and what the call is; when the call returns, the Watch disarms it. If the deadline
// passes first, the watchdog thread prints what was waited for (naming this rank and host)
// and exits the process with `exit_code`; mpirun then ends the job's other ranks.
#pragma once
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace mixprec::dist {

class Watchdog {
 public:
  Watchdog(std::string who, int exit_code);  // who: "rank 1 (host-a)"
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Armed for the lifetime of a Watch.
  class Watch {
   public:
    Watch(Watchdog& dog, const std::string& what, double seconds);
    ~Watch();
    Watch(const Watch&) = delete;
    Watch& operator=(const Watch&) = delete;

   private:
    Watchdog& dog_;
  };

 private:
  void loop();

  using Clock = std::chrono::steady_clock;
  const std::string who_;
  const int exit_code_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false, stopping_ = false;
  Clock::time_point deadline_;
  double seconds_ = 0.0;
  std::string what_;
  std::thread thread_;
};

}  // namespace mixprec::dist

// step_benchmark.h: time full training steps (forward, loss, backward, optimizer) of a model
// under one or more precision presets on a fixed synthetic batch, interleaved, with the
// counters that tell whether a steady-state step is clean (heap allocations, oneDNN
// primitive creations). Behind `mixprec bench`.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/data/data.h"
#include "mixprec/dist/distributed.h"
#include "mixprec/nn/models.h"
#include "mixprec/amp/precision.h"
#include "mixprec/core/status.h"

namespace mixprec::train {

class PrecisionStep;
class DataParallel;

// One preset's training step on a fixed batch, the step benchmark_steps (below) and
// bench/bench_step time: the library's own PrecisionStep, what `mixprec train` runs (weights
// in the preset's dtype, f32 masters, Adam at lr 1e-3, PyTorch's scaler defaults, the fused
// optimizer step), over the spec's model built after manual_seed(seed), so that every preset
// starts from the same f32 weights.
class BenchmarkStep {
 public:
  BenchmarkStep(const nn::ModelSpec& spec, const amp::Preset& preset, int64_t batch_size, uint64_t seed);
  ~BenchmarkStep();
  BenchmarkStep(const BenchmarkStep&) = delete;
  BenchmarkStep& operator=(const BenchmarkStep&) = delete;

  // The step's loss and the wall time of its phases: forward = input cast + autocast forward +
  // loss + loss.item(); backward = the scaled backward; update = zero_grad, the scaler's inf
  // check, the (fused) optimizer update and weight copies.
  struct Phases {
    double loss = 0, forward_ms = 0, backward_ms = 0, update_ms = 0;
  };
  Phases run(const Batch& batch);
  nn::Module& model();
  const amp::Preset& preset() const;
  // Makes this step one rank of a data-parallel step over `comm` (which must outlive it): each
  // run() then meets the other ranks at the step rendezvous, averages the gradients and the
  // loss over them, and takes BatchNorm buffers from rank 0, as a rank of `mpirun -np N mixprec
  // train` does. run()'s batch is this rank's shard. sync_bn: BatchNorm statistics over every
  // rank's shard (--sync-bn), as the workers train's default chooses run.
  void join_ranks(dist::Communicator& comm, bool sync_bn = false);

 private:
  std::unique_ptr<PrecisionStep> step_;
  std::unique_ptr<DataParallel> dp_;
  int64_t dp_step_ = 0;
  std::vector<Batch> micro_ = std::vector<Batch>(1);
};

// oneDNN primitives created since the start (every kind, reorders included): a steady
// training step must leave this unchanged.
int64_t primitive_creations();

struct StepBenchmarkOptions {
  std::string model = "seed-cnn";  // a built-in name, or a model file (FILE.yaml)
  // A model file's input: {C, H, W} (default 1x28x28), or {T} bytes for a text classifier
  // (default 128); and its classes.
  std::vector<int64_t> input;
  int64_t classes = 10;
  std::vector<std::string> presets{"fp32", "amp-bf16"};
  int64_t batch_size = 0;  // 0: the model's benchmark default (default_benchmark_batch)
  int64_t steps = 20;      // timed steps per preset
  int64_t warmup = 3;      // untimed steps per preset first (primitives, layouts, caches)
  uint64_t seed = 0;
  int threads = 0;         // 0: OMP_NUM_THREADS if set, else adaptive (mixprec/core/threads.h)
  // > 1: the step as that many workers, threads of this process that are the ranks of a
  // data-parallel step (each on batch / workers samples, computing on `threads` OpenMP threads,
  // 1 when 0), meeting a few times per step instead of at every parallel region's barrier
  // (train/step_workers.h; issue 34's busy machines). 0: chosen once from the load before the
  // first step, as train's default (mixprec/core/threads.h's choose_workers), with BatchNorm
  // statistics over the whole batch as train's chosen workers keep them.
  int workers = 0;
};

struct PresetTiming {
  std::string preset;
  std::vector<double> step_ms;       // every timed step, in order
  std::vector<int> step_threads;     // the thread count each timed step ran on
  double median_ms = 0, min_ms = 0;
  double images_per_second = 0;      // batch / median
  double forward_ms = 0, backward_ms = 0, update_ms = 0;  // medians of the step's phases
  int64_t peak_activation_bytes = 0; // tracked allocator, over one steady step
  int64_t heap_allocations = 0;      // over all timed steps (0 expected)
  int64_t primitive_creations = 0;   // over all timed steps (0 expected)
  double last_loss = 0;              // sanity: finite, near ln(classes) at the start
};

struct StepBenchmarkResult {
  std::string model;
  int64_t batch_size = 0;
  int threads = 0;            // at the end (the adaptive count may change between steps); per worker
  int workers = 1;            // StepBenchmarkOptions::workers, or the count the default chose
  // What the default chose and why, when the load asked for workers: "2, chosen because other
  // processes busy on ~1.9 of 2 cores (...)", "1, though ...: the batch of 15 does not divide
  // over 2 workers"; "" otherwise.
  std::string workers_note;
  std::string thread_policy;  // ThreadPolicy::describe() at the end: "adaptive (now 1 of 2: ...)"
  std::string thread_warning;  // ThreadPolicy::quota_warning(): --threads above the CPU quota, or ""
  int64_t parameters = 0;
  // Tokens per sample for a language model or a text classifier (0 for images and tables):
  // what turns samples/s into the tokens/s text models are compared by.
  int64_t tokens_per_sample = 0;
  std::vector<PresetTiming> presets;
};

// The batch size the benchmarks use for a model (issue 5's suite): 256 for the CNNs, 512 for
// the MLP.
int64_t default_benchmark_batch(const std::string& model);

// A fixed random batch of n images in the model's geometry (normal(0, 1), seeded by
// manual_seed) with labels drawn from `seed + 1`: what the benchmarks step on, since data
// loading is not part of the step being measured.
Batch synthetic_batch(const nn::ModelSpec& spec, int64_t n, uint64_t seed);

// Runs the benchmark. Presets run round-robin, one step of each in turn, so that a noisy
// shared host affects them alike. `on_progress(done, total)` is called after each timed step.
// The spec benchmark_steps builds: a built-in model's, or a model file's for options.input
// and options.classes (invalid_argument naming --model or --input).
StatusOr<nn::ModelSpec> benchmark_spec(const StepBenchmarkOptions& options);

StatusOr<StepBenchmarkResult> benchmark_steps(const StepBenchmarkOptions& options,
                                              const std::function<void(int64_t, int64_t)>& on_progress = {});

}  // namespace mixprec::train

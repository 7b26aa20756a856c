// step_benchmark.cpp: interleaved whole-step timing under presets (see step_benchmark.h).
#include "mixprec/train/step_benchmark.h"
#include "mixprec/core/hardware.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <random>

#include "backend/onednn/onednn_stats.h"
#include "mixprec/core/memory.h"
#include "mixprec/nn/model_file.h"
#include "mixprec/nn/models.h"
#include "mixprec/core/threads.h"
#include "train/data_parallel.h"
#include "train/precision_step.h"
#include "train/step_workers.h"

namespace mixprec::train {

namespace {

struct Contender {
  PresetTiming timing;
  std::vector<double> forward, backward, update;
  std::unique_ptr<BenchmarkStep> step;  // one process's step, or
  std::unique_ptr<StepWorkers> workers;  // --workers: its data-parallel workers
  BenchmarkStep::Phases run(const Batch& batch) { return workers ? workers->run() : step->run(batch); }
  nn::Module& model() { return workers ? workers->model() : step->model(); }
};

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

BenchmarkStep::BenchmarkStep(const nn::ModelSpec& spec, const amp::Preset& preset, int64_t batch_size,
                             uint64_t seed) {
  TrainConfig config;  // Adam, lr 1e-3, PyTorch's scaler defaults: what `mixprec train` runs
  config.model = spec.name;
  config.precision = preset.name;
  config.batch_size = batch_size;
  manual_seed(seed);  // every preset starts from the same f32 weights
  step_ = std::make_unique<PrecisionStep>(preset, nn::build_model(spec).value(), config);
}

BenchmarkStep::~BenchmarkStep() = default;

BenchmarkStep::Phases BenchmarkStep::run(const Batch& batch) {
  micro_[0] = batch;  // no vector built per step
  if (dp_) {  // what a rank of `mixprec train` does around its step (trainer.cpp)
    auto weight = dp_->agree_on_step(++dp_step_, batch.images.size(0));
    throw_if_error(weight.status());
    step_->set_step_weight(*weight, dp_step_);
  }
  const PrecisionStep::Outcome out = step_->run(micro_);
  if (dp_ && !step_->model().named_buffers().empty()) throw_if_error(dp_->sync_buffers(step_->model(), dp_step_));
  return Phases{out.loss, out.forward_ms, out.backward_ms, out.update_ms};
}

void BenchmarkStep::join_ranks(dist::Communicator& comm, bool sync_bn) {
  dp_ = std::make_unique<DataParallel>(comm);
  step_->set_data_parallel(dp_.get());
  if (sync_bn) step_->set_batch_norm_sync(dp_->batch_norm_sync());
}

nn::Module& BenchmarkStep::model() { return step_->model(); }
const amp::Preset& BenchmarkStep::preset() const { return step_->preset(); }

int64_t primitive_creations() { return backend::onednn::onednn_primitive_creations(); }

Batch synthetic_batch(const nn::ModelSpec& spec, int64_t n, uint64_t seed) {
  Batch batch;
  if (spec.language_model) {  // random bytes: tokens [n, T] and next-byte labels [n, T]
    const int64_t T = spec.width - 1;
    std::mt19937_64 rng(seed + 1);
    std::vector<int64_t> bytes(size_t(n * (T + 1)));
    for (auto& b : bytes) b = int64_t(rng() % 256);
    std::vector<int64_t> tokens, next;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t t = 0; t < T; ++t) {
        tokens.push_back(bytes[size_t(i * (T + 1) + t)]);
        next.push_back(bytes[size_t(i * (T + 1) + t + 1)]);
      }
    batch.images = Tensor::from_vector_i64(tokens, {n, T});
    batch.labels = Tensor::from_vector_i64(next, {n, T});
    return batch;
  }
  std::mt19937_64 rng(seed + 1);
  if (spec.token_input) {  // a text classifier: random non-padding bytes [n, T]
    std::vector<int64_t> ids(size_t(n * spec.width));
    for (auto& b : ids) b = 1 + int64_t(rng() % 255);
    batch.images = Tensor::from_vector_i64(ids, {n, spec.width});
  } else {
    batch.images = Tensor::normal({n, spec.channels, spec.height, spec.width}, 0.0, 1.0);
  }
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (auto& l : labels) l = int64_t(rng() % uint64_t(spec.classes));
  batch.labels = Tensor::from_vector_i64(labels, {n});
  return batch;
}

int64_t default_benchmark_batch(const std::string& model) {
  if (model == "mlp") return 512;
  if (model == "transformer") return 32;
  if (model == "gpt-tiny" || model == "gpt") return 16;  // sequences of 128 / 256 bytes
  return 256;
}

StatusOr<nn::ModelSpec> benchmark_spec(const StepBenchmarkOptions& o) {
  if (!nn::is_model_file(o.model)) {
    if (!o.input.empty())
      return Status::invalid_argument("--input: built-in model " + o.model + " has a fixed input (--input is for "
                                      "model files)");
    return nn::model_spec(o.model);
  }
  auto text = nn::read_model_file(o.model);
  if (!text.is_ok()) return Status::invalid_argument("--model " + o.model + ": " + text.status().message());
  nn::ModelSpec spec = nn::model_file_spec(o.model, *text);
  if (!spec.language_model) spec.classes = o.classes;
  if (!o.input.empty() && spec.language_model)
    return Status::invalid_argument("--input: " + o.model + " is a language model of context " +
                                    std::to_string(spec.width - 1) + " (set in its embedding: context: N)");
  if (!o.input.empty()) {
    const bool ok = spec.token_input ? o.input.size() == 1 && o.input[0] >= 1 && o.input[0] <= 4096
                                     : o.input.size() == 3 && o.input[0] >= 1 && o.input[0] <= 4096 &&
                                           o.input[1] >= 1 && o.input[1] <= 16384 && o.input[2] >= 1 &&
                                           o.input[2] <= 16384;
    if (!ok)
      return Status::invalid_argument(spec.token_input ? "--input: " + o.model + " reads texts: expected T, its bytes "
                                                                                 "per text (1..4096)"
                                                       : std::string("--input: expected CxHxW (e.g. 3x32x32)"));
    if (spec.token_input) spec.width = o.input[0];
    else spec.channels = o.input[0], spec.height = o.input[1], spec.width = o.input[2];
  }
  if (o.classes < 1 || o.classes > 256)
    return Status::invalid_argument("--classes: expected 1..256, got " + std::to_string(o.classes));
  if (auto built = nn::build_model(spec); !built.is_ok()) return Status::invalid_argument(built.status().message());
  return spec;
}

StatusOr<StepBenchmarkResult> benchmark_steps(const StepBenchmarkOptions& o,
                                              const std::function<void(int64_t, int64_t)>& on_progress) {
  auto spec = benchmark_spec(o);
  if (!spec.is_ok()) return spec.status();
  if (o.presets.empty()) return Status::invalid_argument("benchmark: no preset given");
  if (o.steps < 1) return Status::invalid_argument("benchmark: steps must be >= 1, got " + std::to_string(o.steps));
  if (o.warmup < 0) return Status::invalid_argument("benchmark: warmup must be >= 0, got " + std::to_string(o.warmup));
  if (o.batch_size < 0)
    return Status::invalid_argument("benchmark: batch size must be >= 0, got " + std::to_string(o.batch_size));

  if (o.threads < 0 || o.threads > max_thread_count())
    return Status::invalid_argument("--threads: must be from 0 (all cores) to " + std::to_string(max_thread_count()) +
                                    ", got " + std::to_string(o.threads));
  if (o.workers < 0 || o.workers > max_thread_count())
    return Status::invalid_argument("--workers: must be from 0 (chosen by the load) to " +
                                    std::to_string(max_thread_count()) + ", got " + std::to_string(o.workers));
  StepBenchmarkResult result;
  result.model = o.model;
  // A language model from a file: sequences, as the built-in GPTs (default_benchmark_batch).
  result.batch_size = o.batch_size > 0 ? o.batch_size : spec->language_model ? 16 : default_benchmark_batch(o.model);
  result.tokens_per_sample = spec->language_model ? spec->width - 1 : spec->token_input ? spec->width : 0;
  const int64_t n = result.batch_size;

  // --threads N, OMP_NUM_THREADS, or the adaptive default, re-decided between steps. Workers
  // compute on --threads each (1 by default) and adapt nothing: their count is the setting,
  // the user's or, by default, chosen once from the load before the first step as train
  // chooses it (mixprec/core/threads.h's choose_workers).
  int workers = o.workers;
  std::string chosen;
  auto threads = std::make_unique<ThreadPolicy>(o.threads);
  if (workers == 0) {
    workers = 1;
    if (threads->adaptive()) {
      threads->settle();
      const WorkerChoice w = choose_workers(*threads, n);
      workers = w.workers;
      if (workers > 1) chosen = w.load;
      else if (!w.obstacle.empty()) result.workers_note = "1, though " + w.load + ": " + w.obstacle;
    }
  }
  const bool with_workers = workers > 1;
  const int worker_threads = o.threads > 0 ? o.threads : 1;
  if (with_workers) threads = std::make_unique<ThreadPolicy>(worker_threads);
  threads->apply();
  if (with_workers && n % workers != 0)
    return Status::invalid_argument("--batch-size: " + std::to_string(n) + " must divide evenly over --workers " +
                                    std::to_string(workers) + " (try " + even_batches_near(n, workers) + ")");
  result.workers = workers;
  manual_seed(o.seed);
  const Batch batch = synthetic_batch(*spec, n, o.seed);

  std::vector<Contender> contenders;
  for (const std::string& name : o.presets) {
    auto preset = amp::preset_by_name(name);
    if (!preset.is_ok()) return preset.status();
    Contender c;
    c.timing.preset = name;
    if (with_workers) c.workers = std::make_unique<StepWorkers>(*spec, *preset, batch, workers, worker_threads, o.seed,
                                                    /*sync_bn=*/!chosen.empty());
    else c.step = std::make_unique<BenchmarkStep>(*spec, *preset, n, o.seed);
    if (result.parameters == 0) result.parameters = c.model().num_parameters();
    contenders.push_back(std::move(c));
  }

  for (int64_t i = 0; i < o.warmup; ++i)
    for (Contender& c : contenders) c.timing.last_loss = c.run(batch).loss;

  // The warm-up was the thread policy's first window; the step below then makes the
  // primitives for the count it chose.
  threads->settle();
  // One extra untimed step per preset measures its peak activation memory in isolation.
  for (Contender& c : contenders) {
    reset_peak_memory();
    const int64_t base = current_bytes(MemoryCategory::activations);
    c.timing.last_loss = c.run(batch).loss;
    c.timing.peak_activation_bytes = peak_bytes(MemoryCategory::activations) - base;
  }

  const int64_t total = o.steps * int64_t(contenders.size());
  int64_t done = 0;
  for (int64_t i = 0; i < o.steps; ++i) {
    for (Contender& c : contenders) {
      const int64_t allocs = allocation_count();
      const int64_t prims = primitive_creations();
      const auto t0 = std::chrono::steady_clock::now();
      c.timing.step_threads.push_back(with_workers ? worker_threads : threads->apply());  // timed: train pays it too
      const BenchmarkStep::Phases out = c.run(batch);
      const auto t1 = std::chrono::steady_clock::now();
      c.timing.last_loss = out.loss;
      c.forward.push_back(out.forward_ms);
      c.backward.push_back(out.backward_ms);
      c.update.push_back(out.update_ms);
      c.timing.step_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      c.timing.heap_allocations += allocation_count() - allocs;
      c.timing.primitive_creations += primitive_creations() - prims;
      if (on_progress) on_progress(++done, total);
    }
  }
  result.threads = threads->threads();
  result.thread_policy = threads->describe();
  if (with_workers && o.threads == 0) result.thread_policy = "1 (a worker's default)";
  if (!chosen.empty())
    result.workers_note = std::to_string(workers) + ", chosen because " + chosen +
                          " (--workers 1 times one step on adaptive threads)";
  result.thread_warning = threads->quota_warning();
  for (Contender& c : contenders) {
    PresetTiming& t = c.timing;
    t.median_ms = median_of(t.step_ms);
    t.min_ms = *std::min_element(t.step_ms.begin(), t.step_ms.end());
    t.images_per_second = t.median_ms > 0 ? double(n) * 1000.0 / t.median_ms : 0.0;
    t.forward_ms = median_of(c.forward);
    t.backward_ms = median_of(c.backward);
    t.update_ms = median_of(c.update);
    result.presets.push_back(std::move(t));
  }
  return result;
}

}  // namespace mixprec::train

// step_workers_test.cpp: the step as in-process data-parallel workers (train/step_workers.h)
// against an independent route to the same arithmetic: one process stepping on the same
// shards as micro-batches of one step (gradient accumulation). Averaging W shards' gradients
// over the ranks, (g0 + g1) / 2, and accumulating each shard's gradient of loss / 2,
// g0 / 2 + g1 / 2, round alike (halving is exact), so on one thread each the two must leave
// bit-identical weights, optimizer state and losses, step after step; and every worker's
// replica must hold rank 0's weights.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>

#include "mixprec/amp/precision.h"
#include "mixprec/nn/models.h"
#include "mixprec/ops/ops.h"
#include "mixprec/train/step_benchmark.h"
#include "train/precision_step.h"
#include "train/step_workers.h"

namespace mixprec::train {
namespace {

std::vector<uint8_t> bytes_of(const std::vector<Tensor>& ts) {
  std::vector<uint8_t> out;
  for (const Tensor& t : ts) {
    const Tensor c = t.contiguous();
    const auto* p = static_cast<const uint8_t*>(c.data());
    out.insert(out.end(), p, p + size_t(c.numel()) * dtype_size(c.dtype()));
  }
  return out;
}

// The first parameter whose bytes differ, with how many of its values differ, or "".
std::string first_difference(nn::Module& a, nn::Module& b) {
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    const Tensor x = pa[i].second.to(DType::f32).contiguous(), y = pb[i].second.to(DType::f32).contiguous();
    const float *p = x.data_ptr<float>(), *q = y.data_ptr<float>();
    int64_t n = 0;
    double worst = 0;
    for (int64_t j = 0; j < x.numel(); ++j)
      if (std::memcmp(p + j, q + j, 4) != 0) ++n, worst = std::max(worst, double(std::fabs(p[j] - q[j])));
    if (n) return pa[i].first + ": " + std::to_string(n) + " of " + std::to_string(x.numel()) + " differ, by up to " + std::to_string(worst);
  }
  return "";
}

std::vector<Tensor> parameters_of(nn::Module& m) {
  std::vector<Tensor> out;
  for (auto& [name, p] : m.named_parameters()) out.push_back(p);
  return out;
}

void same_as_accumulation(const std::string& model, const std::string& precision, int64_t batch_size) {
  omp_set_num_threads(1);  // the reference's thread count is the workers'
  const nn::ModelSpec spec = nn::model_spec(model).value();
  const amp::Preset preset = amp::preset_by_name(precision).value();
  manual_seed(3);
  const Batch batch = synthetic_batch(spec, batch_size, 3);
  const int64_t half = batch_size / 2;
  const std::vector<Batch> shards = {Batch{narrow(batch.images, 0, half), narrow(batch.labels, 0, half)},
                                     Batch{narrow(batch.images, half, half), narrow(batch.labels, half, half)}};

  StepWorkers workers(spec, preset, batch, 2, 1, /*seed=*/5);
  TrainConfig config;  // BenchmarkStep's: Adam, lr 1e-3, PyTorch's scaler defaults
  config.model = spec.name;
  config.precision = preset.name;
  config.batch_size = batch_size;
  manual_seed(5);
  PrecisionStep reference(preset, nn::build_model(spec).value(), config);

  ASSERT_EQ(bytes_of(parameters_of(workers.model())), bytes_of(parameters_of(reference.model())));
  for (int step = 1; step <= 3; ++step) {
    const BenchmarkStep::Phases w = workers.run();
    const PrecisionStep::Outcome r = reference.run(shards);
    EXPECT_EQ(w.loss, r.loss) << model << " " << precision << " step " << step;
    ASSERT_EQ(bytes_of(parameters_of(workers.model())), bytes_of(parameters_of(reference.model())))
        << model << " " << precision << ": weights differ after step " << step << ": "
        << first_difference(workers.model(), reference.model());
  }
  std::vector<Tensor> state;
  for (const auto& [name, t] : reference.optimizer().state_tensors()) state.push_back(t);
  EXPECT_FALSE(state.empty());
}

// Models without tied weights: a weight that gets two gradients in one backward (a GPT's
// embedding and head) sums them into its .grad one at a time, so accumulating micro-batches
// adds (old + h1) + e1 where the ranks add (h0 + e0) + (h1 + e1): a few ulps apart, not a
// difference between the routes under test.
TEST(StepWorkers, TwoWorkersStepAsOneProcessAccumulatingTheirShards) {
  same_as_accumulation("transformer", "amp-bf16", 4);
  same_as_accumulation("seed-cnn", "amp-bf16", 8);
  same_as_accumulation("mlp", "fp32", 8);
}

TEST(StepWorkers, ABatchThatDoesNotSplitIsRefused) {
  const nn::ModelSpec spec = nn::model_spec("mlp").value();
  manual_seed(0);
  const Batch batch = synthetic_batch(spec, 5, 0);
  try {
    StepWorkers w(spec, amp::preset_by_name("fp32").value(), batch, 2, 1, 0);
    FAIL() << "a batch of 5 split over 2 workers was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("must divide the batch of 5"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mixprec::train

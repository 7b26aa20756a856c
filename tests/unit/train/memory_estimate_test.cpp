// memory_estimate_test.cpp: a run's memory estimated before it allocates (memory_estimate.h).
//  - the model-file formula on a small file, against the same sum worked out by hand here;
//  - the estimate against the tracking allocator's measured peak of real training steps, for
//    model files of each kind (convolutions, an MLP with norms and dropout, a transformer
//    classifier, a language model) and for built-in models (measured at batch 1 and 4): within
//    a factor of 2 either way (docs/cli.md states the same bound);
//  - a run that cannot fit is refused before any large allocation: the tracking allocator's
//    peak over the refused run stays far below one batch of activations;
//  - the machine's memory read from /proc/meminfo and the cgroup files, and the override.
// Nothing here allocates more than a few hundred MB: the refusal is tested against a budget
// (MIXPREC_MEMORY_LIMIT), not by exhausting the machine.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <string>

#include "unit/data/data_test_util.h"
#include "mixprec/core/memory.h"
#include "mixprec/nn/model_file.h"
#include "mixprec/train/train.h"
#include "train/memory_estimate.h"

namespace mixprec::train {
namespace {

using testing_data::TempDir;

// Sets MIXPREC_MEMORY_LIMIT for one test, restoring the previous value.
class LimitGuard {
 public:
  explicit LimitGuard(const char* value) {
    if (const char* old = std::getenv("MIXPREC_MEMORY_LIMIT")) old_ = old, had_ = true;
    ::setenv("MIXPREC_MEMORY_LIMIT", value, 1);
  }
  ~LimitGuard() {
    if (had_) ::setenv("MIXPREC_MEMORY_LIMIT", old_.c_str(), 1);
    else ::unsetenv("MIXPREC_MEMORY_LIMIT");
  }

 private:
  std::string old_;
  bool had_ = false;
};

TrainConfig config_for(const std::string& model, int64_t batch) {
  TrainConfig c;
  c.model = model;
  c.dataset = "synthetic";
  c.precision = "fp32";
  c.batch_size = batch;
  c.max_steps = 2;
  c.epochs = 1;
  c.train_subset = 2 * batch;
  c.test_subset = 8;
  c.self_check = false;
  c.evaluate = false;
  c.threads = 2;
  return c;
}

TEST(MemoryEstimate, ModelFileFormulaMatchesTheSumByHand) {
  const amp::Preset fp32 = amp::preset_by_name("fp32").value();
  nn::ModelSpec spec = nn::model_file_spec("small.yaml", "layers:\n  - flatten\n  - linear: {out: 16}\n  - relu\n"
                                                         "  - linear: {out: classes}\n");
  auto e = estimate_model_file_memory(spec, config_for("small.yaml", 8), fp32, 8);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  // Input 1x28x28 = 784; flatten a view (0); linear 16, relu 16, linear 10: 42 kept; the
  // largest 16 again for backward's gradients: 4 bytes x (784 + 42 + 16).
  EXPECT_EQ(e->activation_bytes_per_sample, 4 * (784 + 42 + 16));
  // 784 x 16 + 16 + 16 x 10 + 10 parameters; fp32 with Adam: weight, gradient, 2 moments.
  EXPECT_EQ(e->parameters, 784 * 16 + 16 + 16 * 10 + 10);
  EXPECT_EQ(e->weight_bytes, e->parameters * (4 + 4 + 8));
  EXPECT_EQ(e->total_bytes, e->weight_bytes + 8 * e->activation_bytes_per_sample);
  // amp-bf16 adds the cached bf16 copy; o2-bf16 bf16 weights and gradients and f32 masters;
  // SGD without momentum keeps no state.
  TrainConfig sgd = config_for("small.yaml", 8);
  sgd.optimizer = "sgd";
  sgd.momentum = 0;
  EXPECT_EQ(estimate_model_file_memory(spec, sgd, amp::preset_by_name("amp-bf16").value(), 8)->weight_bytes,
            e->parameters * (4 + 4 + 2));
  EXPECT_EQ(estimate_model_file_memory(spec, sgd, amp::preset_by_name("o2-bf16").value(), 8)->weight_bytes,
            e->parameters * (2 + 2 + 4));
}

// The estimate a run made against the peak it then measured (TrainResult), fp32, two steps.
void expect_within_factor_2(const std::string& model, const std::string& text, int64_t batch,
                            const std::string& dataset = "synthetic") {
  SCOPED_TRACE(model);
  TempDir dir;
  std::string name = model;
  if (!text.empty()) {
    name = dir.file(model);
    std::ofstream(name) << text;
  }
  TrainConfig c = config_for(name, batch);
  c.dataset = dataset;
  if (dataset == "text") {
    c.data_dir = dir.file("t.txt");
    std::string words;
    for (int i = 0; i < 3000; ++i) words += "and the word was " + std::to_string(i % 97) + ". ";
    std::ofstream(c.data_dir) << words;
    c.train_subset = -1;
  }
  LimitGuard huge("1T");  // the check runs (and reports its estimate) whatever the machine
  auto r = run(c);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_GT(r->estimated_memory_bytes, 0);
  ASSERT_GT(r->peak_total_bytes, 0);
  const double ratio = double(r->estimated_memory_bytes) / double(r->peak_total_bytes);
  std::printf("%s batch %lld: estimated %lld bytes, measured peak %lld: ratio %.2f\n", model.c_str(),
              (long long)batch, (long long)r->estimated_memory_bytes, (long long)r->peak_total_bytes, ratio);
  EXPECT_GE(ratio, 0.5);
  EXPECT_LE(ratio, 2.0);
}

TEST(MemoryEstimate, ModelFilesWithinAFactorOf2OfTheMeasuredPeak) {
  expect_within_factor_2("conv.yaml",
                         "layers:\n  - conv2d: {out: 64, kernel: 3, padding: 1}\n  - relu\n  - maxpool2d: {kernel: 2}\n"
                         "  - conv2d: {out: 128, kernel: 3, padding: 1}\n  - batchnorm2d\n  - relu\n"
                         "  - global_avgpool\n  - flatten\n  - linear: {out: classes}\n",
                         64);
  expect_within_factor_2("mlp.yaml",
                         "layers:\n  - flatten\n  - linear: {out: 1024}\n  - layernorm\n  - gelu\n  - dropout: {p: 0.1}\n"
                         "  - linear: {out: 1024}\n  - gelu\n  - linear: {out: classes}\n",
                         128);
  expect_within_factor_2("lm.yaml",
                         "layers:\n  - embedding: {dim: 64, context: 64}\n  - decoder: {heads: 4}\n"
                         "  - decoder: {heads: 4}\n  - layernorm\n  - lm_head\n",
                         32, "text");
}

TEST(MemoryEstimate, BuiltInModelsWithinAFactorOf2OfTheMeasuredPeak) {
  expect_within_factor_2("cnn", "", 128);
  expect_within_factor_2("resnet20", "", 32);
}

// The wide convolution of issue 31 (4,096 channels here: ~50 MB of activations per sample,
// 3 GB at batch 64) against a budget of 1 GiB: refused, naming the estimate, the budget and
// the batch that would fit, and the tracking allocator never held more than the weights.
TEST(MemoryEstimate, ARunThatCannotFitIsRefusedBeforeAnyLargeAllocation) {
  TempDir dir;
  const std::string model = dir.file("wide.yaml");
  std::ofstream(model) << "layers:\n  - conv2d: {out: 4096, kernel: 3, padding: 1}\n  - relu\n  - global_avgpool\n"
                          "  - flatten\n  - linear: {out: classes}\n";
  LimitGuard budget("1G");
  const int64_t held_before = memory_stats().total_current;
  reset_peak_memory();
  int steps = 0;
  Callbacks cb;
  cb.on_step = [&](const StepReport&) { ++steps; };
  auto r = run(config_for(model, 64), cb);
  const int64_t peak = memory_stats().total_peak - held_before;
  ASSERT_FALSE(r.is_ok()) << "trained; peak " << r->peak_total_bytes;
  EXPECT_EQ(r.status().code(), StatusCode::resource_exhausted);
  const std::string& m = r.status().message();
  EXPECT_NE(m.find("not enough memory for this run: it needs about "), std::string::npos) << m;
  EXPECT_NE(m.find("x batch 64, from the model file's layer shapes), and 1.0 GiB is available (MIXPREC_MEMORY_LIMIT)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("lower --batch-size to at most "), std::string::npos) << m;
  EXPECT_EQ(steps, 0);
  // One batch of the first layer's output alone is 64 x 4096 x 28 x 28 x 4 bytes = 822 MB;
  // the weights (41k parameters) are well under 16 MB.
  EXPECT_LT(peak, int64_t(16) << 20) << "bytes allocated by a run that should have been refused up front";
  // The batch the message proposes fits the same budget.
  const size_t at = m.find("at most ") + 8;
  const int64_t fits = std::stoll(m.substr(at));
  ASSERT_GE(fits, 1);
  auto smaller = estimate_model_file_memory(nn::model_file_spec(model, *nn::read_model_file(model)),
                                            config_for(model, fits), amp::preset_by_name("fp32").value(), fits);
  ASSERT_TRUE(smaller.is_ok());
  EXPECT_LE(smaller->total_bytes, int64_t(1) << 30);
  EXPECT_TRUE(check_fits_in_memory(*smaller, MachineMemory{int64_t(1) << 30, "budget"}).is_ok());
}

TEST(MemoryEstimate, TheRefusalGivesTheLargestBatchThatFits) {
  MemoryEstimate e;
  e.parameters = 1000;
  e.weight_bytes = int64_t(1) << 30;
  e.activation_bytes_per_sample = int64_t(100) << 20;
  e.batch = 64;
  e.total_bytes = e.weight_bytes + 64 * e.activation_bytes_per_sample;
  e.method = "by hand";
  const Status s = check_fits_in_memory(e, MachineMemory{int64_t(4) << 30, "MemAvailable"});
  EXPECT_EQ(s.code(), StatusCode::resource_exhausted);
  // (4096 - 1024) MiB / 100 MiB = 30.72: at most 30.
  EXPECT_NE(s.message().find("it needs about 7.2 GiB"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("4.0 GiB is available (MemAvailable): lower --batch-size to at most 30 "),
            std::string::npos)
      << s.message();
  EXPECT_TRUE(check_fits_in_memory(e, MachineMemory{e.total_bytes, "exactly"}).is_ok());
  EXPECT_FALSE(check_fits_in_memory(e, MachineMemory{e.total_bytes - 1, "one byte short"}).is_ok());
  const Status none = check_fits_in_memory(e, MachineMemory{int64_t(512) << 20, "small"});
  EXPECT_NE(none.message().find("even one sample does not fit"), std::string::npos) << none.message();
}

TEST(MachineMemory, MemAvailableTheTighterCgroupLimitOrTheOverride) {
  const std::string meminfo = "MemTotal:       24000000 kB\nMemFree:  1000 kB\nMemAvailable:   20000000 kB\n";
  auto plain = machine_memory_from(meminfo, "", "", nullptr);
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->available, int64_t(20000000) * 1024);
  EXPECT_EQ(plain->source, "MemAvailable");
  // cgroup v2 without a limit says "max".
  EXPECT_EQ(machine_memory_from(meminfo, "max\n", "123\n", nullptr)->available, int64_t(20000000) * 1024);
  // A limit of 4 GiB with 1 GiB in use leaves 3 GiB: tighter than MemAvailable.
  auto cg = machine_memory_from(meminfo, "4294967296\n", "1073741824\n", nullptr);
  EXPECT_EQ(cg->available, int64_t(3) << 30);
  EXPECT_EQ(cg->source, "cgroup limit 4.0 GiB, 1.0 GiB in use");
  // A cgroup v1 "no limit" (a huge number) does not win over MemAvailable.
  EXPECT_EQ(machine_memory_from(meminfo, "9223372036854771712\n", "1000\n", nullptr)->source, "MemAvailable");
  EXPECT_EQ(machine_memory_from(meminfo, "", "", "8G")->available, int64_t(8) << 30);
  EXPECT_EQ(machine_memory_from(meminfo, "", "", "1500M")->available, int64_t(1500) << 20);
  EXPECT_EQ(machine_memory_from(meminfo, "", "", "123456")->available, 123456);
  EXPECT_FALSE(machine_memory_from(meminfo, "", "", "off").has_value());
  EXPECT_EQ(machine_memory_from(meminfo, "", "", "lots")->source, "MemAvailable");  // unreadable: ignored
  EXPECT_FALSE(machine_memory_from("", "", "", nullptr).has_value());  // nothing to read: no check
}

}  // namespace
}  // namespace mixprec::train

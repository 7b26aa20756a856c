// load_weights_test.cpp: weights saved by name (by PyTorch, another run, a checkpoint) go
// into a model by name, converting the dtype; every name that does not fit is reported.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "mixprec/nn/models.h"
#include "mixprec/io/safetensors.h"
#include "train/checkpointing.h"

namespace mixprec {
namespace {

std::string temp_path(const char* name) { return ::testing::TempDir() + name; }

// The model's tensors by name, with `edit` applied to the list first.
template <typename Edit>
std::vector<std::pair<std::string, Tensor>> saved_tensors(nn::Module& m, Edit&& edit) {
  auto t = m.named_parameters();
  edit(t);
  return t;
}

TEST(LoadWeights, CopiesEveryTensorByNameConvertingTheDtype) {
  manual_seed(1);
  nn::Cnn source(1, 28, 28);
  std::vector<std::pair<std::string, Tensor>> file;
  for (auto& [name, t] : source.named_parameters()) file.emplace_back(name, t.to(DType::bf16));
  file.emplace_back("optimizer.exp_avg.0", Tensor::zeros({3}));  // a checkpoint's extra state
  const std::string path = temp_path("weights_bf16.safetensors");
  ASSERT_TRUE(save_safetensors(path, file).is_ok());

  manual_seed(2);
  nn::Cnn target(1, 28, 28);
  ASSERT_TRUE(train::load_weights(target, path).is_ok());
  auto src = source.named_parameters(), dst = target.named_parameters();
  ASSERT_EQ(src.size(), dst.size());
  for (size_t i = 0; i < src.size(); ++i) {
    EXPECT_EQ(dst[i].second.dtype(), DType::f32) << dst[i].first;
    // Independent expectation: the bf16 rounding of the source, widened back exactly.
    EXPECT_EQ(dst[i].second.to_vector_f64(), src[i].second.to(DType::bf16).to_vector_f64()) << dst[i].first;
  }
  std::remove(path.c_str());
}

TEST(LoadWeights, NamesEveryTensorThatDoesNotFit) {
  manual_seed(1);
  nn::Cnn model(1, 28, 28);
  auto tensors = saved_tensors(model, [](auto& t) {
    t.erase(t.begin());                                       // conv1.weight missing
    t[0].second = Tensor::zeros({7});                         // conv1.bias mis-shaped
    t.emplace_back("head.weight", Tensor::zeros({2, 2}));     // not in the model
  });
  const Status s = train::load_weights(model, tensors, "w.safetensors");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("head.weight"), std::string::npos) << s.message();
  // The unexpected name is reported first; a file without it names the others.
  tensors.pop_back();
  const Status s2 = train::load_weights(model, tensors, "w.safetensors");
  ASSERT_FALSE(s2.is_ok());
  EXPECT_NE(s2.message().find("w.safetensors"), std::string::npos) << s2.message();
  EXPECT_NE(s2.message().find("conv1.weight"), std::string::npos) << s2.message();
  EXPECT_NE(s2.message().find("conv1.bias"), std::string::npos) << s2.message();
  EXPECT_NE(s2.message().find("[7]"), std::string::npos) << s2.message();
}

TEST(LoadWeights, RefusesIntegerTensorsForFloatingParameters) {
  manual_seed(1);
  nn::Cnn model(1, 28, 28);
  auto tensors = saved_tensors(model, [](auto& t) {
    t[1].second = Tensor::from_vector_i64(std::vector<int64_t>(size_t(t[1].second.numel()), 1), t[1].second.shape());
  });
  const Status s = train::load_weights(model, tensors, "w.safetensors");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("conv1.bias"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("floating"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace mixprec

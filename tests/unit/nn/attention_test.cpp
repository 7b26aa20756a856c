// attention_test.cpp: nn::MultiheadAttention against a float64 loop implementation written
// here (in f64 on the reference kernels and in f32 on oneDNN), PyTorch's parameter names and
// initial values, a finite-difference check of the whole TransformerEncoderLayer in f64
// through autograd, and the dtypes autocast gives the attention's ops (read from the graph).
// Long because both attention routes (unfused and fused) are checked against the same naive
// loops and the same module here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "core/cpu_features.h"
#include "common/finite_diff.h"
#include "mixprec/amp/amp.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/core/memory.h"
#include "mixprec/nn/nn_attention.h"
#include "mixprec/ops/ops.h"

namespace mixprec {
namespace {

using test::random_tensor;

// Every parameter of `m` set to seeded uniform values in [-0.5, 0.5) (biases non-zero, so a
// forward that dropped one would fail), in the parameter's dtype.
void randomize(nn::Module& m, uint64_t seed) {
  for (auto& [name, p] : m.named_parameters()) {
    Tensor dst = p;
    dst.copy_(random_tensor(p.shape(), seed++, -0.5, 0.5));
  }
}

// MultiheadAttention(E, H) on x [B, S, E], written as plain loops in double from the
// definition: qkv = x W_in^T + b_in; per head h, scores = q_h k_h^T / sqrt(D); softmax over
// keys; context = P v_h; out = context W_out^T + b_out.
std::vector<double> naive_mha(const std::vector<double>& x, int64_t B, int64_t S, int64_t E,
                              int64_t H, const std::vector<double>& w_in,
                              const std::vector<double>& b_in, const std::vector<double>& w_out,
                              const std::vector<double>& b_out, bool causal = false,
                              const std::vector<double>* attn_mask = nullptr) {  // [S, S], added to the scores
  const int64_t D = E / H;
  std::vector<double> out(size_t(B * S * E));
  for (int64_t b = 0; b < B; ++b) {
    std::vector<double> qkv(size_t(S * 3 * E));
    for (int64_t s = 0; s < S; ++s)
      for (int64_t j = 0; j < 3 * E; ++j) {
        double acc = b_in[size_t(j)];
        for (int64_t e = 0; e < E; ++e) acc += w_in[size_t(j * E + e)] * x[size_t((b * S + s) * E + e)];
        qkv[size_t(s * 3 * E + j)] = acc;
      }
    std::vector<double> context(size_t(S * E));
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < S; ++i) {
        const int64_t visible = causal ? i + 1 : S;  // causal: keys 0..i
        std::vector<double> p(static_cast<size_t>(visible));
        double mx = -INFINITY;
        for (int64_t j = 0; j < visible; ++j) {
          double dot = 0;
          for (int64_t t = 0; t < D; ++t)
            dot += qkv[size_t(i * 3 * E + h * D + t)] * qkv[size_t(j * 3 * E + E + h * D + t)];
          p[size_t(j)] = dot / std::sqrt(double(D)) + (attn_mask ? (*attn_mask)[size_t(i * S + j)] : 0.0);
          mx = std::max(mx, p[size_t(j)]);
        }
        double z = 0;
        for (auto& v : p) z += (v = std::exp(v - mx));
        for (int64_t t = 0; t < D; ++t) {
          double acc = 0;
          for (int64_t j = 0; j < visible; ++j)
            acc += p[size_t(j)] / z * qkv[size_t(j * 3 * E + 2 * E + h * D + t)];
          context[size_t(i * E + h * D + t)] = acc;
        }
      }
    for (int64_t s = 0; s < S; ++s)
      for (int64_t o = 0; o < E; ++o) {
        double acc = b_out[size_t(o)];
        for (int64_t c = 0; c < E; ++c) acc += w_out[size_t(o * E + c)] * context[size_t(s * E + c)];
        out[size_t((b * S + s) * E + o)] = acc;
      }
  }
  return out;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

class AttentionForward : public ::testing::Test {
 protected:
  static constexpr int64_t B = 2, S = 5, E = 8, H = 2;
  void SetUp() override {
    randomize(mha_, 1);
    x_ = random_tensor({B, S, E}, 100);
    expected_ = naive_mha(x_.to_vector_f64(), B, S, E, H, mha_.in_proj_weight.to_vector_f64(),
                          mha_.in_proj_bias.to_vector_f64(), mha_.out_proj->weight.to_vector_f64(),
                          mha_.out_proj->bias.to_vector_f64());
  }
  nn::MultiheadAttention mha_{E, H};
  Tensor x_;
  std::vector<double> expected_;
};

TEST_F(AttentionForward, Float64MatchesNaiveLoops) {
  mha_.to(DType::f64);
  const Tensor out = mha_(x_);
  ASSERT_EQ(out.shape(), (Shape{B, S, E}));
  ASSERT_EQ(out.dtype(), DType::f64);
  // f64 on the reference kernels vs f64 loops: only summation order differs (K <= 8 terms
  // of size < 4, exp of values < 4): ~1e-15; 1e-12 allows for it and nothing else.
  EXPECT_LT(max_abs_diff(out.to_vector_f64(), expected_), 1e-12);
}

TEST_F(AttentionForward, Float32MatchesNaiveLoops) {
  // The parameters were drawn in f64 and stored in f32 (the module's dtype), so the naive
  // reference above used exactly the f32 values; x is rounded to f32 here, so recompute.
  const Tensor x32 = x_.to(DType::f32);
  const std::vector<double> expected =
      naive_mha(x32.to_vector_f64(), B, S, E, H, mha_.in_proj_weight.to_vector_f64(),
                mha_.in_proj_bias.to_vector_f64(), mha_.out_proj->weight.to_vector_f64(),
                mha_.out_proj->bias.to_vector_f64());
  const Tensor out = mha_(x32);
  ASSERT_EQ(out.dtype(), DType::f32);
  double scale = 0;
  for (double v : expected) scale = std::max(scale, std::fabs(v));
  // f32 kernels (oneDNN by default): each stage rounds to f32 (2^-24 relative) over
  // dot products of <= 8 terms; four stages stay below ~1e-6 of the output's scale.
  EXPECT_LT(max_abs_diff(out.to_vector_f64(), expected), 1e-5 * scale);
}

// An additive [S, S] attention mask (PyTorch's float attn_mask) on every batch row and head:
// against the loops with the mask added to the scores, in f64; -30000 (the padding score) hides
// a key; a mask of another shape is an error naming both.
TEST_F(AttentionForward, AttentionMaskIsAddedToEveryHeadsScores) {
  mha_.to(DType::f64);
  std::vector<double> mask(size_t(S * S));
  for (int64_t i = 0; i < S; ++i)
    for (int64_t j = 0; j < S; ++j) mask[size_t(i * S + j)] = (i + 2 * j) % 3 == 0 && i != j ? -30000.0 : 0.25 * double(j - i);
  const std::vector<double> expected =
      naive_mha(x_.to_vector_f64(), B, S, E, H, mha_.in_proj_weight.to_vector_f64(), mha_.in_proj_bias.to_vector_f64(),
                mha_.out_proj->weight.to_vector_f64(), mha_.out_proj->bias.to_vector_f64(), false, &mask);
  const Tensor out = mha_.forward(x_, Tensor(), Tensor::from_vector_f64(mask, {S, S}, DType::f32));
  EXPECT_LT(max_abs_diff(out.to_vector_f64(), expected), 1e-12);
  EXPECT_GT(max_abs_diff(expected_, expected), 1e-3);  // the mask matters
  EXPECT_THROW(mha_.forward(x_, Tensor(), Tensor::zeros({S, S + 1})), Error);
  EXPECT_THROW(mha_.forward(x_, Tensor(), Tensor::zeros({B, S, S})), Error);  // B, not B x heads
  // Per head ([B x heads, S, S], PyTorch's 3-d mask): the same mask in every row gives the 2-d
  // result bit for bit; a mask in one head's row only changes that batch row.
  std::vector<double> per_head;
  for (int64_t r = 0; r < B * H; ++r) per_head.insert(per_head.end(), mask.begin(), mask.end());
  const Tensor same = mha_.forward(x_, Tensor(), Tensor::from_vector_f64(per_head, {B * H, S, S}, DType::f32));
  EXPECT_EQ(same.to_vector_f64(), out.to_vector_f64());
  std::vector<double> one_head(size_t(B * H * S * S), 0.0);
  std::copy(mask.begin(), mask.end(), one_head.begin() + (H + 1) * S * S);  // batch row 1, head 1
  const std::vector<double> only = mha_.forward(x_, Tensor(), Tensor::from_vector_f64(one_head, {B * H, S, S}, DType::f32))
                                       .to_vector_f64();
  const std::vector<double> none = mha_(x_).to_vector_f64();
  for (int64_t i = 0; i < S * E; ++i) EXPECT_EQ(only[size_t(i)], none[size_t(i)]) << "row 0, element " << i;
  double moved = 0;
  for (int64_t i = S * E; i < B * S * E; ++i) moved = std::max(moved, std::fabs(only[size_t(i)] - none[size_t(i)]));
  EXPECT_GT(moved, 1e-3);
}

// Causal self-attention (GPT): against the loops with keys 0..i only, in f64, f32 and bf16;
// and no output position changes when a later input position does.
TEST(AttentionCausal, MatchesNaiveLoopsAndNeverLooksAhead) {
  constexpr int64_t B = 2, S = 6, E = 8, H = 2;
  nn::MultiheadAttention mha(E, H, 0.0, true, /*causal=*/true);
  randomize(mha, 7);
  const Tensor x = random_tensor({B, S, E}, 200).to(DType::f32);
  const std::vector<double> expected =
      naive_mha(x.to_vector_f64(), B, S, E, H, mha.in_proj_weight.to_vector_f64(), mha.in_proj_bias.to_vector_f64(),
                mha.out_proj->weight.to_vector_f64(), mha.out_proj->bias.to_vector_f64(), /*causal=*/true);
  const std::vector<double> full =
      naive_mha(x.to_vector_f64(), B, S, E, H, mha.in_proj_weight.to_vector_f64(), mha.in_proj_bias.to_vector_f64(),
                mha.out_proj->weight.to_vector_f64(), mha.out_proj->bias.to_vector_f64(), /*causal=*/false);
  EXPECT_GT(max_abs_diff(expected, full), 1e-3);  // the mask matters for these inputs
  double scale = 0;
  for (double v : expected) scale = std::max(scale, std::fabs(v));
  EXPECT_LT(max_abs_diff(mha(x).to_vector_f64(), expected), 1e-5 * scale);
  {
    amp::AutocastGuard g(DType::bf16);  // bf16 products and probabilities: a few bf16 ulps
    EXPECT_LT(max_abs_diff(mha(x).to_vector_f64(), expected), 3e-2 * scale);
  }
  // Changing the last position changes only the last output row of each sequence.
  std::vector<double> xv = x.to_vector_f64();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t e = 0; e < E; ++e) xv[size_t((b * S + S - 1) * E + e)] += 1.0;
  const std::vector<double> a = mha(x).to_vector_f64(),
                            c = mha(Tensor::from_vector_f64(xv, {B, S, E}, DType::f32)).to_vector_f64();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t e = 0; e < E; ++e) {
        const size_t k = size_t((b * S + s) * E + e);
        if (s < S - 1) EXPECT_EQ(a[k], c[k]) << "position " << s << " saw a later one";
      }
  mha.to(DType::f64);
  const Tensor x64 = x.to(DType::f64);
  EXPECT_LT(max_abs_diff(mha(x64).to_vector_f64(), expected), 1e-12 * std::max(scale, 1.0));
}

// The unfused route (matmul, softmax, matmul), or the fused one at every length, for the
// life of the guard.
struct UnfusedAttention {
  int64_t before = nn::MultiheadAttention::set_fused_from(int64_t(1) << 40);
  ~UnfusedAttention() { nn::MultiheadAttention::set_fused_from(before); }
};
struct FusedAttention {
  int64_t before = nn::MultiheadAttention::set_fused_from(1);
  ~FusedAttention() { nn::MultiheadAttention::set_fused_from(before); }
};

TEST(AttentionFusedRoute, ThresholdPerMaskAndItsOverrideRestores) {
  if (std::getenv("MIXPREC_ATTENTION_FUSED_FROM")) GTEST_SKIP() << "threshold set by the environment";
  // Causal attention is fused from fewer positions than unmasked (it skips the masked half of
  // the products, the unfused route computes them): 128 and 256 on AVX-512, 128 and 1024 with
  // AVX2 + FMA, 1024 both on the plain loops (src/nn/attention.cpp's measurements).
  const int64_t causal = nn::MultiheadAttention::fused_from(true), full = nn::MultiheadAttention::fused_from(false);
  EXPECT_LE(causal, full);
  const CpuFeatures& f = cpu_features();
  const std::pair<int64_t, int64_t> expected = f.avx512f ? std::pair<int64_t, int64_t>{128, 256}
                                               : f.avx2 && f.fma ? std::pair<int64_t, int64_t>{128, 1024}
                                                                 : std::pair<int64_t, int64_t>{1024, 1024};
  EXPECT_EQ(causal, expected.first);
  EXPECT_EQ(full, expected.second);
  // An override applies to both; restoring what set_fused_from returned (0: the defaults)
  // brings the per-mask defaults back.
  const int64_t before = nn::MultiheadAttention::set_fused_from(7);
  EXPECT_EQ(before, 0);
  EXPECT_EQ(nn::MultiheadAttention::fused_from(true), 7);
  EXPECT_EQ(nn::MultiheadAttention::fused_from(false), 7);
  EXPECT_EQ(nn::MultiheadAttention::set_fused_from(before), 7);
  EXPECT_EQ(nn::MultiheadAttention::fused_from(true), causal);
  EXPECT_EQ(nn::MultiheadAttention::fused_from(false), full);
}

TEST(AttentionFusedRoute, MatchesNaiveLoopsAndItsGradientsTheUnfusedOnes) {
  // On the fused scaled_dot_product_attention the module gives the same outputs as the naive
  // loops (causal or not), in f64 to 1e-12, over 70 positions (one full block of 64 and a
  // short one); the input's gradient equals the unfused route's.
  FusedAttention fused;
  const int64_t S = 70, B = 2, E = 4, H = 2;
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    nn::MultiheadAttention mha(E, H, 0.0, true, causal);
    randomize(mha, 11);
    mha.to(DType::f64);
    const Tensor x = random_tensor({B, S, E}, 300);
    const std::vector<double> expected =
        naive_mha(x.to_vector_f64(), B, S, E, H, mha.in_proj_weight.to_vector_f64(),
                  mha.in_proj_bias.to_vector_f64(), mha.out_proj->weight.to_vector_f64(),
                  mha.out_proj->bias.to_vector_f64(), causal);
    double scale = 1;
    for (double v : expected) scale = std::max(scale, std::fabs(v));
    EXPECT_LT(max_abs_diff(mha(x).to_vector_f64(), expected), 1e-12 * scale);
    Tensor xa = x.clone(), xb = x.clone();
    xa.requires_grad_(true);
    xb.requires_grad_(true);
    const Tensor weight = mha(x).detach();
    sum(mul(mha(xa), weight)).backward();
    {
      UnfusedAttention unfused;
      sum(mul(mha(xb), weight)).backward();
    }
    EXPECT_LT(max_abs_diff(xa.grad().to_vector_f64(), xb.grad().to_vector_f64()), 1e-10);
  }
}

TEST(AttentionFusedRoute, NeverHoldsAnSxSMatrix) {
  // At 2048 positions a training forward + backward must not hold the [S, S] scores of even
  // one head: the fused kernel's tiles are 64 x 64 per thread. (The unfused route's scores
  // and probabilities for 2 heads are 4 [S, S] f32 matrices: 64 MiB here.)
  const int64_t S = 2048, E = 8, H = 2;
  ASSERT_LE(nn::MultiheadAttention::fused_from(), S);  // the default route at this length
  nn::MultiheadAttention mha(E, H, 0.0, true, /*causal=*/true);
  randomize(mha, 5);
  Tensor x = random_tensor({1, S, E}, 400).to(DType::f32);
  x.requires_grad_(true);
  reset_peak_memory();
  const int64_t base = current_bytes(MemoryCategory::activations);
  sum(mha(x)).backward();
  const int64_t peak = peak_bytes(MemoryCategory::activations) - base;
  EXPECT_LT(peak, S * S * int64_t(sizeof(float)) / 8) << "peak activations " << peak << " bytes";
  EXPECT_TRUE(x.grad().defined());
}

TEST_F(AttentionForward, HeadsAreIndependentOfEachOther) {
  // Changing only the V rows of head 1 in in_proj must leave output columns computed from
  // head 0's context unchanged when out_proj reads head 0 only: zero out_proj's columns of
  // head 1, then perturb head 1's V rows; a head split that mixed heads would move the output.
  mha_.to(DType::f64);
  {
    NoGradGuard ng;
    double* w_out = mha_.out_proj->weight.data_ptr<double>();
    for (int64_t o = 0; o < E; ++o)
      for (int64_t c = E / H; c < E; ++c) w_out[o * E + c] = 0.0;
  }
  const std::vector<double> before = mha_(x_).to_vector_f64();
  double* w_in = mha_.in_proj_weight.data_ptr<double>();
  for (int64_t r = 2 * E + E / H; r < 3 * E; ++r)
    for (int64_t e = 0; e < E; ++e) w_in[r * E + e] += 0.25;
  EXPECT_EQ(max_abs_diff(mha_(x_).to_vector_f64(), before), 0.0);
}

TEST(AttentionModule, ParameterNamesShapesAndInitAreTorchs) {
  manual_seed(3);
  nn::TransformerEncoderLayer layer(8, 2, 16);
  const std::vector<std::pair<std::string, Shape>> expected = {
      {"self_attn.in_proj_weight", {24, 8}}, {"self_attn.in_proj_bias", {24}},
      {"self_attn.out_proj.weight", {8, 8}}, {"self_attn.out_proj.bias", {8}},
      {"linear1.weight", {16, 8}},           {"linear1.bias", {16}},
      {"linear2.weight", {8, 16}},           {"linear2.bias", {8}},
      {"norm1.weight", {8}},                 {"norm1.bias", {8}},
      {"norm2.weight", {8}},                 {"norm2.bias", {8}}};
  const auto params = layer.named_parameters();
  ASSERT_EQ(params.size(), expected.size());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].first, expected[i].first);
    EXPECT_EQ(params[i].second.shape(), expected[i].second) << params[i].first;
  }
  // PyTorch's _reset_parameters: xavier_uniform in_proj (bound sqrt(6 / (8 + 24)) = 0.433),
  // zero in/out projection biases; LayerNorm ones / zeros.
  double max_w = 0;
  for (double v : layer.self_attn->in_proj_weight.to_vector_f64()) max_w = std::max(max_w, std::fabs(v));
  EXPECT_LE(max_w, std::sqrt(6.0 / 32.0));
  EXPECT_GT(max_w, 0.3);  // 192 draws: the largest is near the bound
  for (double v : layer.self_attn->in_proj_bias.to_vector_f64()) EXPECT_EQ(v, 0.0);
  for (double v : layer.self_attn->out_proj->bias.to_vector_f64()) EXPECT_EQ(v, 0.0);
  for (double v : layer.norm1->weight.to_vector_f64()) EXPECT_EQ(v, 1.0);
}

TEST(AttentionModule, BadConfigurationsAndShapesThrow) {
  EXPECT_THROW(nn::MultiheadAttention(10, 3), Error);  // 10 not divisible by 3
  EXPECT_THROW(nn::MultiheadAttention(8, 0), Error);
  EXPECT_THROW(nn::MultiheadAttention(8, 2, 1.0), Error);  // dropout must be < 1
  nn::MultiheadAttention mha(8, 2);
  try {
    mha(Tensor::zeros({2, 5, 6}));
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 5, 6]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[B, S, 8]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(mha(Tensor::zeros({10, 8})), Error);
}

// d/d(every parameter and the input) of L = sum(layer(x) * R), autograd against central
// differences, all in f64 (reference kernels).
TEST(AttentionGradcheck, EncoderLayerParametersAndInputFloat64) {
  nn::TransformerEncoderLayer layer(4, 2, 6);
  layer.to(DType::f64);
  randomize(layer, 10);
  // LayerNorm weights near 1 (as trained ones are) keep the normalised stream well scaled.
  for (auto* norm : {layer.norm1.get(), layer.norm2.get()}) norm->weight.copy_(random_tensor({4}, 50, 0.5, 1.5));
  Tensor x = random_tensor({2, 3, 4}, 60);
  const Tensor weights = random_tensor({2, 3, 4}, 61);

  x.requires_grad_(true);
  sum(mul(layer(x), weights)).backward();

  auto loss = [&] {
    NoGradGuard ng;
    return test::dot_f64(layer(x), weights);
  };
  auto numeric = [&](const Tensor& t) { return test::numerical_gradient_in_place(loss, t); };
  // rtol 1e-6 of max(1, max|grad|): f64 central differences with eps 1e-6 have truncation
  // error ~eps^2 * f''' and roundoff ~1e-16 / eps, both ~1e-10 here.
  for (auto& [name, p] : layer.named_parameters()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(p.grad().defined());
    EXPECT_TRUE(test::gradients_match(p.grad(), numeric(p), 1e-6));
  }
  SCOPED_TRACE("input");
  EXPECT_TRUE(test::gradients_match(x.grad(), numeric(x), 1e-6));
}

// Walks the graph behind `out` and records, per op name, the dtypes of its inputs.
std::map<std::string, std::vector<DType>> input_dtypes_by_op(const Tensor& out) {
  std::map<std::string, std::vector<DType>> seen;
  std::set<const Node*> visited;
  std::vector<std::shared_ptr<Node>> stack{out.grad_fn()};
  while (!stack.empty()) {
    auto node = stack.back();
    stack.pop_back();
    if (!node || !visited.insert(node.get()).second) continue;
    for (const Edge& e : node->edges()) {
      if (!e.active()) continue;
      seen[node->name()].push_back(e.dtype);
      if (e.fn) stack.push_back(e.fn);
    }
  }
  return seen;
}

// The encoder layer's two residual adds and LayerNorms are add_layer_norm nodes (inputs: the
// stream, the branch, weight, bias): the f32 stream, f32 parameters, and the bf16 branch read
// as it is (widened in the kernel: no f32 copy of it), no separate layer_norm or add.
void expect_residual_norms_f32(const std::map<std::string, std::vector<DType>>& ops) {
  EXPECT_EQ(ops.count("layer_norm"), 0u);
  EXPECT_EQ(ops.count("add"), 0u);
  ASSERT_EQ(ops.count("add_layer_norm"), 1u);
  const std::vector<DType>& in = ops.at("add_layer_norm");
  ASSERT_EQ(in.size(), 8u);  // two nodes
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(in[i], i % 4 == 1 ? DType::bf16 : DType::f32) << i;
}

TEST(AttentionAutocast, UnfusedBf16ProductsAndSoftmaxLayerNormInF32) {
  UnfusedAttention unfused;
  manual_seed(5);
  nn::TransformerEncoderLayer layer(16, 2, 32);
  Tensor x = Tensor::normal({2, 6, 16}, 0.0, 1.0);
  x.requires_grad_(true);  // every input edge of every op is then active (and counted)
  const Tensor ref = layer(x);
  Tensor out;
  {
    amp::AutocastGuard guard(DType::bf16);
    out = layer(x);
  }
  EXPECT_EQ(out.dtype(), DType::f32);  // the last op is a LayerNorm: fp32 policy
  const auto ops = input_dtypes_by_op(out);
  auto count_nodes = [&](const std::string& op, size_t inputs_per_node) {
    return ops.count(op) ? ops.at(op).size() / inputs_per_node : 0;
  };
  // Q K^T and P V: both operands of both products in bf16.
  ASSERT_EQ(count_nodes("matmul", 2), 2u);
  for (DType d : ops.at("matmul")) EXPECT_EQ(d, DType::bf16);
  // The fused Q|K|V projection, out_proj, linear1, linear2: src, weight and bias in bf16.
  ASSERT_EQ(count_nodes("linear", 3), 4u);
  for (DType d : ops.at("linear")) EXPECT_EQ(d, DType::bf16);
  // The softmax reads the bf16 scores as they are (f32 arithmetic inside, bf16
  // probabilities for the next bf16 product: attention_softmax), no f32 copy of them;
  // the LayerNorms read f32 input and parameters.
  EXPECT_EQ(ops.count("softmax"), 0u);
  ASSERT_EQ(count_nodes("attention_softmax", 1), 1u);
  for (DType d : ops.at("attention_softmax")) EXPECT_EQ(d, DType::bf16);
  expect_residual_norms_f32(ops);
  // bf16 products (8 significant bits) through two LayerNorms: outputs are O(1), and the
  // relative error of bf16 rounding (2^-9) grown by a few stages stays below 0.1.
  double worst = 0;
  const auto a = out.to_vector_f64(), r = ref.to_vector_f64();
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - r[i]));
  EXPECT_LT(worst, 0.1);
  EXPECT_GT(worst, 0.0);  // it really ran in bf16
}

TEST(AttentionAutocast, FusedAttentionReadsBf16AndLayerNormsF32) {
  FusedAttention fused;
  manual_seed(5);
  nn::TransformerEncoderLayer layer(16, 2, 32);
  Tensor x = Tensor::normal({2, 6, 16}, 0.0, 1.0);
  x.requires_grad_(true);
  const Tensor ref = layer(x);
  Tensor out;
  {
    amp::AutocastGuard guard(DType::bf16);
    out = layer(x);
  }
  EXPECT_EQ(out.dtype(), DType::f32);
  const auto ops = input_dtypes_by_op(out);
  // One fused attention node reading the bf16 projection q, k and v are packed in
  // (attention_from_packed_qkv); no matmul or softmax around it.
  ASSERT_EQ(ops.count("attention_from_packed_qkv"), 1u);
  ASSERT_EQ(ops.at("attention_from_packed_qkv").size(), 1u);
  for (DType d : ops.at("attention_from_packed_qkv")) EXPECT_EQ(d, DType::bf16);
  EXPECT_EQ(ops.count("matmul"), 0u);
  EXPECT_EQ(ops.count("attention_softmax"), 0u);
  EXPECT_EQ(ops.count("softmax"), 0u);
  for (DType d : ops.at("linear")) EXPECT_EQ(d, DType::bf16);
  expect_residual_norms_f32(ops);
  double worst = 0;
  const auto a = out.to_vector_f64(), r = ref.to_vector_f64();
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - r[i]));
  EXPECT_LT(worst, 0.1);
  EXPECT_GT(worst, 0.0);
}

}  // namespace
}  // namespace mixprec

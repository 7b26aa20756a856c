// flash_attention_test.cpp: the fused scaled_dot_product_attention (backend/cpu/
// flash_attention.h) at the sizes its blocks make awkward (S = 1, D = 1, Dv != D, S not a
// multiple of the block, one block, many), causal, with a key padding mask and both: its
// output against float64 loops written here in every dtype at that dtype's tolerance, its
// gradients against central differences in f64 and against the unfused route (matmul,
// attention_softmax, matmul) in f32 and bf16, the same bits for 1, 2 and 3 threads, memory
// linear in S, and clear errors for bad arguments. The op harness (op_harness_test) checks
// its registry entries besides. Three product paths (flash_attention.h): on a CPU with
// AVX512-BF16 this binary runs bf16 inputs on vdpbf16ps; tests/CMakeLists.txt runs it again
// with AVX512-BF16 hidden (_no_bf16: bf16 on the AVX-512 f32 FMAs) and with AVX-512 hidden
// (_no_avx512: the plain loops).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/finite_diff.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/core/memory.h"
#include "mixprec/ops/ops.h"

namespace mixprec {
namespace {

using test::random_tensor;

struct Case {
  int64_t N, S, D, Dv, block;
  bool causal;
  int64_t pad_batches;  // 0: no mask; else a [B, S] mask, B = pad_batches dividing N
};

// The mask of sequence b: its last (b + 1) * S / 3 keys are padding (sequence 0 of a short
// S: none), and for b odd its first key too; one sequence with every key padded when B > 2.
Tensor padding_mask(int64_t B, int64_t S) {
  std::vector<double> m(size_t(B * S), 0.0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t j = S - (b + 1) * S / 3; j < S; ++j) m[size_t(b * S + std::max<int64_t>(j, 0))] = -30000.0;
    if (b % 2 == 1) m[size_t(b * S)] = -30000.0;
    if (b == 2)
      for (int64_t j = 0; j < S; ++j) m[size_t(b * S + j)] = -30000.0;
  }
  return Tensor::from_vector_f64(m, {B, S}, DType::f32);
}

// softmax(scale q k^T + mask [+ causal]) v in float64 loops.
std::vector<double> reference(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, const Tensor& mask) {
  const int64_t N = q.size(0), S = q.size(1), D = q.size(2), Dv = v.size(2);
  const auto qv = q.to_vector_f64(), kv = k.to_vector_f64(), vv = v.to_vector_f64();
  const std::vector<double> mv = mask.defined() ? mask.to_vector_f64() : std::vector<double>();
  const int64_t heads = mask.defined() ? N / mask.size(0) : 1;
  const double scale = 1.0 / std::sqrt(double(D));
  std::vector<double> out(static_cast<size_t>(N * S * Dv), 0.0), p(static_cast<size_t>(S));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < S; ++i) {
      const int64_t seen = causal ? i + 1 : S;
      double m = -1e300, sum = 0;
      for (int64_t j = 0; j < seen; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += qv[size_t((n * S + i) * D + d)] * kv[size_t((n * S + j) * D + d)];
        p[size_t(j)] = scale * dot + (mv.empty() ? 0.0 : mv[size_t((n / heads) * S + j)]);
        m = std::max(m, p[size_t(j)]);
      }
      for (int64_t j = 0; j < seen; ++j) sum += (p[size_t(j)] = std::exp(p[size_t(j)] - m));
      for (int64_t j = 0; j < seen; ++j)
        for (int64_t x = 0; x < Dv; ++x)
          out[size_t((n * S + i) * Dv + x)] += p[size_t(j)] / sum * vv[size_t((n * S + j) * Dv + x)];
    }
  return out;
}

// The unfused route on the same operands: matmul, + mask, attention_softmax, matmul.
Tensor unfused(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, const Tensor& mask) {
  const int64_t N = q.size(0), S = q.size(1);
  const Tensor qs = mul(q, 1.0 / std::sqrt(double(q.size(2))));
  Tensor scores = matmul(qs, transpose(k, 1, 2));
  if (mask.defined()) {
    const int64_t B = mask.size(0);
    scores = reshape(add(reshape(scores, {B, N / B, S, S}), reshape(mask.to(scores.dtype()), {B, 1, 1, S})),
                     {N, S, S});
  }
  return matmul(attention_softmax(scores, causal), v);
}

double max_abs(const std::vector<double>& a) {
  double m = 0;
  for (double x : a) m = std::max(m, std::fabs(x));
  return m;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

const std::vector<Case> kCases{
    {1, 1, 1, 1, 64, false, 0},  {1, 1, 1, 1, 64, true, 0},   {3, 7, 1, 2, 3, false, 0},
    {3, 7, 1, 2, 3, true, 0},    {2, 130, 32, 16, 64, true, 0}, {2, 130, 32, 16, 64, false, 0},
    {4, 67, 8, 5, 16, false, 2}, {6, 67, 8, 8, 64, false, 3},  {4, 67, 8, 5, 16, true, 2},
    {2, 64, 16, 16, 64, true, 1},
    // Heads wider than one 16-word register (D = 40: 20 bf16 pairs; Dv = 34) and 70 keys: the
    // register transposes' partial blocks, and 32-wide blocks whose diagonal splits dV^T's
    // and dK^T's products into chunks.
    {2, 70, 40, 34, 32, true, 0},  {2, 70, 40, 34, 32, false, 0}};

std::string name(const Case& c) {
  return "N=" + std::to_string(c.N) + " S=" + std::to_string(c.S) + " D=" + std::to_string(c.D) +
         " Dv=" + std::to_string(c.Dv) + " block=" + std::to_string(c.block) + (c.causal ? " causal" : "") +
         (c.pad_batches ? " padded" : "");
}

TEST(FlashAttention, ForwardMatchesFloat64LoopsInEveryDtype) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(name(c));
    const Tensor mask = c.pad_batches ? padding_mask(c.pad_batches, c.S) : Tensor();
    for (DType dt : {DType::f64, DType::f32, DType::bf16, DType::f16}) {
      SCOPED_TRACE(dtype_name(dt));
      // The reference reads the values the kernel reads (rounded to dt), so only the kernel's
      // arithmetic (f32 inside, f64 for f64) and the output's one rounding remain. (f64: the
      // reference's own -30000 + score rounds at 30000's ulp, 4e-12, for the padded-only
      // sequence, which the kernel shifts to 0 first.)
      const Tensor q = random_tensor({c.N, c.S, c.D}, 1, -2, 2).to(dt), k = random_tensor({c.N, c.S, c.D}, 2, -2, 2).to(dt),
                   v = random_tensor({c.N, c.S, c.Dv}, 3).to(dt);
      const Tensor out = scaled_dot_product_attention(q, k, v, c.causal, std::nullopt, c.block, mask);
      ASSERT_EQ(out.dtype(), dt);
      ASSERT_EQ(out.shape(), (Shape{c.N, c.S, c.Dv}));
      const std::vector<double> expected = reference(q, k, v, c.causal, mask);
      const double tol = dt == DType::f64 ? 1e-11 : dt == DType::f32 ? 2e-6 : dt == DType::f16 ? 1e-3 : 8e-3;
      EXPECT_LT(max_abs_diff(out.to_vector_f64(), expected), tol * std::max(1.0, max_abs(expected)));
    }
  }
}

TEST(FlashAttention, GradientsMatchCentralDifferencesInFloat64) {
  for (const Case& c : std::vector<Case>{{2, 7, 3, 2, 3, false, 0},
                                         {2, 7, 3, 2, 3, true, 0},
                                         {4, 7, 2, 3, 2, false, 2},
                                         {1, 1, 1, 1, 64, true, 0},
                                         {2, 5, 1, 4, 64, true, 0}}) {
    SCOPED_TRACE(name(c));
    const Tensor mask = c.pad_batches ? padding_mask(c.pad_batches, c.S) : Tensor();
    std::vector<Tensor> in{random_tensor({c.N, c.S, c.D}, 4), random_tensor({c.N, c.S, c.D}, 5),
                           random_tensor({c.N, c.S, c.Dv}, 6)};
    const Tensor dir = random_tensor({c.N, c.S, c.Dv}, 7);
    auto f = [&](std::vector<Tensor>& x) {
      return test::dot_f64(dir, scaled_dot_product_attention(x[0], x[1], x[2], c.causal, std::nullopt, c.block, mask));
    };
    std::vector<Tensor> leaves;
    for (const Tensor& t : in) leaves.push_back(t.clone().requires_grad_(true));
    sum(mul(scaled_dot_product_attention(leaves[0], leaves[1], leaves[2], c.causal, std::nullopt, c.block, mask), dir))
        .backward();
    for (size_t i = 0; i < 3; ++i) {
      SCOPED_TRACE("input " + std::to_string(i));
      const bool reaches = !(c.S == 1 && i < 2);  // one key: its softmax weight is 1, dQ = dK = 0
      EXPECT_TRUE(test::gradients_match(leaves[i].grad(), test::numerical_gradient(f, in, i), 1e-7,
                                        reaches ? test::AllZero::reject : test::AllZero::allowed));
    }
  }
}

TEST(FlashAttention, MatchesTheUnfusedRouteWithGradientsInF32AndBf16) {
  for (const Case& c : std::vector<Case>{{4, 130, 32, 32, 64, true, 0}, {4, 67, 16, 8, 64, false, 2}}) {
    SCOPED_TRACE(name(c));
    const Tensor mask = c.pad_batches ? padding_mask(c.pad_batches, c.S) : Tensor();
    for (DType dt : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(dtype_name(dt));
      const Tensor q = random_tensor({c.N, c.S, c.D}, 8, -2, 2).to(dt), k = random_tensor({c.N, c.S, c.D}, 9, -2, 2).to(dt),
                   v = random_tensor({c.N, c.S, c.Dv}, 10).to(dt), dir = random_tensor({c.N, c.S, c.Dv}, 11).to(dt);
      std::vector<std::vector<double>> outs, grads[3];
      for (int route = 0; route < 2; ++route) {
        Tensor a = q.clone().requires_grad_(true), b = k.clone().requires_grad_(true), e = v.clone().requires_grad_(true);
        const Tensor out = route == 0 ? scaled_dot_product_attention(a, b, e, c.causal, std::nullopt, 64, mask)
                                      : unfused(a, b, e, c.causal, mask);
        sum(mul(out, dir)).backward();
        outs.push_back(out.to_vector_f64());
        grads[0].push_back(a.grad().to_vector_f64());
        grads[1].push_back(b.grad().to_vector_f64());
        grads[2].push_back(e.grad().to_vector_f64());
      }
      // f32: both routes accumulate in f32 (~1e-6 relative). bf16: the unfused route rounds
      // the scores and the probabilities to bf16 (2^-9 each) before its products, the fused
      // one keeps them in f32, so the two differ by a few bf16 ulps of the result.
      const double tol = dt == DType::f32 ? 1e-5 : 3e-2;
      EXPECT_LT(max_abs_diff(outs[0], outs[1]), tol * std::max(1.0, max_abs(outs[1])));
      for (int i = 0; i < 3; ++i)
        EXPECT_LT(max_abs_diff(grads[i][0], grads[i][1]), tol * std::max(1.0, max_abs(grads[i][1])))
            << "gradient of input " << i;
    }
  }
}

TEST(FlashAttention, Bf16GradientsMatchTheFloat64KernelOnTheSameValues) {
  // Every product of the backward (the scores and dP again, dV = P^T dO, dK = dS^T Q,
  // dQ = dS K) at odd depths and widths (D = 5, Dv = 3, blocks of 16 over 37 or 67 rows),
  // causal and padded. On AVX512-BF16 they run on bf16 pairs with P and dS rounded to bf16
  // (2^-9 relative each) and f32 sums; elsewhere in f32 from the widened inputs. Either way
  // within a few bf16 ulps of the float64 kernel on the same (bf16-valued) inputs, whose
  // gradients the central differences above check.
  for (const Case& c : std::vector<Case>{{3, 37, 5, 3, 16, true, 0}, {4, 67, 8, 5, 16, false, 2},
                                         {2, 130, 32, 32, 64, true, 0}, {2, 70, 40, 34, 32, true, 0},
                                         {2, 100, 34, 20, 48, true, 0}}) {
    SCOPED_TRACE(name(c));
    const Tensor mask = c.pad_batches ? padding_mask(c.pad_batches, c.S) : Tensor();
    const Tensor q = random_tensor({c.N, c.S, c.D}, 21, -2, 2).to(DType::bf16),
                 k = random_tensor({c.N, c.S, c.D}, 22, -2, 2).to(DType::bf16),
                 v = random_tensor({c.N, c.S, c.Dv}, 23).to(DType::bf16),
                 dir = random_tensor({c.N, c.S, c.Dv}, 24).to(DType::bf16);
    std::vector<std::vector<double>> outs, grads[3];
    for (DType dt : {DType::bf16, DType::f64}) {
      Tensor a = q.to(dt).clone().requires_grad_(true), b = k.to(dt).clone().requires_grad_(true),
             e = v.to(dt).clone().requires_grad_(true);
      const Tensor out = scaled_dot_product_attention(a, b, e, c.causal, std::nullopt, c.block, mask);
      sum(mul(out, dir.to(dt))).backward();
      outs.push_back(out.to_vector_f64());
      grads[0].push_back(a.grad().to_vector_f64());
      grads[1].push_back(b.grad().to_vector_f64());
      grads[2].push_back(e.grad().to_vector_f64());
    }
    // Measured here: outputs within 2.7e-3 (the output's own rounding, 2^-9, is most of it),
    // gradients within 6.2e-3 on vdpbf16ps and 3.9e-3 on f32 products.
    EXPECT_LT(max_abs_diff(outs[0], outs[1]), 6e-3 * std::max(1.0, max_abs(outs[1])));
    for (int i = 0; i < 3; ++i)
      EXPECT_LT(max_abs_diff(grads[i][0], grads[i][1]), 1.5e-2 * std::max(1.0, max_abs(grads[i][1])))
          << "gradient of input " << i;
  }
}

TEST(FlashAttention, SameBitsForOneTwoAndThreeThreads) {
  const int saved = omp_get_max_threads();
  for (DType dt : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor q = random_tensor({5, 200, 16}, 12).to(dt), k = random_tensor({5, 200, 16}, 13).to(dt),
                 v = random_tensor({5, 200, 24}, 14).to(dt), dir = random_tensor({5, 200, 24}, 15).to(dt);
    std::vector<std::vector<double>> runs;
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      Tensor a = q.clone().requires_grad_(true), b = k.clone().requires_grad_(true), e = v.clone().requires_grad_(true);
      const Tensor out = scaled_dot_product_attention(a, b, e, /*causal=*/true);
      sum(mul(out, dir)).backward();
      std::vector<double> all = out.to_vector_f64();
      for (const Tensor* g : {&a, &b, &e}) {
        const auto x = g->grad().to_vector_f64();
        all.insert(all.end(), x.begin(), x.end());
      }
      runs.push_back(all);
    }
    omp_set_num_threads(saved);
    EXPECT_EQ(runs[0], runs[1]);
    EXPECT_EQ(runs[0], runs[2]);
  }
}

// Peak activation bytes of a forward + backward at sequence length S.
int64_t peak_bytes_at(int64_t S) {
  const int64_t N = 2, D = 32;
  Tensor q = random_tensor({N, S, D}, 16).to(DType::f32).requires_grad_(true);
  Tensor k = random_tensor({N, S, D}, 17).to(DType::f32).requires_grad_(true);
  Tensor v = random_tensor({N, S, D}, 18).to(DType::f32).requires_grad_(true);
  reset_peak_memory();
  const int64_t base = current_bytes(MemoryCategory::activations);
  sum(scaled_dot_product_attention(q, k, v, true)).backward();
  return peak_bytes(MemoryCategory::activations) - base;
}

TEST(FlashAttention, MemoryGrowsLinearlyWithTheSequence) {
  // At S = 2048 one head's [S, S] f32 scores are 16 MiB; forward + backward of 2 heads
  // (q, k, v, their gradients, the output and its gradient: ~3 MiB) must stay far below one
  // such matrix, and doubling S may at most double the peak (plus slack for the allocator's
  // rounding).
  const int64_t at1024 = peak_bytes_at(1024), at2048 = peak_bytes_at(2048);
  EXPECT_LT(at2048, int64_t(2048) * 2048 * 4 / 4) << at2048 << " bytes";
  EXPECT_LE(double(at2048), 2.2 * double(at1024)) << at1024 << " -> " << at2048 << " bytes";
}

TEST(FlashAttention, BadArgumentsGiveClearErrors) {
  const Tensor q = random_tensor({4, 5, 3}, 19).to(DType::f32);
  auto expect_error = [](auto f, const std::string& words) {
    try {
      f();
      ADD_FAILURE() << "no error; expected one mentioning " << words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  expect_error([&] { scaled_dot_product_attention(q, q, q, false, std::nullopt, 0); }, "block must be >= 1");
  expect_error([&] { scaled_dot_product_attention(q, q, q, false, std::nullopt, 64, Tensor::zeros({3, 5})); },
               "key_padding");
  expect_error([&] { scaled_dot_product_attention(q, q, q, false, std::nullopt, 64, Tensor::zeros({2, 4})); },
               "key_padding");
  expect_error([&] { scaled_dot_product_attention(q, q, q, false, std::nullopt, 64, Tensor::zeros({4})); },
               "key_padding");
  expect_error([&] { scaled_dot_product_attention(q, random_tensor({4, 6, 3}, 20), q); }, "do not fit");
  expect_error([&] { scaled_dot_product_attention(q, q, q, false, -1.0); }, "scale");
}

}  // namespace
}  // namespace mixprec

// fused_relu_pool_test.cpp: relu_max_pool2d against (a) hand-computed values, (b) the
// composition max_pool2d(relu(x)) it replaces (oneDNN kernels), forward and gradient, and
// (c) backend::ref's f64 relu + max-pool kernels, for f32/bf16/f16, NCHW/NHWC, odd sizes,
// channel counts that leave vector tails, ties and all-non-positive windows; and (d) the
// backend kernel's saved argmax, decoded bit by bit (4-bit packed for k <= 3, bytes for
// k >= 4) against a float64 naive loop, with its backward.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "backend/cpu/relu_max_pool.h"
#include "backend/kernels.h"
#include "mixprec/ops/ops.h"
#include "mixprec/ops/ops_fused.h"

namespace mixprec {
namespace {

namespace ref = backend::ref;
const MemoryFormat kCl = MemoryFormat::channels_last;
const MemoryFormat kPlain = MemoryFormat::contiguous;

// Multiples of 0.5 in [-3, 3]: exact in every dtype, frequent ties (7 values), about 10%
// of 2x2 windows entirely <= 0, and zeros (relu's boundary) in the input.
Tensor tie_heavy(const Shape& shape, DType dt, MemoryFormat f, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> d(-6, 6);
  std::vector<float> v(size_t(shape_numel(shape)));
  for (float& x : v) x = 0.5f * float(d(rng));
  Tensor t = Tensor::from_vector(v, shape, dt);
  return f == kPlain ? t : t.to_memory_format(f);
}

// Equal values (+0 == -0) and the fused result's zeros are +0 (PyTorch's relu gives +0).
// A comparison where fewer than min_nonzero of the values are non-zero is too weak to trust
// (gradients of k x k pooling are at most 1/k^2 non-zero).
::testing::AssertionResult same(const Tensor& fused, const Tensor& expected,
                                double min_nonzero = 0.1) {
  if (fused.shape() != expected.shape() || fused.dtype() != expected.dtype())
    return ::testing::AssertionFailure() << fused.str() << " vs " << expected.str();
  const auto a = fused.to_vector_f64(), e = expected.to_vector_f64();
  size_t nonzero = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != e[i]) return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << e[i];
    if (a[i] == 0.0 && std::signbit(a[i])) return ::testing::AssertionFailure() << "element " << i << " is -0";
    nonzero += a[i] != 0.0;
  }
  if (a.size() >= 10 && double(nonzero) < min_nonzero * double(a.size()))
    return ::testing::AssertionFailure() << "MISTRUSTED: only " << nonzero << " of " << a.size() << " non-zero";
  return ::testing::AssertionSuccess();
}

TEST(FusedReluPool, HandComputed) {
  // One 4x5 plane, 2x2 windows (last column dropped by floor mode):
  //   window (0,0): [1, 3; 3, 0]    -> 3, first 3 (position 1) gets the gradient
  //   window (0,1): [-1, -2; 0, -4] -> 0 (relu), no gradient anywhere (relu' = 0 at x <= 0)
  //   window (1,0): [2, 2; 2, 2]    -> 2, position 0
  //   window (1,1): [-5, 7; 7, 1]   -> 7, position 1
  Tensor x = Tensor::from_vector({1, 3, -1, -2, 9,
                                  3, 0, 0, -4, 9,
                                  2, 2, -5, 7, 9,
                                  2, 2, 7, 1, 9}, {1, 1, 4, 5});
  for (MemoryFormat f : {kPlain, kCl}) {
    Tensor xi = x.to_memory_format(f).detach().requires_grad_(true);
    Tensor y = relu_max_pool2d(xi, 2);
    EXPECT_EQ(y.to_vector_f64(), (std::vector<double>{3, 0, 2, 7}));
    y.backward(Tensor::from_vector({10, 20, 30, 40}, {1, 1, 2, 2}));
    EXPECT_EQ(xi.grad().to_vector_f64(), (std::vector<double>{0, 10, 0, 0, 0,
                                                              0, 0, 0, 0, 0,
                                                              30, 0, 0, 40, 0,
                                                              0, 0, 0, 0, 0}));
  }
}

struct Case {
  Shape shape;
  int64_t k;
};

TEST(FusedReluPool, MatchesReluThenMaxPoolForwardAndGradient) {
  const Case cases[] = {{{2, 19, 9, 7}, 2},    // odd H/W (floor), C tail of 3 lanes
                        {{1, 40, 8, 10}, 2},   // C = 40: 16-bit path's 32-lane tail
                        {{3, 5, 11, 9}, 3},    // k = 3
                        {{2, 64, 6, 6}, 2}};   // full vectors, as conv2's output
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (MemoryFormat f : {kPlain, kCl})
      for (const Case& c : cases) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + (f == kCl ? " nhwc " : " nchw ") +
                     shape_str(c.shape) + " k" + std::to_string(c.k));
        const Tensor x0 = tie_heavy(c.shape, dt, f, 100 + c.shape[1]);
        Tensor xa = x0.detach().requires_grad_(true), xb = x0.detach().requires_grad_(true);
        Tensor fused = relu_max_pool2d(xa, c.k);
        Tensor composed = max_pool2d(relu(xb), c.k);
        EXPECT_TRUE(same(fused, composed));
        EXPECT_EQ(fused.is_channels_last() && !fused.is_contiguous(), f == kCl) << "layout kept";
        const Tensor g = tie_heavy(fused.shape(), dt, kPlain, 7);
        fused.backward(g);
        composed.backward(g);
        ASSERT_TRUE(xa.grad().defined());
        EXPECT_EQ(xa.grad().dtype(), dt);
        // The gradient is a scatter: equal values; zeros may differ in sign only in the
        // composition (oneDNN's relu backward multiplies by 0), never in ours.
        EXPECT_TRUE(same(xa.grad(), xb.grad(), 0.3 / double(c.k * c.k)));
      }
}

// Independent of oneDNN: backend::ref's f64 relu and max-pool loops (PyTorch's rules).
TEST(FusedReluPool, MatchesRefF64Composition) {
  for (DType dt : {DType::f32, DType::bf16})
    for (MemoryFormat f : {kPlain, kCl}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (f == kCl ? " nhwc" : " nchw"));
      const Tensor x0 = tie_heavy({2, 17, 7, 9}, dt, f, 5);
      Tensor x = x0.detach().requires_grad_(true);
      Tensor y = relu_max_pool2d(x, 2);
      const Tensor g = tie_heavy(y.shape(), dt, kPlain, 6);
      y.backward(g);
      const backend::Pool2dParams p{2, 2, 2, 2, 0, 0};
      const Tensor r = ref::relu_forward(x0.to(DType::f64));
      const backend::PoolResult pr = ref::max_pool2d_forward(r, p);
      const Tensor gr = ref::relu_backward(
          ref::max_pool2d_backward(g.to(DType::f64), pr.workspace, r.shape(), p), r);
      EXPECT_TRUE(same(y.to(DType::f64), pr.dst));
      EXPECT_TRUE(same(x.grad().to(DType::f64), gr, 0.3 / 4));
    }
}

TEST(FusedReluPool, F64RunsTheCompositionAndBadInputsThrow) {
  Tensor x = tie_heavy({1, 2, 4, 4}, DType::f64, kPlain, 9).requires_grad_(true);
  Tensor y = relu_max_pool2d(x, 2);
  EXPECT_EQ(y.dtype(), DType::f64);
  EXPECT_TRUE(same(y, max_pool2d(relu(x.detach()), 2)));
  EXPECT_THROW(relu_max_pool2d(Tensor::zeros({2, 4, 4}), 2), Error);
  EXPECT_THROW(relu_max_pool2d(Tensor::zeros({1, 1, 4, 4}), 5), Error);
  EXPECT_THROW(relu_max_pool2d(Tensor::zeros({1, 1, 4, 4}), 0), Error);
}

// ---- the backend kernel's argmax format ----------------------------------------------

// Float64 relu + max-pool over logical [N, C, H, W] values: the output and the first window
// position holding it (-1 when the window maximum is <= 0); the first NaN wins a window.
struct NaivePool {
  std::vector<double> dst;  // logical [N, C, OH, OW]
  std::vector<int> pos;
};

NaivePool naive_relu_max_pool(const std::vector<double>& x, const Shape& s, int64_t k) {
  const int64_t N = s[0], C = s[1], H = s[2], W = s[3], OH = H / k, OW = W / k;
  NaivePool r{std::vector<double>(size_t(N * C * OH * OW)), std::vector<int>(size_t(N * C * OH * OW))};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double m = 0.0;
          int p = -1;
          for (int64_t i = 0; i < k; ++i)
            for (int64_t j = 0; j < k; ++j) {
              const double v = x[size_t(((n * C + c) * H + oh * k + i) * W + ow * k + j)];
              if (std::isnan(m)) continue;
              if (std::isnan(v) || v > m) m = v, p = int(i * k + j);
            }
          const size_t o = size_t(((n * C + c) * OH + oh) * OW + ow);
          r.dst[o] = m;
          r.pos[o] = p;
        }
  return r;
}

// Logical [N, C, OH, OW] index -> element index in the memory order of `format`.
int64_t memory_index(const Shape& d, MemoryFormat format, int64_t n, int64_t c, int64_t oh, int64_t ow) {
  return format == kCl ? ((n * d[2] + oh) * d[3] + ow) * d[1] + c : ((n * d[1] + c) * d[2] + oh) * d[3] + ow;
}

// Logical [N, C, H, W] values: multiples of 0.5 in [-3, 3] (exact in every dtype, ties)
// plus ~2% NaN; every channel c % 4 == 1 is <= 0 apart from its NaNs, so windows without
// an argmax exist for every k.
std::vector<double> with_nans(const Shape& s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> d(-6, 6), nan(0, 49);
  std::vector<double> v(size_t(shape_numel(s)));
  for (size_t i = 0; i < v.size(); ++i) {
    const int64_t c = int64_t(i) / (s[2] * s[3]) % s[1];
    const double x = 0.5 * d(rng);
    v[i] = nan(rng) == 0 ? std::numeric_limits<double>::quiet_NaN() : c % 4 == 1 ? -std::abs(x) : x;
  }
  return v;
}

// Checks the saved argmax code by code against the naive positions; returns how many
// outputs have an argmax (so callers can tell a vacuous check).
int64_t expect_argmax_codes(const Tensor& argmax, const NaivePool& ref, const Shape& d, MemoryFormat f,
                            bool packed) {
  const uint8_t* a = argmax.data_ptr<uint8_t>();
  const int64_t numel = shape_numel(d);
  int64_t with_argmax = 0, bad = 0;
  for (int64_t n = 0; n < d[0]; ++n)
    for (int64_t c = 0; c < d[1]; ++c)
      for (int64_t oh = 0; oh < d[2]; ++oh)
        for (int64_t ow = 0; ow < d[3]; ++ow) {
          const int64_t i = memory_index(d, f, n, c, oh, ow);
          const int p = ref.pos[size_t(((n * d[1] + c) * d[2] + oh) * d[3] + ow)];
          // Hand-written decoding of the documented format: byte i/2, low nibble first.
          const int code = packed ? (i % 2 == 0 ? a[i / 2] & 0x0F : a[i / 2] >> 4) : a[i];
          const int want = p >= 0 ? p : (packed ? 15 : 255);
          if (code != want && bad++ < 5)
            ADD_FAILURE() << "output (" << n << ", " << c << ", " << oh << ", " << ow << ") element " << i
                          << ": code " << code << ", expected " << want;
          with_argmax += p >= 0;
        }
  if (packed && numel % 2 != 0)
    EXPECT_EQ(a[numel / 2] >> 4, 15) << "the unused high nibble of the last byte reads 'no argmax'";
  return with_argmax;
}

struct PackCase {
  Shape shape;
  int64_t k;
};

TEST(FusedReluPoolArgmax, PackedRoundTripOddCountsBothLayouts) {
  // Odd-C cases have an odd element count (the last byte is half used) and odd rows, so
  // thread partitions and rows start at odd elements too.
  const PackCase cases[] = {
      {{1, 3, 6, 10}, 2},   // dst [1, 3, 3, 5] = 45, C = 3 (vector tail)
      {{7, 7, 30, 26}, 2},  // 9555 outputs, 2 threads (over the 32K-element threshold)
      {{1, 5, 9, 10}, 3},   // dst [1, 5, 3, 3] = 45, W dropped by floor mode
      {{7, 9, 21, 33}, 3},  // 4851 outputs, 2 threads
      {{1, 33, 3, 1}, 1},   // k = 1: relu only, 99 outputs
      // Even C (NHWC packs in registers); the counts are even then.
      {{3, 18, 6, 10}, 2},  // a full vector + a tail of 2
      {{2, 32, 9, 9}, 3},
  };
  for (DType dt : {DType::f32, DType::bf16})
    for (MemoryFormat f : {kPlain, kCl})
      for (const PackCase& pc : cases) {
        const Shape& s = pc.shape;
        const int64_t k = pc.k;
        SCOPED_TRACE(std::string(dtype_name(dt)) + (f == kCl ? " nhwc " : " nchw ") + shape_str(s) + " k" +
                     std::to_string(k));
        const std::vector<double> xv = with_nans(s, 11 + uint64_t(s[1]));
        const Tensor x = Tensor::from_vector_f64(xv, s, dt).to_memory_format(f);
        const NaivePool ref = naive_relu_max_pool(xv, s, k);  // exact: inputs are exact in dt
        const backend::cpu::ReluMaxPoolResult r = backend::cpu::relu_max_pool2d_forward(x, k);
        const Shape d = r.dst.shape();
        const int64_t numel = shape_numel(d);
        ASSERT_TRUE(numel % 2 != 0 || s[1] % 2 == 0) << "odd-C cases must leave the last byte half used";
        ASSERT_TRUE(backend::cpu::argmax_is_packed(k));
        EXPECT_EQ(r.format, f);
        EXPECT_EQ(r.argmax.dtype(), DType::u8);
        ASSERT_EQ(r.argmax.shape(), (Shape{(numel + 1) / 2}));
        const int64_t with_argmax = expect_argmax_codes(r.argmax, ref, d, f, true);
        EXPECT_GT(with_argmax, numel / 4) << "too few windows with a maximum > 0 to trust the check";
        EXPECT_LT(with_argmax, numel) << "no 'no argmax' window tested";
        const std::vector<double> y = r.dst.to_vector_f64();
        for (size_t i = 0; i < y.size(); ++i)
          ASSERT_TRUE(std::isnan(ref.dst[i]) ? std::isnan(y[i]) : y[i] == ref.dst[i] && !std::signbit(y[i]))
              << "dst " << i << ": " << y[i] << " vs " << ref.dst[i];

        // Backward, against the float64 scatter: the window's gradient goes to the naive
        // argmax position. Gradients are multiples of 0.5 (exact in dt), so equality is exact.
        std::vector<double> gv(static_cast<size_t>(numel));
        for (size_t i = 0; i < gv.size(); ++i) gv[i] = 0.5 * double(1 + i % 7);
        const Tensor g = Tensor::from_vector_f64(gv, d, dt);
        for (MemoryFormat gf : {kPlain, kCl}) {
          const Tensor ds = backend::cpu::relu_max_pool2d_backward(g.to_memory_format(gf), r.argmax, s, k, r.format);
          ASSERT_EQ(ds.shape(), s);
          EXPECT_EQ(ds.dtype(), dt);
          EXPECT_EQ(ds.suggest_memory_format() == kCl && !ds.is_contiguous(), f == kCl) << "diff_src layout";
          const std::vector<double> got = ds.to_vector_f64();
          const int64_t C = s[1], H = s[2], W = s[3], OH = d[2], OW = d[3];
          int64_t nonzero = 0, mismatches = 0;
          for (int64_t n = 0; n < s[0]; ++n)
            for (int64_t c = 0; c < C; ++c)
              for (int64_t h = 0; h < H; ++h)
                for (int64_t w = 0; w < W; ++w) {
                  const int64_t oh = h / k, ow = w / k;
                  const size_t o = size_t(((n * C + c) * OH + oh) * OW + ow);
                  const double want = oh < OH && ow < OW && ref.pos[o] == (h % k) * k + (w % k) ? gv[o] : 0.0;
                  const double v = got[size_t(((n * C + c) * H + h) * W + w)];
                  if (!std::isfinite(v) || v != want || std::signbit(v)) {
                    if (mismatches++ < 5)
                      ADD_FAILURE() << "diff_src (" << n << ", " << c << ", " << h << ", " << w << "): " << v
                                    << ", expected " << want;
                  }
                  nonzero += v != 0.0;
                }
          EXPECT_EQ(nonzero, with_argmax) << "one gradient per window that has an argmax";
        }
      }
}

TEST(FusedReluPoolArgmax, Kernel4KeepsOneBytePerOutput) {
  for (DType dt : {DType::f32, DType::bf16})
    for (MemoryFormat f : {kPlain, kCl}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (f == kCl ? " nhwc" : " nchw"));
      const Shape s{2, 19, 9, 13};  // dst [2, 19, 2, 3]: 228 outputs, 16 window positions
      const std::vector<double> xv = with_nans(s, 3);
      const Tensor x = Tensor::from_vector_f64(xv, s, dt).to_memory_format(f);
      const NaivePool ref = naive_relu_max_pool(xv, s, 4);
      EXPECT_FALSE(backend::cpu::argmax_is_packed(4));
      const backend::cpu::ReluMaxPoolResult r = backend::cpu::relu_max_pool2d_forward(x, 4);
      EXPECT_EQ(r.argmax.dtype(), DType::u8);
      ASSERT_EQ(r.argmax.shape(), r.dst.shape());
      EXPECT_EQ(r.argmax.is_channels_last() && !r.argmax.is_contiguous(), f == kCl);
      const int64_t with_argmax = expect_argmax_codes(r.argmax, ref, r.dst.shape(), f, false);
      EXPECT_GT(with_argmax, shape_numel(r.dst.shape()) / 4);
      bool high_position = false;  // a code >= 15 would not have fit a nibble
      for (int p : ref.pos) high_position |= p >= 15;
      EXPECT_TRUE(high_position) << "no argmax at window position 15 tested";
      const Tensor g = Tensor::full(r.dst.shape(), 1.5, dt);
      const std::vector<double> got = backend::cpu::relu_max_pool2d_backward(g, r.argmax, s, 4, r.format).to_vector_f64();
      double total = 0;
      for (double v : got) total += v;
      EXPECT_EQ(total, 1.5 * double(with_argmax)) << "one gradient of 1.5 per window with an argmax";
    }
}

TEST(FusedReluPoolArgmax, BackwardRejectsTheOtherFormat) {
  const Tensor x = tie_heavy({1, 2, 4, 4}, DType::f32, kPlain, 4);
  const backend::cpu::ReluMaxPoolResult r2 = backend::cpu::relu_max_pool2d_forward(x, 2);
  const backend::cpu::ReluMaxPoolResult r4 = backend::cpu::relu_max_pool2d_forward(x, 4);
  // A byte-form argmax with a packed kernel, and the reverse, are caller bugs caught by shape.
  EXPECT_THROW(backend::cpu::relu_max_pool2d_backward(r2.dst, Tensor::zeros(r2.dst.shape(), DType::u8),
                                                      x.shape(), 2, kPlain),
               Error);
  EXPECT_THROW(backend::cpu::relu_max_pool2d_backward(r4.dst, r2.argmax, x.shape(), 4, kPlain), Error);
}

}  // namespace
}  // namespace mixprec

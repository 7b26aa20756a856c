// reorder_serial_test.cpp: the reorder savings of the seed CNN step.
// - Small reorders and softmax run on the calling thread (backend/onednn/serial_scope.h):
//   results checked against hand-made bf16 rounding / f64 softmax, and the caller's OpenMP
//   thread count must come back unchanged.
// - Under autocast a grad-free NCHW conv input is cast straight into channels-last bf16
//   (amp/autocast.cpp): conv forward and the weight gradient (which reads the saved input)
//   checked against f64 loops over the bf16-rounded values.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/kernels.h"
#include "mixprec/amp/amp.h"
#include "mixprec/ops/ops.h"
#include "unit/backend/onednn_test_util.h"

namespace mixprec {
namespace {

namespace onednn = backend::onednn;

// Round to nearest even f32 -> bf16, by bits (finite inputs only), back as a double.
double bf16_round(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  u &= 0xFFFF0000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

// Restores the thread count the test changed, whatever happens.
struct ThreadsGuard {
  int saved = omp_get_max_threads();
  ~ThreadsGuard() { omp_set_num_threads(saved); }
};

TEST(ReorderSerial, SmallCastToChannelsLastIsExactAndKeepsThreadCount) {
  ThreadsGuard guard;
  omp_set_num_threads(2);
  const Shape shape{2, 3, 4, 5};
  Tensor src = test::random_input(shape, DType::f32, 11, MemoryFormat::contiguous, -3.0, 3.0);
  // Force exact ties (bit 15 set, bits 0-14 clear) on a few elements: even and odd bf16.
  float* p = static_cast<float*>(src.data());
  const uint32_t ties[] = {0x3F808000u, 0x3F818000u, 0xBF808000u};
  for (int i = 0; i < 3; ++i) std::memcpy(&p[7 * i + 1], &ties[i], 4);
  Tensor dst = onednn::reorder(src, DType::bf16, MemoryFormat::channels_last);
  EXPECT_EQ(omp_get_max_threads(), 2);
  ASSERT_TRUE(dst.is_channels_last());
  const std::vector<double> got = dst.to_vector_f64();  // logical order
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], bf16_round(p[i])) << "element " << i;
  EXPECT_EQ(got[1], 1.0);        // 0x3F808000 ties to the even 0x3F80
  EXPECT_EQ(got[8], 1.015625);   // 0x3F818000 ties up to the even 0x3F82
}

TEST(ReorderSerial, SmallLogSoftmaxMatchesF64AndKeepsThreadCount) {
  ThreadsGuard guard;
  omp_set_num_threads(2);
  const Shape shape{8, 10};
  Tensor x = test::random_input(shape, DType::f32, 5, MemoryFormat::contiguous, -4.0, 4.0);
  Tensor y = log_softmax(x, 1);
  EXPECT_EQ(omp_get_max_threads(), 2);
  const std::vector<double> xv = x.to_vector_f64(), yv = y.to_vector_f64();
  for (int64_t r = 0; r < 8; ++r) {
    double m = -1e300, s = 0;
    for (int64_t c = 0; c < 10; ++c) m = std::max(m, xv[r * 10 + c]);
    for (int64_t c = 0; c < 10; ++c) s += std::exp(xv[r * 10 + c] - m);
    for (int64_t c = 0; c < 10; ++c) {
      const double want = xv[r * 10 + c] - m - std::log(s);
      // f32 exp/log and sum: a few ulps of values up to ~10 in magnitude.
      EXPECT_NEAR(yv[r * 10 + c], want, 1e-5 * (1 + std::fabs(want))) << r << "," << c;
    }
  }
}

// f64 conv (stride 1, pad 1, 3x3) of x [N,C,H,W] and w [O,C,3,3], no bias.
std::vector<double> conv_f64(const std::vector<double>& x, const std::vector<double>& w,
                             int64_t N, int64_t C, int64_t H, int64_t W, int64_t O) {
  std::vector<double> y(static_cast<size_t>(N * O * H * W), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t v = 0; v < W; ++v) {
          double acc = 0;
          for (int64_t c = 0; c < C; ++c)
            for (int64_t kh = 0; kh < 3; ++kh)
              for (int64_t kw = 0; kw < 3; ++kw) {
                const int64_t ih = h + kh - 1, iw = v + kw - 1;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += x[((n * C + c) * H + ih) * W + iw] * w[((o * C + c) * 3 + kh) * 3 + kw];
              }
          y[((n * O + o) * H + h) * W + v] = acc;
        }
  return y;
}

TEST(ReorderAutocast, ConvInputCastIntoChannelsLastForwardAndWeightGrad) {
  const int64_t N = 2, C = 3, H = 6, W = 5, O = 4;
  Tensor x = test::random_input({N, C, H, W}, DType::f32, 21);  // NCHW, no grad (a batch)
  Tensor w = test::random_input({O, C, 3, 3}, DType::f32, 22);
  w.requires_grad_(true);
  Tensor y;
  {
    amp::AutocastGuard ac(DType::bf16);
    y = conv2d(x, w, Tensor(), 1, 1);
    ASSERT_EQ(y.dtype(), DType::bf16);
    sum(y.to(DType::f32)).backward();
  }
  std::vector<double> xr = x.to_vector_f64(), wr = w.detach().to_vector_f64();
  for (double& v : xr) v = bf16_round(static_cast<float>(v));
  for (double& v : wr) v = bf16_round(static_cast<float>(v));
  const Tensor want = Tensor::from_vector_f64(conv_f64(xr, wr, N, C, H, W, O), {N, O, H, W},
                                              DType::f64);
  EXPECT_TRUE(test::close_to_ref(y, want, test::bf16_tol(C * 9)));
  // d sum / d w[o,c,kh,kw] = sum over n, h, w of the bf16 input under that tap (the output
  // gradient is exactly 1). oneDNN sums in f32, then autograd rounds the gradient to the
  // dtype of the bf16 weight copy before the cast node widens it: one bf16 rounding.
  std::vector<double> gw(static_cast<size_t>(O * C * 9), 0.0);
  for (int64_t o = 0; o < O; ++o)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t kh = 0; kh < 3; ++kh)
        for (int64_t kw = 0; kw < 3; ++kw) {
          double acc = 0;
          for (int64_t n = 0; n < N; ++n)
            for (int64_t h = 0; h < H; ++h)
              for (int64_t v = 0; v < W; ++v) {
                const int64_t ih = h + kh - 1, iw = v + kw - 1;
                if (ih >= 0 && ih < H && iw >= 0 && iw < W) acc += xr[((n * C + c) * H + ih) * W + iw];
              }
          gw[((o * C + c) * 3 + kh) * 3 + kw] = acc;
        }
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), DType::f32);
  const Tensor want_gw = Tensor::from_vector_f64(gw, {O, C, 3, 3}, DType::f64);
  EXPECT_TRUE(test::close_to_ref(w.grad(), want_gw, test::bf16_tol(N * H * W)));
}

// An input that needs its gradient keeps the recorded cast: its gradient still arrives, in f32.
TEST(ReorderAutocast, ConvInputThatNeedsGradStillGetsIt) {
  Tensor x = test::random_input({1, 3, 4, 4}, DType::f32, 31);
  x.requires_grad_(true);
  Tensor w = test::random_input({2, 3, 3, 3}, DType::f32, 32);
  {
    amp::AutocastGuard ac(DType::bf16);
    sum(conv2d(x, w, Tensor(), 1, 1).to(DType::f32)).backward();
  }
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().dtype(), DType::f32);
  EXPECT_EQ(x.grad().shape(), x.shape());
  // Centre pixel: every tap of every output channel sees it, so its gradient is the sum of
  // all bf16 weights of its input channel.
  const std::vector<double> wv = w.to_vector_f64(), gx = x.grad().to_vector_f64();
  for (int64_t c = 0; c < 3; ++c) {
    double want = 0;
    for (int64_t o = 0; o < 2; ++o)
      for (int64_t k = 0; k < 9; ++k) want += bf16_round(static_cast<float>(wv[(o * 3 + c) * 9 + k]));
    // bf16 diff_src (18 products rounded once to bf16): 2^-8 relative.
    EXPECT_NEAR(gx[(c * 4 + 1) * 4 + 1], want, std::ldexp(1.0, -8) * (std::fabs(want) + 0.1)) << c;
  }
}

}  // namespace
}  // namespace mixprec

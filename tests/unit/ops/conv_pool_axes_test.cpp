// conv_pool_axes_test.cpp: the per-axis (Axes2 {H, W}) forms of conv2d, conv_transpose2d,
// max_pool2d and avg_pool2d: non-square kernels with different stride, padding, dilation and
// output_padding on H and W, against naive float64 loops written here from PyTorch's
// definitions (f64 runs on backend/ref; f32 on oneDNN must agree to f32 accuracy), their
// gradients against central differences, the int forms as the pair forms with equal axes,
// and PyTorch's per-axis argument rules as errors naming the axis and the value.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "common/autograd_check.h"
#include "mixprec/ops/ops.h"

namespace mixprec {
namespace {

int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d = 1) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

// PyTorch's conv2d: out[n, o, i, j] = b[o] + sum over the group's channels c and taps (u, v)
// of x[n, c, i sh - ph + u dh, j sw - pw + v dw] w[o, c, u, v] (outside the input: 0).
std::vector<double> conv2d_loop(const Tensor& x, const Tensor& w, const Tensor& b, Axes2 s, Axes2 p, Axes2 d,
                                int64_t groups) {
  const std::vector<double> X = x.to_vector_f64(), Wt = w.to_vector_f64();
  const std::vector<double> B = b.defined() ? b.to_vector_f64() : std::vector<double>();
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t O = w.size(0), Cg = w.size(1), KH = w.size(2), KW = w.size(3), Og = O / groups;
  const int64_t OH = out_size(H, KH, s[0], p[0], d[0]), OW = out_size(W, KW, s[1], p[1], d[1]);
  std::vector<double> out;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < OH; ++i)
        for (int64_t j = 0; j < OW; ++j) {
          double acc = B.empty() ? 0.0 : B[size_t(o)];
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t u = 0; u < KH; ++u)
              for (int64_t v = 0; v < KW; ++v) {
                const int64_t r = i * s[0] - p[0] + u * d[0], q = j * s[1] - p[1] + v * d[1];
                if (r < 0 || r >= H || q < 0 || q >= W) continue;
                const int64_t ci = (o / Og) * Cg + c;
                acc += X[size_t(((n * C + ci) * H + r) * W + q)] * Wt[size_t(((o * Cg + c) * KH + u) * KW + v)];
              }
          out.push_back(acc);
        }
  return out;
}

// PyTorch's pooling: the max, or the sum over the window divided by its kernel area
// (padding counted, count_include_pad), of the windows at i sh - ph, j sw - pw.
std::vector<double> pool_loop(const Tensor& x, Axes2 k, Axes2 s, Axes2 p, bool max) {
  const std::vector<double> X = x.to_vector_f64();
  const int64_t NC = x.size(0) * x.size(1), H = x.size(2), W = x.size(3);
  const int64_t OH = out_size(H, k[0], s[0], p[0]), OW = out_size(W, k[1], s[1], p[1]);
  std::vector<double> out;
  for (int64_t nc = 0; nc < NC; ++nc)
    for (int64_t i = 0; i < OH; ++i)
      for (int64_t j = 0; j < OW; ++j) {
        double acc = max ? -std::numeric_limits<double>::infinity() : 0.0;
        for (int64_t u = 0; u < k[0]; ++u)
          for (int64_t v = 0; v < k[1]; ++v) {
            const int64_t r = i * s[0] - p[0] + u, q = j * s[1] - p[1] + v;
            if (r < 0 || r >= H || q < 0 || q >= W) continue;
            const double e = X[size_t((nc * H + r) * W + q)];
            acc = max ? std::max(acc, e) : acc + e;
          }
        out.push_back(max ? acc : acc / double(k[0] * k[1]));
      }
  return out;
}

void expect_near(const Tensor& got, const std::vector<double>& want, double tol) {
  const std::vector<double> g = got.contiguous().to_vector_f64();
  ASSERT_EQ(g.size(), want.size());
  ASSERT_GT(g.size(), 0u);
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], want[i], tol) << "element " << i;
}

std::string str(Axes2 a) { return "(" + std::to_string(a[0]) + ", " + std::to_string(a[1]) + ")"; }

struct ConvCase {
  Shape x, w;
  Axes2 stride, padding, dilation;
  int64_t groups;
};

const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> cases = {
      {{2, 3, 5, 7}, {4, 3, 1, 3}, {2, 1}, {0, 1}, {1, 1}, 1},  // the docs' Conv2d(3, 16, (1, 3), (2, 1), (0, 1))
      {{1, 4, 6, 5}, {6, 2, 3, 2}, {1, 2}, {2, 0}, {2, 1}, 2},  // groups, dilation on H only
      {{2, 2, 7, 4}, {3, 2, 2, 3}, {3, 1}, {1, 2}, {1, 2}, 1},
  };
  return cases;
}

TEST(ConvAxes, Conv2dMatchesTheLoopPerAxis) {
  manual_seed(11);
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE("stride " + str(c.stride) + " padding " + str(c.padding) + " dilation " + str(c.dilation));
    const Tensor x = Tensor::uniform(c.x, -1, 1, DType::f64), w = Tensor::uniform(c.w, -1, 1, DType::f64);
    const Tensor b = Tensor::uniform({c.w[0]}, -1, 1, DType::f64);
    const std::vector<double> want = conv2d_loop(x, w, b, c.stride, c.padding, c.dilation, c.groups);
    const Tensor y = conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
    EXPECT_EQ(y.size(2), out_size(c.x[2], c.w[2], c.stride[0], c.padding[0], c.dilation[0]));
    EXPECT_EQ(y.size(3), out_size(c.x[3], c.w[3], c.stride[1], c.padding[1], c.dilation[1]));
    expect_near(y, want, 1e-12);  // ref's f64 kernel
    expect_near(conv2d(x.to(DType::f32), w.to(DType::f32), b.to(DType::f32), c.stride, c.padding, c.dilation, c.groups),
                want, 1e-5);  // oneDNN's f32 kernel
  }
}

TEST(ConvAxes, IntFormsAreThePairFormsWithEqualAxes) {
  manual_seed(12);
  const Tensor x = Tensor::uniform({2, 4, 9, 8}, -1, 1), w = Tensor::uniform({4, 2, 3, 2}, -1, 1);
  const Tensor b = Tensor::uniform({4}, -1, 1);
  const auto same = [](const Tensor& a, const Tensor& e) {
    EXPECT_EQ(a.shape(), e.shape());
    EXPECT_EQ(a.contiguous().to_vector_f64(), e.contiguous().to_vector_f64());
  };
  same(conv2d(x, w, b, 2, 1, 2, 2), conv2d(x, w, b, Axes2{2, 2}, Axes2{1, 1}, Axes2{2, 2}, 2));
  const Tensor wt = Tensor::uniform({4, 3, 2, 3}, -1, 1);
  same(conv_transpose2d(x, wt, Tensor(), 2, 1, 1, 2, 1),
       conv_transpose2d(x, wt, Tensor(), Axes2{2, 2}, Axes2{1, 1}, Axes2{1, 1}, 2, Axes2{1, 1}));
  same(max_pool2d(x, 3, -1, 1), max_pool2d(x, Axes2{3, 3}, Axes2{3, 3}, Axes2{1, 1}));
  same(avg_pool2d(x, 3, 2, 1), avg_pool2d(x, Axes2{3, 3}, Axes2{2, 2}, Axes2{1, 1}));
}

double dot(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector_f64(), y = b.to_vector_f64();
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
  return s;
}

// conv_transpose2d with per-axis arguments is conv2d's adjoint with the same ones:
// <conv2d(y, W), x> == <y, conv_transpose2d(x, W)>, and has PyTorch's output size per axis.
TEST(ConvAxes, ConvTranspose2dIsTheAdjointPerAxis) {
  manual_seed(13);
  for (const ConvCase& c : conv_cases()) {
    // The transposed weight [C_in, C_out / groups, KH, KW] is conv2d's [O, C / groups, KH, KW].
    const Axes2 out_pad{c.stride[0] > 1 ? 1 : 0, c.stride[1] > 1 ? 1 : 0};
    SCOPED_TRACE("stride " + str(c.stride) + " padding " + str(c.padding) + " output_padding " + str(out_pad));
    const Tensor W = Tensor::uniform(c.w, -1, 1, DType::f64);
    const Tensor x = Tensor::uniform({2, c.w[0], 4, 3}, -1, 1, DType::f64);
    const Tensor up = conv_transpose2d(x, W, Tensor(), c.stride, c.padding, out_pad, c.groups, c.dilation);
    for (size_t a = 0; a < 2; ++a)
      EXPECT_EQ(up.size(int64_t(2 + a)), (x.size(int64_t(2 + a)) - 1) * c.stride[a] - 2 * c.padding[a] +
                                             c.dilation[a] * (c.w[2 + a] - 1) + out_pad[a] + 1);
    const Tensor y = Tensor::uniform(up.shape(), -1, 1, DType::f64);
    const Tensor down = conv2d(y, W, Tensor(), c.stride, c.padding, c.dilation, c.groups);
    ASSERT_EQ(down.shape(), x.shape());
    EXPECT_NEAR(dot(down, x), dot(y, up), 1e-10);
    const Tensor up32 = conv_transpose2d(x.to(DType::f32), W.to(DType::f32), Tensor(), c.stride, c.padding, out_pad,
                                         c.groups, c.dilation);
    expect_near(up32, up.to_vector_f64(), 1e-5);
  }
}

TEST(ConvAxes, PoolingMatchesTheLoopPerAxis) {
  manual_seed(14);
  for (const auto& [k, s, p] : {std::tuple{Axes2{1, 3}, Axes2{2, 1}, Axes2{0, 1}}, {Axes2{3, 2}, Axes2{1, 2}, Axes2{1, 0}},
                                {Axes2{2, 4}, Axes2{3, 2}, Axes2{1, 2}}}) {
    SCOPED_TRACE("kernel " + str(k) + " stride " + str(s) + " padding " + str(p));
    const Tensor x = Tensor::uniform({2, 3, 7, 9}, -1, 1, DType::f64);
    for (bool max : {true, false}) {
      const std::vector<double> want = pool_loop(x, k, s, p, max);
      expect_near(max ? max_pool2d(x, k, s, p) : avg_pool2d(x, k, s, p), want, 1e-12);
      const Tensor x32 = x.to(DType::f32);
      expect_near(max ? max_pool2d(x32, k, s, p) : avg_pool2d(x32, k, s, p), want, 1e-6);
    }
  }
}

TEST(ConvAxes, GradientsMatchFiniteDifferences) {
  manual_seed(15);
  const Tensor x = test::random_tensor({2, 4, 6, 5}, 1), w = test::random_tensor({4, 2, 3, 2}, 2);
  const Tensor b = test::random_tensor({4}, 3);
  test::check_op("conv2d per axis", [](const std::vector<Tensor>& in) {
    return conv2d(in[0], in[1], in[2], Axes2{2, 1}, Axes2{1, 0}, Axes2{1, 2}, 2);
  }, {x, w, b});
  test::check_op("conv_transpose2d per axis", [](const std::vector<Tensor>& in) {
    return conv_transpose2d(in[0], in[1], in[2], Axes2{2, 1}, Axes2{1, 0}, Axes2{1, 0}, 2, Axes2{1, 2});
  }, {x, test::random_tensor({4, 3, 2, 3}, 4), test::random_tensor({6}, 5)});
  test::check_op("max_pool2d per axis",
                 [](const std::vector<Tensor>& in) { return max_pool2d(in[0], Axes2{3, 2}, Axes2{2, 1}, Axes2{1, 0}); },
                 {x});
  test::check_op("avg_pool2d per axis",
                 [](const std::vector<Tensor>& in) { return avg_pool2d(in[0], Axes2{1, 3}, Axes2{2, 1}, Axes2{0, 1}); },
                 {x});
}

// PyTorch's argument rules, each axis on its own: the message names the op, the argument,
// the bad value and its axis.
TEST(ConvAxes, BadPerAxisValuesNameTheAxis) {
  const Tensor x = Tensor::uniform({1, 2, 5, 6}, -1, 1), w = Tensor::uniform({3, 2, 2, 3}, -1, 1);
  auto message = [](auto&& fn) -> std::string {
    try {
      fn();
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  auto has = [](const std::string& m, const std::string& what) { EXPECT_NE(m.find(what), std::string::npos) << m; };
  has(message([&] { conv2d(x, w, Tensor(), Axes2{1, 1}, Axes2{0, -1}); }),
      "conv2d: padding -1 (expected >= 0) along W, padding (0, -1)");
  has(message([&] { conv2d(x, w, Tensor(), Axes2{0, 1}, Axes2{0, 0}); }),
      "conv2d: stride 0 (expected >= 1) along H, stride (0, 1)");
  has(message([&] { conv2d(x, w, Tensor(), Axes2{1, 1}, Axes2{0, 0}, Axes2{1, 0}); }),
      "conv2d: dilation 0 (expected >= 1) along W, dilation (1, 0)");
  has(message([&] { conv2d(x, Tensor::uniform({3, 2, 2, 9}, -1, 1), Tensor(), Axes2{1, 1}, Axes2{0, 1}); }),
      "it spans 9 along W, the input padded by (0, 1) has 8");
  has(message([&] { conv_transpose2d(x, Tensor::uniform({2, 3, 2, 3}, -1, 1), Tensor(), Axes2{2, 1}, Axes2{0, 0},
                                     Axes2{1, 1}); }),
      "output_padding must be smaller than the stride or the dilation, got 1 along W, output_padding (1, 1)");
  has(message([&] { max_pool2d(x, Axes2{3, 2}, Axes2{1, 1}, Axes2{0, 2}); }),
      "max_pool2d: padding 2 is more than half the kernel_size 2 along W");
  has(message([&] { avg_pool2d(x, Axes2{3, 2}, Axes2{1, 0}); }), "avg_pool2d: stride 0 (expected >= 1) along W");
  has(message([&] { max_pool2d(x, Axes2{-1, 2}, Axes2{1, 1}); }), "max_pool2d: kernel_size -1 (expected >= 1) along H");
  has(message([&] { avg_pool2d(x, Axes2{1, 2}, Axes2{1, 1}, Axes2{-1, 0}); }),
      "avg_pool2d: padding -1 (expected >= 0) along H");
  // 5 rows padded by 1 are 7: a kernel of 7 fits once, one of 8 never (stride 2 too, where
  // C++'s truncating (7 - 8) / 2 + 1 would say 1 output row).
  EXPECT_EQ(max_pool2d(x, Axes2{7, 2}, Axes2{2, 1}, Axes2{1, 0}).size(2), 1);
  has(message([&] { max_pool2d(x, Axes2{8, 2}, Axes2{2, 1}, Axes2{1, 0}); }),
      "max_pool2d: kernel_size 8 is larger than the padded input's 7 (src [1, 2, 5, 6]) along H");
}

}  // namespace
}  // namespace mixprec

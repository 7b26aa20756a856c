// backend/ref/conv.cpp: direct 2-D convolution (PyTorch's groups and dilation) and its two
// backward passes, as plain nested loops accumulating in double.
// Letters: N batch, C input channels, H/W input size, O output channels, KH/KW kernel,
// OH/OW output size; G groups of CG = C / G input and OG = O / G output channels. Input
// pixel of output (oh, kh): ih = oh * stride_h - pad_h + kh * dil_h; output channel o reads
// input channels (o / OG) * CG + c for c < CG, weights [O, CG, KH, KW].
#include "backend/kernels.h"
#include "backend/ref/ref_util.h"

namespace mixprec::backend::ref {
namespace {

struct ConvGeom {
  int64_t N, C, H, W, O, KH, KW, OH, OW, G, CG, OG;
};

// Validates src/weights/params once for all three kernels, so they agree on the rules.
ConvGeom conv_geometry(const char* op, const Shape& src, const Shape& weights,
                       const Conv2dParams& p) {
  check_rank(op, "src", src, 4);
  check_rank(op, "weights", weights, 4);
  if (p.stride_h < 1 || p.stride_w < 1 || p.pad_h < 0 || p.pad_w < 0 || p.dil_h < 1 || p.dil_w < 1 ||
      p.groups < 1)
    fail(std::string(op) + ": stride (" + std::to_string(p.stride_h) + ", " +
         std::to_string(p.stride_w) + ") must be >= 1, pad (" + std::to_string(p.pad_h) +
         ", " + std::to_string(p.pad_w) + ") >= 0, dilation (" + std::to_string(p.dil_h) + ", " +
         std::to_string(p.dil_w) + ") and groups (" + std::to_string(p.groups) + ") >= 1");
  if (src[1] != weights[1] * p.groups)
    fail(std::string(op) + ": src " + shape_str(src) + " and weights " + shape_str(weights) +
         ": channel mismatch " + std::to_string(src[1]) + " vs " + std::to_string(weights[1]) +
         (p.groups > 1 ? " x " + std::to_string(p.groups) + " groups" : std::string()));
  if (weights[0] % p.groups != 0)
    fail(std::string(op) + ": weights " + shape_str(weights) + ": " + std::to_string(weights[0]) +
         " output channels in " + std::to_string(p.groups) + " groups");
  ConvGeom g{src[0], src[1], src[2], src[3], weights[0], weights[2], weights[3], 0, 0, p.groups, weights[1],
             weights[0] / p.groups};
  // Guard the division in conv_out_size: a kernel larger than the padded input is an error,
  // not a negative size.
  const int64_t span_h = p.dil_h * (g.KH - 1) + 1, span_w = p.dil_w * (g.KW - 1) + 1;
  if (span_h > g.H + 2 * p.pad_h || span_w > g.W + 2 * p.pad_w || g.KH < 1 || g.KW < 1)
    fail(std::string(op) + ": src " + shape_str(src) + " and weights " + shape_str(weights) +
         ": kernel " + std::to_string(span_h) + "x" + std::to_string(span_w) +
         " (dilated) does not fit the input padded by (" + std::to_string(p.pad_h) + ", " +
         std::to_string(p.pad_w) + ")");
  g.OH = conv_out_size(g.H, g.KH, p.stride_h, p.pad_h, p.dil_h);
  g.OW = conv_out_size(g.W, g.KW, p.stride_w, p.pad_w, p.dil_w);
  return g;
}

// Calls f(src index, weights index) for every product that output (n, o, oh, ow) sums: the
// one walk of the geometry the three kernels share, so that they cannot disagree on it.
template <typename F>
void for_each_tap(const ConvGeom& g, const Conv2dParams& p, int64_t n, int64_t o, int64_t oh, int64_t ow, F&& f) {
  const int64_t c0 = (o / g.OG) * g.CG;
  for (int64_t c = 0; c < g.CG; ++c)
    for (int64_t kh = 0; kh < g.KH; ++kh) {
      const int64_t ih = oh * p.stride_h - p.pad_h + kh * p.dil_h;
      if (ih < 0 || ih >= g.H) continue;
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const int64_t iw = ow * p.stride_w - p.pad_w + kw * p.dil_w;
        if (iw < 0 || iw >= g.W) continue;
        f(((n * g.C + c0 + c) * g.H + ih) * g.W + iw, ((o * g.CG + c) * g.KH + kh) * g.KW + kw);
      }
    }
}

}  // namespace

Tensor conv2d_forward(const Tensor& src, const Tensor& weights, const Tensor& bias,
                      const Conv2dParams& p) {
  const char* op = "conv2d";
  check_same_dtype(op, "src", src, "weights", weights);
  const ConvGeom g = conv_geometry(op, src.shape(), weights.shape(), p);
  std::vector<double> b(static_cast<size_t>(g.O), 0.0);
  if (bias.defined()) {
    check_same_dtype(op, "src", src, "bias", bias);
    if (bias.shape() != Shape{g.O})
      fail(std::string(op) + ": bias " + shape_str(bias.shape()) + " and weights " +
           shape_str(weights.shape()) + ": bias must be [" + std::to_string(g.O) + "]");
    b = read_f64(bias);
  }
  const std::vector<double> x = read_f64(src);
  const std::vector<double> w = read_f64(weights);
  std::vector<double> y(static_cast<size_t>(g.N * g.O * g.OH * g.OW));
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t o = 0; o < g.O; ++o)
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          double acc = b[o];
          for_each_tap(g, p, n, o, oh, ow, [&](int64_t xi, int64_t wi) { acc += x[xi] * w[wi]; });
          y[((n * g.O + o) * g.OH + oh) * g.OW + ow] = acc;
        }
  return make_tensor(y, {g.N, g.O, g.OH, g.OW}, src.dtype());
}

Tensor conv2d_backward_data(const Tensor& diff_dst, const Tensor& weights,
                            const Shape& src_shape, const Conv2dParams& p) {
  const char* op = "conv2d_backward_data";
  check_same_dtype(op, "diff_dst", diff_dst, "weights", weights);
  const ConvGeom g = conv_geometry(op, src_shape, weights.shape(), p);
  const Shape expected{g.N, g.O, g.OH, g.OW};
  if (diff_dst.shape() != expected)
    fail(std::string(op) + ": diff_dst " + shape_str(diff_dst.shape()) + " must be " +
         shape_str(expected) + " for src " + shape_str(src_shape) + " and weights " +
         shape_str(weights.shape()));
  const std::vector<double> dy = read_f64(diff_dst);
  const std::vector<double> w = read_f64(weights);
  std::vector<double> dx(static_cast<size_t>(g.N * g.C * g.H * g.W), 0.0);
  // Scatter form: each forward product x*w sends diff_dst*w back to the x it read.
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t o = 0; o < g.O; ++o)
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const double d = dy[((n * g.O + o) * g.OH + oh) * g.OW + ow];
          for_each_tap(g, p, n, o, oh, ow, [&](int64_t xi, int64_t wi) { dx[xi] += d * w[wi]; });
        }
  return make_tensor(dx, src_shape, diff_dst.dtype());
}

WeightGrads conv2d_backward_weights(const Tensor& src, const Tensor& diff_dst,
                                    const Shape& weights_shape, bool with_bias,
                                    const Conv2dParams& p) {
  const char* op = "conv2d_backward_weights";
  check_same_dtype(op, "src", src, "diff_dst", diff_dst);
  const ConvGeom g = conv_geometry(op, src.shape(), weights_shape, p);
  const Shape expected{g.N, g.O, g.OH, g.OW};
  if (diff_dst.shape() != expected)
    fail(std::string(op) + ": diff_dst " + shape_str(diff_dst.shape()) + " must be " +
         shape_str(expected) + " for src " + shape_str(src.shape()) + " and weights " +
         shape_str(weights_shape));
  const std::vector<double> x = read_f64(src);
  const std::vector<double> dy = read_f64(diff_dst);
  std::vector<double> dw(static_cast<size_t>(g.O * g.CG * g.KH * g.KW), 0.0);
  std::vector<double> db(static_cast<size_t>(g.O), 0.0);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t o = 0; o < g.O; ++o)
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const double d = dy[((n * g.O + o) * g.OH + oh) * g.OW + ow];
          db[o] += d;
          for_each_tap(g, p, n, o, oh, ow, [&](int64_t xi, int64_t wi) { dw[wi] += d * x[xi]; });
        }
  WeightGrads grads;
  grads.diff_weights = make_tensor(dw, weights_shape, src.dtype());
  if (with_bias) grads.diff_bias = make_tensor(db, {g.O}, src.dtype());
  return grads;
}

}  // namespace mixprec::backend::ref

// backend/ref/conv3d_reference.cpp: the float64 references of F.conv3d and
// F.conv_transpose3d, written from PyTorch's definitions as direct 3-D loops (a gather and a
// scatter), independent of the ops' routes (ops/conv3d.cpp and ops/conv_transpose3d.cpp run
// one conv2d or conv_transpose2d over channel x depth tap pairs).
#include "backend/ref/op_reference.h"
#include "backend/ref/ref_util.h"

namespace mixprec::backend::ref {

Tensor conv3d_reference(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t stride, int64_t padding,
                        int64_t dilation, int64_t groups) {
  check_rank("conv3d_reference", "input", input, 5);
  check_rank("conv3d_reference", "weight", weight, 5);
  const int64_t N = input.size(0), C = input.size(1), D = input.size(2), H = input.size(3), W = input.size(4);
  const int64_t O = weight.size(0), CG = weight.size(1), KD = weight.size(2), KH = weight.size(3), KW = weight.size(4);
  const int64_t OG = O / groups;
  auto out_size = [&](int64_t in, int64_t k) { return (in + 2 * padding - dilation * (k - 1) - 1) / stride + 1; };
  const int64_t OD = out_size(D, KD), OH = out_size(H, KH), OW = out_size(W, KW);
  const std::vector<double> x = read_f64(input), w = read_f64(weight);
  const std::vector<double> b = bias.defined() ? read_f64(bias) : std::vector<double>(size_t(O), 0.0);
  std::vector<double> y(size_t(N * O * OD * OH * OW), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t od = 0; od < OD; ++od)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            double acc = b[size_t(o)];
            for (int64_t c = 0; c < CG; ++c) {
              const int64_t ci = (o / OG) * CG + c;
              for (int64_t kd = 0; kd < KD; ++kd) {
                const int64_t id = od * stride - padding + kd * dilation;
                if (id < 0 || id >= D) continue;
                for (int64_t kh = 0; kh < KH; ++kh) {
                  const int64_t ih = oh * stride - padding + kh * dilation;
                  if (ih < 0 || ih >= H) continue;
                  for (int64_t kw = 0; kw < KW; ++kw) {
                    const int64_t iw = ow * stride - padding + kw * dilation;
                    if (iw < 0 || iw >= W) continue;
                    acc += x[size_t((((n * C + ci) * D + id) * H + ih) * W + iw)] *
                           w[size_t((((o * CG + c) * KD + kd) * KH + kh) * KW + kw)];
                  }
                }
              }
            }
            y[size_t((((n * O + o) * OD + od) * OH + oh) * OW + ow)] = acc;
          }
  return make_tensor(y, {N, O, OD, OH, OW}, DType::f64);
}

Tensor conv_transpose3d_reference(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t stride,
                                  int64_t padding, int64_t output_padding, int64_t groups, int64_t dilation) {
  check_rank("conv_transpose3d_reference", "input", input, 5);
  check_rank("conv_transpose3d_reference", "weight", weight, 5);
  const int64_t N = input.size(0), CI = input.size(1), D = input.size(2), H = input.size(3), W = input.size(4);
  const int64_t COG = weight.size(1), KD = weight.size(2), KH = weight.size(3), KW = weight.size(4);
  const int64_t CO = COG * groups, CIG = CI / groups;
  auto out_size = [&](int64_t in, int64_t k) {
    return (in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1;
  };
  const int64_t OD = out_size(D, KD), OH = out_size(H, KH), OW = out_size(W, KW);
  const std::vector<double> x = read_f64(input), w = read_f64(weight);
  const std::vector<double> b = bias.defined() ? read_f64(bias) : std::vector<double>(size_t(CO), 0.0);
  std::vector<double> y(size_t(N * CO * OD * OH * OW), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t co = 0; co < CO; ++co)
      for (int64_t i = 0; i < OD * OH * OW; ++i) y[size_t((n * CO + co) * OD * OH * OW + i)] = b[size_t(co)];
  // Each input element scatters weight-scaled copies over its group's output channels.
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ci = 0; ci < CI; ++ci)
      for (int64_t d = 0; d < D; ++d)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t wi = 0; wi < W; ++wi) {
            const double v = x[size_t((((n * CI + ci) * D + d) * H + h) * W + wi)];
            for (int64_t j = 0; j < COG; ++j) {
              const int64_t co = (ci / CIG) * COG + j;
              for (int64_t kd = 0; kd < KD; ++kd) {
                const int64_t od = d * stride - padding + kd * dilation;
                if (od < 0 || od >= OD) continue;
                for (int64_t kh = 0; kh < KH; ++kh) {
                  const int64_t oh = h * stride - padding + kh * dilation;
                  if (oh < 0 || oh >= OH) continue;
                  for (int64_t kw = 0; kw < KW; ++kw) {
                    const int64_t ow = wi * stride - padding + kw * dilation;
                    if (ow < 0 || ow >= OW) continue;
                    y[size_t((((n * CO + co) * OD + od) * OH + oh) * OW + ow)] +=
                        v * w[size_t((((ci * COG + j) * KD + kd) * KH + kh) * KW + kw)];
                  }
                }
              }
            }
          }
  return make_tensor(y, {N, CO, OD, OH, OW}, DType::f64);
}

}  // namespace mixprec::backend::ref

// backend/ref/deconv.cpp: the float64 reference of the transposed convolution, written from
// PyTorch's definition as a scatter (each input pixel spreads weight-scaled copies over the
// output), independent of the conv2d kernels the op itself runs (ops/conv_transpose.cpp
// runs conv2d's backward-data as its forward).
#include "backend/ref/op_reference.h"
#include "backend/ref/ref_util.h"

namespace mixprec::backend::ref {

Tensor conv_transpose2d_reference(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t stride_h,
                                  int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t out_pad_h, int64_t out_pad_w,
                                  int64_t groups, int64_t dil_h, int64_t dil_w) {
  check_rank("conv_transpose2d_reference", "input", input, 4);
  check_rank("conv_transpose2d_reference", "weight", weight, 4);
  const int64_t N = input.size(0), CI = input.size(1), H = input.size(2), W = input.size(3);
  const int64_t COG = weight.size(1), CO = COG * groups, CIG = CI / groups, KH = weight.size(2), KW = weight.size(3);
  const int64_t OH = (H - 1) * stride_h - 2 * pad_h + dil_h * (KH - 1) + out_pad_h + 1;
  const int64_t OW = (W - 1) * stride_w - 2 * pad_w + dil_w * (KW - 1) + out_pad_w + 1;
  const std::vector<double> x = read_f64(input), w = read_f64(weight);
  const std::vector<double> b = bias.defined() ? read_f64(bias) : std::vector<double>(size_t(CO), 0.0);
  std::vector<double> y(size_t(N * CO * OH * OW), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t co = 0; co < CO; ++co)
      for (int64_t i = 0; i < OH * OW; ++i) y[size_t((n * CO + co) * OH * OW + i)] = b[size_t(co)];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ci = 0; ci < CI; ++ci)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t wi = 0; wi < W; ++wi) {
          const double v = x[size_t(((n * CI + ci) * H + h) * W + wi)];
          for (int64_t j = 0; j < COG; ++j)
            for (int64_t kh = 0; kh < KH; ++kh) {
              const int64_t oh = h * stride_h - pad_h + kh * dil_h, co = (ci / CIG) * COG + j;
              if (oh < 0 || oh >= OH) continue;
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t ow = wi * stride_w - pad_w + kw * dil_w;
                if (ow < 0 || ow >= OW) continue;
                y[size_t(((n * CO + co) * OH + oh) * OW + ow)] += v * w[size_t(((ci * COG + j) * KH + kh) * KW + kw)];
              }
            }
        }
  return make_tensor(y, {N, CO, OH, OW}, DType::f64);
}

}  // namespace mixprec::backend::ref

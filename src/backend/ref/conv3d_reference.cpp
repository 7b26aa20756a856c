// backend/ref/conv3d_reference.cpp: the float64 reference of F.conv3d, written from PyTorch's
// definition as a direct 3-D loop, independent of the op's route (ops/conv3d.cpp runs one
// conv2d over channel x depth tap pairs).
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

}  // namespace mixprec::backend::ref

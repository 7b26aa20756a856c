// pow.cpp: elementwise power by a scalar exponent (fp32 policy under autocast: a bf16
// input is raised in f32, as x^e amplifies relative error by |e|), forward and backward.
#include <cmath>

#include "autograd/node.h"
#include "core/convert.h"
#include "ops/autocast_hook.h"
#include "mixprec/ops_extra.h"
#include "mixprec/status.h"

namespace mixprec {

namespace {

constexpr int64_t kParallelMin = int64_t(1) << 15;

std::vector<double> load_dense(const Tensor& t) {
  MIXPREC_CHECK(t.is_dense(), "pow: load_dense needs a dense tensor, got " + t.str());
  std::vector<double> v(size_t(t.numel()));
  convert_elements(t.data(), t.dtype(), v.data(), DType::f64, t.numel());
  return v;
}

Tensor store_like(const std::vector<double>& v, const Tensor& like) {
  Tensor out = Tensor::empty(like.shape(), like.dtype(), like.suggest_memory_format());
  convert_elements(v.data(), DType::f64, out.data(), like.dtype(), out.numel());
  return out;
}

}  // namespace

Tensor pow(const Tensor& src_in, double exponent) {
  const Tensor src = ops_detail::autocast_inputs(amp::OpId::pow, {src_in})[0];
  if (!src.defined() || !is_floating(src.dtype()))
    throw Error(Status::invalid_argument("pow: needs a floating tensor, got " + src.str()));
  const Tensor x = src.is_dense() ? src.detach() : src.detach().contiguous();
  const std::vector<double> xv = load_dense(x);
  std::vector<double> y(xv.size());
  const int64_t n = int64_t(xv.size());
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[size_t(i)] = std::pow(xv[size_t(i)], exponent);
  Tensor dst = store_like(y, x);
  if (any_requires_grad({&src})) {
    record_op(dst, "pow", {&src}, [x, exponent](const Tensor& diff_dst) {
      const std::vector<double> xv = load_dense(x);
      const std::vector<double> dy =
          load_dense(diff_dst.to_memory_format(x.suggest_memory_format()));
      std::vector<double> dx(xv.size(), 0.0);  // exponent 0: a constant, gradient 0 (PyTorch)
      const int64_t n = int64_t(xv.size());
      if (exponent != 0.0) {
#pragma omp parallel for if (n > kParallelMin)
        for (int64_t i = 0; i < n; ++i)
          dx[size_t(i)] = dy[size_t(i)] * exponent * std::pow(xv[size_t(i)], exponent - 1.0);
      }
      return std::vector<Tensor>{store_like(dx, x)};
    });
  }
  return dst;
}

}  // namespace mixprec

// activation_extra.cpp: exact GELU and dropout (keep policy: they run in their input
// dtype), forward and backward. Elementwise loops walk the dense buffer linearly, so a
// channels-last activation stays channels-last; values are computed in double and
// rounded once to the dtype.
#include <cmath>
#include <memory>

#include "autograd/node.h"
#include "core/convert.h"
#include "core/random.h"
#include "mixprec/amp.h"
#include "mixprec/ops_extra.h"
#include "mixprec/status.h"

namespace mixprec {

namespace {

constexpr int64_t kParallelMin = int64_t(1) << 15;

void check_floating(const char* op, const Tensor& src) {
  if (!src.defined() || !is_floating(src.dtype()))
    throw Error(
        Status::invalid_argument(std::string(op) + ": needs a floating tensor, got " + src.str()));
}

// A dense version of t (no autograd) whose buffer order the elementwise loop walks.
Tensor dense(const Tensor& t) { return t.is_dense() ? t.detach() : t.detach().contiguous(); }

std::vector<double> load_dense(const Tensor& t) {
  MIXPREC_CHECK(t.is_dense(), "activation_extra: load_dense needs a dense tensor, got " + t.str());
  std::vector<double> v(size_t(t.numel()));
  convert_elements(t.data(), t.dtype(), v.data(), DType::f64, t.numel());
  return v;
}

// v in the buffer order of `like`, stored as dtype with like's memory format.
Tensor store_like(const std::vector<double>& v, const Tensor& like, DType dtype) {
  Tensor out = Tensor::empty(like.shape(), dtype, like.suggest_memory_format());
  convert_elements(v.data(), DType::f64, out.data(), dtype, out.numel());
  return out;
}

// diff_dst's values in x's buffer order.
std::vector<double> load_grad_like(const Tensor& diff_dst, const Tensor& x) {
  return load_dense(diff_dst.to_memory_format(x.suggest_memory_format()));
}

constexpr double kInvSqrt2 = 0.70710678118654752440;    // 1 / sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1 / sqrt(2 pi)

}  // namespace

Tensor gelu(const Tensor& src_in) {
  const Tensor src = amp::cast_inputs(amp::OpId::gelu, {src_in})[0];
  check_floating("gelu", src);
  const Tensor x = dense(src);
  const std::vector<double> xv = load_dense(x);
  std::vector<double> y(xv.size());
  const int64_t n = int64_t(xv.size());
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i)
    y[size_t(i)] = 0.5 * xv[size_t(i)] * (1.0 + std::erf(xv[size_t(i)] * kInvSqrt2));
  Tensor dst = store_like(y, x, x.dtype());
  if (any_requires_grad({&src})) {
    record_op(dst, "gelu", {&src}, [x](const Tensor& diff_dst) {
      const std::vector<double> xv = load_dense(x), dy = load_grad_like(diff_dst, x);
      std::vector<double> dx(xv.size());
      const int64_t n = int64_t(xv.size());
      // d/dx [x Phi(x)] = Phi(x) + x phi(x)
#pragma omp parallel for if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) {
        const double v = xv[size_t(i)];
        const double cdf = 0.5 * (1.0 + std::erf(v * kInvSqrt2));
        const double pdf = kInvSqrt2Pi * std::exp(-0.5 * v * v);
        dx[size_t(i)] = dy[size_t(i)] * (cdf + v * pdf);
      }
      return std::vector<Tensor>{store_like(dx, x, x.dtype())};
    });
  }
  return dst;
}

Tensor dropout(const Tensor& src_in, double p, bool training) {
  if (!(p >= 0.0 && p < 1.0))
    throw Error(Status::invalid_argument("dropout: p must be in [0, 1), got " + std::to_string(p)));
  const Tensor src = amp::cast_inputs(amp::OpId::dropout, {src_in})[0];
  check_floating("dropout", src);
  if (!training || p == 0.0) return src;
  const Tensor x = dense(src);
  const std::vector<double> xv = load_dense(x);
  const double scale = 1.0 / (1.0 - p);
  // One draw per element in buffer order, from the top 53 bits (the same on every
  // standard library, unlike std::bernoulli_distribution). Serial: the draws must not
  // depend on the thread count.
  auto keep = std::make_shared<std::vector<uint8_t>>(xv.size());
  std::mt19937_64& gen = global_generator();
  for (auto& k : *keep) k = double(gen() >> 11) * 0x1.0p-53 >= p ? 1 : 0;
  std::vector<double> y(xv.size());
  for (size_t i = 0; i < y.size(); ++i) y[i] = (*keep)[i] ? xv[i] * scale : 0.0;
  Tensor dst = store_like(y, x, x.dtype());
  if (any_requires_grad({&src})) {
    // Backward needs the mask, not the input.
    const Shape shape = x.shape();
    const MemoryFormat format = x.suggest_memory_format();
    const DType dtype = x.dtype();
    record_op(dst, "dropout", {&src}, [keep, scale, shape, format, dtype](const Tensor& diff_dst) {
      const std::vector<double> dy = load_dense(diff_dst.to_memory_format(format));
      std::vector<double> dx(dy.size());
      for (size_t i = 0; i < dx.size(); ++i) dx[i] = (*keep)[i] ? dy[i] * scale : 0.0;
      Tensor g = Tensor::empty(shape, dtype, format);
      convert_elements(dx.data(), DType::f64, g.data(), dtype, g.numel());
      return std::vector<Tensor>{g};
    });
  }
  return dst;
}

}  // namespace mixprec

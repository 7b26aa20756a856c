// tests/common/finite_diff.h: central-difference gradients in float64, for checking
// backward kernels and autograd against their forward pass. Header-only.
//
// Typical use: f(inputs) = <diff_dst, forward(inputs)> (the directional derivative along
// a fixed random diff_dst); numerical_gradient(f, inputs, i) is then what the backward
// kernel must return as the gradient of inputs[i] for that diff_dst.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <sstream>
#include <vector>

#include "common/compare_guard.h"
#include "mixprec/core/tensor.h"

namespace mixprec::test {

using ScalarFn = std::function<double(std::vector<Tensor>& inputs)>;

// d f / d inputs[index], element by element: (f(x + eps e_i) - f(x - eps e_i)) / (2 eps).
// Perturbs a contiguous f64 copy swapped into inputs[index] (restored before returning), so
// the caller's tensor is never written. Returns an f64 tensor of that input's shape.
// Give f64 inputs: a 1e-6 step is below f32's resolution for values near 1.
inline Tensor numerical_gradient(const ScalarFn& f, std::vector<Tensor>& inputs, size_t index,
                                 double eps = 1e-6) {
  const Tensor original = inputs.at(index);
  Tensor x = Tensor::from_vector_f64(original.to_vector_f64(), original.shape(), DType::f64);
  inputs[index] = x;
  double* p = x.data_ptr<double>();
  std::vector<double> grad(static_cast<size_t>(x.numel()));
  for (size_t i = 0; i < grad.size(); ++i) {
    const double v = p[i];
    p[i] = v + eps;
    const double f_plus = f(inputs);
    p[i] = v - eps;
    const double f_minus = f(inputs);
    p[i] = v;
    grad[i] = (f_plus - f_minus) / (2.0 * eps);
  }
  inputs[index] = original;
  return Tensor::from_vector_f64(grad, original.shape(), DType::f64);
}

// The same for a tensor that `loss` reads itself (a module's parameter or input): each
// element of t's contiguous f64 buffer is moved by +-eps in place and put back. t must be
// a contiguous f64 tensor (a module after to(DType::f64)).
inline Tensor numerical_gradient_in_place(const std::function<double()>& loss, Tensor t, double eps = 1e-6) {
  std::vector<double> g(static_cast<size_t>(t.numel()));
  double* p = t.data_ptr<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    const double v = p[i];
    p[i] = v + eps;
    const double plus = loss();
    p[i] = v - eps;
    const double minus = loss();
    p[i] = v;
    g[i] = (plus - minus) / (2 * eps);
  }
  return Tensor::from_vector_f64(g, t.shape(), DType::f64);
}

// <a, b> over logical order, in double. Shapes must match.
inline double dot_f64(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape()) << "dot_f64: shape mismatch";
  const std::vector<double> x = a.to_vector_f64();
  const std::vector<double> y = b.to_vector_f64();
  double acc = 0.0;
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) acc += x[i] * y[i];
  return acc;
}

// Uniform [low, high) values from a fixed seed (independent of the engine's RNG), f64 unless
// told otherwise.
inline Tensor random_tensor(const Shape& shape, uint64_t seed, double low = -1.0,
                            double high = 1.0, DType dtype = DType::f64) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(low, high);
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (double& x : v) x = dist(rng);
  return Tensor::from_vector_f64(v, shape, dtype);
}

// Analytic vs numerical gradient: |a - n| <= rtol * max(1, max_i |n_i|) for every element.
// The scale is the whole tensor's, not the element's: finite-difference error is roughly
// the same absolute size for every element (roundoff of f divided by eps).
// Fails on an undefined or empty gradient, a shape mismatch, any NaN, and on both gradients
// all zero unless `zeros` is AllZero::allowed (the input really does not reach the loss):
// a gradient that never flowed would otherwise match a numeric gradient that is zero for
// the same reason (compare_guard.h).
inline ::testing::AssertionResult gradients_match(const Tensor& analytic, const Tensor& numeric,
                                                  double rtol, AllZero zeros = AllZero::reject) {
  if (!analytic.defined() || !numeric.defined())
    return ::testing::AssertionFailure() << (analytic.defined() ? "numeric" : "analytic")
                                         << " gradient is undefined";
  if (analytic.shape() != numeric.shape())
    return ::testing::AssertionFailure() << "shape " << shape_str(analytic.shape()) << " vs "
                                         << shape_str(numeric.shape());
  const std::vector<double> a = analytic.to_vector_f64();
  const std::vector<double> n = numeric.to_vector_f64();
  if (auto ok = not_vacuous("gradients_match", a, n, zeros); !ok) return ok;
  double scale = 1.0;
  for (double v : n) scale = std::max(scale, std::fabs(v));
  const double tol = rtol * scale;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(std::fabs(a[i] - n[i]) <= tol))  // also false for a NaN on either side
      return ::testing::AssertionFailure()
             << "element " << i << ": analytic " << a[i] << " vs numeric " << n[i]
             << " (|diff| " << std::fabs(a[i] - n[i]) << " > tol " << tol << ")";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace mixprec::test

// op_reference.cpp: see op_reference.h. Every function reads its inputs with read_f64
// (logical order, any dtype or strides) and writes a contiguous f64 tensor.
#include "backend/ref/op_reference.h"

#include <cmath>
#include <limits>
#include <random>

#include "backend/ref/ref_util.h"

namespace mixprec::backend::ref {

namespace {

Tensor f64(const std::vector<double>& v, const Shape& shape) {
  return make_tensor(v, shape, DType::f64);
}

std::vector<double> affine(const Tensor& t, int64_t n, double fill) {
  return t.defined() ? read_f64(t) : std::vector<double>(size_t(n), fill);
}

}  // namespace

Tensor gelu_reference(const Tensor& src) {
  std::vector<double> x = read_f64(src);
  for (double& v : x) v = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
  return f64(x, src.shape());
}

Tensor pow_reference(const Tensor& src, double exponent) {
  std::vector<double> x = read_f64(src);
  for (double& v : x) v = std::pow(v, exponent);
  return f64(x, src.shape());
}

Tensor layer_norm_reference(const Tensor& src, int64_t d, const Tensor& weight,
                            const Tensor& bias, double eps) {
  const std::vector<double> x = read_f64(src);
  const std::vector<double> w = affine(weight, d, 1.0), b = affine(bias, d, 0.0);
  std::vector<double> y(x.size());
  for (size_t r = 0; d > 0 && r < x.size() / size_t(d); ++r) {
    const double* row = &x[r * size_t(d)];
    double mean = 0, var = 0;
    for (int64_t j = 0; j < d; ++j) mean += row[j];
    mean /= double(d);
    for (int64_t j = 0; j < d; ++j) var += (row[j] - mean) * (row[j] - mean);
    var /= double(d);
    for (int64_t j = 0; j < d; ++j)
      y[r * size_t(d) + size_t(j)] = (row[j] - mean) / std::sqrt(var + eps) * w[size_t(j)] + b[size_t(j)];
  }
  return f64(y, src.shape());
}

Tensor batch_norm_train_reference(const Tensor& src, const Tensor& weight, const Tensor& bias,
                                  double eps) {
  const std::vector<double> x = read_f64(src);
  const int64_t N = src.size(0), C = src.size(1), inner = src.numel() / std::max<int64_t>(N * C, 1);
  const std::vector<double> w = affine(weight, C, 1.0), b = affine(bias, C, 0.0);
  std::vector<double> y(x.size());
  for (int64_t c = 0; c < C; ++c) {
    double mean = 0, var = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < inner; ++j) mean += x[size_t((n * C + c) * inner + j)];
    mean /= double(N * inner);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < inner; ++j) {
        const double dv = x[size_t((n * C + c) * inner + j)] - mean;
        var += dv * dv;
      }
    var /= double(N * inner);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < inner; ++j) {
        const size_t i = size_t((n * C + c) * inner + j);
        y[i] = (x[i] - mean) / std::sqrt(var + eps) * w[size_t(c)] + b[size_t(c)];
      }
  }
  return f64(y, src.shape());
}

Tensor nll_loss_mean_reference(const Tensor& log_probs, const Tensor& target) {
  const std::vector<double> x = read_f64(log_probs), t = read_f64(target);
  const int64_t N = log_probs.size(0), C = log_probs.size(1);
  double total = 0;
  for (int64_t i = 0; i < N; ++i) total -= x[size_t(i * C + int64_t(t[size_t(i)]))];
  return f64({total / double(N)}, {});
}

Tensor cross_entropy_mean_reference(const Tensor& logits, const Tensor& target) {
  const std::vector<double> x = read_f64(logits), t = read_f64(target);
  const int64_t N = logits.size(0), C = logits.size(1);
  double total = 0;
  for (int64_t i = 0; i < N; ++i) {
    double m = -std::numeric_limits<double>::infinity(), s = 0;
    for (int64_t j = 0; j < C; ++j) m = std::max(m, x[size_t(i * C + j)]);
    for (int64_t j = 0; j < C; ++j) s += std::exp(x[size_t(i * C + j)] - m);
    total += m + std::log(s) - x[size_t(i * C + int64_t(t[size_t(i)]))];
  }
  return f64({total / double(N)}, {});
}

Tensor mse_loss_mean_reference(const Tensor& input, const Tensor& target) {
  const std::vector<double> a = read_f64(input), b = read_f64(target);
  double total = 0;
  for (size_t i = 0; i < a.size(); ++i) total += (a[i] - b[i]) * (a[i] - b[i]);
  return f64({total / double(std::max<size_t>(a.size(), 1))}, {});
}

Tensor cat_reference(const std::vector<Tensor>& inputs, int64_t dim) {
  Shape shape = inputs.at(0).shape();
  if (dim < 0) dim += int64_t(shape.size());
  shape[size_t(dim)] = 0;
  for (const auto& x : inputs) shape[size_t(dim)] += x.size(dim);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < dim; ++i) outer *= shape[size_t(i)];
  for (size_t i = size_t(dim) + 1; i < shape.size(); ++i) inner *= shape[i];
  std::vector<double> out;
  std::vector<std::vector<double>> parts;
  for (const auto& x : inputs) parts.push_back(read_f64(x));
  for (int64_t o = 0; o < outer; ++o)
    for (size_t t = 0; t < inputs.size(); ++t) {
      const int64_t len = inputs[t].size(dim) * inner;
      out.insert(out.end(), parts[t].begin() + o * len, parts[t].begin() + (o + 1) * len);
    }
  return f64(out, shape);
}

Tensor permute_reference(const Tensor& src, const std::vector<int64_t>& perm) {
  const std::vector<double> x = read_f64(src);
  const Shape& in = src.shape();
  const int64_t n = int64_t(in.size());
  Shape out_shape(in.size());
  for (int64_t k = 0; k < n; ++k) out_shape[size_t(k)] = in[size_t(perm[size_t(k)])];
  const Shape in_strides = contiguous_strides(in);
  std::vector<double> y(x.size());
  std::vector<int64_t> idx(size_t(n), 0);  // index into the output, row-major
  for (size_t i = 0; i < y.size(); ++i) {
    int64_t off = 0;
    for (int64_t k = 0; k < n; ++k) off += idx[size_t(k)] * in_strides[size_t(perm[size_t(k)])];
    y[i] = x[size_t(off)];
    for (int64_t k = n - 1; k >= 0; --k) {
      if (++idx[size_t(k)] < out_shape[size_t(k)]) break;
      idx[size_t(k)] = 0;
    }
  }
  return f64(y, out_shape);
}

Tensor dropout_reference(const Tensor& src, double p, uint64_t seed) {
  std::vector<double> x = read_f64(src);
  // The mask as the dropout kernel defines it: one draw from the generator keys it; element
  // e takes the low (e even) or high (e odd) 32 bits of splitmix64(key + (e / 2) * golden).
  std::mt19937_64 gen(seed);
  const uint64_t key = gen();
  for (size_t e = 0; e < x.size(); ++e) {
    uint64_t z = key + uint64_t(e / 2) * 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    const uint32_t bits = e % 2 == 0 ? uint32_t(z) : uint32_t(z >> 32);
    x[e] = double(bits) * 0x1.0p-32 >= p ? x[e] / (1.0 - p) : 0.0;
  }
  return f64(x, src.shape());
}

Tensor causal_softmax_reference(const Tensor& src) {
  std::vector<double> x = read_f64(src);
  const int64_t S = src.size(src.dim() - 1);
  for (size_t r = 0; r < x.size() / size_t(S); ++r) {
    const size_t row = r * size_t(S), visible = r % size_t(S) + 1;
    double m = -INFINITY;
    for (size_t j = 0; j < visible; ++j) m = std::max(m, x[row + j]);
    double sum = 0.0;
    for (size_t j = 0; j < visible; ++j) sum += std::exp(x[row + j] - m);
    for (size_t j = 0; j < size_t(S); ++j) x[row + j] = j < visible ? std::exp(x[row + j] - m) / sum : 0.0;
  }
  return f64(x, src.shape());
}

Tensor embedding_reference(const Tensor& indices, const Tensor& weight) {
  const std::vector<double> w = weight.to_vector_f64(), idx = indices.to_vector_f64();
  const int64_t dim = weight.size(1);
  std::vector<double> out;
  out.reserve(idx.size() * size_t(dim));
  for (double i : idx)
    for (int64_t d = 0; d < dim; ++d) out.push_back(w[size_t(int64_t(i) * dim + d)]);
  Shape shape = indices.shape();
  shape.push_back(dim);
  return Tensor::from_vector_f64(out, shape, DType::f64);
}

Tensor index_add_reference(const Tensor& input, const Tensor& indices, const Tensor& source) {
  std::vector<double> out = input.to_vector_f64();
  const std::vector<double> src = source.to_vector_f64(), idx = indices.to_vector_f64();
  const size_t width = idx.empty() ? 0 : src.size() / idx.size();
  for (size_t i = 0; i < idx.size(); ++i)
    for (size_t j = 0; j < width; ++j) out[size_t(idx[i]) * width + j] += src[i * width + j];
  return Tensor::from_vector_f64(out, input.shape(), DType::f64);
}

Tensor argmax_reference(const Tensor& src) {
  const std::vector<double> x = read_f64(src);
  const int64_t N = src.size(0), C = src.size(1);
  std::vector<double> y(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) {
    int64_t best = 0;
    for (int64_t c = 1; c < C; ++c)
      if (x[size_t(i * C + c)] > x[size_t(i * C + best)]) best = c;
    y[size_t(i)] = double(best);
  }
  return f64(y, {N});
}

Tensor relu_max_pool2d_reference(const Tensor& src, int64_t k) {
  const std::vector<double> x = read_f64(src);
  const int64_t N = src.size(0), C = src.size(1), H = src.size(2), W = src.size(3);
  const int64_t OH = H / k, OW = W / k;
  std::vector<double> y(size_t(N * C * OH * OW));
  for (int64_t nc = 0; nc < N * C; ++nc)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        double m = 0.0;  // relu: max(0, window)
        for (int64_t a = 0; a < k; ++a)
          for (int64_t b = 0; b < k; ++b)
            m = std::max(m, x[size_t((nc * H + oh * k + a) * W + ow * k + b)]);
        y[size_t((nc * OH + oh) * OW + ow)] = m;
      }
  return f64(y, {N, C, OH, OW});
}

}  // namespace mixprec::backend::ref

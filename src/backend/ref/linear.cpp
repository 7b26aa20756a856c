// backend/ref/linear.cpp: fully connected layer (PyTorch layout, weights [O, K]) and
// batched matmul with broadcast batch dims, as triple loops accumulating in double.
// Letters: N rows (batch), K input features, O output features; matmul uses M, N, K.
#include <algorithm>

#include "backend/kernels.h"
#include "backend/ref/ref_util.h"

namespace mixprec::backend::ref {

Tensor linear_forward(const Tensor& src, const Tensor& weights, const Tensor& bias) {
  const char* op = "linear";
  check_same_dtype(op, "src", src, "weights", weights);
  check_rank(op, "src", src, 2);
  check_rank(op, "weights", weights, 2);
  const int64_t N = src.size(0), K = src.size(1), O = weights.size(0);
  if (weights.size(1) != K)
    fail(std::string(op) + ": src " + shape_str(src.shape()) + " and weights " +
         shape_str(weights.shape()) + ": in-features mismatch " + std::to_string(K) + " vs " +
         std::to_string(weights.size(1)));
  std::vector<double> b(static_cast<size_t>(O), 0.0);
  if (bias.defined()) {
    check_same_dtype(op, "src", src, "bias", bias);
    if (bias.shape() != Shape{O})
      fail(std::string(op) + ": bias " + shape_str(bias.shape()) + " and weights " +
           shape_str(weights.shape()) + ": bias must be [" + std::to_string(O) + "]");
    b = read_f64(bias);
  }
  const std::vector<double> x = read_f64(src);
  const std::vector<double> w = read_f64(weights);
  std::vector<double> y(static_cast<size_t>(N * O));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      double acc = b[o];
      for (int64_t k = 0; k < K; ++k) acc += x[n * K + k] * w[o * K + k];
      y[n * O + o] = acc;
    }
  return make_tensor(y, {N, O}, src.dtype());
}

Tensor linear_backward_data(const Tensor& diff_dst, const Tensor& weights) {
  const char* op = "linear_backward_data";
  check_same_dtype(op, "diff_dst", diff_dst, "weights", weights);
  check_rank(op, "diff_dst", diff_dst, 2);
  check_rank(op, "weights", weights, 2);
  const int64_t N = diff_dst.size(0), O = diff_dst.size(1), K = weights.size(1);
  if (weights.size(0) != O)
    fail(std::string(op) + ": diff_dst " + shape_str(diff_dst.shape()) + " and weights " +
         shape_str(weights.shape()) + ": out-features mismatch " + std::to_string(O) + " vs " +
         std::to_string(weights.size(0)));
  const std::vector<double> dy = read_f64(diff_dst);
  const std::vector<double> w = read_f64(weights);
  std::vector<double> dx(static_cast<size_t>(N * K));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      double acc = 0.0;
      for (int64_t o = 0; o < O; ++o) acc += dy[n * O + o] * w[o * K + k];
      dx[n * K + k] = acc;
    }
  return make_tensor(dx, {N, K}, diff_dst.dtype());
}

WeightGrads linear_backward_weights(const Tensor& src, const Tensor& diff_dst, bool with_bias) {
  const char* op = "linear_backward_weights";
  check_same_dtype(op, "src", src, "diff_dst", diff_dst);
  check_rank(op, "src", src, 2);
  check_rank(op, "diff_dst", diff_dst, 2);
  const int64_t N = src.size(0), K = src.size(1), O = diff_dst.size(1);
  if (diff_dst.size(0) != N)
    fail(std::string(op) + ": src " + shape_str(src.shape()) + " and diff_dst " +
         shape_str(diff_dst.shape()) + ": batch mismatch " + std::to_string(N) + " vs " +
         std::to_string(diff_dst.size(0)));
  const std::vector<double> x = read_f64(src);
  const std::vector<double> dy = read_f64(diff_dst);
  std::vector<double> dw(static_cast<size_t>(O * K), 0.0);
  std::vector<double> db(static_cast<size_t>(O), 0.0);
  for (int64_t o = 0; o < O; ++o)
    for (int64_t n = 0; n < N; ++n) {
      const double d = dy[n * O + o];
      db[o] += d;
      for (int64_t k = 0; k < K; ++k) dw[o * K + k] += d * x[n * K + k];
    }
  WeightGrads grads;
  grads.diff_weights = make_tensor(dw, {O, K}, src.dtype());
  if (with_bias) grads.diff_bias = make_tensor(db, {O}, src.dtype());
  return grads;
}

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  const char* op = "matmul";
  check_same_dtype(op, "a", a, "b", b);
  const Shape& as = a.shape();
  const Shape& bs = b.shape();
  if (as.size() < 2 || bs.size() < 2)
    fail(std::string(op) + ": a " + shape_str(as) + " and b " + shape_str(bs) +
         ": both must be at least 2-D");
  const int64_t ra = static_cast<int64_t>(as.size()), rb = static_cast<int64_t>(bs.size());
  // Logical (after transpose) a is [.., M, K] and b is [.., K, N].
  const int64_t M = trans_a ? as[ra - 1] : as[ra - 2];
  const int64_t K = trans_a ? as[ra - 2] : as[ra - 1];
  const int64_t Kb = trans_b ? bs[rb - 1] : bs[rb - 2];
  const int64_t N = trans_b ? bs[rb - 2] : bs[rb - 1];
  if (K != Kb)
    fail(std::string(op) + ": a " + shape_str(as) + " and b " + shape_str(bs) +
         ": inner dims mismatch " + std::to_string(K) + " vs " + std::to_string(Kb) +
         " (trans_a " + (trans_a ? "true" : "false") + ", trans_b " +
         (trans_b ? "true" : "false") + ")");

  // Batch dims broadcast numpy-style, aligned from the right.
  const int64_t batch_rank = std::max(ra, rb) - 2;
  Shape batch(static_cast<size_t>(batch_rank));
  for (int64_t i = 0; i < batch_rank; ++i) {
    const int64_t da = i - (batch_rank - (ra - 2));  // index into a's batch dims, <0: absent
    const int64_t db = i - (batch_rank - (rb - 2));
    const int64_t sa = da >= 0 ? as[da] : 1;
    const int64_t sb = db >= 0 ? bs[db] : 1;
    if (sa != sb && sa != 1 && sb != 1)
      fail(std::string(op) + ": a " + shape_str(as) + " and b " + shape_str(bs) +
           ": batch dims are not broadcastable (dim " + std::to_string(i - batch_rank - 2) +
           ": " + std::to_string(sa) + " vs " + std::to_string(sb) + ")");
    batch[i] = sa == 1 ? sb : sa;
  }
  const int64_t B = shape_numel(batch);
  const std::vector<double> x = read_f64(a);
  const std::vector<double> y = read_f64(b);
  std::vector<double> out(static_cast<size_t>(B * M * N));
  std::vector<int64_t> bidx(static_cast<size_t>(batch_rank), 0);
  for (int64_t bi = 0; bi < B; ++bi) {
    // Row-major offset of this batch's matrix in a and in b (size-1 dims repeat).
    int64_t off_a = 0, off_b = 0;
    for (int64_t i = 0; i < batch_rank; ++i) {
      const int64_t da = i - (batch_rank - (ra - 2));
      const int64_t db = i - (batch_rank - (rb - 2));
      if (da >= 0) off_a = off_a * as[da] + (as[da] == 1 ? 0 : bidx[i]);
      if (db >= 0) off_b = off_b * bs[db] + (bs[db] == 1 ? 0 : bidx[i]);
    }
    off_a *= M * K;
    off_b *= K * N;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double acc = 0.0;
        for (int64_t k = 0; k < K; ++k) {
          const double av = x[off_a + (trans_a ? k * M + m : m * K + k)];
          const double bv = y[off_b + (trans_b ? n * K + k : k * N + n)];
          acc += av * bv;
        }
        out[(bi * M + m) * N + n] = acc;
      }
    for (int64_t i = batch_rank - 1; i >= 0; --i) {
      if (++bidx[i] < batch[i]) break;
      bidx[i] = 0;
    }
  }
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  return make_tensor(out, out_shape, a.dtype());
}

}  // namespace mixprec::backend::ref

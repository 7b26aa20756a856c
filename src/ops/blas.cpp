// blas.cpp: PyTorch's BLAS-style matrix ops (torch.mm, mv, addmm, addmv, addr, baddbmm,
// addbmm, chain_matmul), each with its own row of the autocast table (lower, as PyTorch's
// autocast) and PyTorch's signatures, shape rules and errors.
//
// Each one applies its row and then composes public ops (matmul, reshape, transpose, mul,
// add) with autocast off, so forward and backward are matmul's kernels and gradients: no
// kernel or backward closure of its own to get wrong. The compositions are exact where a
// GEMM is one rounding: mv and addr are matmuls of reshaped operands, and addbmm's sum over
// the batch is folded into the GEMM's K dimension ([M, B*K] x [B*K, N]) instead of summing
// B rounded products. The add* family is beta * input + alpha * product with PyTorch's
// rules: input broadcasts to the product's shape (never the other way); beta == 0 ignores
// input's values, NaN and inf included (input then gets no gradient; PyTorch gives it
// zeros); factors of 1 cost nothing. In 16 bits the scalings and the add round once each
// after the GEMM (PyTorch's CPU kernels fold them into the GEMM): a difference of an ulp.
#include <limits>

#include "mixprec/ops/ops.h"
#include "ops/autocast_hook.h"

namespace mixprec {

namespace {

[[noreturn]] void fail(const std::string& msg) { throw Error(Status::invalid_argument(msg)); }

void expect_dim(const char* op, const char* arg, const Tensor& t, int64_t dim) {
  if (!t.defined()) fail(std::string(op) + ": " + arg + " is undefined");
  if (t.dim() != dim)
    fail(std::string(op) + ": expected " + arg + " to be " + std::to_string(dim) + "-D, got " + t.str());
}

// One dtype for every operand, as PyTorch requires outside autocast (it raises "self and
// mat2 must have the same dtype"); add would otherwise promote silently.
void expect_same_dtype(const char* op, const std::vector<Tensor>& xs) {
  for (const Tensor& x : xs) {
    if (!is_floating(x.dtype()))
      fail(std::string(op) + ": expected floating operands, got " + x.str());
    if (x.dtype() != xs[0].dtype())
      fail(std::string(op) + ": dtype mismatch: " + xs[0].str() + " and " + x.str() +
           " (cast one, or use autocast)");
  }
}

// PyTorch's expand rule: input's trailing dims equal the target's or are 1.
void expect_broadcastable(const char* op, const Tensor& input, const Shape& target) {
  const Shape& s = input.shape();
  bool ok = s.size() <= target.size();
  for (size_t i = 0; ok && i < s.size(); ++i) {
    const int64_t have = s[s.size() - 1 - i], want = target[target.size() - 1 - i];
    ok = have == want || have == 1;
  }
  if (!ok)
    fail(std::string(op) + ": input " + shape_str(s) + " cannot be broadcast to the product's shape " +
         shape_str(target));
}

Tensor scaled(const Tensor& x, double factor) { return factor == 1.0 ? x : mul(x, factor); }

// beta * input + alpha * product (see the header comment); autocast is off here.
Tensor add_scaled(const char* op, const Tensor& input, const Tensor& product, double beta, double alpha) {
  expect_broadcastable(op, input, product.shape());
  const Tensor p = scaled(product, alpha);
  if (beta == 0.0) return p;
  return add(scaled(input, beta), p);
}

}  // namespace

Tensor mm(const Tensor& input_in, const Tensor& mat2_in) {
  const auto in = ops_detail::autocast_inputs(amp::OpId::mm, {input_in, mat2_in});
  expect_dim("mm", "input", in[0], 2);
  expect_dim("mm", "mat2", in[1], 2);
  if (in[0].size(1) != in[1].size(0))
    fail("mm: mat1 and mat2 shapes cannot be multiplied (" + std::to_string(in[0].size(0)) + "x" +
         std::to_string(in[0].size(1)) + " and " + std::to_string(in[1].size(0)) + "x" +
         std::to_string(in[1].size(1)) + ")");
  expect_same_dtype("mm", {in[0], in[1]});
  ops_detail::AutocastOff inside;
  return matmul(in[0], in[1]);
}

Tensor mv(const Tensor& input_in, const Tensor& vec_in) {
  const auto in = ops_detail::autocast_inputs(amp::OpId::mv, {input_in, vec_in});
  expect_dim("mv", "input", in[0], 2);
  expect_dim("mv", "vec", in[1], 1);
  if (in[0].size(1) != in[1].size(0))
    fail("mv: size mismatch: input " + shape_str(in[0].shape()) + ", vec " + shape_str(in[1].shape()));
  expect_same_dtype("mv", {in[0], in[1]});
  ops_detail::AutocastOff inside;
  return reshape(matmul(in[0], reshape(in[1], {in[1].size(0), 1})), {in[0].size(0)});
}

Tensor addmm(const Tensor& input_in, const Tensor& mat1_in, const Tensor& mat2_in, double beta, double alpha) {
  const auto in = ops_detail::autocast_inputs(amp::OpId::addmm, {input_in, mat1_in, mat2_in});
  expect_dim("addmm", "mat1", in[1], 2);
  expect_dim("addmm", "mat2", in[2], 2);
  if (in[1].size(1) != in[2].size(0))
    fail("addmm: mat1 and mat2 shapes cannot be multiplied (" + std::to_string(in[1].size(0)) + "x" +
         std::to_string(in[1].size(1)) + " and " + std::to_string(in[2].size(0)) + "x" +
         std::to_string(in[2].size(1)) + ")");
  expect_same_dtype("addmm", {in[0], in[1], in[2]});
  expect_broadcastable("addmm", in[0], {in[1].size(0), in[2].size(1)});
  ops_detail::AutocastOff inside;
  return add_scaled("addmm", in[0], matmul(in[1], in[2]), beta, alpha);
}

Tensor addmv(const Tensor& input_in, const Tensor& mat_in, const Tensor& vec_in, double beta, double alpha) {
  const auto in = ops_detail::autocast_inputs(amp::OpId::addmv, {input_in, mat_in, vec_in});
  expect_dim("addmv", "mat", in[1], 2);
  expect_dim("addmv", "vec", in[2], 1);
  if (in[1].size(1) != in[2].size(0))
    fail("addmv: size mismatch: mat " + shape_str(in[1].shape()) + ", vec " + shape_str(in[2].shape()));
  expect_same_dtype("addmv", {in[0], in[1], in[2]});
  expect_broadcastable("addmv", in[0], {in[1].size(0)});
  ops_detail::AutocastOff inside;
  const Tensor product = reshape(matmul(in[1], reshape(in[2], {in[2].size(0), 1})), {in[1].size(0)});
  return add_scaled("addmv", in[0], product, beta, alpha);
}

Tensor addr(const Tensor& input_in, const Tensor& vec1_in, const Tensor& vec2_in, double beta, double alpha) {
  const auto in = ops_detail::autocast_inputs(amp::OpId::addr, {input_in, vec1_in, vec2_in});
  expect_dim("addr", "vec1", in[1], 1);
  expect_dim("addr", "vec2", in[2], 1);
  expect_same_dtype("addr", {in[0], in[1], in[2]});
  expect_broadcastable("addr", in[0], {in[1].size(0), in[2].size(0)});
  ops_detail::AutocastOff inside;
  // The outer product as a GEMM with K = 1: each element is one product, rounded once.
  const Tensor product = matmul(reshape(in[1], {in[1].size(0), 1}), reshape(in[2], {1, in[2].size(0)}));
  return add_scaled("addr", in[0], product, beta, alpha);
}

namespace {

// batch1 [B, M, K] and batch2 [B, K, N], as baddbmm and addbmm require.
void expect_batches(const char* op, const Tensor& b1, const Tensor& b2) {
  expect_dim(op, "batch1", b1, 3);
  expect_dim(op, "batch2", b2, 3);
  if (b1.size(0) != b2.size(0))
    fail(std::string(op) + ": batch1 and batch2 must have the same number of batches, got " +
         std::to_string(b1.size(0)) + " and " + std::to_string(b2.size(0)));
  if (b1.size(2) != b2.size(1))
    fail(std::string(op) + ": batch1 " + shape_str(b1.shape()) + " and batch2 " + shape_str(b2.shape()) +
         " cannot be multiplied (expected batch2 [" + std::to_string(b1.size(0)) + ", " +
         std::to_string(b1.size(2)) + ", N])");
}

}  // namespace

Tensor baddbmm(const Tensor& input_in, const Tensor& batch1_in, const Tensor& batch2_in, double beta,
               double alpha) {
  const auto in = ops_detail::autocast_inputs(amp::OpId::baddbmm, {input_in, batch1_in, batch2_in});
  expect_batches("baddbmm", in[1], in[2]);
  expect_same_dtype("baddbmm", {in[0], in[1], in[2]});
  expect_broadcastable("baddbmm", in[0], {in[1].size(0), in[1].size(1), in[2].size(2)});
  ops_detail::AutocastOff inside;
  return add_scaled("baddbmm", in[0], matmul(in[1], in[2]), beta, alpha);
}

Tensor addbmm(const Tensor& input_in, const Tensor& batch1_in, const Tensor& batch2_in, double beta,
              double alpha) {
  const auto in = ops_detail::autocast_inputs(amp::OpId::addbmm, {input_in, batch1_in, batch2_in});
  expect_batches("addbmm", in[1], in[2]);
  expect_same_dtype("addbmm", {in[0], in[1], in[2]});
  const int64_t B = in[1].size(0), M = in[1].size(1), K = in[1].size(2), N = in[2].size(2);
  expect_broadcastable("addbmm", in[0], {M, N});
  ops_detail::AutocastOff inside;
  // sum_b batch1[b] x batch2[b] = [M, B*K] x [B*K, N]: one GEMM, one rounding per element.
  const Tensor a = reshape(transpose(in[1], 0, 1), {M, B * K});
  const Tensor b = reshape(in[2], {B * K, N});
  return add_scaled("addbmm", in[0], matmul(a, b), beta, alpha);
}

Tensor chain_matmul(const std::vector<Tensor>& matrices_in) {
  if (matrices_in.empty()) fail("chain_matmul: expected one or more matrices");
  std::vector<Tensor> m = matrices_in;
  ops_detail::autocast_inputs(amp::OpId::chain_matmul, m);
  for (size_t i = 0; i < m.size(); ++i) {
    const std::string arg = "matrices[" + std::to_string(i) + "]";
    expect_dim("chain_matmul", arg.c_str(), m[i], 2);
    if (i > 0 && m[i - 1].size(1) != m[i].size(0))
      fail("chain_matmul: matrices " + std::to_string(i - 1) + " and " + std::to_string(i) + " with shapes " +
           shape_str(m[i - 1].shape()) + " and " + shape_str(m[i].shape()) + " cannot be multiplied");
  }
  expect_same_dtype("chain_matmul", m);
  ops_detail::AutocastOff inside;
  const size_t n = m.size();
  if (n == 1) return mul(m[0], 1.0);  // a new tensor, as PyTorch's clone (the gradient flows)
  // The cheapest order, as PyTorch's multi_dot chooses it, so 16-bit results round where
  // PyTorch's do: for three matrices its closed form ((AB)C on ties), else the textbook
  // dynamic programme (the first split on ties).
  std::vector<int64_t> dims(n + 1);
  for (size_t i = 0; i < n; ++i) dims[i] = m[i].size(0);
  dims[n] = m[n - 1].size(1);
  std::vector<std::vector<size_t>> split(n, std::vector<size_t>(n, 0));
  if (n == 3) {
    const double a = double(dims[0]), b = double(dims[1]), c = double(dims[2]), d = double(dims[3]);
    const bool right_first = a * c * (b + d) > b * d * (a + c);  // cost of (AB)C > A(BC)
    split[0][2] = right_first ? 0 : 1;
    split[0][1] = 0;
    split[1][2] = 1;
  } else {
    std::vector<std::vector<double>> cost(n, std::vector<double>(n, 0.0));
    for (size_t len = 1; len < n; ++len)
      for (size_t i = 0; i + len < n; ++i) {
        const size_t j = i + len;
        cost[i][j] = std::numeric_limits<double>::infinity();
        for (size_t k = i; k < j; ++k) {
          const double c = cost[i][k] + cost[k + 1][j] + double(dims[i]) * double(dims[k + 1]) * double(dims[j + 1]);
          if (c < cost[i][j]) {
            cost[i][j] = c;
            split[i][j] = k;
          }
        }
      }
  }
  auto product = [&](auto&& self, size_t i, size_t j) -> Tensor {
    if (i == j) return m[i];
    const size_t k = split[i][j];
    return matmul(self(self, i, k), self(self, k + 1, j));
  };
  return product(product, 0, n - 1);
}

}  // namespace mixprec

// norm.cpp: layer_norm, add_layer_norm (the residual add and layer_norm in one pass,
// ops_fused.h) and batch_norm (fp32 and keep rows of the policy table), forward and
// backward: shape checks, the autocast row, the kernels (backend/cpu/norm.h and
// residual_layer_norm.h: double accumulation whatever the storage dtype, rounded once) and
// the backward closure.
#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "autograd/node.h"
#include "mixprec/backend/batch_norm_sync.h"
#include "mixprec/ops/ops.h"
#include "mixprec/ops/ops_fused.h"
#include "mixprec/core/status.h"
#include "ops/autocast_hook.h"
#include "ops/dispatch.h"

namespace mixprec {

namespace {

// weight/bias as n doubles, or n copies of `fill` when undefined (no affine).
std::vector<double> affine_values(const Tensor& t, int64_t n, double fill) {
  return t.defined() ? t.to_vector_f64() : std::vector<double>(size_t(n), fill);
}

// Which of (src, weight, bias) want a gradient, and the dtypes of the parameter gradients (a
// missing weight or bias: src's): what both norms' backward closures decide the same way.
struct AffineGrads {
  bool x, w, b;
  DType w_dtype, b_dtype;
  AffineGrads(const Tensor& src, const Tensor& weight, const Tensor& bias)
      : x(src.requires_grad()),
        w(weight.defined() && weight.requires_grad()),
        b(bias.defined() && bias.requires_grad()),
        w_dtype(weight.defined() ? weight.dtype() : src.dtype()),
        b_dtype(bias.defined() ? bias.dtype() : src.dtype()) {}
  // {dsrc, dweight, dbias}, the parameters' from the kernel's double sums, shaped `shape`.
  std::vector<Tensor> pack(Tensor dx, const std::vector<double>& dw, const std::vector<double>& db,
                           const Shape& shape) const {
    std::vector<Tensor> g(3);
    g[0] = std::move(dx);
    if (w) g[1] = Tensor::from_vector_f64(dw, shape, w_dtype);
    if (b) g[2] = Tensor::from_vector_f64(db, shape, b_dtype);
    return g;
  }
};

void check_eps(const char* op, double eps) {
  if (!(eps >= 0.0) || !std::isfinite(eps))
    throw Error(Status::invalid_argument(std::string(op) + ": eps must be finite and >= 0, got " +
                                         std::to_string(eps)));
}

void check_floating(const char* op, const char* field, const Tensor& t) {
  if (t.defined() && !is_floating(t.dtype()))
    throw Error(Status::invalid_argument(std::string(op) + ": " + field +
                                         " must be a floating tensor, got " + t.str()));
}

// ---------------------------------------------------------------------------------------
// layer_norm

void check_layer_norm(const Tensor& src, const Shape& ns, const Tensor& weight, const Tensor& bias,
                      double eps) {
  check_floating("layer_norm", "src", src);
  check_floating("layer_norm", "weight", weight);
  check_floating("layer_norm", "bias", bias);
  check_eps("layer_norm", eps);
  const int64_t k = int64_t(ns.size());
  bool fits = k >= 1 && k <= src.dim();
  for (int64_t i = 0; fits && i < k; ++i) fits = src.size(src.dim() - k + i) == ns[size_t(i)];
  if (!fits)
    throw Error(Status::invalid_argument("layer_norm: normalized_shape " + shape_str(ns) +
                                         " does not match the trailing dims of src " +
                                         shape_str(src.shape()) + " (expected src [..., " +
                                         shape_str(ns).substr(1) + ")"));
  for (const auto* p : {&weight, &bias})
    if (p->defined() && p->shape() != ns)
      throw Error(Status::invalid_argument(
          std::string("layer_norm: ") + (p == &weight ? "weight " : "bias ") +
          shape_str(p->shape()) + " does not match normalized_shape " + shape_str(ns)));
}

}  // namespace

Tensor layer_norm(const Tensor& src_in, const Shape& normalized_shape, const Tensor& weight_in,
                  const Tensor& bias_in, double eps) {
  const auto in = ops_detail::autocast_inputs(amp::OpId::layer_norm, {src_in, weight_in, bias_in});
  const Tensor &src = in[0], &weight = in[1], &bias = in[2];
  check_layer_norm(src, normalized_shape, weight, bias, eps);
  const int64_t d = shape_numel(normalized_shape);
  const Tensor x = src.detach().contiguous();  // rows of d contiguous values
  const std::vector<double> w = affine_values(weight, d, 1.0), b = affine_values(bias, d, 0.0);
  auto stats = std::make_shared<backend::cpu::LayerNormStats>();
  Tensor dst = ops_detail::dispatch_cpu("layer_norm", x.dtype(),
                                        [&] { return backend::cpu::layer_norm_forward(x, d, w, b, eps, *stats); });
  if (any_requires_grad({&src, &weight, &bias})) {
    const AffineGrads need(src, weight, bias);
    record_op(dst, "layer_norm", {&src, &weight, &bias},
              [x, stats, w, d, normalized_shape, need](const Tensor& diff_dst) {
                backend::cpu::LayerNormGrads lg = ops_detail::dispatch_cpu("layer_norm_backward", x.dtype(), [&] {
                  return backend::cpu::layer_norm_backward(x, diff_dst.contiguous(), d, w, *stats, need.x,
                                                           need.w || need.b);
                });
                return need.pack(lg.dx, lg.dw, lg.db, normalized_shape);
              });
  }
  return dst;
}

// ---------------------------------------------------------------------------------------
// add_layer_norm

ResidualLayerNorm add_layer_norm(const Tensor& x_in, const Tensor& branch_in, const Shape& normalized_shape,
                                 const Tensor& weight_in, const Tensor& bias_in, double eps,
                                 std::optional<DType> normed_dtype) {
  check_floating("add_layer_norm", "branch", branch_in);
  // layer_norm's row on x, weight, bias and an empty stand-in of the branch's dtype: what
  // the row makes of the branch, without a pass over it.
  const Tensor probe = branch_in.defined() ? Tensor::empty({0}, branch_in.dtype()) : Tensor();
  const auto in = ops_detail::autocast_inputs(amp::OpId::layer_norm, {x_in, weight_in, bias_in, probe});
  const Tensor &x = in[0], &weight = in[1], &bias = in[2];
  check_layer_norm(x, normalized_shape, weight, bias, eps);
  Tensor branch = branch_in;
  if (branch.defined()) {
    if (branch.shape() != x.shape())
      throw Error(Status::invalid_argument("add_layer_norm: branch " + shape_str(branch.shape()) +
                                           " does not match x " + shape_str(x.shape())));
    // A widening (bf16 to f32) is exact and the kernel does it as it reads; a narrowing
    // (a lower row) changes values, so it is the row's cast, recorded as any other.
    if (promote_types(in[3].dtype(), branch.dtype()) != in[3].dtype()) branch = branch.to(in[3].dtype());
  }
  const DType sum_dtype = branch.defined() ? promote_types(x.dtype(), in[3].dtype()) : x.dtype();
  const DType out_dtype = normed_dtype.value_or(sum_dtype);
  if (!is_floating(out_dtype))
    throw Error(Status::invalid_argument(std::string("add_layer_norm: normed_dtype must be floating, got ") +
                                         dtype_name(out_dtype)));
  const int64_t d = shape_numel(normalized_shape);
  const Tensor xc = x.detach().contiguous();
  const Tensor bc = branch.defined() ? branch.detach().contiguous() : Tensor();
  const std::vector<double> w = affine_values(weight, d, 1.0), b = affine_values(bias, d, 0.0);
  auto stats = std::make_shared<backend::cpu::LayerNormStats>();
  backend::cpu::ResidualLayerNormForward f = ops_detail::dispatch_cpu("add_layer_norm", sum_dtype, [&] {
    return backend::cpu::residual_layer_norm_forward(xc, bc, sum_dtype, out_dtype, d, w, b, eps, *stats);
  });
  ResidualLayerNorm out{branch.defined() ? f.sum : x, f.normed};
  if (!any_requires_grad({&x, &branch, &weight, &bias})) return out;
  const AffineGrads need(x, weight, bias);
  const bool need_branch = branch.defined() && branch.requires_grad();
  const DType branch_dtype = branch.defined() ? branch.dtype() : sum_dtype;
  // {dx, dbranch, dweight, dbias} from the normed output's gradient and the sum's.
  auto grads = [s = f.sum.detach(), stats, w, d, normalized_shape, need, need_branch, branch_dtype](
                   const Tensor& d_normed, const Tensor& d_sum) {
    backend::cpu::ResidualLayerNormGrads g = ops_detail::dispatch_cpu("add_layer_norm_backward", s.dtype(), [&] {
      return backend::cpu::residual_layer_norm_backward(
          s, d_normed.defined() ? d_normed.contiguous() : Tensor(), d_sum.defined() ? d_sum.contiguous() : Tensor(),
          d, w, *stats, need_branch, branch_dtype, need.w || need.b);
    });
    std::vector<Tensor> r = need.pack(g.dsum, g.dw, g.db, normalized_shape);
    if (!d_normed.defined()) r[1] = r[2] = Tensor();  // the norm's parameters took no part
    r.insert(r.begin() + 1, g.dbranch);
    return r;
  };
  if (!branch.defined()) {
    record_op(out.normed, "add_layer_norm", {&x, &branch, &weight, &bias},
              [grads](const Tensor& d_normed) { return grads(d_normed, Tensor()); });
    return out;
  }
  // Two outputs on the single-output engine (as split_attention_heads): each output's node
  // leaves its gradient in `pending` and passes a one-element token to the join node, which
  // the engine runs after both (their common input) and which runs the fused backward once.
  auto pending = std::make_shared<std::array<Tensor, 2>>();  // {d_sum, d_normed}
  Tensor join = Tensor::empty({1}, sum_dtype);
  record_op(join, "add_layer_norm", {&x, &branch, &weight, &bias}, [grads, pending](const Tensor&) {
    const std::array<Tensor, 2> g = std::move(*pending);
    *pending = {};
    return grads(g[1], g[0]);
  });
  for (int part = 0; part < 2; ++part)
    record_op(part == 0 ? out.sum : out.normed, part == 0 ? "add_layer_norm_sum" : "add_layer_norm_normed", {&join},
              [pending, part, sum_dtype](const Tensor& g) {
                (*pending)[size_t(part)] = g;
                return std::vector<Tensor>{Tensor::zeros({1}, sum_dtype)};
              });
  return out;
}

// ---------------------------------------------------------------------------------------
// batch_norm

namespace {

void check_batch_norm(const Tensor& src, const Tensor& rm, const Tensor& rv, const Tensor& weight,
                      const Tensor& bias, bool training, double eps) {
  check_floating("batch_norm", "src", src);
  check_eps("batch_norm", eps);
  if (src.dim() < 2)
    throw Error(Status::invalid_argument(
        "batch_norm: src must be [N, C, ...] with at least 2 dims, got " + shape_str(src.shape())));
  const int64_t c = src.size(1);
  const std::pair<const char*, const Tensor*> params[] = {
      {"running_mean", &rm}, {"running_var", &rv}, {"weight", &weight}, {"bias", &bias}};
  for (const auto& [field, t] : params) {
    check_floating("batch_norm", field, *t);
    if (t->defined() && (t->dim() != 1 || t->size(0) != c))
      throw Error(Status::invalid_argument(std::string("batch_norm: ") + field + " " +
                                           shape_str(t->shape()) + " does not match src " +
                                           shape_str(src.shape()) + " (expected [" +
                                           std::to_string(c) + "], the channel dim)"));
  }
  if (rm.defined() != rv.defined())
    throw Error(Status::invalid_argument(
        "batch_norm: running_mean and running_var must both be given or both be undefined"));
  if (training && src.numel() / std::max<int64_t>(c, 1) <= 1)
    throw Error(Status::invalid_argument(
        "batch_norm: expected more than 1 value per channel when training, got src " +
        shape_str(src.shape())));
}

}  // namespace

namespace {
thread_local std::shared_ptr<const BatchNormSync> t_batch_norm_sync;
}  // namespace

BatchNormSyncGuard::BatchNormSyncGuard(std::shared_ptr<const BatchNormSync> sync)
    : previous_(std::move(t_batch_norm_sync)) {
  t_batch_norm_sync = std::move(sync);
}
BatchNormSyncGuard::~BatchNormSyncGuard() { t_batch_norm_sync = std::move(previous_); }
std::shared_ptr<const BatchNormSync> current_batch_norm_sync() { return t_batch_norm_sync; }

Tensor batch_norm(const Tensor& src_in, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight_in, const Tensor& bias_in, bool training, double momentum,
                  double eps) {
  // The running stats are never cast: a cast would be a copy, and the update must reach
  // the caller's buffers.
  const auto in = ops_detail::autocast_inputs(amp::OpId::batch_norm, {src_in, weight_in, bias_in});
  const Tensor &src = in[0], &weight = in[1], &bias = in[2];
  check_batch_norm(src, running_mean, running_var, weight, bias, training, eps);
  const Tensor x = src.is_dense() ? src.detach() : src.detach().contiguous();
  const std::vector<double> w = affine_values(weight, x.size(1), 1.0);
  const std::vector<double> b = affine_values(bias, x.size(1), 0.0);
  const bool batch_stats = training || !running_mean.defined();
  // --sync-bn (batch_norm_sync.h): training statistics over every process's batch.
  const std::shared_ptr<const BatchNormSync> sync = training ? current_batch_norm_sync() : nullptr;
  backend::cpu::BatchNormForward r = ops_detail::dispatch_cpu("batch_norm", x.dtype(), [&] {
    return backend::cpu::batch_norm_forward(x, w, b, batch_stats, running_mean, running_var,
                                            training && running_mean.defined(), momentum, eps, sync.get());
  });
  Tensor dst = r.dst;
  const auto stats = r.stats;
  if (any_requires_grad({&src, &weight, &bias})) {
    const AffineGrads need(src, weight, bias);
    record_op(dst, "batch_norm", {&src, &weight, &bias},
              [x, stats, w, batch_stats, need, sync](const Tensor& diff_dst) {
                backend::cpu::BatchNormGrads bg = ops_detail::dispatch_cpu("batch_norm_backward", x.dtype(), [&] {
                  return backend::cpu::batch_norm_backward(x, diff_dst, *stats, w, batch_stats, need.x, sync.get());
                });
                return need.pack(bg.dx, bg.sum_dy_xhat, bg.sum_dy, Shape{x.size(1)});
              });
  }
  return dst;
}

}  // namespace mixprec

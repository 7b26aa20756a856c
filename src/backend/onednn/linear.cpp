// backend/onednn/linear.cpp: fully connected layer (PyTorch layout) as oneDNN matmul.
// Letters: N rows (batch), K input features, O output features.
//   forward:          src [N,K], weights [O,K], bias [O] -> dst [N,O]
//   backward data:    diff_dst [N,O], weights [O,K]      -> diff_src [N,K]
//   backward weights: src [N,K], diff_dst [N,O]          -> diff_weights [O,K], diff_bias [O]
// All three run as oneDNN matmul on PyTorch's plain layouts: weights [O,K] are read as the
// transposed [K,O] operand through their strides, diff_dst^T likewise, and diff_weights
// comes out in [O,K] f32 directly. The inner-product primitive this file used before wants
// blocked weights (format any) and gives blocked diff_weights (a plain request falls back to
// gemm:jit in oneDNN 2.6.3), which costs two reorders per layer and step: on the mlp
// (512x4096x4096, bf16, 2 threads) 8 ms for the bf16 weights and 10-20 ms for the f32
// weight gradient (jit:uni), against 40-55 ms for each of the three products. matmul's
// brgemm packs its B panels itself inside the product, and measured as fast or faster on
// that shape (probe interleaved 2026-11-22: fwd 39-55 vs 49-54 ms + reorder, bwd_w with a
// transposed A 43-45 vs 39-47 ms + reorder). diff_bias, which matmul does not compute, is
// a column sum of diff_dst (backend/cpu/column_sum.h).
// Weight gradient, two routes (linear_weights_route.h): brgemm runs diff_dst^T x src faster
// from a plain [O,N] A than from diff_dst read transposed (5-8% of the product on gpt-tiny's
// shapes), and writing that transpose costs little more than the column-sum pass it replaces
// (cpu::transpose_with_column_sums makes the bias gradient in the same pass, same bits; bf16
// [2048, 384]: 0.11 ms against 0.08 for the sums alone, 1 thread). Measured (issue 34,
// 2026-11-28, AMD EPYC family 25 model 17 (Zen4 class), oneDNN 2.6.3;
// tests/perf/linear_weights_route_probe with OMP_WAIT_POLICY=passive, so that a descheduled
// partner thread's wait is not counted as spin; process CPU time, medians of interleaved
// repeats; three runs, UNDER LOAD: load average 4-9 on 2 cores): transposed / strided time
// per call with the bias, median of the runs (range where it crosses 1):
//                 gpt-tiny (N=2048)             encoder block (N=4096)         mlp
//                 qkv  proj  c_fc  c_proj       qkv  proj  fc1             fc2    512x4096x4096
//   bf16 1 thr    0.97 0.98  0.94  0.99         0.93 0.99  0.97 (.97-1.01) 0.99   0.98
//   bf16 2 thr    0.96 0.94  0.95  0.91         0.92 0.95  1.01 (.97-1.01) 0.93   0.98
//   f32  1 thr    0.98 1.00  0.96  0.99         0.99 1.00  1.01            0.97   1.00 (.97-1.02)
//   f32  2 thr    0.97 1.00  0.97  0.94         0.97 0.98  1.01 (.97-1.03) 0.92   0.98
// (K = 128, 128, 128, 512 | 256, 256, 256, 1024 | 4096.) Hence weights_route: bf16 always the
// transposed route; f32, whose transpose moves twice the bytes and wins less, from K = 512;
// products small enough to run serially (unmeasured) the strided one. diff_weights may change
// in the last bits where brgemm splits the reduction over N differently for the two layouts
// (~3e-5 on values ~15 at N = 2048; none at N <= 600 or on the mlp); the bias gradient never
// does.
// Precision: bf16 in, bf16 out (f32 accumulation); backward weights returns f32
// diff_weights/diff_bias for bf16 inputs, as conv.cpp does and for the same reason: the
// gradient reaching an fp32 master stays fp32. f16 is emulated on the f32 primitives
// (half_emulation.h), backward weights returning f32 for it too.
#include "backend/cpu/column_sum.h"
#include "backend/kernels.h"
#include "backend/onednn/dnnl_errors.h"
#include "backend/onednn/half_emulation.h"
#include "backend/onednn/linear_weights_route.h"
#include "backend/onednn/matmul_util.h"
#include "backend/onednn/memory_desc.h"
#include "backend/onednn/reorder_util.h"
#include "backend/onednn/serial_scope.h"

namespace mixprec::backend::onednn {
namespace {

[[noreturn]] void bad(const std::string& m) { throw Error(Status::invalid_argument(m)); }

void check_2d(const char* op, const char* name, const Tensor& t) {
  if (t.dim() != 2) bad(std::string(op) + ": " + name + " " + shape_str(t.shape()) + " must be 2-D");
}

void check_same_dtype(const char* op, const char* an, const Tensor& a, const char* bn,
                      const Tensor& b) {
  if (b.defined() && a.dtype() != b.dtype())
    bad(std::string(op) + ": dtype mismatch: " + an + " " + dtype_name(a.dtype()) + " vs " + bn +
        " " + dtype_name(b.dtype()));
}

std::string kind_name(const char* op, DType d) { return std::string(op) + " " + dtype_name(d); }

// Products of at most this many multiply-adds (N*K*O) create and run their primitive on
// the calling thread (serial_scope.h): the seed CNN's fc2 (256x256 -> 10, 0.66 M) takes
// ~10 us in each pass, far less than an OpenMP region costs on a shared host. brgemm fixes
// its thread count at creation, hence the scope around the cache lookup too; N, K and O are
// in every key through the src/dst descs, so a key always makes the same choice.
constexpr int64_t kSerialMacs = int64_t(1) << 20;

bool run_serial(int64_t n, int64_t k, int64_t o) { return n * k * o <= kSerialMacs; }

}  // namespace

Tensor linear_forward(const Tensor& src, const Tensor& weights, const Tensor& bias) {
  const char* op = "linear_forward";
  check_2d(op, "src", src);
  check_2d(op, "weights", weights);
  check_same_dtype(op, "src", src, "weights", weights);
  check_same_dtype(op, "src", src, "bias", bias);
  if (is_emulated(src))
    return emulate(op, src.dtype(),
                   [&] { return linear_forward(widen(src), widen(weights), widen(bias)); });
  require_compute_dtype(op, src.dtype());
  const int64_t N = src.size(0), K = src.size(1), O = weights.size(0);
  if (weights.size(1) != K)
    bad(std::string(op) + ": src " + shape_str(src.shape()) + " has " + std::to_string(K) +
        " features, weights " + shape_str(weights.shape()) + " expect " +
        std::to_string(weights.size(1)));
  if (bias.defined() && bias.shape() != Shape{O})
    bad(std::string(op) + ": bias " + shape_str(bias.shape()) + " must be [" + std::to_string(O) + "]");
  const DType dt = src.dtype();
  Tensor dst = Tensor::empty({N, O}, dt);
  if (dst.numel() == 0) return dst;
  if (K == 0) {  // empty reduction: dst = bias (or 0)
    if (bias.defined()) {
      for (int64_t n = 0; n < N; ++n) dst.as_strided({O}, {1}, n * O).copy_(bias);
    } else {
      dst.fill_(0.0);
    }
    return dst;
  }
  const Tensor x = in_format(src, MemoryFormat::contiguous);
  const Tensor w = matmul_dense(weights);
  const Tensor b = bias.defined() ? in_format(bias, MemoryFormat::contiguous) : Tensor();
  const dnnl_md bias_md = md_of(Shape{1, O}, dt, MemoryFormat::contiguous);
  SerialScope serial(run_serial(N, K, O));
  auto e = matmul_entry(PrimKind::linear_fwd, op, dt, md_of(x), matmul_operand_md(w, 2, true),
                        b.defined() ? &bias_md : nullptr, md_of(dst), [&] {
                          return kind_name(op, dt) + " src " + shape_str(src.shape()) +
                                 " weights " + shape_str(weights.shape());
                        });
  run_matmul(*e, x.data(), w.data(), b.defined() ? b.data() : nullptr, dst.data());
  return dst;
}

Tensor linear_backward_data(const Tensor& diff_dst, const Tensor& weights) {
  const char* op = "linear_backward_data";
  check_2d(op, "diff_dst", diff_dst);
  check_2d(op, "weights", weights);
  check_same_dtype(op, "diff_dst", diff_dst, "weights", weights);
  if (is_emulated(diff_dst))
    return emulate(op, diff_dst.dtype(),
                   [&] { return linear_backward_data(widen(diff_dst), widen(weights)); });
  require_compute_dtype(op, diff_dst.dtype());
  const int64_t N = diff_dst.size(0), O = weights.size(0), K = weights.size(1);
  if (diff_dst.size(1) != O)
    bad(std::string(op) + ": diff_dst " + shape_str(diff_dst.shape()) + " must have " +
        std::to_string(O) + " columns for weights " + shape_str(weights.shape()));
  const DType dt = diff_dst.dtype();
  Tensor diff_src = Tensor::empty({N, K}, dt);
  if (diff_src.numel() == 0) return diff_src;
  if (O == 0) {
    diff_src.fill_(0.0);
    return diff_src;
  }
  const Tensor dd = in_format(diff_dst, MemoryFormat::contiguous);
  const Tensor w = matmul_dense(weights);
  SerialScope serial(run_serial(N, K, O));
  auto e = matmul_entry(PrimKind::linear_bwd_data, op, dt, md_of(dd),
                        matmul_operand_md(w, 2, false), nullptr, md_of(diff_src), [&] {
                          return kind_name(op, dt) + " diff_dst " + shape_str(diff_dst.shape()) +
                                 " weights " + shape_str(weights.shape());
                        });
  run_matmul(*e, dd.data(), w.data(), nullptr, diff_src.data());
  return diff_src;
}

WeightsRoute weights_route(int64_t N, int64_t K, int64_t O, DType dt) {
  // The transpose costs ~N*O element moves, the plain A saves a share of 2*N*K*O flops. bf16:
  // it paid on every shape measured, on one thread and two, but one (within noise); f32, whose
  // transpose moves twice the bytes: from K = 512 (the figures are in the banner). Products
  // small enough to run serially were not measured and keep the strided A.
  if (run_serial(N, K, O)) return WeightsRoute::strided;
  if (dt == DType::bf16) return WeightsRoute::transposed;
  return K >= 512 ? WeightsRoute::transposed : WeightsRoute::strided;
}

WeightGrads linear_backward_weights(const Tensor& src, const Tensor& diff_dst, bool with_bias) {
  // The route is only a choice once the operands are checked and plain f32/bf16 2-D matrices;
  // linear_backward_weights_on checks them first either way.
  const bool known = src.dim() == 2 && diff_dst.dim() == 2 && src.dtype() == diff_dst.dtype() &&
                     (src.dtype() == DType::f32 || src.dtype() == DType::bf16);
  const WeightsRoute route = known ? weights_route(src.size(0), src.size(1), diff_dst.size(1), src.dtype())
                                   : WeightsRoute::strided;
  return linear_backward_weights_on(route, src, diff_dst, with_bias);
}

WeightGrads linear_backward_weights_on(WeightsRoute route, const Tensor& src, const Tensor& diff_dst,
                                       bool with_bias) {
  const char* op = "linear_backward_weights";
  check_2d(op, "src", src);
  check_2d(op, "diff_dst", diff_dst);
  check_same_dtype(op, "src", src, "diff_dst", diff_dst);
  if (is_emulated(src))  // f32 diff_weights/diff_bias, as for bf16 (half_emulation.h)
    return emulate_raw(op, src.dtype(), [&] {
      return linear_backward_weights_on(route, widen(src), widen(diff_dst), with_bias);
    });
  require_compute_dtype(op, src.dtype());
  const int64_t N = src.size(0), K = src.size(1), O = diff_dst.size(1);
  if (diff_dst.size(0) != N)
    bad(std::string(op) + ": src " + shape_str(src.shape()) + " and diff_dst " +
        shape_str(diff_dst.shape()) + " must have the same number of rows");
  const DType dt = src.dtype();
  constexpr DType kGradDType = DType::f32;  // f32 for bf16 inputs too (see the banner)
  WeightGrads out;
  out.diff_weights = Tensor::empty({O, K}, kGradDType);
  const Tensor dd = in_format(diff_dst, MemoryFormat::contiguous);
  const bool empty = N == 0 || O == 0 || K == 0;
  // diff_weights [O,K] = diff_dst^T [O,N] x src [N,K], f32 out of bf16 inputs; A is either
  // diff_dst read transposed through its strides or its transpose written out here.
  Tensor a = dd;
  bool a_transposed = true;
  if (route == WeightsRoute::transposed && !empty) {
    cpu::TransposeWithSums t = cpu::transpose_with_column_sums(dd, with_bias);
    a = std::move(t.transposed);
    a_transposed = false;
    if (with_bias) out.diff_bias = std::move(t.sums);
  } else if (with_bias) {
    // The column sums of diff_dst, also for an empty batch (zeros) or K == 0 (no weights,
    // but the bias still learns).
    out.diff_bias = cpu::column_sums_f32(dd);
  }
  if (empty) {
    out.diff_weights.fill_(0.0);
    return out;
  }
  const Tensor x = in_format(src, MemoryFormat::contiguous);
  SerialScope serial(run_serial(N, K, O));
  auto e = matmul_entry(PrimKind::linear_bwd_weights, op, dt, matmul_operand_md(a, 2, a_transposed),
                        md_of(x), nullptr, md_of(out.diff_weights), [&] {
                          return kind_name(op, dt) + " src " + shape_str(src.shape()) +
                                 " diff_dst " + shape_str(diff_dst.shape());
                        });
  run_matmul(*e, a.data(), x.data(), nullptr, out.diff_weights.data());
  return out;
}

}  // namespace mixprec::backend::onednn

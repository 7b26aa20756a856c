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
// Precision: bf16 in, bf16 out (f32 accumulation); backward weights returns f32
// diff_weights/diff_bias for bf16 inputs, as conv.cpp does and for the same reason: the
// gradient reaching an fp32 master stays fp32. f16 is emulated on the f32 primitives
// (f16_emulation.h), backward weights returning f32 for it too.
#include "backend/cpu/column_sum.h"
#include "backend/kernels.h"
#include "backend/onednn/f16_emulation.h"
#include "backend/onednn/primitive_cache.h"
#include "backend/onednn/reorder_util.h"
#include "backend/onednn/serial_scope.h"

namespace mixprec::backend::onednn {
namespace {

struct LinearEntry : CacheEntry {
  dnnl::matmul prim;
  std::unordered_map<int, dnnl::memory> args;  // keyed by DNNL_ARG_*
  void bind(int arg, const void* p) { args.at(arg).set_data_handle(const_cast<void*>(p)); }
};

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

// A 2-D tensor as a plain strided desc, optionally read transposed (dims and strides
// swapped: nothing is copied).
dnnl_md matrix_md(const Tensor& t, bool transposed) {
  const Shape st = canonical_strides(t);
  dnnl::memory::dims dims{t.size(0), t.size(1)}, strides{st[0], st[1]};
  if (transposed) {
    std::swap(dims[0], dims[1]);
    std::swap(strides[0], strides[1]);
  }
  return dnnl_md(dims, to_dnnl(t.dtype()), strides);
}

// Weights dense along either dim pass as they are (a transposed view included); anything
// else is copied to contiguous.
Tensor dense_matrix(const Tensor& t) {
  const bool rows = t.strides()[1] == 1 || t.size(1) == 1;
  const bool cols = t.strides()[0] == 1 || t.size(0) == 1;
  return rows || cols ? t : in_format(t, MemoryFormat::contiguous);
}

// Creates (once per key) and runs dst = a x b (+ bias) on the calling thread's stream.
void run_matmul(const char* op, PrimKind kind, const dnnl_md& a_md, const void* a,
                const dnnl_md& b_md, const void* b, const dnnl_md* bias_md, const void* bias,
                const dnnl_md& dst_md, void* dst, const std::string& what) {
  PrimKey key(kind);
  key.add(a_md).add(b_md).add(dst_md).add(bias_md != nullptr);
  if (bias_md) key.add(*bias_md);
  auto e = cached<LinearEntry>(key, [&] {
    auto entry = std::make_shared<LinearEntry>();
    try {
      auto desc = bias_md ? dnnl::matmul::desc(a_md, b_md, *bias_md, dst_md)
                          : dnnl::matmul::desc(a_md, b_md, dst_md);
      dnnl::matmul::primitive_desc pd(desc, cpu_engine());
      entry->prim = make_primitive<dnnl::matmul>(pd);
      entry->impl = pd.impl_info_str();
    } catch (const dnnl::error& err) {
      rethrow_dnnl(err, what);
    }
    entry->args = {{DNNL_ARG_SRC, unbound_memory(a_md)},
                   {DNNL_ARG_WEIGHTS, unbound_memory(b_md)},
                   {DNNL_ARG_DST, unbound_memory(dst_md)}};
    if (bias_md) entry->args.emplace(DNNL_ARG_BIAS, unbound_memory(*bias_md));
    dispatch_log(op, entry->impl);
    return entry;
  });
  std::lock_guard<std::mutex> lock(e->mu);
  e->bind(DNNL_ARG_SRC, a);
  e->bind(DNNL_ARG_WEIGHTS, b);
  if (bias_md) e->bind(DNNL_ARG_BIAS, bias);
  e->bind(DNNL_ARG_DST, dst);
  e->prim.execute(cpu_stream(), e->args);
}

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
  if (is_f16(src))
    return emulate_f16(op, [&] { return linear_forward(widen(src), widen(weights), widen(bias)); });
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
  const Tensor w = dense_matrix(weights);
  const Tensor b = bias.defined() ? in_format(bias, MemoryFormat::contiguous) : Tensor();
  const dnnl_md bias_md = md_of(Shape{1, O}, dt, MemoryFormat::contiguous);
  SerialScope serial(run_serial(N, K, O));
  run_matmul("linear_forward", PrimKind::linear_fwd, md_of(x), x.data(), matrix_md(w, true), w.data(),
             b.defined() ? &bias_md : nullptr, b.defined() ? b.data() : nullptr, md_of(dst),
             dst.data(),
             kind_name(op, dt) + " src " + shape_str(src.shape()) + " weights " +
                 shape_str(weights.shape()));
  return dst;
}

Tensor linear_backward_data(const Tensor& diff_dst, const Tensor& weights) {
  const char* op = "linear_backward_data";
  check_2d(op, "diff_dst", diff_dst);
  check_2d(op, "weights", weights);
  check_same_dtype(op, "diff_dst", diff_dst, "weights", weights);
  if (is_f16(diff_dst))
    return emulate_f16(op, [&] { return linear_backward_data(widen(diff_dst), widen(weights)); });
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
  const Tensor w = dense_matrix(weights);
  SerialScope serial(run_serial(N, K, O));
  run_matmul("linear_backward_data", PrimKind::linear_bwd_data, md_of(dd), dd.data(),
             matrix_md(w, false), w.data(), nullptr, nullptr, md_of(diff_src), diff_src.data(),
             kind_name(op, dt) + " diff_dst " + shape_str(diff_dst.shape()) + " weights " +
                 shape_str(weights.shape()));
  return diff_src;
}

WeightGrads linear_backward_weights(const Tensor& src, const Tensor& diff_dst, bool with_bias) {
  const char* op = "linear_backward_weights";
  check_2d(op, "src", src);
  check_2d(op, "diff_dst", diff_dst);
  check_same_dtype(op, "src", src, "diff_dst", diff_dst);
  if (is_f16(src))  // f32 diff_weights/diff_bias, as for bf16 (f16_emulation.h)
    return emulate_f16_raw(
        op, [&] { return linear_backward_weights(widen(src), widen(diff_dst), with_bias); });
  require_compute_dtype(op, src.dtype());
  const int64_t N = src.size(0), K = src.size(1), O = diff_dst.size(1);
  if (diff_dst.size(0) != N)
    bad(std::string(op) + ": src " + shape_str(src.shape()) + " and diff_dst " +
        shape_str(diff_dst.shape()) + " must have the same number of rows");
  const DType dt = src.dtype();
  constexpr DType kGradDType = DType::f32;  // f32 for bf16 inputs too (see the banner)
  WeightGrads out;
  out.diff_weights = Tensor::empty({O, K}, kGradDType);
  if (with_bias) out.diff_bias = Tensor::empty({O}, kGradDType);
  if (N == 0 || O == 0 || K == 0) {
    out.diff_weights.fill_(0.0);
    if (with_bias && K == 0 && N > 0 && O > 0)  // no weights, but the bias still learns
      out.diff_bias = reduce(ReduceOp::sum, reorder(diff_dst, kGradDType, MemoryFormat::contiguous),
                             {0}, false);
    else if (with_bias)
      out.diff_bias.fill_(0.0);
    return out;
  }
  const Tensor x = in_format(src, MemoryFormat::contiguous);
  const Tensor dd = in_format(diff_dst, MemoryFormat::contiguous);
  SerialScope serial(run_serial(N, K, O));
  // diff_weights [O,K] = diff_dst^T [O,N] x src [N,K], f32 out of bf16 inputs.
  run_matmul("linear_backward_weights", PrimKind::linear_bwd_weights, matrix_md(dd, true), dd.data(),
             md_of(x), x.data(), nullptr, nullptr, md_of(out.diff_weights),
             out.diff_weights.data(),
             kind_name(op, dt) + " src " + shape_str(src.shape()) + " diff_dst " +
                 shape_str(diff_dst.shape()));
  if (with_bias) out.diff_bias = cpu::column_sums_f32(dd);
  return out;
}

}  // namespace mixprec::backend::onednn

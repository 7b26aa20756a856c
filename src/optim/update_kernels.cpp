// update_kernels.cpp: the optimizer passes. Work is cut into tiles of kTile elements; a tile
// of a 16-bit tensor (gradient, 16-bit parameter or state, rounded model weight) is widened
// to f32 on the stack, updated by update_math's formulas and narrowed back, so memory is read
// and written once per step whatever the dtypes. Conversions go through convert_elements,
// the same rounding Tensor::copy_ uses, so a fused pass equals unscale + step + copy_ bit for
// bit. Tiles are split over the OpenMP threads with a static schedule: every element is
// computed the same way on any thread count. f64 parameters keep a plain double loop.
#include "optim/update_kernels.h"

// No implicit FMA contraction (see update_math.cpp): the f64 loops fuse where written.
#pragma GCC optimize("fp-contract=off")

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/convert.h"
#include "mixprec/core/status.h"
#include "optim/update_math.h"
#include "core/cpu_features.h"

namespace mixprec::optim {
namespace {

constexpr int64_t kTile = 1024;              // 4 KiB of f32 per buffer: five stay in L1
constexpr int64_t kParallelMin = 64 * 1024;  // below this a fork/join costs more than it saves

// The raw buffers of one f32-computed update.
struct TileIo {
  char* param = nullptr;
  DType param_dtype = DType::f32;  // f32, bf16 or f16; state tensors share it
  const char* grad = nullptr;
  DType grad_dtype = DType::f32;
  float grad_scale = 1.0f;
  char* state[3] = {nullptr, nullptr, nullptr};
  char* out = nullptr;  // rounded copy of the updated parameter, or null
  DType out_dtype = DType::bf16;
};

char* bytes_of(Tensor& t) { return static_cast<char*>(t.data()); }

// Elements [begin, begin + len) of a buffer as f32: in place when it is f32, else widened.
const float* widen(const char* base, DType dtype, int64_t begin, int64_t len, float* scratch) {
  if (dtype == DType::f32) return reinterpret_cast<const float*>(base) + begin;
  convert_elements(base + begin * int64_t(dtype_size(dtype)), dtype, scratch, DType::f32, len);
  return scratch;
}
float* widen(char* base, DType dtype, int64_t begin, int64_t len, float* scratch) {
  if (dtype == DType::f32) return reinterpret_cast<float*>(base) + begin;
  widen(static_cast<const char*>(base), dtype, begin, len, scratch);
  return scratch;
}

void narrow(const float* tile, char* base, DType dtype, int64_t begin, int64_t len) {
  if (dtype == DType::f32) return;  // the tile was the buffer itself
  convert_elements(tile, DType::f32, base + begin * int64_t(dtype_size(dtype)), dtype, len);
}

// The 16-bit copy of the updated parameter (an O2 model weight, or the autocast copy that
// PrecisionStep offers to the next forward) is written once and not read again in this
// step: streaming stores skip the read-for-ownership a normal store costs, a third of
// that write's memory traffic. Whole 64-byte lines only; the rest is stored normally.
__attribute__((target("avx512f"))) void stream_out(const uint16_t* src, char* dst, int64_t len) {
  int64_t i = 0;
  const int64_t head = int64_t((64 - reinterpret_cast<uintptr_t>(dst) % 64) % 64) / 2;
  if (reinterpret_cast<uintptr_t>(dst) % 2 == 0) {
    const int64_t h = std::min(head, len);
    std::memcpy(dst, src, size_t(h) * 2);
    for (i = h; i + 32 <= len; i += 32)
      _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i * 2),
                          _mm512_loadu_si512(reinterpret_cast<const void*>(src + i)));
  }
  std::memcpy(dst + i * 2, src + i, size_t(len - i) * 2);
}

void write_rounded(const float* p, char* out, DType out_dtype, int64_t len) {
  if (!cpu_features().avx512f) return convert_elements(p, DType::f32, out, out_dtype, len);
  alignas(64) uint16_t obuf[kTile];
  convert_elements(p, DType::f32, obuf, out_dtype, len);
  stream_out(obuf, out, len);
}

// core(p, g, state0, state1, state2, len) on every tile; null pointers for unused state.
template <typename Core>
void for_each_tile(const TileIo& io, int64_t n, const Core& core) {
  auto run = [&](int64_t t) {
    alignas(64) float pbuf[kTile], gbuf[kTile], sbuf0[kTile], sbuf1[kTile], sbuf2[kTile];
    const int64_t begin = t * kTile, len = std::min(kTile, n - begin);
    float* p = widen(io.param, io.param_dtype, begin, len, pbuf);
    const float* g;
    if (io.grad_dtype == DType::f32 && io.grad_scale == 1.0f) {
      g = reinterpret_cast<const float*>(io.grad) + begin;
    } else {
      // Unscaling multiplies in f32 exactly as the scaler's unscale pass does; by 1 it is
      // the identity (inf/NaN never get here: the scaler skipped the step), so it is skipped.
      const float* src = widen(io.grad, io.grad_dtype, begin, len, gbuf);
      if (io.grad_scale != 1.0f) {
        const float s = io.grad_scale;
#pragma omp simd
        for (int64_t i = 0; i < len; ++i) gbuf[i] = src[i] * s;
      }
      g = gbuf;
    }
    float* s0 = io.state[0] ? widen(io.state[0], io.param_dtype, begin, len, sbuf0) : nullptr;
    float* s1 = io.state[1] ? widen(io.state[1], io.param_dtype, begin, len, sbuf1) : nullptr;
    float* s2 = io.state[2] ? widen(io.state[2], io.param_dtype, begin, len, sbuf2) : nullptr;
    core(p, g, s0, s1, s2, len);
    narrow(p, io.param, io.param_dtype, begin, len);
    if (s0) narrow(s0, io.state[0], io.param_dtype, begin, len);
    if (s1) narrow(s1, io.state[1], io.param_dtype, begin, len);
    if (s2) narrow(s2, io.state[2], io.param_dtype, begin, len);
    if (io.out) write_rounded(p, io.out + begin * 2, io.out_dtype, len);
  };
  const int64_t tiles = (n + kTile - 1) / kTile;
  if (n >= kParallelMin && omp_get_max_threads() > 1 && !omp_in_parallel()) {
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < tiles; ++t) run(t);
  } else {
    for (int64_t t = 0; t < tiles; ++t) run(t);
  }
  if (io.out) _mm_sfence();  // streaming stores visible before anyone reads the copy
}

// ---- f64 parameters: the f32 formula (update_formula.inc) in double: PyTorch's double
// kernels fuse at the same places (std::fma here), and take its Python scalars unrounded.
// The gradient is scaled in double. ----------------------------------------------------------

void sgd_f64(double* p, const double* g, double* buf, int64_t n, double scale, double lr, double momentum,
             double dampening, double wd, bool nesterov, bool first_step, bool maximize) {
#pragma omp parallel for schedule(static) if (n > 100000)
  for (int64_t i = 0; i < n; ++i) {
    double d = scale == 1.0 ? g[i] : g[i] * scale;
    if (maximize) d = -d;
    if (wd != 0) d = std::fma(p[i], wd, d);
    if (momentum != 0) {
      buf[i] = first_step ? d : std::fma(d, 1.0 - dampening, buf[i] * momentum);
      d = nesterov ? std::fma(buf[i], momentum, d) : buf[i];
    }
    p[i] = std::fma(d, -lr, p[i]);
  }
}

void adam_f64(double* p, const double* g, double* m, double* v, double* vmax, int64_t n, double scale,
              double lr, double beta1, double beta2, double eps, double wd, bool decoupled, bool maximize,
              double bc1, double bc2) {
  const double neg_step_size = -(lr / bc1);
  const double bc2_sqrt = std::sqrt(bc2);
  const double decay = 1.0 - lr * wd;
#pragma omp parallel for schedule(static) if (n > 100000)
  for (int64_t i = 0; i < n; ++i) {
    double gi = scale == 1.0 ? g[i] : g[i] * scale;
    if (maximize) gi = -gi;
    if (decoupled) {
      p[i] = p[i] * decay;
    } else if (wd != 0) {
      gi = std::fma(p[i], wd, gi);
    }
    m[i] = std::fma(gi, 1.0 - beta1, m[i] * beta1);
    v[i] = std::fma((1.0 - beta2) * gi, gi, v[i] * beta2);
    double second = v[i];
    if (vmax) second = vmax[i] = (std::isnan(vmax[i]) || std::isnan(v[i])) ? NAN : std::max(vmax[i], v[i]);
    const double denom = std::sqrt(second) / bc2_sqrt + eps;
    p[i] = (neg_step_size * m[i]) / denom + p[i];
  }
}

// ---- argument checks --------------------------------------------------------------------

[[noreturn]] void bad(const char* op, const std::string& what) {
  throw Error(Status::invalid_argument(std::string(op) + ": " + what));
}

void check_state(const char* op, const Tensor& p, const Tensor& state) {
  if (!state.defined()) return;
  if (state.dtype() != p.dtype() || state.strides() != p.strides() || state.shape() != p.shape())
    bad(op, "state " + state.str() + " does not match parameter " + p.str());
}

// Validates param/grad/out and fills the buffer-level description of the pass.
TileIo describe(const char* op, Tensor& param, const UpdateInput& in) {
  const Tensor& g = in.grad;
  if (!param.is_dense()) bad(op, "parameter " + param.str() + " must be dense");
  const bool grad_dtype_ok = g.dtype() == param.dtype() || (param.dtype() == DType::f32 && is_half(g.dtype()));
  if (!grad_dtype_ok || g.shape() != param.shape() || g.strides() != param.strides())
    bad(op, "gradient " + g.str() + " does not match parameter " + param.str() +
                " (expected its strides, and its dtype or bf16/f16 for an f32 parameter)");
  if (is_half(param.dtype()) && in.grad_scale != 1.0f)
    bad(op, "grad_scale must be 1 for the 16-bit parameter " + param.str() + ", got " +
                std::to_string(in.grad_scale));
  TileIo io;
  io.param = bytes_of(param);
  io.param_dtype = param.dtype();
  io.grad = static_cast<const char*>(g.data());
  io.grad_dtype = g.dtype();
  io.grad_scale = in.grad_scale;
  if (in.rounded_out && in.rounded_out->defined()) {
    Tensor out = *in.rounded_out;
    if (param.dtype() != DType::f32 || !is_half(out.dtype()) || out.shape() != param.shape() ||
        out.strides() != param.strides())
      bad(op, "rounded output " + out.str() + " must be bf16/f16 laid out like the f32 parameter " + param.str());
    io.out = bytes_of(out);
    io.out_dtype = out.dtype();
  }
  return io;
}

}  // namespace

void sgd_update(Tensor& param, const UpdateInput& in, Tensor& buf, double lr, const SGDOptions& o,
                bool first_step) {
  check_state("sgd", param, buf);
  TileIo io = describe("sgd", param, in);
  const int64_t n = param.numel();
  const bool use_buf = o.momentum != 0.0;
  if (use_buf && !buf.defined()) bad("sgd", "momentum buffer missing for " + param.str());
  if (param.dtype() == DType::f64) {
    sgd_f64(param.data_ptr<double>(), in.grad.data_ptr<double>(), use_buf ? buf.data_ptr<double>() : nullptr,
            n, double(in.grad_scale), lr, o.momentum, o.dampening, o.weight_decay, o.nesterov, first_step,
            o.maximize);
    return;
  }
  const SgdCoeffs c = sgd_coeffs(lr, o.momentum, o.dampening, o.weight_decay, o.nesterov, first_step, o.maximize);
  if (use_buf) io.state[0] = bytes_of(buf);
  for_each_tile(io, n, [&c](float* p, const float* g, float* b, float*, float*, int64_t len) {
    sgd_tile(p, g, b, len, c);
  });
}

void adam_update(Tensor& param, const UpdateInput& in, Tensor& exp_avg, Tensor& exp_avg_sq,
                 Tensor& max_exp_avg_sq, double lr, const AdamOptions& o, bool decoupled, int64_t step) {
  check_state("adam", param, exp_avg);
  check_state("adam", param, exp_avg_sq);
  check_state("adam", param, max_exp_avg_sq);
  if (!exp_avg.defined() || !exp_avg_sq.defined() || (o.amsgrad && !max_exp_avg_sq.defined()))
    bad("adam", "state missing for " + param.str());
  TileIo io = describe("adam", param, in);
  const int64_t n = param.numel();
  if (param.dtype() == DType::f64) {
    adam_f64(param.data_ptr<double>(), in.grad.data_ptr<double>(), exp_avg.data_ptr<double>(),
             exp_avg_sq.data_ptr<double>(), o.amsgrad ? max_exp_avg_sq.data_ptr<double>() : nullptr, n,
             double(in.grad_scale), lr, o.beta1, o.beta2, o.eps, o.weight_decay, decoupled, o.maximize,
             1.0 - std::pow(o.beta1, double(step)), 1.0 - std::pow(o.beta2, double(step)));
    return;
  }
  const AdamCoeffs c =
      adam_coeffs(lr, o.beta1, o.beta2, o.eps, o.weight_decay, decoupled, o.amsgrad, o.maximize, step);
  io.state[0] = bytes_of(exp_avg);
  io.state[1] = bytes_of(exp_avg_sq);
  if (o.amsgrad) io.state[2] = bytes_of(max_exp_avg_sq);
  for_each_tile(io, n, [&c](float* p, const float* g, float* m, float* v, float* vmax, int64_t len) {
    adam_tile(p, g, m, v, vmax, len, c);
  });
}

Tensor scaled_grad_like(const Tensor& param, const Tensor& grad, float scale) {
  Tensor t = Tensor::empty(param.shape(), param.dtype(), param.suggest_memory_format());
  t.copy_(grad);
  if (scale == 1.0f) return t;
  const int64_t n = t.numel();
  if (t.dtype() == DType::f32) {
    float* d = t.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) d[i] = d[i] * scale;
  } else if (t.dtype() == DType::f64) {
    double* d = t.data_ptr<double>();
    for (int64_t i = 0; i < n; ++i) d[i] = d[i] * double(scale);
  } else {
    bad("optimizer", "grad_scale must be 1 for the 16-bit parameter " + param.str());
  }
  return t;
}

Tensor restored_like(const Tensor& param, const Tensor& src, const std::string& name) {
  if (src.shape() != param.shape())
    throw Error(Status::invalid_argument("optimizer state '" + name + "': shape " + shape_str(src.shape()) +
                                         ", expected " + shape_str(param.shape())));
  MemoryCategoryGuard mg(MemoryCategory::optimizer_state);
  Tensor t = Tensor::empty(param.shape(), param.dtype(), param.suggest_memory_format());
  t.copy_(src);
  return t;
}

}  // namespace mixprec::optim

// dispatch.h: the one route from an op to a kernel. Every kernel call of src/ops goes
// through route() (or its two short forms below), which tries the op's implementations in
// this order, each where it applies:
//
//   1. cpu     backend/cpu's hand-written kernel, where the op says it applies (relu: a
//              dense tensor in f32/bf16/f16, before oneDNN, which maps NaN to 0; gelu,
//              layer_norm, the losses, ...: every dtype), unless MIXPREC_BACKEND=ref.
//   2. onednn  where oneDNN is used for the dtype (f32, bf16, f16; f16, and bf16 on a CPU
//              without AVX-512, emulated on the f32 kernels: backend/onednn/half_emulation.h)
//              and MIXPREC_BACKEND is not ref. A oneDNN kernel that throws unimplemented
//              falls through to ref with a one-time note, counted by ref_fallback_count().
//   3. ref     backend/ref (naive loops accumulating in f64): f64 (gradchecks), integers,
//              MIXPREC_BACKEND=ref, the fallback. An op defined as a composition of other
//              ops passes composed(fn) here instead (each inner op then takes its route).
//   4. cpu     an op with no ref kernel runs its cpu kernel where ref would have run
//              (MIXPREC_BACKEND=ref), and the log says "cpu (no ref kernel)".
//
// An op without one of the three passes `no_kernel` in its place. MIXPREC_VERBOSE=dispatch
// logs each choice once per (op, dtype, backend) (backend/dispatch_log.h, shared with
// oneDNN's implementation names); fallbacks are always logged.
#pragma once
#include <string>
#include <type_traits>
#include <utility>

#include "backend/kernels.h"
#include "mixprec/core/status.h"

namespace mixprec::ops_detail {

// MIXPREC_BACKEND contains "ref" (read once), unless a test set it: every op with a ref
// kernel runs it.
bool forced_ref();
void set_forced_ref(bool on);
// oneDNN runs dtype: f32, bf16 or f16, and not forced_ref().
bool onednn_enabled_for(DType dtype);
using backend::dispatch_verbose;
// Logs "<op> <dtype> -> <backend>[: why]" (always when `why` is set: a fallback).
void note_dispatch(const char* op, DType dtype, const char* backend, const std::string& why = "");
void note_ref_fallback();
// An op that returns a view of its input (no kernel runs): logged as "view".
inline void note_view(const char* op, DType dtype) {
  if (dispatch_verbose()) note_dispatch(op, dtype, "view");
}

// An implementation the op does not have (route's cpu, onednn or ref slot).
struct NoKernel {};
inline constexpr NoKernel no_kernel{};

// In route's ref slot: an op defined as a composition of other ops (relu_max_pool2d:
// relu, then max_pool2d), run where ref would run; each of its ops then takes its own route.
template <typename F>
struct Composed {
  F fn;
  auto operator()() const { return fn(); }
};
template <typename F>
Composed<F> composed(F fn) {
  return Composed<F>{std::move(fn)};
}

namespace route_detail {
template <typename F>
constexpr bool has = !std::is_same_v<std::decay_t<F>, NoKernel>;
template <typename F>
struct is_composed : std::false_type {};
template <typename F>
struct is_composed<Composed<F>> : std::true_type {};
template <typename F>
constexpr const char* ref_name = is_composed<std::decay_t<F>>::value ? "composition of ops" : "ref";
template <typename A, typename B, typename C>
auto result_of() {
  if constexpr (has<A>) return std::type_identity<std::invoke_result_t<A>>{};
  else if constexpr (has<B>) return std::type_identity<std::invoke_result_t<B>>{};
  else return std::type_identity<std::invoke_result_t<C>>{};
}
template <typename A, typename B, typename C>
using result_t = typename decltype(result_of<A, B, C>())::type;
}  // namespace route_detail

template <typename CpuFn, typename OnednnFn, typename RefFn>
auto route(const char* op, DType dtype, bool cpu_applies, CpuFn&& cpu, OnednnFn&& onednn, RefFn&& ref)
    -> route_detail::result_t<CpuFn, OnednnFn, RefFn> {
  using route_detail::has;
  constexpr bool is_composed_ref = route_detail::is_composed<std::decay_t<RefFn>>::value;
  static_assert(has<CpuFn> || has<OnednnFn> || has<RefFn>, "an op needs a kernel");
  if constexpr (has<CpuFn>) {
    if (cpu_applies && !forced_ref()) {
      if (dispatch_verbose()) note_dispatch(op, dtype, "cpu");
      return cpu();
    }
  }
  if constexpr (has<OnednnFn>) {
    if (onednn_enabled_for(dtype)) {
      if constexpr (!has<RefFn>) {
        if (dispatch_verbose()) note_dispatch(op, dtype, "onednn");
        return onednn();
      } else {
        try {
          if constexpr (std::is_void_v<decltype(onednn())>) {
            onednn();
            if (dispatch_verbose()) note_dispatch(op, dtype, "onednn");
            return;
          } else {
            auto result = onednn();
            if (dispatch_verbose()) note_dispatch(op, dtype, "onednn");
            return result;
          }
        } catch (const Error& e) {
          if (e.status().code() != StatusCode::unimplemented) throw;
          note_ref_fallback();
          note_dispatch(op, dtype, is_composed_ref ? "composition of ops (fallback)" : "ref (fallback)", e.what());
          return ref();
        }
      }
    }
  }
  if constexpr (has<RefFn>) {
    if (dispatch_verbose()) note_dispatch(op, dtype, route_detail::ref_name<RefFn>);
    return ref();
  } else if constexpr (has<CpuFn>) {
    if (dispatch_verbose()) note_dispatch(op, dtype, "cpu (no ref kernel)");
    return cpu();
  } else {
    throw Error(Status::internal(std::string(op) + ": no kernel for " + dtype_name(dtype)));
  }
}

// onednn, or ref where oneDNN is not used for dtype or says unimplemented.
template <typename OnednnFn, typename RefFn>
auto dispatch(const char* op, DType dtype, OnednnFn&& onednn, RefFn&& ref) {
  return route(op, dtype, false, no_kernel, std::forward<OnednnFn>(onednn), std::forward<RefFn>(ref));
}

// A backend/cpu kernel with no other implementation (it runs every dtype).
template <typename CpuFn>
auto dispatch_cpu(const char* op, DType dtype, CpuFn&& cpu) {
  return route(op, dtype, true, std::forward<CpuFn>(cpu), no_kernel, no_kernel);
}

}  // namespace mixprec::ops_detail

namespace mixprec {
// How many op calls fell back from oneDNN to backend/ref (unimplemented) since start: a
// training step in f32, bf16 or f16 must add none (ref runs naive f64 loops, seconds per
// step). Deliberate ref runs (f64, integers, MIXPREC_BACKEND=ref) do not count.
int64_t ref_fallback_count();
}  // namespace mixprec

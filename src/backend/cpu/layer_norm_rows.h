// backend/cpu/layer_norm_rows.h: layer_norm's per-row kernels (forward: mean, rstd and the normalised
// row; backward: the input gradient and the row's share of the weight/bias gradients).
// Why separate: the loops are reductions over a row of d values in double, which GCC
// keeps in source order (a chain of dependent adds, ~4 cycles each) unless told that lane
// order may change; these are compiled with `omp simd` reductions and, on CPUs that have
// it, for AVX-512 (8 doubles per instruction). The order of the partial sums is fixed by
// the build, not by threads or timing, so results are deterministic. At the transformer's
// [4096, 256] f32 activation this is ~10x faster than the serial loops it replaces.
// f32, bf16 and f16 rows (x and dy of one dtype; the 16-bit residual stream of O2
// included) have hand-written AVX-512 kernels; other mixes run the general bodies.
// Precision is unchanged in kind: every value is widened to double, statistics and
// outputs are computed in double and rounded once to the storage dtype.
#pragma once
#include <cstdint>
#include <vector>

#include "mixprec/core/dtype.h"

namespace mixprec::backend::cpu::layer_norm_rows {

// Per-thread buffers, reused from row to row.
struct Scratch {
  std::vector<float> f, fg, fo;  // x and dy rows widened to f32; a 16-bit output row before rounding
  std::vector<double> x, g, out;
};

// Row r of a dense [rows, d] buffer x_base of dtype dt -> row r of y_base (same dtype).
// w and b hold d doubles (1 and 0 when the layer has no affine). Returns mean and rstd.
void forward_row(const void* x_base, DType dt, int64_t r, int64_t d, const double* w,
                 const double* b, double eps, void* y_base, double& mean, double& rstd,
                 Scratch& s);

// dx row (when dx_base is not null) and dw_acc[j] += dy * xhat, db_acc[j] += dy (when
// the accumulators are not null). dy_base holds rows of dtype gdt.
void backward_row(const void* x_base, DType dt, const void* dy_base, DType gdt, int64_t r,
                  int64_t d, const double* w, double mean, double rstd, void* dx_base,
                  double* dw_acc, double* db_acc, Scratch& s);

// The general bodies compiled for the baseline ISA, whatever the CPU: the route a CPU
// without AVX-512 takes (MIXPREC_CPU_DISABLE=avx512f), callable here so that tests compare
// the AVX-512 kernels with it in one process.
void forward_row_baseline(const void* x_base, DType dt, int64_t r, int64_t d, const double* w,
                          const double* b, double eps, void* y_base, double& mean, double& rstd,
                          Scratch& s);
void backward_row_baseline(const void* x_base, DType dt, const void* dy_base, DType gdt, int64_t r,
                           int64_t d, const double* w, double mean, double rstd, void* dx_base,
                           double* dw_acc, double* db_acc, Scratch& s);

}  // namespace mixprec::backend::cpu::layer_norm_rows

// backend/cpu/reduce_sum.cpp: see reduce_sum.h.
#include "backend/cpu/reduce_sum.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "core/convert.h"
#include "mixprec/core/status.h"

namespace mixprec::backend::cpu {
namespace {

struct Run {
  int64_t size;
  bool reduced;
};

// src's dims as runs: size-1 dims dropped, neighbours with the same status merged.
std::vector<Run> runs_of(const Shape& shape, const std::vector<int64_t>& axes) {
  std::vector<Run> runs;
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
    if (shape[size_t(d)] == 1) continue;
    const bool reduced = std::binary_search(axes.begin(), axes.end(), d);
    if (!runs.empty() && runs.back().reduced == reduced)
      runs.back().size *= shape[size_t(d)];
    else
      runs.push_back({shape[size_t(d)], reduced});
  }
  return runs;
}

// Below this many elements a pass runs on the calling thread.
constexpr int64_t kParallelElements = int64_t(1) << 15;

// out[o] = the sum of row o (n contiguous values), for rows o < rows: 16 lane partials in
// order, then the lanes added in order.
void sum_rows(const float* src, int64_t rows, int64_t n, float* out) {
#pragma omp parallel for schedule(static) if (rows * n >= kParallelElements)
  for (int64_t o = 0; o < rows; ++o) {
    const float* r = src + o * n;
    float lane[16] = {};
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
      for (int l = 0; l < 16; ++l) lane[l] += r[j + l];
    for (int l = 0; j < n; ++j, ++l) lane[l] += r[j];
    float s = 0.0f;
    for (int l = 0; l < 16; ++l) s += lane[l];
    out[o] = s;
  }
}

// out[o, i] = sum over r < R of src[o, r, i]: rows added in order, vectorised along i.
void sum_middle(const float* src, int64_t outer, int64_t R, int64_t inner, float* out) {
  // Work items: an outer index and a chunk of inner, so that a single outer index (a batch
  // sum) still spreads over the threads.
  constexpr int64_t kChunk = 1024;
  const int64_t chunks = (inner + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (outer * R * inner >= kParallelElements)
  for (int64_t item = 0; item < outer * chunks; ++item) {
    const int64_t o = item / chunks, i0 = (item % chunks) * kChunk, i1 = std::min(inner, i0 + kChunk);
    const float* s = src + o * R * inner;
    float* d = out + o * inner;
    std::memcpy(d + i0, s + i0, size_t(i1 - i0) * sizeof(float));
    for (int64_t r = 1; r < R; ++r) {
      const float* row = s + r * inner;
      for (int64_t i = i0; i < i1; ++i) d[i] += row[i];
    }
  }
}

}  // namespace

bool reduce_sum_applies(const Tensor& src, const std::vector<int64_t>& axes) {
  if ((src.dtype() != DType::f32 && src.dtype() != DType::bf16) || !src.is_contiguous() || src.numel() == 0 ||
      axes.empty())
    return false;
  const std::vector<Run> runs = runs_of(src.shape(), axes);
  int reduced_runs = 0;
  for (const Run& r : runs) reduced_runs += r.reduced ? 1 : 0;
  if (reduced_runs == 0) return false;  // only size-1 axes: a copy, oneDNN's
  return !(reduced_runs == 1 && runs.back().reduced);
}

Tensor reduce_sum(const Tensor& src, const std::vector<int64_t>& axes, bool keepdim, bool mean) {
  const Shape& shape = src.shape();
  Shape out_shape;
  int64_t count = 1;
  for (int64_t d = 0; d < src.dim(); ++d) {
    const bool reduced = std::binary_search(axes.begin(), axes.end(), d);
    if (reduced) count *= shape[size_t(d)];
    if (!reduced)
      out_shape.push_back(shape[size_t(d)]);
    else if (keepdim)
      out_shape.push_back(1);
  }
  // Passes in f32, innermost reduced run first; each pass removes one run.
  std::vector<Run> runs = runs_of(shape, axes);
  std::vector<float> cur(size_t(src.numel())), next;
  convert_elements(src.data(), src.dtype(), cur.data(), DType::f32, src.numel());
  for (;;) {
    int j = -1;
    for (int k = int(runs.size()); k-- > 0;)
      if (runs[size_t(k)].reduced) {
        j = k;
        break;
      }
    if (j < 0) break;
    int64_t outer = 1, inner = 1;
    for (int k = 0; k < j; ++k) outer *= runs[size_t(k)].size;
    for (size_t k = size_t(j) + 1; k < runs.size(); ++k) inner *= runs[k].size;
    next.assign(size_t(outer * inner), 0.0f);
    if (inner == 1)
      sum_rows(cur.data(), outer, runs[size_t(j)].size, next.data());
    else
      sum_middle(cur.data(), outer, runs[size_t(j)].size, inner, next.data());
    cur.swap(next);
    runs.erase(runs.begin() + j);
    // The kept runs either side are now neighbours: merge them.
    if (j > 0 && size_t(j) < runs.size() && !runs[size_t(j) - 1].reduced && !runs[size_t(j)].reduced) {
      runs[size_t(j) - 1].size *= runs[size_t(j)].size;
      runs.erase(runs.begin() + j);
    }
  }
  if (mean) {
    const float c = float(count);
    for (float& v : cur) v /= c;
  }
  Tensor out = Tensor::empty(out_shape, src.dtype());
  convert_elements(cur.data(), DType::f32, out.data(), src.dtype(), out.numel());
  return out;
}

}  // namespace mixprec::backend::cpu

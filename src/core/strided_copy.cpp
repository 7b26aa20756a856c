// strided_copy.cpp: see strided_copy.h.
#include "core/strided_copy.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace mixprec {
namespace {

// Elements are moved as unsigned words of their size; may_alias because the memory holds
// floats, bf16 and integers that other code reads under their own types.
typedef uint8_t __attribute__((__may_alias__)) W1;
typedef uint16_t __attribute__((__may_alias__)) W2;
typedef uint32_t __attribute__((__may_alias__)) W4;
typedef uint64_t __attribute__((__may_alias__)) W8;

struct Dim {
  int64_t size, s, d;  // extent, src stride, dst stride (elements)
};

// The copy's dims in the order that walks dst forwards (largest dst stride first), size-1
// dims dropped, neighbours merged where both layouts step over them as one dim.
std::vector<Dim> plan(const Shape& shape, const Shape& ss, const Shape& ds) {
  std::vector<Dim> dims;
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] != 1) dims.push_back({shape[i], ss[i], ds[i]});
  std::stable_sort(dims.begin(), dims.end(),
                   [](const Dim& a, const Dim& b) { return std::llabs(a.d) > std::llabs(b.d); });
  std::vector<Dim> merged;
  for (const Dim& x : dims) {
    if (!merged.empty()) {
      Dim& o = merged.back();
      if (o.s == x.s * x.size && o.d == x.d * x.size) {
        o = {o.size * x.size, x.s, x.d};
        continue;
      }
    }
    merged.push_back(x);
  }
  return merged;
}

// Tile edge of the transposing copy: 32 rows of src lines and 32 of dst stay in L1.
constexpr int64_t kTile = 32;

template <typename T>
void copy_plane(const char* src, char* dst, const Dim& k, const Dim& L, int64_t i0, int64_t i1) {
  // Rows i0..i1 of dim k (src's innermost) against all of L (dst's innermost), in tiles.
  const T* s = reinterpret_cast<const T*>(src);
  T* d = reinterpret_cast<T*>(dst);
  for (int64_t j0 = 0; j0 < L.size; j0 += kTile) {
    const int64_t j1 = std::min(L.size, j0 + kTile);
    for (int64_t i = i0; i < i1; ++i) {
      const T* sr = s + i * k.s;
      T* dr = d + i * k.d;
      for (int64_t j = j0; j < j1; ++j) dr[j * L.d] = sr[j * L.s];
    }
  }
}

template <typename T>
void copy_row(const char* src, char* dst, const Dim& L) {
  const T* s = reinterpret_cast<const T*>(src);
  T* d = reinterpret_cast<T*>(dst);
  if (L.s == 1 && L.d == 1) {
    std::memcpy(d, s, size_t(L.size) * sizeof(T));
    return;
  }
  for (int64_t j = 0; j < L.size; ++j) d[j * L.d] = s[j * L.s];
}

template <typename T>
void run(const char* src, char* dst, std::vector<Dim> dims) {
  const int64_t es = int64_t(sizeof(T));
  if (dims.empty()) {  // one element
    std::memcpy(dst, src, sizeof(T));
    return;
  }
  const Dim L = dims.back();
  dims.pop_back();
  // The dim src walks fastest, when it is not L: then each (k, L) plane is a transpose.
  int k_at = -1;
  for (int i = 0; i < int(dims.size()); ++i)
    if (std::llabs(dims[size_t(i)].s) < std::llabs(L.s) &&
        (k_at < 0 || std::llabs(dims[size_t(i)].s) < std::llabs(dims[size_t(k_at)].s)))
      k_at = i;
  Dim k{1, 0, 0};
  if (k_at >= 0) {
    k = dims[size_t(k_at)];
    dims.erase(dims.begin() + k_at);
  }
  // Work items: every index of the outer dims, times blocks of kTile rows of k.
  const int64_t blocks = (k.size + kTile - 1) / kTile;
  int64_t outer = 1;
  for (const Dim& x : dims) outer *= x.size;
  const int64_t items = outer * blocks;
  int64_t total = outer * k.size * L.size;
  const bool parallel = total * es >= (int64_t(1) << 20) && items > 1;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t item = 0; item < items; ++item) {
    int64_t rem = item / blocks, so = 0, dof = 0;
    for (size_t x = dims.size(); x-- > 0;) {
      const int64_t idx = rem % dims[x].size;
      rem /= dims[x].size;
      so += idx * dims[x].s;
      dof += idx * dims[x].d;
    }
    const int64_t b = item % blocks, i0 = b * kTile, i1 = std::min(k.size, i0 + kTile);
    const char* s = src + so * es;
    char* d = dst + dof * es;
    if (k_at >= 0) {
      copy_plane<T>(s, d, k, L, i0, i1);
    } else {
      for (int64_t i = i0; i < i1; ++i) copy_row<T>(s + i * k.s * es, d + i * k.d * es, L);
    }
  }
}

}  // namespace

void strided_copy(const void* src, const Shape& src_strides, void* dst, const Shape& dst_strides, const Shape& shape,
                  size_t element_size) {
  for (int64_t n : shape)
    if (n == 0) return;
  std::vector<Dim> dims = plan(shape, src_strides, dst_strides);
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  switch (element_size) {
    case 1: return run<W1>(s, d, std::move(dims));
    case 2: return run<W2>(s, d, std::move(dims));
    case 4: return run<W4>(s, d, std::move(dims));
    case 8: return run<W8>(s, d, std::move(dims));
    default: throw Error(Status::invalid_argument("strided_copy: element size " + std::to_string(element_size)));
  }
}

}  // namespace mixprec

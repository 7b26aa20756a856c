// strided_copy_test.cpp: Tensor::copy_ between layouts (core/strided_copy.*): every element
// lands where an independent per-index walk says, for permutations, stepped and broadcast
// views, every element size, copies into strided destinations, and with a dtype change
// (which must round as convert_elements does: compared with the dense cast).
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "core/strided_copy.h"
#include "mixprec/core/tensor.h"

namespace mixprec {
namespace {

// The storage offset of logical index `i` (row-major over shape) under strides.
int64_t offset_of(int64_t i, const Shape& shape, const Shape& strides) {
  int64_t pos = 0;
  for (size_t k = shape.size(); k-- > 0;) {
    pos += (i % shape[k]) * strides[k];
    i /= shape[k];
  }
  return pos;
}

// Checks strided_copy on raw words of `es` bytes: src holds distinct patterns; dst starts
// filled with a marker, so a missed element or one written twice to the wrong place shows.
void check_raw(const Shape& shape, const Shape& ss, const Shape& ds, size_t es, size_t src_words, size_t dst_words) {
  std::vector<unsigned char> src(src_words * es), dst(dst_words * es, 0xEE), want(dst_words * es, 0xEE);
  for (size_t b = 0; b < src.size(); ++b) src[b] = static_cast<unsigned char>((b * 131 + b / es * 7) & 0xFF);
  const int64_t n = shape_numel(shape);
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(&want[size_t(offset_of(i, shape, ds)) * es], &src[size_t(offset_of(i, shape, ss)) * es], es);
  strided_copy(src.data(), ss, dst.data(), ds, shape, es);
  ASSERT_EQ(dst, want) << "shape " << shape_str(shape) << " src strides " << shape_str(ss) << " dst strides "
                       << shape_str(ds) << " element size " << es;
}

Shape row_major(const Shape& shape) {
  Shape st(shape.size(), 1);
  for (size_t k = shape.size(); k-- > 1;) st[k - 1] = st[k] * shape[k];
  return st;
}

int64_t span(const Shape& shape, const Shape& st) {  // words a layout reaches, + 1
  int64_t m = 0;
  for (size_t k = 0; k < shape.size(); ++k) m += (shape[k] - 1) * st[k];
  return m + 1;
}

TEST(StridedCopy, PermutationsOfEveryElementSize) {
  // Transposes large enough for several tiles, with ragged edges, and 3-4 dim permutes.
  const std::vector<std::pair<Shape, std::vector<int>>> cases = {
      {{67, 45}, {1, 0}},         {{1024, 3}, {1, 0}},       {{5, 33, 70}, {0, 2, 1}},
      {{5, 33, 70}, {2, 1, 0}},   {{4, 9, 6, 35}, {0, 2, 1, 3}}, {{4, 9, 6, 35}, {0, 3, 1, 2}},
      {{2, 1, 40, 1, 33}, {4, 1, 2, 3, 0}}, {{300, 200}, {1, 0}},
  };
  for (size_t es : {1, 2, 4, 8})
    for (const auto& [shape, perm] : cases) {
      const Shape base = row_major(shape);
      Shape ps, pst;
      for (int d : perm) ps.push_back(shape[size_t(d)]), pst.push_back(base[size_t(d)]);
      const int64_t n = shape_numel(shape);
      check_raw(ps, pst, row_major(ps), es, size_t(n), size_t(n));  // permuted view -> dense
      check_raw(ps, row_major(ps), pst, es, size_t(n), size_t(n));  // dense -> permuted destination
    }
}

TEST(StridedCopy, SteppedBroadcastAndOffsetViews) {
  // Every other row and column of a [40, 50] (a stepped slice), its transpose, a broadcast
  // (stride 0) row and column, and a destination with gaps (a slice of a wider tensor).
  check_raw({20, 25}, {100, 2}, row_major({20, 25}), 4, 2000, 500);
  check_raw({25, 20}, {2, 100}, row_major({25, 20}), 2, 2000, 500);
  check_raw({64, 48}, {0, 1}, row_major({64, 48}), 4, 48, 64 * 48);
  check_raw({64, 48}, {1, 0}, row_major({64, 48}), 8, 64, 64 * 48);
  check_raw({30, 40}, {1, 30}, {50, 1}, 4, 1200, 30 * 50);
  check_raw({30, 40}, {40, 1}, {50, 1}, 4, 1200, 30 * 50);  // dense rows into rows with gaps
  check_raw({30, 40}, {50, 1}, {40, 1}, 2, 30 * 50, 1200);  // and back
  check_raw({7, 1, 1}, {1, 5, 9}, {1, 1, 1}, 2, 7, 7);
  check_raw({}, {}, {}, 4, 1, 1);  // one element
}

TEST(StridedCopy, RandomLayoutsAgainstTheWalk) {
  std::mt19937_64 g(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int nd = 1 + int(g() % 4);
    Shape shape;
    for (int k = 0; k < nd; ++k) shape.push_back(1 + int64_t(g() % 37));
    // src: a permuted, possibly stepped layout of a bigger buffer; dst: row-major or permuted.
    std::vector<int> perm(static_cast<size_t>(nd));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), g);
    // The buffer's dim k holds logical dim perm[k], every step[k]-th position.
    Shape buf(static_cast<size_t>(nd)), step(static_cast<size_t>(nd));
    for (int k = 0; k < nd; ++k) {
      step[size_t(k)] = 1 + int64_t(g() % 2);
      buf[size_t(k)] = shape[size_t(perm[size_t(k)])] * step[size_t(k)];
    }
    const Shape bst = row_major(buf);
    Shape ss(static_cast<size_t>(nd));
    for (int k = 0; k < nd; ++k) ss[size_t(perm[size_t(k)])] = bst[size_t(k)] * step[size_t(k)];
    const Shape ds = trial % 3 == 0 ? ss : row_major(shape);
    const size_t es = size_t(1) << (g() % 4);
    check_raw(shape, ss, ds, es, size_t(span(shape, ss)), size_t(span(shape, ds)));
  }
}

TEST(StridedCopy, TensorCopyBetweenLayoutsAndDtypes) {
  std::vector<float> v(size_t(37 * 53));
  std::mt19937 g(3);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (float& x : v) x = nd(g);
  v[5] = 1.0f / 0.0f, v[6] = -0.0f, v[7] = 1e-41f;  // inf, -0, a subnormal
  const Tensor a = Tensor::from_vector(v, {37, 53});
  const Tensor at = a.as_strided({53, 37}, {1, 53}, 0);  // the transpose, as a view
  for (DType to : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
    Tensor out = Tensor::empty({53, 37}, to);
    out.copy_(at);
    // Reference: the transpose by index, then the cast of a dense tensor (convert_elements).
    std::vector<float> t(v.size());
    for (int64_t i = 0; i < 53; ++i)
      for (int64_t j = 0; j < 37; ++j) t[size_t(i * 37 + j)] = v[size_t(j * 53 + i)];
    const Tensor want = Tensor::from_vector(t, {53, 37}).to(to);
    ASSERT_EQ(std::memcmp(out.data(), want.data(), size_t(out.numel()) * dtype_size(to)), 0) << dtype_name(to);
  }
  // Into a strided destination of another dtype (the element walk's path).
  Tensor wide = Tensor::zeros({53, 40}, DType::bf16);
  Tensor dst = wide.as_strided({53, 37}, {40, 1}, 0);
  dst.copy_(at);
  for (int64_t i = 0; i < 53; ++i)
    for (int64_t j = 0; j < 37; ++j)
      ASSERT_EQ(wide.at(i * 40 + j), Tensor::scalar(v[size_t(j * 53 + i)]).to(DType::bf16).item()) << i << "," << j;
}

}  // namespace
}  // namespace mixprec

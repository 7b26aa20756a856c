// add_row_test.cpp: backend::cpu::add_row (add_layer_norm's residual sum and its backward's
// join) for bf16 + bf16 -> bf16 and f16 + f16 -> f16, whose f32 add and one rounding must give
// the bits of the double route (both operands widened to double, added, rounded once through
// round-to-odd f32: what convert_elements does, written out here). bf16: every pair of
// patterns over a dense set of exponent pairs (all signs and mantissas; subnormals, inf, NaN,
// signed zeros included). f16: all of a's patterns against b's of every exponent within 14 of
// a's (the double-rounding cases) and the ends, with ten mantissas each; then random pairs. NaN results must be NaN on both routes (which
// NaN's payload survives is the hardware's choice of operand, on both routes); every other
// result bit for bit. The _no_avx512 twin runs the fallback (f32 buffers, convert_elements).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <utility>

#include "backend/cpu/residual_layer_norm.h"
#include "core/convert.h"

namespace mixprec {
namespace {

bool is_nan16(DType dt, uint16_t v) {
  return dt == DType::bf16 ? (v & 0x7fff) > 0x7f80 : (v & 0x7fff) > 0x7c00;
}

// The double route: widen, add in double, round once.
std::vector<uint16_t> double_route(DType dt, const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  const int64_t n = int64_t(a.size());
  std::vector<double> da(a.size()), db(b.size());
  convert_elements(a.data(), dt, da.data(), DType::f64, n);
  convert_elements(b.data(), dt, db.data(), DType::f64, n);
  for (size_t i = 0; i < da.size(); ++i) da[i] += db[i];
  std::vector<uint16_t> out(a.size());
  convert_elements(da.data(), DType::f64, out.data(), dt, n);
  return out;
}

// Adds the pairs (a[i], b[i]) with add_row, in rows of odd length (vector tails), and
// compares with the double route. Returns the number of pairs checked.
int64_t check_pairs(DType dt, const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  const std::vector<uint16_t> want = double_route(dt, a, b);
  std::vector<uint16_t> got(a.size());
  backend::cpu::AddRowScratch s;
  const int64_t n = int64_t(a.size()), row = 1021;
  for (int64_t i = 0; i < n; i += row) {
    const int64_t len = std::min(row, n - i);
    backend::cpu::add_row(&a[size_t(i)], dt, &b[size_t(i)], dt, &got[size_t(i)], dt, len, s);
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (is_nan16(dt, want[i])) {
      EXPECT_TRUE(is_nan16(dt, got[i])) << std::hex << a[i] << " + " << b[i];
      continue;
    }
    if (got[i] != want[i]) {
      ADD_FAILURE() << dtype_name(dt) << " " << std::hex << a[i] << " + " << b[i] << ": " << got[i]
                    << ", the double route " << want[i];
      return int64_t(i);
    }
  }
  return n;
}

// Every pair (sign, exponent ea, mantissa) x (sign, exponent eb, mantissa) for the given
// exponent pairs; mant_bits = 7 (bf16) or 10 (f16); b's mantissas: b_mants (empty: all).
int64_t check_exponent_pairs(DType dt, int mant_bits, const std::vector<std::pair<int, int>>& exps,
                             std::vector<uint32_t> b_mants) {
  int64_t checked = 0;
  const uint32_t m_count = 1u << mant_bits;
  if (b_mants.empty())
    for (uint32_t m = 0; m < m_count; ++m) b_mants.push_back(m);
  for (auto [ea, eb] : exps) {
    std::vector<uint16_t> a, b;
    for (uint32_t sa = 0; sa < 2; ++sa)
      for (uint32_t ma = 0; ma < m_count; ++ma)
        for (uint32_t sb = 0; sb < 2; ++sb)
          for (uint32_t mb : b_mants) {
            const int sign_shift = mant_bits + (dt == DType::bf16 ? 8 : 5);
            a.push_back(uint16_t((sa << sign_shift) | (uint32_t(ea) << mant_bits) | ma));
            b.push_back(uint16_t((sb << sign_shift) | (uint32_t(eb) << mant_bits) | mb));
          }
    checked += check_pairs(dt, a, b);
    if (::testing::Test::HasFailure()) return checked;
  }
  return checked;
}

TEST(AddRow, Bf16PairsMatchTheDoubleRoute) {
  // a's exponent field: subnormal/zero, the smallest normals, around 1, the largest normals,
  // inf/NaN; b's: every gap from -20 to 20 (past ~17 the sum needs more than 24 bits), plus
  // the ends of the range.
  std::vector<std::pair<int, int>> exps;
  for (int ea : {0, 1, 2, 9, 60, 127, 128, 200, 246, 253, 254, 255}) {
    for (int g = -20; g <= 20; ++g)
      if (ea + g >= 0 && ea + g <= 255) exps.push_back({ea, ea + g});
    for (int eb : {0, 1, 254, 255})
      if (std::abs(eb - ea) > 20) exps.push_back({ea, eb});
  }
  const int64_t n = check_exponent_pairs(DType::bf16, 7, exps, {});
  EXPECT_GT(n, int64_t(20'000'000));
}

TEST(AddRow, F16PairsMatchTheDoubleRoute) {
  // Every exponent pair with a gap up to 14 (and the ends): f16's 2p + 1 = 23 is one bit
  // below f32's 24, the tightest case. All of a's mantissas; b's at the ends and middle of
  // the range (where carries and ties happen) and one in between.
  std::vector<std::pair<int, int>> exps;
  for (int ea = 0; ea <= 31; ++ea)
    for (int eb = 0; eb <= 31; ++eb)
      if (std::abs(ea - eb) <= 14 || eb == 0 || eb == 31) exps.push_back({ea, eb});
  const int64_t n = check_exponent_pairs(DType::f16, 10, exps, {0, 1, 2, 3, 0x155, 0x1ff, 0x200, 0x201, 0x3fe, 0x3ff});
  EXPECT_GT(n, int64_t(30'000'000));
}

TEST(AddRow, RandomF16AndBf16Pairs) {
  std::mt19937 rng(7);
  for (DType dt : {DType::bf16, DType::f16}) {
    std::vector<uint16_t> a(1 << 22), b(1 << 22);
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = uint16_t(rng());
      b[i] = uint16_t(rng());
    }
    check_pairs(dt, a, b);
  }
}

// In place (out = a), as the backward's join runs it.
TEST(AddRow, InPlace) {
  std::vector<uint16_t> a(37), b(37);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = uint16_t(0x3f80 + i);
    b[i] = uint16_t(0x3c00 + 3 * i);
  }
  const std::vector<uint16_t> want = double_route(DType::bf16, a, b);
  backend::cpu::AddRowScratch s;
  backend::cpu::add_row(a.data(), DType::bf16, b.data(), DType::bf16, a.data(), DType::bf16, 37, s);
  EXPECT_EQ(a, want);
}

}  // namespace
}  // namespace mixprec

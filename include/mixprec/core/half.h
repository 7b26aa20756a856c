// half.h: the two 16-bit float storage types, Half (IEEE binary16) and BFloat16, and their
// scalar conversions to and from float. These are the reference rounding that the bulk
// conversion in src/core/convert.cpp must match bit for bit (vector paths included).
//
//   float32   s eeeeeeee mmmmmmmmmmmmmmmmmmmmmmm   bias 127
//   Half      s eeeee    mmmmmmmmmm                bias 15, max 65504, min subnormal 2^-24
//   BFloat16  s eeeeeeee mmmmmmm                   bias 127: the top 16 bits of a float32
//             15 14..     ..0
//
// Rounding rules (same for both types, as in PyTorch's c10::Half/c10::BFloat16):
//  - round to nearest, ties to even;
//  - NaN stays NaN: quiet bit set, sign and the top payload bits kept (what the x86
//    conversion instructions VCVTPS2PH / VCVTNEPS2BF16 produce);
//  - Half: |x| >= 65520 (the tie between 65504 and 2^16) becomes +-inf; subnormals kept;
//  - BFloat16: float32 subnormals are rounded, not flushed. VCVTNEPS2BF16 flushes them
//    to +-0, so the bulk path patches those blocks (see convert.cpp).
// Widening is exact except that a signalling NaN comes back quiet (as VCVTPH2PS does).
#pragma once
#include <bit>
#include <cstdint>

namespace mixprec {

namespace detail {

constexpr uint16_t float_to_half_bits(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: inf
  if (abs >= 0x38800000u) {                                               // >= 2^-14: normal
    uint32_t m = abs - (112u << 23);  // rebias exponent 127 -> 15
    m += 0xfffu + ((m >> 13) & 1u);   // round to nearest even on the 13 dropped bits
    return static_cast<uint16_t>(sign | (m >> 13));
  }
  if (abs <= 0x33000000u) return static_cast<uint16_t>(sign);  // <= 2^-25: tie or below -> 0
  // Subnormal result: count in units of 2^-24. The exponent here is 102..112 (normal f32),
  // so the shift is 14..24 and the 24-bit significand never loses its leading bit early.
  const uint32_t exponent = abs >> 23;
  const uint32_t significand = (abs & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - exponent;
  uint32_t q = significand >> shift;
  const uint32_t rem = significand & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1u);
  if (rem > halfway || (rem == halfway && (q & 1u))) ++q;  // may carry into 0x400: min normal
  return static_cast<uint16_t>(sign | q);
}

constexpr float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) {
    // inf stays inf; NaN gets the quiet bit, like VCVTPH2PS.
    const uint32_t quiet = mantissa != 0 ? 0x400000u : 0u;
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13) | quiet);
  }
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24 is exact in float (and a normal float).
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
  }
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

constexpr uint16_t float_to_bfloat16_bits(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  // Round to nearest even on the low 16 bits; a carry out of the mantissa bumps the exponent,
  // which turns values above the largest bf16 into inf exactly as rounding says it should.
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

constexpr float bfloat16_bits_to_float(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

}  // namespace detail

struct alignas(2) Half {
  struct FromBits {};
  uint16_t bits = 0;

  constexpr Half() = default;
  constexpr Half(uint16_t raw, FromBits) : bits(raw) {}
  constexpr explicit Half(float value) : bits(detail::float_to_half_bits(value)) {}
  constexpr explicit operator float() const { return detail::half_bits_to_float(bits); }
  static constexpr Half from_bits(uint16_t raw) { return Half(raw, FromBits{}); }
};

struct alignas(2) BFloat16 {
  struct FromBits {};
  uint16_t bits = 0;

  constexpr BFloat16() = default;
  constexpr BFloat16(uint16_t raw, FromBits) : bits(raw) {}
  constexpr explicit BFloat16(float value) : bits(detail::float_to_bfloat16_bits(value)) {}
  constexpr explicit operator float() const { return detail::bfloat16_bits_to_float(bits); }
  static constexpr BFloat16 from_bits(uint16_t raw) { return BFloat16(raw, FromBits{}); }
};

static_assert(sizeof(Half) == 2 && alignof(Half) == 2);
static_assert(sizeof(BFloat16) == 2 && alignof(BFloat16) == 2);
static_assert(Half(65504.0f).bits == 0x7bff && Half(65520.0f).bits == 0x7c00);
static_assert(BFloat16(1.0f).bits == 0x3f80);

}  // namespace mixprec

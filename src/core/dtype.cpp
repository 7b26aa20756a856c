// dtype.cpp: names and promotion rules of the element types.
#include "mixprec/core/dtype.h"

#include <string>

namespace mixprec {

const char* dtype_name(DType d) {
  switch (d) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f64: return "f64";
    case DType::i64: return "i64";
    case DType::i32: return "i32";
    case DType::u8: return "u8";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  struct Alias { const char* name; DType dtype; };
  static const Alias kAliases[] = {
      {"f32", DType::f32},   {"float32", DType::f32},  {"float", DType::f32}, {"fp32", DType::f32},
      {"f16", DType::f16},   {"float16", DType::f16},  {"half", DType::f16},  {"fp16", DType::f16},
      {"bf16", DType::bf16}, {"bfloat16", DType::bf16},
      {"f64", DType::f64},   {"float64", DType::f64},  {"double", DType::f64},
      {"i64", DType::i64},   {"int64", DType::i64},    {"i32", DType::i32},   {"int32", DType::i32},
      {"u8", DType::u8},     {"uint8", DType::u8},
  };
  for (const auto& a : kAliases)
    if (name == a.name) return a.dtype;
  return std::nullopt;
}

namespace {
// Rank among floats for promotion; f16 and bf16 share a rank and meet at f32.
int float_rank(DType d) {
  switch (d) {
    case DType::f16:
    case DType::bf16: return 1;
    case DType::f32: return 2;
    case DType::f64: return 3;
    default: return 0;
  }
}
int int_rank(DType d) {
  switch (d) {
    case DType::u8: return 1;
    case DType::i32: return 2;
    case DType::i64: return 3;
    default: return 0;
  }
}
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  const bool fa = is_floating(a), fb = is_floating(b);
  if (fa && !fb) return a;
  if (fb && !fa) return b;
  if (fa && fb) {
    if (float_rank(a) == float_rank(b)) return DType::f32;  // f16 with bf16
    return float_rank(a) > float_rank(b) ? a : b;
  }
  return int_rank(a) > int_rank(b) ? a : b;
}

}  // namespace mixprec

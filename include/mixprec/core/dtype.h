// dtype.h: the element types a Tensor can hold, and their properties.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace mixprec {

// Precision roles in the rest of the code are named (param_dtype, compute_dtype,
// accum_dtype); this enum is only the storage format of one element.
enum class DType : uint8_t { f32, f16, bf16, f64, i64, i32, u8 };

inline constexpr DType kAllDTypes[] = {DType::f32, DType::f16, DType::bf16, DType::f64,
                                       DType::i64, DType::i32, DType::u8};

constexpr size_t dtype_size(DType d) {
  switch (d) {
    case DType::f32: return 4;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::f64: return 8;
    case DType::i64: return 8;
    case DType::i32: return 4;
    case DType::u8: return 1;
  }
  return 0;
}

constexpr bool is_floating(DType d) {
  return d == DType::f32 || d == DType::f16 || d == DType::bf16 || d == DType::f64;
}

// f16 and bf16: the "lower precision" types autocast casts to.
constexpr bool is_half(DType d) { return d == DType::f16 || d == DType::bf16; }

// Short names as users type them on the command line: f32, f16, bf16, f64, i64, i32, u8.
const char* dtype_name(DType d);
// Accepts the short names and PyTorch's long ones (float32, float16, half, bfloat16, ...).
std::optional<DType> parse_dtype(std::string_view name);

// The type mixed inputs are computed in (PyTorch's promote_types restricted to our set):
// any float beats any integer; f64 > f32 > {f16, bf16}; f16 with bf16 gives f32.
DType promote_types(DType a, DType b);

}  // namespace mixprec

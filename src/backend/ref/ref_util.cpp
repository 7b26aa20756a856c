// backend/ref/ref_util.cpp: strided reads into double, rounded writes, and the argument
// checks shared by the reference kernels.
#include "backend/ref/ref_util.h"

#include "core/convert.h"
#include "core/storage.h"

namespace mixprec::backend::ref {

std::vector<double> read_f64(const Tensor& t) {
  const Shape& shape = t.shape();
  const Shape& strides = t.strides();
  const int64_t n = shape_numel(shape);
  std::vector<double> out(static_cast<size_t>(n));
  if (n == 0) return out;
  const void* base = t.storage()->data();
  const DType dtype = t.dtype();
  const int64_t rank = static_cast<int64_t>(shape.size());
  // Odometer over the logical index; `pos` is the element offset into the storage.
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
  int64_t pos = t.storage_offset();
  for (int64_t i = 0; i < n; ++i) {
    out[static_cast<size_t>(i)] = load_as_double(base, dtype, pos);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) {
        pos += strides[d];
        break;
      }
      pos -= (shape[d] - 1) * strides[d];
      idx[d] = 0;
    }
  }
  return out;
}

Tensor make_tensor(const std::vector<double>& values, const Shape& shape, DType dtype) {
  MIXPREC_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape),
                "make_tensor: " + std::to_string(values.size()) + " values for shape " +
                    shape_str(shape));
  Tensor out = Tensor::empty(shape, dtype);
  if (values.empty()) return out;
  void* base = out.storage()->data();
  const int64_t offset = out.storage_offset();
  for (size_t i = 0; i < values.size(); ++i)
    store_from_double(base, dtype, offset + static_cast<int64_t>(i), values[i]);
  return out;
}

void fail(const std::string& message) { throw Error(Status::invalid_argument(message)); }

void check_floating(const char* op, const char* name, const Tensor& t) {
  if (!t.defined()) fail(std::string(op) + ": " + name + " is undefined");
  if (!is_floating(t.dtype()))
    fail(std::string(op) + ": " + name + " has dtype " + dtype_name(t.dtype()) +
         ", expected a floating dtype");
}

void check_same_dtype(const char* op, const char* name_a, const Tensor& a, const char* name_b,
                      const Tensor& b) {
  check_floating(op, name_a, a);
  if (!b.defined()) fail(std::string(op) + ": " + name_b + " is undefined");
  if (a.dtype() != b.dtype())
    fail(std::string(op) + ": dtype mismatch: " + name_a + " " + dtype_name(a.dtype()) +
         " vs " + name_b + " " + dtype_name(b.dtype()));
}

void check_rank(const char* op, const char* name, const Shape& shape, int64_t rank) {
  if (static_cast<int64_t>(shape.size()) != rank)
    fail(std::string(op) + ": " + name + " " + shape_str(shape) + " must be " +
         std::to_string(rank) + "-D");
}

void check_rank(const char* op, const char* name, const Tensor& t, int64_t rank) {
  check_rank(op, name, t.shape(), rank);
}

void check_same_shape(const char* op, const char* name_a, const Shape& a, const char* name_b,
                      const Shape& b) {
  if (a != b)
    fail(std::string(op) + ": " + name_a + " " + shape_str(a) + " and " + name_b + " " +
         shape_str(b) + " must have the same shape");
}

}  // namespace mixprec::backend::ref

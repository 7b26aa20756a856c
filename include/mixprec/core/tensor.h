// tensor.h: a strided view of a reference-counted buffer, with the autograd fields.
// Logical dims are always PyTorch's (NCHW for images); channels-last is only a stride order,
// so a tensor whose memory is NHWC still reports shape [N, C, H, W].
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/core/dtype.h"
#include "mixprec/core/memory.h"
#include "mixprec/core/status.h"  // the tensor API throws mixprec::Error

namespace mixprec {

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& s);  // "[256, 1, 28, 28]"
int64_t shape_numel(const Shape& s);

enum class MemoryFormat : uint8_t { contiguous, channels_last };

Shape contiguous_strides(const Shape& shape);
Shape channels_last_strides(const Shape& shape);  // 4-D only: NHWC memory order
// The strides of a fresh tensor of this shape in `format` (channels-last applies to 4-D only).
Shape strides_for(const Shape& shape, MemoryFormat format);

class Storage;
class Node;
struct TensorImpl;

class Tensor {
 public:
  Tensor() = default;  // undefined: defined() is false

  // ---- factories (buffers charged to current_memory_category()) ----
  static Tensor empty(const Shape& shape, DType dtype = DType::f32,
                      MemoryFormat format = MemoryFormat::contiguous);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32);
  static Tensor ones(const Shape& shape, DType dtype = DType::f32);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32);
  // Values are converted (round to nearest even) to dtype.
  static Tensor from_vector(const std::vector<float>& values, const Shape& shape,
                            DType dtype = DType::f32);
  static Tensor from_vector_f64(const std::vector<double>& values, const Shape& shape,
                                DType dtype = DType::f64);
  static Tensor from_vector_i64(const std::vector<int64_t>& values, const Shape& shape);
  static Tensor scalar(double value, DType dtype = DType::f32);
  // Seeded by manual_seed(): uniform [low, high), normal(mean, std).
  static Tensor uniform(const Shape& shape, double low, double high, DType dtype = DType::f32);
  static Tensor normal(const Shape& shape, double mean, double std, DType dtype = DType::f32);
  // A view of memory owned elsewhere (a NumPy array), without copying: strides in elements,
  // none negative; `owner` is held until the last tensor viewing the memory is gone. The
  // memory is not charged to the tracking allocator. The Python package's from_numpy().
  static Tensor from_external(void* data, const Shape& shape, const Shape& strides, DType dtype,
                              std::shared_ptr<void> owner);
  // A tensor with the same shape/dtype as `like` (PyTorch's *_like: inherits the dtype).
  static Tensor empty_like(const Tensor& like);
  static Tensor zeros_like(const Tensor& like);

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  const Shape& strides() const;
  int64_t dim() const;
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const;
  DType dtype() const;
  int64_t storage_offset() const;  // in elements
  bool is_contiguous() const;
  bool is_channels_last() const;   // 4-D, NHWC memory order
  // Contiguous or channels-last: elementwise kernels may walk the buffer linearly.
  bool is_dense() const;
  MemoryFormat suggest_memory_format() const;
  std::string str() const;  // "Tensor[256, 10] f32" for error messages

  // ---- data ----
  void* data();
  const void* data() const;
  template <typename T> T* data_ptr() { return static_cast<T*>(data()); }
  template <typename T> const T* data_ptr() const { return static_cast<const T*>(data()); }
  const std::shared_ptr<Storage>& storage() const;
  // Element i in logical row-major order, converted to double (slow; tests and debugging).
  double at(int64_t flat_index) const;
  double item() const;                        // numel must be 1
  std::vector<float> to_vector() const;       // logical order, converted to f32
  std::vector<double> to_vector_f64() const;  // logical order, converted to f64

  // ---- conversions (record autograd where requires_grad) ----
  Tensor to(DType dtype) const;                          // no copy if already dtype
  Tensor contiguous() const;                             // no copy if already contiguous
  Tensor to_memory_format(MemoryFormat format) const;    // no copy if already in format
  Tensor clone() const;
  Tensor detach() const;  // same storage, no grad_fn, requires_grad false
  Tensor reshape(const Shape& shape) const;  // -1 allowed once; copies if not contiguous
  // Copies other's values (converting dtype) into this tensor's buffer, no autograd.
  void copy_(const Tensor& other);
  void fill_(double value);

  // ---- autograd ----
  bool requires_grad() const;
  Tensor& requires_grad_(bool value = true);
  bool is_leaf() const;  // no grad_fn
  Tensor grad() const;
  Tensor& mutable_grad();  // the .grad slot itself (optimizers, zero_grad, scaler)
  void set_grad(const Tensor& g);
  const std::shared_ptr<Node>& grad_fn() const;
  void set_grad_fn(std::shared_ptr<Node> fn);
  // Backward from a scalar (gradient 1) or with an explicit gradient of this tensor's shape.
  // Gradients accumulate into leaves' .grad; the graph is freed afterwards.
  void backward(const Tensor& gradient = Tensor()) const;

  // Identity of the underlying impl (for caches keyed by parameter).
  const TensorImpl* impl() const { return impl_.get(); }
  // True when no other Tensor (handle or view) shares this one's buffer: backward then takes
  // a leaf's first gradient over instead of copying it, as PyTorch's AccumulateGrad does.
  bool owns_buffer_alone() const;
  bool same(const Tensor& other) const { return impl_ == other.impl_; }

  // Low-level: a view with explicit geometry over this tensor's storage.
  Tensor as_strided(const Shape& shape, const Shape& strides, int64_t offset) const;

 private:
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<TensorImpl> impl_;
  friend struct TensorImpl;
};

// Seeds every random draw (parameter init, uniform/normal, dropout, data shuffles that do
// not get their own seed).
void manual_seed(uint64_t seed);

}  // namespace mixprec

// tensor.cpp: factories, metadata and data access of Tensor. The methods that are ops
// (to, contiguous, to_memory_format, reshape, backward) are defined in
// src/ops/tensor_methods.cpp, beside the ops they call: core comes before ops in the layers.
#include "mixprec/core/tensor.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "core/convert.h"
#include "core/random.h"
#include "core/strided.h"
#include "core/strided_copy.h"
#include "core/tensor_impl.h"
#include "mixprec/core/status.h"

namespace mixprec {

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << ']';
  return os.str();
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape st(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = acc;
    acc *= std::max<int64_t>(shape[i], 1);
  }
  return st;
}

Shape strides_for(const Shape& shape, MemoryFormat format) {
  return format == MemoryFormat::channels_last && shape.size() == 4 ? channels_last_strides(shape)
                                                                    : contiguous_strides(shape);
}

Shape channels_last_strides(const Shape& shape) {
  MIXPREC_CHECK(shape.size() == 4, "channels_last needs a 4-D shape, got " + shape_str(shape));
  const int64_t C = std::max<int64_t>(shape[1], 1), H = std::max<int64_t>(shape[2], 1),
                W = std::max<int64_t>(shape[3], 1);
  return {H * W * C, 1, W * C, C};
}

namespace {

TensorImpl& impl_of(const Tensor& t) {
  if (!t.defined()) throw Error(Status::invalid_argument("use of an undefined tensor"));
  return TensorImpl::of(t);
}

void check_shape(const Shape& shape) {
  for (auto d : shape)
    if (d < 0) throw Error(Status::invalid_argument("negative dimension in shape " + shape_str(shape)));
}

}  // namespace

Tensor Tensor::empty(const Shape& shape, DType dtype, MemoryFormat format) {
  check_shape(shape);
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->dtype = dtype;
  impl->numel = shape_numel(shape);
  impl->strides = strides_for(shape, format);
  impl->storage = std::make_shared<Storage>(size_t(impl->numel) * dtype_size(dtype),
                                            current_memory_category());
  return Tensor(std::move(impl));
}

Tensor Tensor::from_external(void* data, const Shape& shape, const Shape& strides, DType dtype,
                             std::shared_ptr<void> owner) {
  check_shape(shape);
  if (strides.size() != shape.size())
    throw Error(Status::invalid_argument("from_external: " + std::to_string(strides.size()) +
                                         " strides for shape " + shape_str(shape)));
  int64_t extent = 1;  // elements from the first to one past the last one addressed
  for (size_t i = 0; i < shape.size(); ++i) {
    if (strides[i] < 0)
      throw Error(Status::invalid_argument("from_external: negative stride in " + shape_str(strides)));
    extent += (shape[i] - 1) * strides[i];
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->strides = strides;
  impl->dtype = dtype;
  impl->numel = shape_numel(shape);
  if (impl->numel == 0) extent = 0;
  impl->storage = std::make_shared<Storage>(data, size_t(extent) * dtype_size(dtype), std::move(owner));
  return Tensor(std::move(impl));
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype) {
  Tensor t = empty(shape, dtype);
  t.fill_(value);
  return t;
}
Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  std::memset(t.data(), 0, size_t(t.numel()) * dtype_size(dtype));  // 0 is all-zero bits in every dtype
  return t;
}
Tensor Tensor::ones(const Shape& shape, DType dtype) { return full(shape, 1.0, dtype); }
Tensor Tensor::scalar(double value, DType dtype) { return full({}, value, dtype); }

Tensor Tensor::from_vector(const std::vector<float>& values, const Shape& shape, DType dtype) {
  if (int64_t(values.size()) != shape_numel(shape))
    throw Error(Status::invalid_argument("from_vector: " + std::to_string(values.size()) +
                                         " values do not fill shape " + shape_str(shape)));
  Tensor t = empty(shape, dtype);
  convert_elements(values.data(), DType::f32, t.data(), dtype, t.numel());
  return t;
}
Tensor Tensor::from_vector_f64(const std::vector<double>& values, const Shape& shape, DType dtype) {
  if (int64_t(values.size()) != shape_numel(shape))
    throw Error(Status::invalid_argument("from_vector_f64: " + std::to_string(values.size()) +
                                         " values do not fill shape " + shape_str(shape)));
  Tensor t = empty(shape, dtype);
  convert_elements(values.data(), DType::f64, t.data(), dtype, t.numel());
  return t;
}
Tensor Tensor::from_vector_i64(const std::vector<int64_t>& values, const Shape& shape) {
  if (int64_t(values.size()) != shape_numel(shape))
    throw Error(Status::invalid_argument("from_vector_i64: " + std::to_string(values.size()) +
                                         " values do not fill shape " + shape_str(shape)));
  Tensor t = empty(shape, DType::i64);
  std::memcpy(t.data(), values.data(), values.size() * sizeof(int64_t));
  return t;
}

Tensor Tensor::uniform(const Shape& shape, double low, double high, DType dtype) {
  std::vector<double> v(size_t(shape_numel(shape)));
  std::uniform_real_distribution<double> dist(low, high);
  for (auto& x : v) x = dist(global_generator());
  return from_vector_f64(v, shape, dtype);
}
Tensor Tensor::normal(const Shape& shape, double mean, double std, DType dtype) {
  std::vector<double> v(size_t(shape_numel(shape)));
  std::normal_distribution<double> dist(mean, std);
  for (auto& x : v) x = dist(global_generator());
  return from_vector_f64(v, shape, dtype);
}
Tensor Tensor::empty_like(const Tensor& like) {
  return empty(like.shape(), like.dtype(), like.suggest_memory_format());
}
Tensor Tensor::zeros_like(const Tensor& like) { return zeros(like.shape(), like.dtype()); }

const Shape& Tensor::shape() const { return impl_of(*this).shape; }
const Shape& Tensor::strides() const { return impl_of(*this).strides; }
int64_t Tensor::dim() const { return int64_t(impl_of(*this).shape.size()); }
int64_t Tensor::size(int64_t d) const {
  const int64_t n = dim();
  const int64_t k = d < 0 ? d + n : d;
  if (k < 0 || k >= n)
    throw Error(Status::invalid_argument("size(" + std::to_string(d) + "): dim out of range for " + str()));
  return impl_of(*this).shape[size_t(k)];
}
int64_t Tensor::numel() const { return impl_of(*this).numel; }
DType Tensor::dtype() const { return impl_of(*this).dtype; }
int64_t Tensor::storage_offset() const { return impl_of(*this).offset; }

bool Tensor::is_contiguous() const {
  const auto& im = impl_of(*this);
  const Shape expected = contiguous_strides(im.shape);
  for (size_t i = 0; i < im.shape.size(); ++i)
    if (im.shape[i] != 1 && im.strides[i] != expected[i]) return false;
  return true;
}
bool Tensor::is_channels_last() const {
  const auto& im = impl_of(*this);
  if (im.shape.size() != 4) return false;
  const Shape expected = channels_last_strides(im.shape);
  for (size_t i = 0; i < 4; ++i)
    if (im.shape[i] != 1 && im.strides[i] != expected[i]) return false;
  return true;
}
bool Tensor::is_dense() const { return is_contiguous() || is_channels_last(); }
MemoryFormat Tensor::suggest_memory_format() const {
  return (is_channels_last() && !is_contiguous()) ? MemoryFormat::channels_last
                                                  : MemoryFormat::contiguous;
}
std::string Tensor::str() const {
  if (!defined()) return "Tensor(undefined)";
  return "Tensor" + shape_str(shape()) + " " + dtype_name(dtype());
}

void* Tensor::data() {
  auto& im = impl_of(*this);
  return static_cast<char*>(im.storage->data()) + im.offset * int64_t(dtype_size(im.dtype));
}
const void* Tensor::data() const {
  const auto& im = impl_of(*this);
  return static_cast<const char*>(im.storage->data()) + im.offset * int64_t(dtype_size(im.dtype));
}
const std::shared_ptr<Storage>& Tensor::storage() const { return impl_of(*this).storage; }

bool Tensor::owns_buffer_alone() const {
  return impl_ != nullptr && impl_.use_count() == 1 && impl_->storage != nullptr && impl_->storage.use_count() == 1;
}

double Tensor::at(int64_t flat_index) const {
  const auto& im = impl_of(*this);
  if (flat_index < 0 || flat_index >= im.numel)
    throw Error(Status::invalid_argument("at(" + std::to_string(flat_index) + "): out of range for " + str()));
  int64_t pos = im.offset, rem = flat_index;
  for (size_t k = im.shape.size(); k-- > 0;) {
    pos += (rem % im.shape[k]) * im.strides[k];
    rem /= im.shape[k];
  }
  return load_as_double(im.storage->data(), im.dtype, pos);
}

double Tensor::item() const {
  if (numel() != 1)
    throw Error(Status::invalid_argument("item(): needs exactly one element, got " + str()));
  return at(0);
}

std::vector<double> Tensor::to_vector_f64() const {
  const auto& im = impl_of(*this);
  std::vector<double> out(size_t(im.numel));
  if (is_contiguous()) {
    convert_elements(data(), im.dtype, out.data(), DType::f64, im.numel);
  } else {
    const void* base = im.storage->data();
    for_each_element(im.shape, im.strides, im.offset, [&](int64_t i, int64_t pos) {
      out[size_t(i)] = load_as_double(base, im.dtype, pos);
    });
  }
  return out;
}
std::vector<float> Tensor::to_vector() const {
  const Tensor c = contiguous();
  std::vector<float> out(size_t(c.numel()));
  convert_elements(c.data(), c.dtype(), out.data(), DType::f32, c.numel());
  return out;
}

void Tensor::copy_(const Tensor& other) {
  auto& dst = impl_of(*this);
  const auto& src = impl_of(other);
  if (dst.shape != src.shape)
    throw Error(Status::invalid_argument("copy_: destination " + str() + " and source " +
                                         other.str() + " differ in shape"));
  if (dst.strides == src.strides && is_dense()) {
    // Same dense layout: one linear pass over the buffers (the fast path).
    convert_elements(other.data(), src.dtype, data(), dst.dtype, dst.numel);
  } else if (dst.dtype == src.dtype) {
    // Another layout, the same dtype: bits moved by strided_copy (tiles for a transpose).
    strided_copy(other.data(), src.strides, data(), dst.strides, dst.shape, dtype_size(dst.dtype));
  } else if (is_dense()) {
    // Another layout and dtype: into this layout in the source dtype, then one conversion
    // pass, so every cast rounds by convert_elements.
    std::vector<unsigned char> tmp(size_t(dst.numel) * dtype_size(src.dtype));
    strided_copy(other.data(), src.strides, tmp.data(), dst.strides, dst.shape, dtype_size(src.dtype));
    convert_elements(tmp.data(), src.dtype, data(), dst.dtype, dst.numel);
  } else {
    std::vector<double> v = other.to_vector_f64();
    void* base = dst.storage->data();
    for_each_element(dst.shape, dst.strides, dst.offset, [&](int64_t i, int64_t pos) {
      store_from_double(base, dst.dtype, pos, v[size_t(i)]);
    });
  }
  dst.storage->bump_version();
}

void Tensor::fill_(double value) {
  auto& im = impl_of(*this);
  if (im.numel == 0) return;
  // Convert once, then replicate the element's bytes.
  const size_t es = dtype_size(im.dtype);
  alignas(8) unsigned char elem[8];
  store_from_double(elem, im.dtype, 0, value);
  void* base = im.storage->data();
  for_each_element(im.shape, im.strides, im.offset, [&](int64_t, int64_t pos) {
    std::memcpy(static_cast<char*>(base) + pos * int64_t(es), elem, es);
  });
  im.storage->bump_version();
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), dtype(), suggest_memory_format());
  out.copy_(*this);
  return out;
}
Tensor Tensor::detach() const {
  auto im = std::make_shared<TensorImpl>();
  const auto& src = impl_of(*this);
  im->storage = src.storage;
  im->shape = src.shape;
  im->strides = src.strides;
  im->offset = src.offset;
  im->dtype = src.dtype;
  im->numel = src.numel;
  return Tensor(std::move(im));
}

Tensor Tensor::as_strided(const Shape& shape, const Shape& strides, int64_t offset) const {
  auto im = std::make_shared<TensorImpl>();
  const auto& src = impl_of(*this);
  im->storage = src.storage;
  im->shape = shape;
  im->strides = strides;
  im->offset = offset;
  im->dtype = src.dtype;
  im->numel = shape_numel(shape);
  return Tensor(std::move(im));
}

bool Tensor::requires_grad() const { return impl_of(*this).requires_grad; }
Tensor& Tensor::requires_grad_(bool value) {
  auto& im = impl_of(*this);
  if (value && !is_floating(im.dtype))
    throw Error(Status::invalid_argument("requires_grad_: only floating tensors can require "
                                         "gradients, got " + str()));
  im.requires_grad = value;
  return *this;
}
bool Tensor::is_leaf() const { return impl_of(*this).grad_fn == nullptr; }
Tensor Tensor::grad() const { return impl_of(*this).grad; }
Tensor& Tensor::mutable_grad() { return impl_of(*this).grad; }
void Tensor::set_grad(const Tensor& g) { impl_of(*this).grad = g; }
const std::shared_ptr<Node>& Tensor::grad_fn() const { return impl_of(*this).grad_fn; }
void Tensor::set_grad_fn(std::shared_ptr<Node> fn) {
  auto& im = impl_of(*this);
  im.grad_fn = std::move(fn);
  im.requires_grad = im.grad_fn != nullptr || im.requires_grad;
}

}  // namespace mixprec

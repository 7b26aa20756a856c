// tensor_impl.h: the state behind a Tensor handle. Internal: only src/ sees it.
#pragma once
#include <memory>

#include "core/storage.h"
#include "mixprec/core/tensor.h"

namespace mixprec {

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;       // in elements
  int64_t offset = 0;  // in elements
  DType dtype = DType::f32;
  int64_t numel = 0;

  bool requires_grad = false;
  Tensor grad;                       // accumulated by backward (leaves only)
  std::shared_ptr<Node> grad_fn;     // set on outputs of recorded ops

  static Tensor wrap(std::shared_ptr<TensorImpl> impl) { return Tensor(std::move(impl)); }
  static TensorImpl& of(const Tensor& t) { return *t.impl_; }
};

}  // namespace mixprec

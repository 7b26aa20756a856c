// bindings.h: what the binding's files share. The binding is a user of the library like the
// CLI: it includes only the public headers (include/mixprec), never src/.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include <mixprec/core/tensor.h>

namespace mixprec::python {

namespace py = pybind11;

// Every call into the engine (ops, backward, optimizer steps) runs without the GIL, so other
// Python threads (a data loader) keep running meanwhile.
using release_gil = py::call_guard<py::gil_scoped_release>;

// A tensor as the engine's ops take it: the views Python makes (a transpose, a stepped slice:
// python/mixprec/_views.py) are strided, and not every kernel takes arbitrary strides (oneDNN
// refuses the memory descriptor of a permuted-and-stepped view, in Tensor::contiguous and
// casts too), so a view that is neither contiguous nor channels-last is copied first, as
// PyTorch's kernels call .contiguous(). Tensor::copy_ walks any strides. A view that requires
// grad (a leaf the caller made from a view) takes the engine's contiguous(), which records
// the backward.
inline Tensor strided_copy(const Tensor& t, DType dtype) {
  Tensor out = Tensor::empty(t.shape(), dtype);
  out.copy_(t);
  return out;
}
inline Tensor dense(const Tensor& t) {
  if (!t.defined() || t.is_dense()) return t;
  return t.requires_grad() ? t.contiguous() : strided_copy(t, t.dtype());
}

namespace detail {
template <typename A>
decltype(auto) densify(A&& a) {
  using D = std::decay_t<A>;
  if constexpr (std::is_same_v<D, Tensor>) {
    return dense(a);
  } else if constexpr (std::is_same_v<D, std::optional<Tensor>>) {
    return a ? std::optional<Tensor>(dense(*a)) : std::optional<Tensor>();
  } else if constexpr (std::is_same_v<D, std::vector<Tensor>>) {
    std::vector<Tensor> out;
    for (const Tensor& t : a) out.push_back(dense(t));
    return out;
  } else {
    return std::forward<A>(a);
  }
}
}  // namespace detail

// An op whose tensor arguments are made dense() first: on_dense(&relu), on_dense(+[](...) {...}).
template <typename R, typename... Args>
auto on_dense(R (*fn)(Args...)) {
  return [fn](Args... args) -> R { return fn(detail::densify(std::forward<Args>(args))...); };
}

void bind_errors(py::module_& m);
void bind_tensor(py::module_& m);
void bind_ops(py::module_& m);
void bind_autograd_amp(py::module_& m);
void bind_nn(py::module_& m);
void bind_optim(py::module_& m);
void bind_data(py::module_& m);
void bind_train(py::module_& m);
void bind_infer(py::module_& m);

// The dtype's name as mixprec.<name> shows it ("float32", "bfloat16").
const char* python_dtype_name(DType d);

}  // namespace mixprec::python

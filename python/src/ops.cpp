// ops.cpp: the functional API (include/mixprec/ops.h) and the tensor's operators. Shapes,
// dims and dtypes are checked by the ops themselves, which throw mixprec::Error (a Python
// exception naming the op and the shapes); nothing here adds numerics.
#include <mixprec/ops.h>

#include "bindings.h"

namespace mixprec::python {

namespace {

// A Python number as a 0-d tensor of the other operand's floating dtype, so `x / 3` stays in
// x's dtype as in PyTorch (a Python scalar does not promote a tensor).
Tensor scalar_like(double value, const Tensor& like) {
  return Tensor::scalar(value, is_floating(like.dtype()) ? like.dtype() : DType::f32);
}

// An optional tensor argument (None in Python) as the engine's undefined tensor.
Tensor opt(const std::optional<Tensor>& t) { return t ? *t : Tensor(); }

Reduction parse_reduction(const std::string& r) {
  if (r == "mean") return Reduction::mean;
  if (r == "sum") return Reduction::sum;
  if (r == "none") return Reduction::none;
  throw py::value_error(r + " is not a valid value for reduction (expected 'none', 'mean' or 'sum')");
}

void bind_operators(py::class_<Tensor>& t) {
  using T = const Tensor&;
  const auto op = py::is_operator();
  t.def("__add__", [](T a, T b) { return add(a, b); }, op, release_gil())
      .def("__add__", [](T a, double b) { return add(a, b); }, op, release_gil())
      .def("__radd__", [](T a, double b) { return add(a, b); }, op, release_gil())
      .def("__sub__", [](T a, T b) { return sub(a, b); }, op, release_gil())
      .def("__sub__", [](T a, double b) { return add(a, -b); }, op, release_gil())
      .def("__rsub__", [](T a, double b) { return add(neg(a), b); }, op, release_gil())
      .def("__mul__", [](T a, T b) { return mul(a, b); }, op, release_gil())
      .def("__mul__", [](T a, double b) { return mul(a, b); }, op, release_gil())
      .def("__rmul__", [](T a, double b) { return mul(a, b); }, op, release_gil())
      .def("__truediv__", [](T a, T b) { return div(a, b); }, op, release_gil())
      .def("__truediv__", [](T a, double b) { return div(a, scalar_like(b, a)); }, op, release_gil())
      .def("__rtruediv__", [](T a, double b) { return div(scalar_like(b, a), a); }, op, release_gil())
      .def("__neg__", [](T a) { return neg(a); }, release_gil())
      .def("__pow__", [](T a, double e) { return pow(a, e); }, op, release_gil())
      .def("__matmul__", [](T a, T b) { return matmul(a, b); }, op, release_gil());
}

}  // namespace

void bind_ops(py::module_& m) {
  auto cls = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  bind_operators(cls);
  using T = const Tensor&;
  const auto nogil = release_gil();
  m.def("cast", &cast, nogil);
  m.def("reshape", &reshape, nogil);
  m.def("flatten", &flatten, py::arg("input"), py::arg("start_dim") = 0, py::arg("end_dim") = -1, nogil);
  m.def("transpose", &transpose, nogil);
  m.def("permute4", [](T a, std::array<int, 4> dims) { return permute(a, dims); }, nogil);
  m.def("narrow", &narrow, nogil);
  m.def("add", py::overload_cast<T, T>(&add), nogil);
  m.def("sub", &sub, nogil);
  m.def("mul", py::overload_cast<T, T>(&mul), nogil);
  m.def("div", &div, nogil);
  m.def("neg", &neg, nogil);
  m.def("exp", &exp, nogil);
  m.def("log", &log, nogil);
  m.def("pow", &pow, nogil);
  m.def("relu", &relu, nogil);
  m.def("gelu", &gelu, nogil);
  using O = const std::optional<Tensor>&;
  m.def("linear", [](T x, T w, O b) { return linear(x, w, opt(b)); }, nogil);
  m.def("matmul", &matmul, nogil);
  m.def("conv2d", [](T x, T w, O b, int64_t stride, int64_t padding) { return conv2d(x, w, opt(b), stride, padding); },
        nogil);
  m.def("max_pool2d", &max_pool2d, nogil);
  m.def("avg_pool2d", &avg_pool2d, nogil);
  m.def("sum", py::overload_cast<T>(&sum), nogil);
  m.def("sum", py::overload_cast<T, const std::vector<int64_t>&, bool>(&sum), nogil);
  m.def("mean", py::overload_cast<T>(&mean), nogil);
  m.def("mean", py::overload_cast<T, const std::vector<int64_t>&, bool>(&mean), nogil);
  m.def("softmax", &softmax, nogil);
  m.def("log_softmax", &log_softmax, nogil);
  m.def("nll_loss", [](T x, T y, const std::string& r) { return nll_loss(x, y, parse_reduction(r)); }, nogil);
  m.def("cross_entropy", [](T x, T y, const std::string& r) { return cross_entropy(x, y, parse_reduction(r)); },
        nogil);
  m.def("mse_loss", [](T x, T y, const std::string& r) { return mse_loss(x, y, parse_reduction(r)); }, nogil);
  m.def("layer_norm", [](T x, const Shape& shape, O w, O b, double eps) { return layer_norm(x, shape, opt(w), opt(b), eps); },
        nogil);
  m.def("batch_norm",
        [](T x, O mean, O var, O w, O b, bool training, double momentum, double eps) {
          return batch_norm(x, opt(mean), opt(var), opt(w), opt(b), training, momentum, eps);
        },
        nogil);
  m.def("dropout", &dropout, nogil);
  m.def("cat", &cat, nogil);
  m.def("stack", &stack, nogil);
  m.def("embedding", &embedding, nogil);
  m.def("argmax", &argmax, nogil);
}

}  // namespace mixprec::python

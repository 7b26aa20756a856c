// ops.cpp: the functional API (include/mixprec/ops/ops.h) and the tensor's operators. Shapes,
// dims and dtypes are checked by the ops themselves, which throw mixprec::Error (a Python
// exception naming the op and the shapes); nothing here adds numerics. Every op takes its
// tensors through on_dense (bindings.h): a strided view from Python is copied dense first.
#include <mixprec/ops/ops.h>
#include <mixprec/ops/ops_fused.h>

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
  t.def("__add__", on_dense(+[](T a, T b) { return add(a, b); }), op, release_gil())
      .def("__add__", on_dense(+[](T a, double b) { return add(a, b); }), op, release_gil())
      .def("__radd__", on_dense(+[](T a, double b) { return add(a, b); }), op, release_gil())
      .def("__sub__", on_dense(+[](T a, T b) { return sub(a, b); }), op, release_gil())
      .def("__sub__", on_dense(+[](T a, double b) { return add(a, -b); }), op, release_gil())
      .def("__rsub__", on_dense(+[](T a, double b) { return add(neg(a), b); }), op, release_gil())
      .def("__mul__", on_dense(+[](T a, T b) { return mul(a, b); }), op, release_gil())
      .def("__mul__", on_dense(+[](T a, double b) { return mul(a, b); }), op, release_gil())
      .def("__rmul__", on_dense(+[](T a, double b) { return mul(a, b); }), op, release_gil())
      .def("__truediv__", on_dense(+[](T a, T b) { return div(a, b); }), op, release_gil())
      .def("__truediv__", on_dense(+[](T a, double b) { return div(a, scalar_like(b, a)); }), op, release_gil())
      .def("__rtruediv__", on_dense(+[](T a, double b) { return div(scalar_like(b, a), a); }), op, release_gil())
      .def("__neg__", on_dense(+[](T a) { return neg(a); }), release_gil())
      .def("__pow__", on_dense(+[](T a, double e) { return pow(a, e); }), op, release_gil())
      .def("__matmul__", on_dense(+[](T a, T b) { return matmul(a, b); }), op, release_gil());
}

}  // namespace

void bind_ops(py::module_& m) {
  auto cls = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  bind_operators(cls);
  using T = const Tensor&;
  const auto nogil = release_gil();
  m.def("cast", on_dense(&cast), nogil);
  m.def("reshape", on_dense(&reshape), nogil);
  m.def("flatten", on_dense(&flatten), py::arg("input"), py::arg("start_dim") = 0, py::arg("end_dim") = -1, nogil);
  m.def("transpose", on_dense(&transpose), nogil);
  m.def("permute4", on_dense(+[](T a, std::array<int, 4> dims) { return permute(a, dims); }), nogil);
  m.def("narrow", on_dense(&narrow), nogil);
  m.def("add", on_dense(py::overload_cast<T, T>(&add)), nogil);
  m.def("sub", on_dense(&sub), nogil);
  m.def("mul", on_dense(py::overload_cast<T, T>(&mul)), nogil);
  m.def("div", on_dense(&div), nogil);
  m.def("neg", on_dense(&neg), nogil);
  m.def("exp", on_dense(&exp), nogil);
  m.def("log", on_dense(&log), nogil);
  m.def("sigmoid", on_dense(&sigmoid), nogil);
  m.def("tanh", on_dense(&mixprec::tanh), nogil);
  m.def("sqrt", on_dense(&mixprec::sqrt), nogil);
  m.def("pow", on_dense(&pow), nogil);
  m.def("relu", on_dense(&relu), nogil);
  m.def("gelu", on_dense(&gelu), nogil);
  using O = const std::optional<Tensor>&;
  m.def("linear", on_dense(+[](T x, T w, O b) { return linear(x, w, opt(b)); }), nogil);
  m.def("matmul", on_dense(&matmul), nogil);
  m.def("conv1d",
        on_dense(+[](T x, T w, O b, int64_t stride, int64_t padding, int64_t dilation, int64_t groups) {
          return conv1d(x, w, opt(b), stride, padding, dilation, groups);
        }),
        nogil);
  // The 2-D convolutions and pooling take each spatial argument as an int (both axes) or an
  // (H, W) pair, as PyTorch's; the int overload is tried first.
  m.def("conv_transpose2d",
        on_dense(+[](T x, T w, O b, int64_t stride, int64_t padding, int64_t output_padding, int64_t groups,
                     int64_t dilation) {
          return conv_transpose2d(x, w, opt(b), stride, padding, output_padding, groups, dilation);
        }),
        nogil);
  m.def("conv_transpose2d",
        on_dense(+[](T x, T w, O b, Axes2 stride, Axes2 padding, Axes2 output_padding, int64_t groups,
                     Axes2 dilation) {
          return conv_transpose2d(x, w, opt(b), stride, padding, output_padding, groups, dilation);
        }),
        nogil);
  m.def("conv2d",
        on_dense(+[](T x, T w, O b, int64_t stride, int64_t padding, int64_t dilation, int64_t groups) {
          return conv2d(x, w, opt(b), stride, padding, dilation, groups);
        }),
        nogil);
  m.def("conv2d",
        on_dense(+[](T x, T w, O b, Axes2 stride, Axes2 padding, Axes2 dilation, int64_t groups) {
          return conv2d(x, w, opt(b), stride, padding, dilation, groups);
        }),
        nogil);
  m.def("max_pool2d", on_dense(py::overload_cast<T, int64_t, int64_t, int64_t>(&max_pool2d)), nogil);
  m.def("max_pool2d", on_dense(py::overload_cast<T, Axes2, Axes2, Axes2>(&max_pool2d)), nogil);
  // The fused blocks nn.Sequential runs Conv2d, ReLU, MaxPool2d(k) as (mixprec/ops/ops_fused.h).
  m.def("relu_max_pool2d", on_dense(&relu_max_pool2d), nogil);
  m.def("conv2d_relu_max_pool2d",
        on_dense(+[](T x, T w, O b, int64_t stride, int64_t padding, int64_t pool) {
          return conv2d_relu_max_pool2d(x, w, opt(b), stride, padding, pool);
        }),
        nogil);
  m.def("avg_pool2d", on_dense(py::overload_cast<T, int64_t, int64_t, int64_t>(&avg_pool2d)), nogil);
  m.def("avg_pool2d", on_dense(py::overload_cast<T, Axes2, Axes2, Axes2>(&avg_pool2d)), nogil);
  m.def("sum", on_dense(py::overload_cast<T>(&sum)), nogil);
  m.def("sum", on_dense(py::overload_cast<T, const std::vector<int64_t>&, bool>(&sum)), nogil);
  m.def("mean", on_dense(py::overload_cast<T>(&mean)), nogil);
  m.def("mean", on_dense(py::overload_cast<T, const std::vector<int64_t>&, bool>(&mean)), nogil);
  m.def("softmax", on_dense(&softmax), nogil);
  m.def("log_softmax", on_dense(&log_softmax), nogil);
  m.def("nll_loss", on_dense(+[](T x, T y, const std::string& r) { return nll_loss(x, y, parse_reduction(r)); }), nogil);
  m.def("cross_entropy", on_dense(+[](T x, T y, const std::string& r) { return cross_entropy(x, y, parse_reduction(r)); }),
        nogil);
  m.def("mse_loss", on_dense(+[](T x, T y, const std::string& r) { return mse_loss(x, y, parse_reduction(r)); }), nogil);
  m.def("layer_norm", on_dense(+[](T x, const Shape& shape, O w, O b, double eps) { return layer_norm(x, shape, opt(w), opt(b), eps); }),
        nogil);
  m.def("batch_norm",
        // Not on_dense: the running statistics are updated in place (a copy would lose it).
        [](T x, O mean, O var, O w, O b, bool training, double momentum, double eps) {
          return batch_norm(dense(x), opt(mean), opt(var), dense(opt(w)), dense(opt(b)), training, momentum, eps);
        },
        nogil);
  m.def("dropout", on_dense(&dropout), nogil);
  m.def("cat", on_dense(&cat), nogil);
  m.def("stack", on_dense(&stack), nogil);
  m.def("embedding", on_dense(&embedding), nogil);
  m.def("index_add", on_dense(&index_add), nogil);
  m.def("argmax", on_dense(&argmax), nogil);
}

}  // namespace mixprec::python

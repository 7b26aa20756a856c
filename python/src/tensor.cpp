// tensor.cpp: mixprec.Tensor: metadata, autograd fields, and NumPy in both directions
// without copies (from_numpy, numpy(), the buffer protocol).
#include <string>
#include <vector>

#include "bindings.h"

namespace mixprec::python {

namespace {

// The NumPy dtype of a tensor dtype; bf16 has none.
py::dtype numpy_dtype(DType d) {
  switch (d) {
    case DType::f32: return py::dtype::of<float>();
    case DType::f64: return py::dtype::of<double>();
    case DType::f16: return py::dtype("float16");
    case DType::i64: return py::dtype::of<int64_t>();
    case DType::i32: return py::dtype::of<int32_t>();
    case DType::u8: return py::dtype::of<uint8_t>();
    case DType::bf16: break;
  }
  throw py::type_error(
      "numpy() of a bfloat16 tensor: NumPy has no bfloat16 type; convert explicitly with "
      "t.float().numpy() (exact: every bfloat16 value is a float32)");
}

DType dtype_of_numpy(const py::dtype& dt) {
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  if (kind == 'f' && size == 4) return DType::f32;
  if (kind == 'f' && size == 8) return DType::f64;
  if (kind == 'f' && size == 2) return DType::f16;
  if (kind == 'i' && size == 8) return DType::i64;
  if (kind == 'i' && size == 4) return DType::i32;
  if (kind == 'u' && size == 1) return DType::u8;
  throw py::type_error("can't convert np.ndarray of type " + py::str(py::handle(dt)).cast<std::string>() +
                       ". The only supported types are: float64, float32, float16, int64, int32, "
                       "and uint8.");
}

// The struct-module format the buffer protocol names an element by.
std::string buffer_format(DType d) {
  switch (d) {
    case DType::f32: return py::format_descriptor<float>::format();
    case DType::f64: return py::format_descriptor<double>::format();
    case DType::f16: return "e";
    case DType::i64: return py::format_descriptor<int64_t>::format();
    case DType::i32: return py::format_descriptor<int32_t>::format();
    case DType::u8: return py::format_descriptor<uint8_t>::format();
    case DType::bf16: break;
  }
  throw py::buffer_error("a bfloat16 tensor has no buffer format; use t.float()");
}

Shape byte_strides(const Tensor& t) {
  Shape s = t.strides();
  for (auto& v : s) v *= int64_t(dtype_size(t.dtype()));
  return s;
}

// Releases a Python object from whatever thread drops the last tensor viewing its memory
// (backward frees graphs without the GIL). After the interpreter has finalised (a tensor in
// a static cache destroyed at exit) the reference is left: there is no Python to return it to.
void release_python_object(void* object) {
  if (!Py_IsInitialized() || _Py_IsFinalizing()) return;
  py::gil_scoped_acquire gil;
  delete static_cast<py::object*>(object);
}

// The buffer protocol's entry point: pybind11's own (2.10) calls the def_buffer function
// outside any try block, so an exception there (a bf16 tensor has no buffer format) would
// end the interpreter. This one refuses such tensors with a BufferError first, and tensors
// that require grad, as numpy() does.
extern "C" int tensor_getbuffer(PyObject* object, Py_buffer* view, int flags) {
  try {
    const Tensor& t = py::cast<const Tensor&>(py::handle(object));
    if (t.dtype() != DType::bf16 && !t.requires_grad()) return py::detail::pybind11_getbuffer(object, view, flags);
    PyErr_SetString(PyExc_BufferError, t.requires_grad() ? "the tensor requires grad: use t.detach()"
                                                         : "a bfloat16 tensor has no buffer format; use t.float()");
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_BufferError, e.what());
  }
  if (view) view->obj = nullptr;
  return -1;
}

}  // namespace

Tensor tensor_from_numpy(const py::array& a) {
  const DType dtype = dtype_of_numpy(a.dtype());
  const auto itemsize = py::ssize_t(dtype_size(dtype));
  Shape shape(a.shape(), a.shape() + a.ndim()), strides(size_t(a.ndim()));
  for (py::ssize_t i = 0; i < a.ndim(); ++i) {
    const py::ssize_t s = a.strides()[i];
    if (s < 0)
      throw py::value_error(
          "At least one stride in the given numpy array is negative, and tensors with negative "
          "strides are not currently supported. (You can probably work around this by making a "
          "copy of your array with array.copy().)");
    if (s % itemsize != 0)
      throw py::value_error("from_numpy: the array's strides are not multiples of its item size "
                            "(a view into a structured array?); pass np.ascontiguousarray(a)");
    strides[size_t(i)] = s / itemsize;
  }
  if (reinterpret_cast<uintptr_t>(a.data()) % uintptr_t(itemsize) != 0)
    throw py::value_error("from_numpy: the array's data is not aligned; pass a.copy()");
  if (!a.writeable())
    PyErr_WarnEx(PyExc_UserWarning,
                 "The given NumPy array is not writable, and mixprec does not support non-writable "
                 "tensors: writing to the tensor (an optimizer step) writes into it anyway. Copy "
                 "the array first (a.copy()) to protect its data.", 1);
  std::shared_ptr<void> owner(new py::object(a), release_python_object);
  return Tensor::from_external(const_cast<void*>(a.data()), shape, strides, dtype, std::move(owner));
}

py::array tensor_to_numpy(const Tensor& t) {
  if (t.requires_grad())
    throw py::type_error(
        "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.");
  py::dtype dt = numpy_dtype(t.dtype());
  // The array's base holds a handle to the tensor's storage, so the memory stays valid after
  // the Tensor object is gone.
  auto* keep = new Tensor(t.detach());
  py::capsule base(keep, [](void* p) { delete static_cast<Tensor*>(p); });
  return py::array(dt, t.shape(), byte_strides(t), keep->data(), base);
}

void bind_tensor(py::module_& m) {
  py::class_<Tensor> cls(m, "Tensor", py::buffer_protocol());
  cls.def(py::init([](const Tensor& other) { return other; }),
          "A handle to other's tensor (the same storage and autograd state)")
      .def_buffer([](Tensor& t) -> py::buffer_info {
        return py::buffer_info(t.data(), py::ssize_t(dtype_size(t.dtype())), buffer_format(t.dtype()), t.dim(),
                               t.shape(), byte_strides(t));
      })
      .def("numpy", &tensor_to_numpy, "A NumPy array sharing this tensor's memory (no copy)")
      .def_property_readonly("shape", [](const Tensor& t) { return py::tuple(py::cast(t.shape())); })
      .def_property_readonly("dtype", &Tensor::dtype)
      .def_property_readonly("ndim", &Tensor::dim)
      .def("dim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def("stride", [](const Tensor& t) { return py::tuple(py::cast(t.strides())); })
      .def("storage_offset", &Tensor::storage_offset)
      .def("data_ptr", [](Tensor& t) { return reinterpret_cast<uintptr_t>(t.data()); })
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("_is_dense", &Tensor::is_dense, "Contiguous or channels-last (what kernels walk linearly)")
      .def("__len__", [](const Tensor& t) {
        if (t.dim() == 0) throw py::type_error("len() of a 0-d tensor");
        return t.size(0);
      })
      .def_property_readonly("is_leaf", &Tensor::is_leaf)
      .def_property(
          "requires_grad", &Tensor::requires_grad,
          [](Tensor& t, bool value) {
            if (!t.is_leaf())
              throw py::value_error(
                  "you can only change requires_grad flags of leaf variables. If you want to use a "
                  "computed variable in a subgraph that doesn't require differentiation use "
                  "var_no_grad = var.detach().");
            t.requires_grad_(value);
          })
      .def("requires_grad_", [](Tensor& t, bool value) { return t.requires_grad_(value); },
           py::arg("requires_grad") = true)
      .def_property(
          "grad", [](const Tensor& t) -> py::object {
            Tensor g = t.grad();
            return g.defined() ? py::cast(g) : py::none();
          },
          [](Tensor& t, std::optional<Tensor> g) {
            if (g && g->shape() != t.shape())
              throw py::value_error("assigned grad has data of a different size: " + g->str() +
                                    " for " + t.str());
            t.set_grad(g ? *g : Tensor());
          })
      .def("backward",
           [](const Tensor& t, std::optional<Tensor> gradient) { t.backward(gradient ? *gradient : Tensor()); },
           py::arg("gradient") = py::none(), release_gil())
      .def("detach", &Tensor::detach)
      .def("item", &Tensor::item)
      .def("clone", &Tensor::clone, release_gil())
      .def("contiguous", [](const Tensor& t) { return t.is_contiguous() ? t : dense(t).contiguous(); }, release_gil())
      .def("_to_dtype", [](const Tensor& t, DType d) {
        return t.dtype() == d || t.is_dense() || t.requires_grad() ? dense(t).to(d) : strided_copy(t, d);
      }, release_gil())
      .def("copy_", [](Tensor& t, const Tensor& src) { t.copy_(src); return t; }, release_gil())
      .def("fill_", [](Tensor& t, double v) { t.fill_(v); return t; }, release_gil())
      .def("zero_", [](Tensor& t) { t.fill_(0.0); return t; }, release_gil())
      // The engine caches copies derived from weights (oneDNN's reordered layouts, autocast's
      // casts) keyed by the storage's version, which every engine write bumps; a write
      // through a NumPy view does not. A copy of zero elements into a view of the storage
      // bumps it without touching the data (public API only).
      .def("mark_modified_", [](Tensor& t) {
        t.as_strided({0}, {1}, t.storage_offset()).copy_(Tensor::empty({0}, t.dtype()));
        return t;
      }, "Tell mixprec's caches that this tensor's memory was written through NumPy")
      .def("_same", &Tensor::same, "Whether both objects are handles to the same tensor")
      .def("_shares_storage", [](const Tensor& a, const Tensor& b) { return a.storage() == b.storage(); })
      .def("_str", &Tensor::str);
  reinterpret_cast<PyHeapTypeObject*>(cls.ptr())->as_buffer.bf_getbuffer = tensor_getbuffer;
  // np.asarray(t) tries the buffer first and, when it is refused, __array__, whose error
  // (bf16, requires_grad) is then the one raised.
  cls.def("__array__", [](const Tensor& t, py::object dtype) {
    py::array a = tensor_to_numpy(t);
    return dtype.is_none() ? a : py::array(a.attr("astype")(dtype));
  }, py::arg("dtype") = py::none());
  // numpy defers to the tensor's reflected operators (array + tensor -> Tensor.__radd__).
  cls.attr("__array_ufunc__") = py::none();

  // The views of python/mixprec/_views.py (transpose, permute, slicing, view): a tensor over
  // the same storage with new geometry, no autograd (the Python layer makes views only where
  // no graph is recorded). Every element it reaches must lie inside what `src` reaches, so a
  // wrong geometry is an error here, never a read outside the buffer.
  m.def("_as_strided", [](const Tensor& src, const Shape& shape, const Shape& strides, int64_t offset) {
    if (shape.size() != strides.size())
      throw py::value_error("_as_strided: " + std::to_string(shape.size()) + " sizes but " +
                            std::to_string(strides.size()) + " strides");
    const auto extent = [](const Shape& sizes, const Shape& steps, int64_t base, int64_t& lo, int64_t& hi) {
      lo = hi = base;
      for (size_t i = 0; i < sizes.size(); ++i) {
        if (sizes[i] < 0) throw py::value_error("_as_strided: negative size");
        if (sizes[i] == 0) return false;
        (steps[i] < 0 ? lo : hi) += (sizes[i] - 1) * steps[i];
      }
      return true;
    };
    int64_t src_lo = 0, src_hi = 0, lo = 0, hi = 0;
    const bool src_any = extent(src.shape(), src.strides(), src.storage_offset(), src_lo, src_hi);
    if (extent(shape, strides, offset, lo, hi) && (!src_any || lo < src_lo || hi > src_hi))
      throw py::value_error("_as_strided: the view " + shape_str(shape) + " reaches outside " + src.str());
    return src.as_strided(shape, strides, offset);
  }, py::arg("src"), py::arg("shape"), py::arg("strides"), py::arg("offset"));
  m.def("from_numpy", &tensor_from_numpy, py::arg("array"),
        "A tensor sharing the array's memory (no copy); the array stays alive as long as the tensor");
  m.def("_empty", [](const Shape& s, DType d) { return Tensor::empty(s, d); }, release_gil());
  m.def("_zeros", [](const Shape& s, DType d) { return Tensor::zeros(s, d); }, release_gil());
  m.def("_full", [](const Shape& s, double v, DType d) { return Tensor::full(s, v, d); }, release_gil());
  m.def("_uniform", &Tensor::uniform, release_gil());
  m.def("_normal", &Tensor::normal, release_gil());
}

}  // namespace mixprec::python

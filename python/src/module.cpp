// module.cpp: the extension module mixprec._mixprec. The Python package (python/mixprec)
// arranges what is bound here under PyTorch's names (mixprec.nn, mixprec.optim, ...).
#include "bindings.h"

#include <mixprec/core/dtype.h>
#include <mixprec/core/status.h>

namespace mixprec::python {

const char* python_dtype_name(DType d) {
  switch (d) {
    case DType::f32: return "float32";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    case DType::f64: return "float64";
    case DType::i64: return "int64";
    case DType::i32: return "int32";
    case DType::u8: return "uint8";
  }
  return "?";
}

void bind_errors(py::module_& m) {
  // Engine errors carry a Status; Python sees them as exceptions a PyTorch user already
  // catches: every one is a RuntimeError (what torch raises for bad shapes and dtypes), the
  // caller's mistakes are also ValueErrors, and what this machine cannot run also a
  // NotImplementedError, a missing file also a FileNotFoundError. The classes are made once
  // and live as long as the interpreter.
  static PyObject* base = PyErr_NewExceptionWithDoc(
      "mixprec.MixprecError", "An error reported by the mixprec engine (a RuntimeError).",
      PyExc_RuntimeError, nullptr);
  static PyObject* invalid = PyErr_NewExceptionWithDoc(
      "mixprec.InvalidArgumentError", "Wrong shape, dtype or value (a ValueError and a RuntimeError).",
      PyTuple_Pack(2, base, PyExc_ValueError), nullptr);
  static PyObject* unimplemented = PyErr_NewExceptionWithDoc(
      "mixprec.UnimplementedError", "Not available for this dtype or shape on this machine.",
      PyTuple_Pack(2, base, PyExc_NotImplementedError), nullptr);
  static PyObject* not_found = PyErr_NewExceptionWithDoc(
      "mixprec.NotFoundError", "A missing file or directory (a FileNotFoundError too).",
      PyTuple_Pack(2, base, PyExc_FileNotFoundError), nullptr);
  m.attr("MixprecError") = py::handle(base);
  m.attr("NotFoundError") = py::handle(not_found);
  m.attr("InvalidArgumentError") = py::handle(invalid);
  m.attr("UnimplementedError") = py::handle(unimplemented);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      PyObject* type = base;
      if (e.status().code() == StatusCode::invalid_argument) type = invalid;
      if (e.status().code() == StatusCode::unimplemented) type = unimplemented;
      if (e.status().code() == StatusCode::not_found) type = not_found;
      PyErr_SetString(type, e.what());
    }
  });
}

}  // namespace mixprec::python

PYBIND11_MODULE(_mixprec, m) {
  using namespace mixprec;
  using namespace mixprec::python;
  m.doc() = "mixprec's engine (C++); import mixprec, not this module";
  bind_errors(m);
  py::enum_<DType> dtype(m, "dtype");
  for (DType d : kAllDTypes) dtype.value(python_dtype_name(d), d);
  // Replaces (not overloads) the enum's own repr/str: mixprec.bfloat16, as torch.bfloat16 shows.
  const auto name = [](DType d) { return std::string("mixprec.") + python_dtype_name(d); };
  dtype.attr("__repr__") = py::cpp_function(name, py::is_method(dtype));
  dtype.attr("__str__") = py::cpp_function(name, py::is_method(dtype));
  dtype.def_property_readonly("is_floating_point", [](DType d) { return is_floating(d); })
      .def_property_readonly("itemsize", [](DType d) { return dtype_size(d); });
  bind_tensor(m);
  bind_ops(m);
  bind_autograd_amp(m);
  bind_nn(m);
  bind_optim(m);
  bind_data(m);
  bind_train(m);
  bind_infer(m);
}

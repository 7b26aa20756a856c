// bindings.h: what the binding's files share. The binding is a user of the library like the
// CLI: it includes only the public headers (include/mixprec), never src/.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <mixprec/tensor.h>

namespace mixprec::python {

namespace py = pybind11;

// Every call into the engine (ops, backward, optimizer steps) runs without the GIL, so other
// Python threads (a data loader) keep running meanwhile.
using release_gil = py::call_guard<py::gil_scoped_release>;

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

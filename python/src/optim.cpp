// optim.cpp: SGD, Adam and AdamW (include/mixprec/optim/optim.h). The package's optimizer classes
// (python/mixprec/optim.py) take PyTorch's arguments, validate them with PyTorch's messages,
// and hold one of these; the update itself, bit-identical to PyTorch 1.13's on f32
// parameters, is the engine's.
#include <mixprec/optim/optim.h>

#include "bindings.h"

namespace mixprec::python {

void bind_optim(py::module_& m) {
  py::module_ o = m.def_submodule("optim", "the engine's optimizers");
  py::class_<optim::Optimizer, std::shared_ptr<optim::Optimizer>>(o, "Optimizer")
      .def("step", &optim::Optimizer::step, release_gil())
      .def("zero_grad", &optim::Optimizer::zero_grad)
      .def_property("lr", &optim::Optimizer::lr, &optim::Optimizer::set_lr)
      .def_property("step_count", &optim::Optimizer::step_count, &optim::Optimizer::set_step_count)
      .def("params", &optim::Optimizer::params)
      .def("state_tensors", &optim::Optimizer::state_tensors)
      .def("load_state_tensors", &optim::Optimizer::load_state_tensors);
  py::class_<optim::SGD, optim::Optimizer, std::shared_ptr<optim::SGD>>(o, "SGD")
      .def(py::init([](std::vector<Tensor> params, double lr, double momentum, double dampening,
                       double weight_decay, bool nesterov, bool maximize) {
             return std::make_shared<optim::SGD>(
                 std::move(params), optim::SGDOptions{lr, momentum, dampening, weight_decay, nesterov, maximize});
           }),
           py::arg("params"), py::arg("lr"), py::arg("momentum"), py::arg("dampening"),
           py::arg("weight_decay"), py::arg("nesterov"), py::arg("maximize"));
  py::class_<optim::Adam, optim::Optimizer, std::shared_ptr<optim::Adam>>(o, "Adam")
      .def(py::init([](std::vector<Tensor> params, double lr, double beta1, double beta2, double eps,
                       double weight_decay, bool amsgrad, bool maximize, bool decoupled_weight_decay) {
             return std::make_shared<optim::Adam>(
                 std::move(params), optim::AdamOptions{lr, beta1, beta2, eps, weight_decay, amsgrad, maximize},
                 decoupled_weight_decay);
           }),
           py::arg("params"), py::arg("lr"), py::arg("beta1"), py::arg("beta2"), py::arg("eps"),
           py::arg("weight_decay"), py::arg("amsgrad"), py::arg("maximize"), py::arg("decoupled_weight_decay"));
}

}  // namespace mixprec::python

// nn.cpp: the engine's layers (include/mixprec/nn.h) that hold parameters. The Python layers
// (python/mixprec/nn/modules.py) are made from these, so a layer's parameters are initialised
// exactly as the C++ API and the CLI initialise them for the same seed (PyTorch's default
// initialisation), and run the same ops as the C++ forward() does.
#include <mixprec/nn.h>
#include <mixprec/optim.h>

#include "bindings.h"

namespace mixprec::python {

void bind_nn(py::module_& m) {
  py::module_ nn = m.def_submodule("nn", "the engine's layers");
  py::class_<nn::Module, std::shared_ptr<nn::Module>>(nn, "Module")
      .def("named_parameters", &nn::Module::named_parameters)
      .def("named_buffers", &nn::Module::named_buffers);
  py::class_<nn::Linear, nn::Module, std::shared_ptr<nn::Linear>>(nn, "Linear")
      .def(py::init<int64_t, int64_t, bool>(), py::arg("in_features"), py::arg("out_features"),
           py::arg("bias"), release_gil());
  py::class_<nn::Conv2d, nn::Module, std::shared_ptr<nn::Conv2d>>(nn, "Conv2d")
      .def(py::init<int64_t, int64_t, int64_t, int64_t, int64_t, bool>(), py::arg("in_channels"),
           py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride"), py::arg("padding"),
           py::arg("bias"), release_gil());
  py::class_<nn::LayerNorm, nn::Module, std::shared_ptr<nn::LayerNorm>>(nn, "LayerNorm")
      .def(py::init<Shape, double, bool>(), py::arg("normalized_shape"), py::arg("eps"),
           py::arg("elementwise_affine"));
  py::class_<nn::BatchNorm2d, nn::Module, std::shared_ptr<nn::BatchNorm2d>>(nn, "BatchNorm2d")
      .def(py::init<int64_t, double, double>(), py::arg("num_features"), py::arg("eps"), py::arg("momentum"));
  py::class_<nn::Embedding, nn::Module, std::shared_ptr<nn::Embedding>>(nn, "Embedding")
      .def(py::init<int64_t, int64_t>(), py::arg("num_embeddings"), py::arg("embedding_dim"), release_gil());
  nn.def("clip_grad_norm_", &optim::clip_grad_norm_, py::arg("parameters"), py::arg("max_norm"), release_gil());
}

}  // namespace mixprec::python

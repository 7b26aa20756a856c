// nn.cpp: the engine's modules. The Python layers (python/mixprec/nn/layers.py) are made from
// the engine's, so a layer's parameters are initialised exactly as the C++ API and the CLI
// initialise them for the same seed (PyTorch's default initialisation), and run the same ops
// as the C++ forward() does. Whole engine modules (the encoder layer, built-in models, model
// files) run their own forward() and are wrapped by nn.EngineModule (python/mixprec/nn/engine.py).
#include <mixprec/nn/models.h>
#include <mixprec/nn/model_file.h>
#include <mixprec/nn/nn.h>
#include <mixprec/nn/nn_attention.h>
#include <mixprec/optim/optim.h>

#include "bindings.h"

namespace mixprec::python {

void bind_nn(py::module_& m) {
  py::module_ nn = m.def_submodule("nn", "the engine's layers");
  py::class_<nn::Module, std::shared_ptr<nn::Module>>(nn, "Module")
      .def("named_parameters", &nn::Module::named_parameters)
      .def("named_buffers", &nn::Module::named_buffers)
      .def("forward", [](nn::Module& m, const Tensor& x) { return m(dense(x)); }, release_gil())
      .def("train", &nn::Module::train)
      .def("to", [](nn::Module& m, DType d) { m.to(d); }, release_gil())
      .def("type_name", &nn::Module::type_name)
      .def("summary", [](const nn::Module& m) { return nn::summary(m); });
  py::class_<nn::TransformerEncoderLayer, nn::Module, std::shared_ptr<nn::TransformerEncoderLayer>>(
      nn, "TransformerEncoderLayer")
      .def(py::init([](int64_t d_model, int64_t nhead, int64_t dim_feedforward, double dropout,
                       const std::string& activation, double eps) {
             if (activation != "relu" && activation != "gelu")
               throw py::value_error("activation should be relu/gelu, not " + activation);
             return std::make_shared<nn::TransformerEncoderLayer>(
                 d_model, nhead, dim_feedforward, dropout,
                 activation == "relu" ? nn::Activation::relu : nn::Activation::gelu, eps);
           }),
           py::arg("d_model"), py::arg("nhead"), py::arg("dim_feedforward"), py::arg("dropout"),
           py::arg("activation"), py::arg("layer_norm_eps"), release_gil())
      // x [B, S, E]; key_padding [B, S] f32, the additive key mask (0, or PADDING_SCORE at
      // padding), or None; causal: PyTorch's square subsequent src_mask, taken as the
      // attention's own causal mode for this call (its backward keeps the mode it ran with);
      // attn_mask [S, S] f32, any other src_mask as an additive mask, or None.
      .def("forward_masked",
           [](nn::TransformerEncoderLayer& m, const Tensor& x, const std::optional<Tensor>& key_padding,
              bool causal, const std::optional<Tensor>& attn_mask) {
             struct Mode {  // the layer's own mode again however the call ends
               nn::MultiheadAttention& attn;
               bool was;
               ~Mode() { attn.causal = was; }
             } mode{*m.self_attn, m.self_attn->causal};
             m.self_attn->causal = causal;
             return m.forward(dense(x), key_padding ? dense(*key_padding) : Tensor(),
                              attn_mask ? dense(*attn_mask) : Tensor());
           },
           release_gil());
  // What a padded key's scores get (nn_sequence.h): finite in every dtype, its exp 0.
  nn.attr("PADDING_SCORE") = nn::kPaddingScore;
  // A model file (docs/models.md) built for inputs of C x H x W and `classes` outputs.
  nn.def("build_model_file", [](const std::string& path, int64_t c, int64_t h, int64_t w, int64_t classes) {
    StatusOr<std::string> text = nn::read_model_file(path);
    throw_if_error(text.status());
    StatusOr<std::shared_ptr<nn::Module>> model = nn::build_model_file(*text, path, c, h, w, classes);
    throw_if_error(model.status());
    return *model;
  }, release_gil());
  // A built-in model by its `mixprec train --model` name, with its input geometry.
  nn.def("make_model", [](const std::string& name) {
    StatusOr<nn::ModelSpec> spec = nn::model_spec(name);
    throw_if_error(spec.status());
    StatusOr<std::shared_ptr<nn::Module>> model = nn::build_model(*spec);
    throw_if_error(model.status());
    return py::make_tuple(*model, py::make_tuple(spec->channels, spec->height, spec->width), spec->classes);
  });
  nn.def("model_names", &nn::model_names);
  py::class_<nn::Linear, nn::Module, std::shared_ptr<nn::Linear>>(nn, "Linear")
      .def(py::init<int64_t, int64_t, bool>(), py::arg("in_features"), py::arg("out_features"),
           py::arg("bias"), release_gil());
  py::class_<nn::Conv2d, nn::Module, std::shared_ptr<nn::Conv2d>>(nn, "Conv2d")
      .def(py::init<int64_t, int64_t, int64_t, int64_t, int64_t, bool, int64_t, int64_t>(), py::arg("in_channels"),
           py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride"), py::arg("padding"),
           py::arg("bias"), py::arg("dilation"), py::arg("groups"), release_gil());
  py::class_<nn::Conv1d, nn::Module, std::shared_ptr<nn::Conv1d>>(nn, "Conv1d")
      .def(py::init<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool>(), py::arg("in_channels"),
           py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride"), py::arg("padding"),
           py::arg("dilation"), py::arg("groups"), py::arg("bias"), release_gil());
  py::class_<nn::ConvTranspose2d, nn::Module, std::shared_ptr<nn::ConvTranspose2d>>(nn, "ConvTranspose2d")
      .def(py::init<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, int64_t>(),
           py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride"),
           py::arg("padding"), py::arg("output_padding"), py::arg("groups"), py::arg("bias"), py::arg("dilation"),
           release_gil());
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

// infer.cpp: mixprec.load(checkpoint): a trained model put to use through the library's own
// inference (mixprec/infer/infer.h), the code `mixprec predict`, `serve` and `generate` run, so the
// probabilities here are the CLI's bit for bit. python/mixprec/_load.py wraps it as a Module.
#include <mixprec/infer/infer.h>
#include <mixprec/serve/serve.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "bindings.h"

namespace mixprec::python {

namespace {

using infer::Predictor;

py::dict spec_dict(const nn::ModelSpec& s) {
  py::dict d;
  d["name"] = s.name;
  d["channels"] = s.channels;
  d["height"] = s.height;
  d["width"] = s.width;
  d["classes"] = s.classes;
  d["language_model"] = s.language_model;
  d["token_input"] = s.token_input;
  return d;
}

// The samples of texts (a text classifier's inputs, a language model's prompts) as the
// library encodes them for serve (serve::decode_predict_request with a JSON body of strings).
std::vector<float> text_samples(const Predictor& p, const std::string& json_body, int64_t n) {
  StatusOr<serve::DecodedRequest> decoded =
      serve::decode_predict_request(json_body, "application/json", p.layout(), n);
  throw_if_error(decoded.status());
  std::vector<float> out;
  for (const auto& s : decoded->samples) out.insert(out.end(), s.begin(), s.end());
  return out;
}

}  // namespace

void bind_infer(py::module_& m) {
  py::module_ inf = m.def_submodule("infer", "the library's inference (mixprec/infer/infer.h)");
  py::class_<Predictor, std::shared_ptr<Predictor>>(inf, "Predictor")
      .def_static("open", [](const std::string& path, const std::string& precision) {
        std::shared_ptr<Predictor> out;
        {
          py::gil_scoped_release nogil;
          StatusOr<Predictor> p = Predictor::open(path, precision);
          throw_if_error(p.status());
          out = std::make_shared<Predictor>(std::move(p).value());
        }
        return out;
      }, py::arg("path"), py::arg("precision"))
      .def("model", [](const Predictor& p) { return p.loaded().model; })
      .def_property_readonly("path", [](const Predictor& p) { return p.loaded().opened.path; })
      .def_property_readonly("weights_only", [](const Predictor& p) { return p.loaded().opened.weights_only; })
      .def_property_readonly("model_note", [](const Predictor& p) { return p.loaded().opened.model_note; })
      .def_property_readonly("spec", [](const Predictor& p) { return spec_dict(p.spec()); })
      .def_property_readonly("precision", [](const Predictor& p) { return p.loaded().preset.name; })
      .def_property_readonly("class_names", &Predictor::class_names)
      .def_property_readonly("mean", &Predictor::mean)
      .def_property_readonly("std", &Predictor::stddev)
      .def_property_readonly("feature_names", [](const Predictor& p) { return p.config().feature_names; })
      .def_property_readonly("values_per_sample", [](const Predictor& p) { return p.layout().values_per_sample(); })
      .def("parameter_count", &Predictor::parameter_count)
      .def("weight_bytes", &Predictor::weight_bytes)
      // n samples of values_per_sample floats each (C-order), as Predictor::probabilities
      // takes them; returns [n, classes] float32.
      .def("probabilities", [](const Predictor& p, py::array_t<float, py::array::c_style | py::array::forcecast> x,
                               int64_t n) {
        std::vector<float> samples(x.data(), x.data() + x.size());
        std::vector<std::vector<float>> rows;
        {
          py::gil_scoped_release nogil;
          rows = p.probabilities(samples, n);
        }
        const py::ssize_t classes = rows.empty() ? py::ssize_t(p.spec().classes) : py::ssize_t(rows[0].size());
        py::array_t<float> out({py::ssize_t(rows.size()), classes});
        auto view = out.mutable_unchecked<2>();
        for (py::ssize_t i = 0; i < py::ssize_t(rows.size()); ++i)
          for (py::ssize_t j = 0; j < classes; ++j) view(i, j) = rows[size_t(i)][size_t(j)];
        return out;
      }, py::arg("samples"), py::arg("n"))
      .def("text_samples", [](const Predictor& p, const std::string& json_body, int64_t n) {
        std::vector<float> v = text_samples(p, json_body, n);
        return py::array_t<float>(py::ssize_t(v.size()), v.data());
      }, py::arg("json_body"), py::arg("n"))
      .def("top", [](const Predictor& p, const std::vector<float>& row, int64_t k) {
        py::list out;
        for (const infer::TopClass& t : p.top(row, k)) {
          py::dict d;
          d["class"] = t.index;
          d["name"] = t.name;
          d["probability"] = t.probability;
          out.append(d);
        }
        return out;
      }, py::arg("probabilities"), py::arg("k"))
      // The model's f32 logits for a normalised input under the checkpoint's preset, no autograd.
      .def("run_model", [](const Predictor& p, const Tensor& x) { return infer::run_model(p.loaded(), dense(x)); },
           py::arg("input"), release_gil())
      .def("generate", [](const Predictor& p, const std::string& prompt, int64_t max_tokens, double temperature,
                          int64_t top_k, uint64_t seed) {
        auto* lm = dynamic_cast<nn::StepwiseLanguageModel*>(p.loaded().model.get());
        if (!p.spec().language_model || lm == nullptr)
          throw py::value_error(p.loaded().opened.path + " holds model " + p.spec().name +
                                ", a classifier; generate() needs a language model");
        if (max_tokens < 0) throw py::value_error("generate(): max_tokens must be >= 0");
        if (!std::isfinite(temperature) || temperature < 0) throw py::value_error("generate(): temperature must be finite and >= 0");
        if (top_k < 0 || top_k > 256) throw py::value_error("generate(): top_k must be in 0..256");
        std::string text;
        {
          py::gil_scoped_release nogil;
          text = infer::generate_text(*lm, p.loaded().preset.autocast_dtype, prompt,
                                      {max_tokens, temperature, top_k, seed});
        }
        return py::bytes(text);
      }, py::arg("prompt"), py::arg("max_tokens"), py::arg("temperature"), py::arg("top_k"), py::arg("seed"));
}

}  // namespace mixprec::python

// train.cpp: mixprec.train(**config): what `mixprec train` runs (train::run), with the keys of
// config.json. The run holds no GIL; between steps it asks Python for pending signals, so
// Ctrl-C ends it as the CLI's does (a checkpoint when there is a run directory), then raises
// KeyboardInterrupt.
#include <mixprec/train/train.h>
#include <mixprec/train/train_config.h>

#include <optional>
#include <type_traits>
#include <variant>

#include "bindings.h"

namespace mixprec::python {

namespace {

py::dict summary(const train::TrainResult& r) {
  py::dict out;
  out["losses"] = r.losses;
  py::list evals;
  for (const auto& e : r.evals) {
    py::dict d;
    d["epoch"] = e.epoch;
    d["step"] = e.step;
    d["accuracy"] = e.accuracy;
    d["loss"] = e.loss;
    d["samples"] = e.samples;
    evals.append(d);
  }
  out["evals"] = evals;
  out["best_accuracy"] = r.best_accuracy;
  out["final_accuracy"] = r.final_accuracy;
  out["steps"] = r.steps;
  out["seconds"] = r.seconds;
  out["seconds_per_step"] = r.seconds_per_step;
  out["skipped_steps"] = r.skipped_steps;
  out["final_scale"] = r.final_scale;
  out["precision"] = r.precision;
  out["self_check"] = r.self_check;
  out["last_checkpoint"] = r.last_checkpoint;
  out["diverged"] = r.diverged;
  out["peak_activation_bytes"] = r.peak_activation_bytes;
  return out;
}

py::dict step_dict(const train::StepReport& s) {
  py::dict d;
  d["step"] = s.step;
  d["total_steps"] = s.total_steps;
  d["epoch"] = s.epoch;
  d["loss"] = s.loss;
  d["lr"] = s.lr;
  d["scale"] = s.scale;
  d["skipped"] = s.skipped;
  d["images_per_second"] = s.images_per_second;
  return d;
}

// The settings as TrainConfig, through the table of settings (train_config.h): each key is a
// row's, each value of the row's type and within its range or choices. Every row is
// accepted, not only those a --config file may hold: run_dir, resume, threads are the
// caller's to choose here as on the command line.
train::TrainConfig config_from(const py::dict& settings) {
  train::TrainConfig config;
  for (const auto& [key_object, value] : settings) {
    const std::string key = py::str(key_object);
    const train::ConfigField* field = train::find_config_field(key);
    if (!field) throw py::value_error("mixprec.train(): unknown setting '" + key + "'");
    std::visit([&](auto member) {
      using T = std::remove_reference_t<decltype(config.*member)>;
      if constexpr (!std::is_same_v<T, bool> && !std::is_same_v<T, std::string> &&
                    !std::is_same_v<T, double> && std::is_arithmetic_v<T>) {
        if (!py::isinstance<py::int_>(value) || py::isinstance<py::bool_>(value))
          throw py::value_error("mixprec.train(): " + key + " must be an integer, got " + py::repr(value).cast<std::string>());
      }
      try {
        config.*member = value.cast<T>();
      } catch (const py::cast_error&) {
        throw py::value_error("mixprec.train(): " + key + " has the wrong type: " + py::repr(value).cast<std::string>());
      }
    }, field->member);
    const std::string problem = train::check_field(*field, config);
    if (!problem.empty()) throw py::value_error("mixprec.train(): " + key + " " + problem);
  }
  return config;
}

}  // namespace

void bind_train(py::module_& m) {
  m.def("_train_keys", [] {
    std::vector<std::string> keys;
    for (const auto& f : train::config_fields()) keys.push_back(f.key);
    return keys;
  });
  m.def("_train", [](const py::dict& settings, py::object on_step) {
    const train::TrainConfig config = config_from(settings);
    bool stop = false;
    std::optional<py::error_already_set> callback_error;  // raised again once the run is over
    train::Callbacks callbacks;
    callbacks.stop_requested = [&] {
      py::gil_scoped_acquire gil;
      if (!stop && PyErr_CheckSignals() != 0) {
        callback_error.emplace();  // takes the pending KeyboardInterrupt
        stop = true;
      }
      return stop;
    };
    callbacks.on_warning = [](const std::string& message) {
      py::gil_scoped_acquire gil;
      if (PyErr_WarnEx(PyExc_UserWarning, message.c_str(), 1) != 0) PyErr_Clear();
    };
    if (!on_step.is_none())
      callbacks.on_step = [&](const train::StepReport& s) {
        py::gil_scoped_acquire gil;
        if (stop) return;
        try {
          on_step(step_dict(s));
        } catch (py::error_already_set& e) {
          callback_error.emplace(std::move(e));
          stop = true;
        }
      };
    std::optional<StatusOr<train::TrainResult>> result;
    {
      py::gil_scoped_release nogil;
      result.emplace(train::run(config, callbacks));
    }
    if (callback_error) throw std::move(*callback_error);
    throw_if_error(result->status());
    return summary(result->value());
  }, py::arg("settings"), py::arg("on_step"));
}

}  // namespace mixprec::python

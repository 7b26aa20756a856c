// autograd_amp.cpp: grad mode, autocast regions, the GradScaler, seeding and threads. The
// engine's RAII guards become scopes Python enters and leaves (the package's context
// managers); they are thread-local as the guards are, so a scope must be left on the thread
// that entered it.
#include <omp.h>

#include <mixprec/amp/amp.h>
#include <mixprec/autograd/autograd.h>
#include <mixprec/amp/grad_scaler.h>
#include <mixprec/core/hardware.h>
#include <mixprec/core/memory.h>

#include <optional>

#include "bindings.h"

namespace mixprec::python {

namespace {

struct GradModeScope {
  explicit GradModeScope(bool enabled_) : enabled(enabled_) {}
  bool enabled;
  std::optional<GradModeGuard> guard;
};

struct AutocastScope {
  AutocastScope(DType dtype_, bool enabled_, bool cache_enabled_)
      : dtype(dtype_), enabled(enabled_), cache_enabled(cache_enabled_) {
    if (!is_half(dtype))
      throw py::value_error(std::string("autocast: dtype must be mixprec.bfloat16 or mixprec.float16, got mixprec.") +
                            python_dtype_name(dtype));
  }
  DType dtype;
  bool enabled, cache_enabled;
  std::optional<amp::AutocastGuard> guard;
};

}  // namespace

void bind_autograd_amp(py::module_& m) {
  py::class_<GradModeScope>(m, "_GradModeScope")
      .def(py::init<bool>())
      .def("enter", [](GradModeScope& s) { s.guard.emplace(s.enabled); })
      .def("exit", [](GradModeScope& s) { s.guard.reset(); });
  m.def("is_grad_enabled", &grad_mode_enabled);
  m.def("_set_grad_enabled", &set_grad_mode);

  py::class_<AutocastScope>(m, "_AutocastScope")
      .def(py::init<DType, bool, bool>())
      .def("enter", [](AutocastScope& s) { s.guard.emplace(s.dtype, s.enabled, s.cache_enabled); })
      .def("exit", [](AutocastScope& s) { s.guard.reset(); });
  m.def("is_autocast_enabled", &amp::is_autocast_enabled);
  m.def("get_autocast_dtype", &amp::autocast_dtype);
  m.def("clear_autocast_cache", &amp::clear_cast_cache);
  // Where an op's autocast output dtype differs from PyTorch 1.13's (docs/amp.md), as tuples
  // (op, mode, inputs, pytorch, mixprec, why).
  m.def("autocast_differences_from_pytorch", [] {
    py::list out;
    for (const auto& d : amp::differences_from_pytorch())
      out.append(py::make_tuple(amp::op_name(d.op), d.mode, d.inputs, d.pytorch, d.mixprec, d.why));
    return out;
  });

  m.def("manual_seed", &manual_seed, py::arg("seed"));
  // OpenMP's thread count is per calling thread: ops run on the thread that calls them.
  m.def("set_num_threads", [](int n) {
    if (n < 1) throw py::value_error("set_num_threads: expected a positive number, got " + std::to_string(n));
    omp_set_num_threads(n);
  });
  m.def("get_num_threads", &omp_get_max_threads);
  m.def("cpu_summary", &cpu_summary);
  // Bytes held by tensor buffers the engine allocated (NumPy memory shared by from_numpy is
  // not counted): the memory tests watch it return to where it was.
  m.def("_allocated_bytes", [] { return memory_stats().total_current; });
  m.def("compute_path", &compute_path);

  py::class_<amp::NonFiniteGrad>(m, "NonFiniteGrad")
      .def_readonly("name", &amp::NonFiniteGrad::name)
      .def_readonly("count", &amp::NonFiniteGrad::count)
      .def_readonly("first_index", &amp::NonFiniteGrad::first_index)
      .def("__repr__", [](const amp::NonFiniteGrad& g) {
        return "NonFiniteGrad(" + g.name + ", count=" + std::to_string(g.count) +
               ", first_index=" + std::to_string(g.first_index) + ")";
      });
  py::class_<amp::GradScaler>(m, "GradScaler")
      .def(py::init([](double init_scale, double growth_factor, double backoff_factor, int64_t growth_interval,
                       bool enabled) {
             amp::GradScalerOptions o;
             o.init_scale = init_scale;
             o.growth_factor = growth_factor;
             o.backoff_factor = backoff_factor;
             o.growth_interval = growth_interval;
             o.enabled = enabled;
             return amp::GradScaler(o);
           }),
           py::arg("init_scale"), py::arg("growth_factor"), py::arg("backoff_factor"),
           py::arg("growth_interval"), py::arg("enabled"))
      .def("scale", &amp::GradScaler::scale, release_gil())
      .def("unscale", &amp::GradScaler::unscale, release_gil())
      .def("step", &amp::GradScaler::step, release_gil())
      .def("update", &amp::GradScaler::update, py::arg("new_scale") = py::none(), release_gil())
      .def("get_scale", &amp::GradScaler::get_scale)
      .def("is_enabled", &amp::GradScaler::is_enabled)
      .def("get_growth_factor", &amp::GradScaler::get_growth_factor)
      .def("get_backoff_factor", &amp::GradScaler::get_backoff_factor)
      .def("get_growth_interval", &amp::GradScaler::get_growth_interval)
      .def("set_growth_factor", &amp::GradScaler::set_growth_factor)
      .def("set_backoff_factor", &amp::GradScaler::set_backoff_factor)
      .def("set_growth_interval", &amp::GradScaler::set_growth_interval)
      .def("state_dict", &amp::GradScaler::state_dict)
      .def("load_state_dict", &amp::GradScaler::load_state_dict)
      .def("applied_steps", &amp::GradScaler::applied_steps)
      .def("skipped_steps", &amp::GradScaler::skipped_steps)
      .def("last_step_skipped", &amp::GradScaler::last_step_skipped)
      .def("last_nonfinite", &amp::GradScaler::last_nonfinite)
      .def("name_parameters", &amp::GradScaler::name_parameters);
}

}  // namespace mixprec::python

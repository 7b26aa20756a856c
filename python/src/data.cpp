// data.cpp: the engine's dataset readers (validated, bounded: include/mixprec/data/data.h), its
// shuffle order, and the CLI's learning-rate schedule, for mixprec.data and
// mixprec.optim.lr_scheduler.
#include <mixprec/data/data.h>
#include <mixprec/train/train.h>

#include "bindings.h"

namespace mixprec::python {

namespace {

// Bytes the engine read, as a NumPy array that owns its copy.
py::array_t<uint8_t> owned_bytes(const std::vector<uint8_t>& bytes, std::vector<py::ssize_t> shape) {
  py::array_t<uint8_t> out(shape);
  std::copy(bytes.begin(), bytes.end(), out.mutable_data());
  return out;
}

}  // namespace

void bind_data(py::module_& m) {
  m.def("load_mnist_like", [](const std::string& dir, const std::string& split, const std::string& variant) {
    const MnistVariant v = variant == "fashion-mnist" ? MnistVariant::fashion_mnist
                           : variant == "mnist"       ? MnistVariant::mnist
                                                      : MnistVariant::automatic;
    StatusOr<ImageDataset> loaded = [&] {
      py::gil_scoped_release nogil;
      return load_mnist_like(dir, split == "train" ? Split::train : Split::test, v);
    }();
    throw_if_error(loaded.status());
    const ImageDataset& d = *loaded;
    py::dict out;
    out["images"] = owned_bytes(d.images, {d.count, d.channels, d.height, d.width});
    out["labels"] = owned_bytes(d.labels, {d.count});
    out["mean"] = d.mean;
    out["std"] = d.stddev;
    out["name"] = d.name;
    out["num_classes"] = d.num_classes;
    return out;
  }, py::arg("dir"), py::arg("split"), py::arg("variant"));
  m.def("shuffled_order", &shuffled_order, py::arg("n"), py::arg("seed"), py::arg("epoch"));
  m.def("lr_at", [](double lr, const std::string& schedule, int64_t warmup_steps, double min_lr,
                    int64_t step, int64_t total_steps) {
    train::TrainConfig c;
    c.lr = lr;
    c.lr_schedule = schedule;
    c.warmup_steps = warmup_steps;
    c.min_lr = min_lr;
    return train::lr_at(c, step, total_steps);
  });
}

}  // namespace mixprec::python

// npy_dataset.cpp: a pair of NumPy arrays (x, y) as a dataset, the way Keras and scikit-learn
// users keep their data: x of [N, C, H, W], [N, H, W] or [N, F], y of [N] class numbers.
#include <cmath>

#include <fmt/format.h>

#include "mixprec/data/data.h"
#include "mixprec/data/npy.h"

namespace mixprec {
namespace {

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "(";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + (s.size() == 1 ? ",)" : ")");
}

}  // namespace

StatusOr<ImageDataset> npy_dataset(const std::string& x_path, const std::string& y_path, int num_classes) {
  auto x = read_npy(x_path);
  if (!x.is_ok()) return x.status();
  auto y = read_npy(y_path);
  if (!y.is_ok()) return y.status();
  const std::vector<int64_t>& s = x->shape;
  if (s.size() < 2 || s.size() > 4 || s[0] < 1)
    return Status::data_loss(fmt::format("{}: shape {}: expected (N, C, H, W), (N, H, W) or (N, F) with N >= 1",
                                         x_path, shape_text(s)));
  const int64_t n = s[0];
  if (y->shape != std::vector<int64_t>{n})
    return Status::data_loss(fmt::format("{}: shape {}: expected ({},), one label per sample of {}", y_path,
                                         shape_text(y->shape), n, x_path));
  ImageDataset d;
  d.name = "npy";
  d.count = n;
  if (s.size() == 4) d.channels = s[1], d.height = s[2], d.width = s[3];
  else if (s.size() == 3) d.channels = 1, d.height = s[1], d.width = s[2];
  else d.channels = s[1], d.height = d.width = 1;  // a table: each column a channel of 1 x 1
  if (d.channels > 65536 || d.height > 16384 || d.width > 16384)
    return Status::data_loss(fmt::format("{}: shape {}: a sample larger than mixprec reads", x_path, shape_text(s)));
  // Bytes are pixels (0..255, normalised as images are); any other dtype is numbers.
  const bool pixels = x->descr == "|u1";
  d.tabular = !pixels;
  const size_t total = x->values.size();
  if (pixels) {
    d.images.resize(total);
    for (size_t i = 0; i < total; ++i) d.images[i] = uint8_t(x->values[i]);
  } else {
    d.features.resize(total);
    for (size_t i = 0; i < total; ++i) {
      const double v = x->values[i];
      if (!std::isfinite(v) || std::fabs(v) > 3.0e38)
        return Status::data_loss(fmt::format("{}: element {} is {}, expected a finite float32 number", x_path, i, v));
      d.features[i] = float(v);
    }
  }
  int largest = -1;
  d.labels.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    const double v = y->values[size_t(i)];
    if (!(v >= 0 && v <= 255 && v == std::floor(v)) || (num_classes > 0 && v >= num_classes))
      return Status::data_loss(fmt::format("{}: label {} is {}, expected a class number in 0..{}", y_path, i, v,
                                           num_classes > 0 ? num_classes - 1 : 255));
    d.labels[size_t(i)] = uint8_t(v);
    largest = std::max(largest, int(v));
  }
  d.num_classes = std::max(largest + 1, num_classes);
  d.source = fmt::format("{} {} and {}", x_path, shape_text(s), y_path);
  compute_normalisation(d, d.mean, d.stddev);
  MIXPREC_RETURN_IF_ERROR(d.validate());
  return d;
}

}  // namespace mixprec

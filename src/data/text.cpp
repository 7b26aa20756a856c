// text.cpp: a text file as windows of bytes for a byte-level language model (data.h).
#include <algorithm>
#include <cmath>
#include <string>

#include "mixprec/data.h"
#include "mixprec/files.h"

namespace mixprec {

StatusOr<ImageDataset> load_text_windows(const std::string& path, int64_t window, Split split,
                                         double val_fraction) {
  if (window < 2 || window > (int64_t(1) << 20))
    return Status::invalid_argument("text windows: window " + std::to_string(window) + " bytes: expected 2..2^20");
  if (!(val_fraction > 0 && val_fraction < 1))
    return Status::invalid_argument("text windows: validation fraction must be in (0, 1)");
  auto bytes = io::read_regular_file(path, "text file", uint64_t(kMaxDatasetBytes));
  if (!bytes.is_ok()) return bytes.status();
  const std::string& text = *bytes;
  const int64_t n = int64_t(text.size());
  const int64_t val_bytes = int64_t(std::floor(double(n) * val_fraction));
  const int64_t begin = split == Split::train ? 0 : n - val_bytes;
  const int64_t end = split == Split::train ? n - val_bytes : n;
  const int64_t step = window - 1;  // windows overlap by one byte: each byte is a target once
  const int64_t count = end - begin >= window ? (end - begin - 1) / step : 0;
  if (count < 1)
    return Status::invalid_argument("text file '" + path + "': its " + split_name(split) + " split holds " +
                                    std::to_string(end - begin) + " bytes (" + std::to_string(n) +
                                    " in the file, the last " + std::to_string(int(val_fraction * 100)) +
                                    "% for testing), fewer than one window of " + std::to_string(window) +
                                    " bytes: give a longer text or a shorter context");
  ImageDataset d;
  d.count = count;
  d.channels = 1;
  d.height = 1;
  d.width = window;
  d.text = true;
  d.num_classes = 256;
  d.labels.assign(size_t(count), 0);  // unused: the targets are the next bytes
  d.images.resize(size_t(count * window));
  for (int64_t i = 0; i < count; ++i)
    std::copy_n(text.data() + begin + i * step, window, d.images.data() + i * window);
  d.name = "text";
  d.source = path;
  return d;
}

}  // namespace mixprec

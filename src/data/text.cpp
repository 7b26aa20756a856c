// text.cpp: a text file as windows of bytes for a byte-level language model (data.h). The
// file is mapped, not read: a corpus of many GiB trains in the memory of a small one (the
// loader copies each batch's windows out of the map and releases their pages).
#include <cmath>
#include <string>

#include "io/mapped_file.h"
#include "mixprec/data/data.h"

namespace mixprec {

StatusOr<ImageDataset> load_text_windows(const std::string& path, int64_t window, Split split,
                                         double val_fraction) {
  if (window < 2 || window > (int64_t(1) << 20))
    return Status::invalid_argument("text windows: window " + std::to_string(window) + " bytes: expected 2..2^20");
  if (!(val_fraction > 0 && val_fraction < 1))
    return Status::invalid_argument("text windows: validation fraction must be in (0, 1)");
  auto mapped = io::map_regular_file(path, "text file", uint64_t(kMaxTextBytes));
  if (!mapped.is_ok()) return mapped.status();
  const int64_t n = int64_t(mapped->size);
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
  d.corpus = std::move(mapped->bytes);
  d.corpus_begin = begin;
  d.corpus_end = end;
  d.name = "text";
  d.source = path;
  return d;
}

namespace {
// SplitMix64's finaliser: a bijection of 64-bit words whose outputs pass BigCrush as a
// counter-based generator; chaining it over (seed, epoch, position) keys every draw.
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
}  // namespace

int64_t text_window_start(uint64_t seed, int64_t epoch, int64_t position, int64_t begin, int64_t end,
                          int64_t window) {
  const uint64_t range = uint64_t(end - window - begin) + 1;  // starts begin..end - window
  const uint64_t key = mix64(mix64(mix64(seed) ^ uint64_t(epoch)) ^ uint64_t(position));
  // Unbiased: reject the top sliver of draws that would favour small offsets (at most half
  // the draws for any range, so the expected number of draws is below 2).
  const uint64_t limit = UINT64_MAX - UINT64_MAX % range;
  uint64_t x = key;
  for (uint64_t k = 1; x >= limit; ++k) x = mix64(key + k);
  return begin + int64_t(x % range);
}

}  // namespace mixprec

// dataset.cpp: assembling ImageDatasets from files on disk (MNIST-like IDX directories and
// CIFAR-10 batch directories), their normalisation constants, and subsets.
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "mixprec/data/data.h"

namespace mixprec {
namespace {

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

// The first existing candidate, or not_found listing every name tried.
StatusOr<std::string> find_file(const std::string& dir, const std::vector<std::string>& names) {
  for (const auto& n : names)
    if (is_regular_file(join(dir, n))) return join(dir, n);
  std::string tried;
  for (const auto& n : names) tried += (tried.empty() ? "" : ", ") + n;
  return Status::not_found(fmt::format("{}: none of [{}] found", dir, tried));
}

// MNIST and Fashion-MNIST share file names; the path is the only hint which one it is.
bool looks_like_fashion(const std::string& dir) {
  std::string lower(dir);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return lower.find("fashion") != std::string::npos;
}

}  // namespace

const char* split_name(Split split) { return split == Split::train ? "train" : "test"; }

ImageDataset ImageDataset::subset(int64_t first_n) const { return slice(0, first_n); }

ImageDataset ImageDataset::slice(int64_t begin, int64_t end) const {
  const int64_t b = std::clamp<int64_t>(begin, 0, count), e = std::clamp<int64_t>(end, b, count), n = e - b;
  ImageDataset out;
  out.count = n;
  out.channels = channels;
  out.height = height;
  out.width = width;
  const int64_t per = sample_bytes();  // bytes per image, or values per table row
  if (corpus) {  // a mapped text: the same map, narrowed to the bytes of windows b..e-1
    out.corpus = corpus;
    out.corpus_begin = corpus_begin + b * (width - 1);
    out.corpus_end = n > 0 ? out.corpus_begin + n * (width - 1) + 1 : out.corpus_begin;
  } else if (tabular) {
    out.features.assign(features.begin() + b * per, features.begin() + e * per);
  } else {
    out.images.assign(images.begin() + b * per, images.begin() + e * per);
  }
  out.tabular = tabular;
  out.feature_names = feature_names;
  if (!corpus) out.labels.assign(labels.begin() + b, labels.begin() + e);
  out.num_classes = num_classes;
  out.name = name;
  out.source = n == count ? source
               : b == 0   ? fmt::format("{} (first {} of {})", source, n, count)
                          : fmt::format("{} (samples {}..{} of {})", source, b, e - 1, count);
  out.mean = mean;
  out.stddev = stddev;
  out.text = text;
  out.tokens = tokens;
  out.skipped = skipped;
  out.class_names = class_names;
  return out;
}

Status ImageDataset::validate() const {
  auto bad = [&](const std::string& what) {
    return Status::invalid_argument(fmt::format("dataset {} ({}): {}", name, source, what));
  };
  if (count < 0 || channels < 1 || height < 1 || width < 1)
    return bad(fmt::format("shape [{}, {}, {}, {}]: expected count >= 0 and C, H, W >= 1",
                           count, channels, height, width));
  if (corpus) {  // a mapped text: windows of its bytes, nothing stored per sample
    if (!text || channels != 1 || height != 1 || width < 2 || !images.empty() || !labels.empty())
      return bad("a mapped text must be a language model's windows [count, 1, 1, width >= 2] with no stored "
                 "images or labels");
    if (corpus_begin < 0 || (count > 0 && corpus_end - corpus_begin < count * (width - 1) + 1))
      return bad(fmt::format("text bytes {}..{} hold fewer than {} windows of {}", corpus_begin, corpus_end, count,
                             width));
    if (num_classes != 256) return bad(fmt::format("num_classes {}: a byte-level text has 256", num_classes));
    return Status::ok();
  }
  if (!tabular && int64_t(images.size()) != count * sample_bytes())
    return bad(fmt::format("images has {} bytes: expected {} = {} x {} x {} x {}",
                           images.size(), count * sample_bytes(), count, channels, height, width));
  if (tabular && (int64_t(features.size()) != count * sample_bytes() || !images.empty() || text))
    return bad(fmt::format("a table has {} values: expected {} = {} x {} x {} x {} (and no pixels)",
                           features.size(), count * sample_bytes(), count, channels, height, width));
  if (tokens && (tabular || text || channels != 1 || height != 1))
    return bad(fmt::format("token sequences must be [count, 1, 1, length] and neither a table nor a language "
                           "model's text, got [{}, {}, {}, {}]", count, channels, height, width));
  if (tabular)
    for (float v : features)
      if (!std::isfinite(v)) return bad("a table value is not finite");
  if (int64_t(labels.size()) != count)
    return bad(fmt::format("labels has {} entries: expected {}", labels.size(), count));
  if (num_classes < 1 || num_classes > 256)
    return bad(fmt::format("num_classes {}: expected 1..256", num_classes));
  for (size_t i = 0; i < labels.size(); ++i)
    if (labels[i] >= num_classes)
      return bad(fmt::format("label {} at index {} is out of range [0, {})", labels[i], i,
                             num_classes));
  if (mean.empty() && stddev.empty()) return Status::ok();  // no normalisation constants
  if (int64_t(mean.size()) != channels || int64_t(stddev.size()) != channels)
    return bad(fmt::format("mean/std have {}/{} entries: expected one per channel ({})",
                           mean.size(), stddev.size(), channels));
  for (int64_t c = 0; c < channels; ++c)
    if (!(stddev[size_t(c)] > 0) || !std::isfinite(stddev[size_t(c)]) || !std::isfinite(mean[size_t(c)]))
      return bad(fmt::format("channel {}: mean {} std {}: expected finite values and std > 0",
                             c, mean[size_t(c)], stddev[size_t(c)]));
  return Status::ok();
}

StatusOr<ImageDataset> load_mnist_like(const std::string& dir, Split split, MnistVariant variant) {
  if (!is_directory(dir)) return Status::not_found(fmt::format("{}: no such directory", dir));
  const std::string prefix = split == Split::train ? "train" : "t10k";
  // Canonical names, then the "train-images.idx3-ubyte" spelling some mirrors use.
  auto names = [&](const char* kind, const char* idx) {
    std::string dash = fmt::format("{}-{}-{}-ubyte", prefix, kind, idx);
    std::string dot = fmt::format("{}-{}.{}-ubyte", prefix, kind, idx);
    return std::vector<std::string>{dash, dash + ".gz", dot, dot + ".gz"};
  };
  auto images_path = find_file(dir, names("images", "idx3"));
  if (!images_path.is_ok()) return images_path.status();
  auto labels_path = find_file(dir, names("labels", "idx1"));
  if (!labels_path.is_ok()) return labels_path.status();

  auto images = read_idx_images(images_path.value());
  if (!images.is_ok()) return images.status();
  auto labels = read_idx_labels(labels_path.value(), 10);
  if (!labels.is_ok()) return labels.status();
  if (int64_t(labels.value().size()) != images.value().count)
    return Status::data_loss(fmt::format(
        "{}: image count {} does not match the label count {} in {}", images_path.value(),
        images.value().count, labels.value().size(), labels_path.value()));

  bool fashion = variant == MnistVariant::fashion_mnist ||
                 (variant == MnistVariant::automatic && looks_like_fashion(dir));
  ImageDataset ds;
  ds.count = images.value().count;
  ds.channels = 1;
  ds.height = images.value().rows;
  ds.width = images.value().cols;
  ds.images = std::move(images.value().pixels);
  ds.labels = std::move(labels.value());
  ds.num_classes = 10;
  ds.name = fashion ? "fashion-mnist" : "mnist";
  ds.source = fmt::format("{} + {}", images_path.value(), labels_path.value());
  // Training-set statistics of pixel / 255 (the values the PyTorch examples use).
  ds.mean = {fashion ? 0.2860 : 0.1307};
  ds.stddev = {fashion ? 0.3530 : 0.3081};
  return ds;
}

StatusOr<ImageDataset> load_cifar10(const std::string& dir, Split split) {
  if (!is_directory(dir)) return Status::not_found(fmt::format("{}: no such directory", dir));
  // The official tarball unpacks into cifar-10-batches-bin/; accept its parent too.
  std::string root = dir;
  if (!is_regular_file(join(dir, "test_batch.bin")) &&
      is_directory(join(dir, "cifar-10-batches-bin")))
    root = join(dir, "cifar-10-batches-bin");
  std::vector<std::string> files;
  if (split == Split::train) {
    for (int i = 1; i <= 5; ++i) files.push_back(fmt::format("data_batch_{}.bin", i));
  } else {
    files.push_back("test_batch.bin");
  }
  ImageDataset all;
  for (const auto& f : files) {
    auto path = find_file(root, {f, f + ".gz"});
    if (!path.is_ok()) return path.status();
    auto batch = read_cifar10_batch(path.value());
    if (!batch.is_ok()) return batch.status();
    ImageDataset& b = batch.value();
    if (all.count == 0) {
      all = std::move(b);
      continue;
    }
    all.count += b.count;
    all.images.insert(all.images.end(), b.images.begin(), b.images.end());
    all.labels.insert(all.labels.end(), b.labels.begin(), b.labels.end());
  }
  all.source = fmt::format("{} ({})", root, split == Split::train ? "data_batch_1..5.bin" : "test_batch.bin");
  return all;
}

void compute_normalisation(const ImageDataset& dataset, std::vector<double>& mean, std::vector<double>& stddev) {
  compute_channel_stats(dataset, mean, stddev);
  for (double& s : stddev)
    if (!(s > 0)) s = 1.0;
}

void compute_channel_stats(const ImageDataset& ds, std::vector<double>& mean,
                           std::vector<double>& stddev) {
  mean.assign(size_t(ds.channels), 0.0);
  stddev.assign(size_t(ds.channels), 0.0);
  const int64_t plane = ds.height * ds.width;
  if (ds.tabular) {  // two passes in double, in sample order: the same figures every time
    const double n = double(ds.count * plane);
    for (int64_t c = 0; c < ds.channels && n > 0; ++c) {
      double s = 0, s2 = 0;
      for (int64_t i = 0; i < ds.count; ++i)
        for (int64_t j = 0; j < plane; ++j) s += ds.features[size_t((i * ds.channels + c) * plane + j)];
      const double m = s / n;
      for (int64_t i = 0; i < ds.count; ++i)
        for (int64_t j = 0; j < plane; ++j) {
          const double e = ds.features[size_t((i * ds.channels + c) * plane + j)] - m;
          s2 += e * e;
        }
      mean[size_t(c)] = m;
      stddev[size_t(c)] = std::sqrt(s2 / n);
    }
    return;
  }
  for (int64_t c = 0; c < ds.channels; ++c) {
    // Integer histogram: exact sums, so the statistics do not depend on summation order.
    int64_t hist[256] = {};
    for (int64_t i = 0; i < ds.count; ++i) {
      const uint8_t* p = ds.image(i) + c * plane;
      for (int64_t j = 0; j < plane; ++j) ++hist[p[j]];
    }
    double n = double(ds.count * plane), s = 0, s2 = 0;
    for (int v = 0; v < 256; ++v) {
      s += double(hist[v]) * (v / 255.0);
      s2 += double(hist[v]) * (v / 255.0) * (v / 255.0);
    }
    double m = n > 0 ? s / n : 0.0;
    double var = n > 0 ? std::max(0.0, s2 / n - m * m) : 0.0;
    mean[size_t(c)] = m;
    stddev[size_t(c)] = std::sqrt(var);
  }
}

}  // namespace mixprec

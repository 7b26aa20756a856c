// data_source.cpp: dataset selection for the training loop.
#include "mixprec/train_data.h"

#include <unistd.h>

namespace mixprec::train {

std::string default_data_dir(const std::string& dataset) {
  if (dataset == "fashion-mnist") return "/usr/share/datasets/fashion-mnist";  // Debian package
  if (dataset == "mnist") return "/usr/share/datasets/mnist";
  if (dataset == "kjv") return "data/kjv";  // scripts/prepare-kjv writes data/kjv/kjv.txt
  return "";
}

namespace {

StatusOr<ImageDataset> load_split(const TrainConfig& c, const nn::ModelSpec& spec, Split split) {
  const std::string dir = c.data_dir.empty() ? default_data_dir(c.dataset) : c.data_dir;
  if (c.dataset == "fashion-mnist")
    return load_mnist_like(dir, split, MnistVariant::fashion_mnist);
  if (c.dataset == "mnist") return load_mnist_like(dir, split, MnistVariant::mnist);
  if (c.dataset == "cifar10") {
    if (dir.empty())
      return Status::invalid_argument("--dataset cifar10 needs --data-dir (the folder of "
                                      "data_batch_1.bin .. test_batch.bin)");
    return load_cifar10(dir, split);
  }
  if (c.dataset == "kjv" || c.dataset == "text") {
    // A byte-level language model reads windows of its context + 1 bytes.
    if (spec.height != 1 || spec.channels != 1)
      return Status::invalid_argument("--dataset " + c.dataset + " is text, for a language model (--model gpt-tiny, "
                                      "gpt); model " + spec.name + " reads images");
    std::string file = dir;
    if (c.dataset == "kjv") {
      file = dir + "/kjv.txt";
      if (::access(file.c_str(), F_OK) != 0)
        return Status::not_found("the King James Bible text " + file + " is missing: run scripts/prepare-kjv " +
                                 "(it prints the whole text with Debian's bible-kjv: bible -f \"Gen1:1-Rev22:21\")");
    } else if (file.empty()) {
      return Status::invalid_argument("--dataset text needs --data-dir FILE (a text file, read as bytes)");
    }
    auto d = load_text_windows(file, spec.width, split);
    if (d.is_ok()) d->name = c.dataset;
    return d;
  }
  if (c.dataset == "synthetic") {
    // Shaped like the model's input; test data shares the class prototypes (same seed).
    const int64_t n = split == Split::train ? 6000 : 1000;
    ImageDataset all = make_synthetic(7000, spec.channels, spec.height, spec.width,
                                      int(spec.classes), c.seed + 12345);
    if (split == Split::train) return all.subset(n);
    ImageDataset test = all;
    const int64_t sb = all.sample_bytes();
    test.images.assign(all.images.begin() + 6000 * sb, all.images.end());
    test.labels.assign(all.labels.begin() + 6000, all.labels.end());
    test.count = n;
    return test;
  }
  return Status::invalid_argument("unknown dataset '" + c.dataset +
                                  "' (expected one of: fashion-mnist, mnist, cifar10, synthetic)");
}

Status check_fits(const ImageDataset& d, const nn::ModelSpec& spec) {
  if (d.channels != spec.channels || d.height != spec.height || d.width != spec.width)
    return Status::invalid_argument(
        "dataset " + d.name + " has images of " + std::to_string(d.channels) + "x" +
        std::to_string(d.height) + "x" + std::to_string(d.width) + " but model " + spec.name +
        " expects " + std::to_string(spec.channels) + "x" + std::to_string(spec.height) + "x" +
        std::to_string(spec.width) + " (try --model cnn for 28x28, seed-cnn for 3x32x32)");
  if (d.num_classes > spec.classes)
    return Status::invalid_argument("dataset " + d.name + " has " + std::to_string(d.num_classes) +
                                    " classes, model has " + std::to_string(spec.classes));
  return Status::ok();
}

// The normalisation a run recorded (config.norm_mean/norm_std) replaces the dataset's own,
// so eval of a checkpoint feeds the model inputs scaled exactly as in training.
Status apply_normalisation(ImageDataset& d, const TrainConfig& c) {
  if (c.norm_mean.empty() && c.norm_std.empty()) return Status::ok();
  d.mean = c.norm_mean;
  d.stddev = c.norm_std;
  Status s = d.validate();
  if (!s.is_ok())
    return Status::invalid_argument("configuration: norm_mean/norm_std do not fit dataset " + d.name + ": " +
                                    s.message());
  return Status::ok();
}

}  // namespace

StatusOr<DataSplits> load_data(const TrainConfig& config, const nn::ModelSpec& spec) {
  auto train = load_split(config, spec, Split::train);
  if (!train.is_ok()) return train.status();
  auto test = load_split(config, spec, Split::test);
  if (!test.is_ok()) return test.status();
  MIXPREC_RETURN_IF_ERROR(check_fits(*train, spec));
  MIXPREC_RETURN_IF_ERROR(check_fits(*test, spec));
  MIXPREC_RETURN_IF_ERROR(apply_normalisation(*train, config));
  MIXPREC_RETURN_IF_ERROR(apply_normalisation(*test, config));
  DataSplits s;
  s.train = std::make_shared<ImageDataset>(config.train_subset >= 0 ? train->subset(config.train_subset)
                                                                    : std::move(train).value());
  s.test = std::make_shared<ImageDataset>(config.test_subset >= 0 ? test->subset(config.test_subset)
                                                                  : std::move(test).value());
  if (s.train->count == 0) return Status::invalid_argument("the training set is empty");
  return s;
}

}  // namespace mixprec::train

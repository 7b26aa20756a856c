// data_source.cpp: dataset selection for the training loop.
#include "mixprec/train/train_data.h"

#include <sys/stat.h>
#include <unistd.h>

#include <functional>

#include "mixprec/nn/model_file.h"

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
                                      "gpt, or a model file ending in lm_head); model " + spec.name + " reads images");
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
                                  "' (expected one of: fashion-mnist, mnist, cifar10, synthetic, folder, kjv, text)");
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

using Splits = std::pair<ImageDataset, ImageDataset>;

// The data's own test split when it has one (test_path names it, load_test reads it with the
// training split at hand), else --val-split's share of the training data; either without the
// other is a usage error. `missing` says what a test split would have been.
StatusOr<Splits> with_test_split(const TrainConfig& c, ImageDataset train, const std::string& test_path,
                                 const std::string& missing,
                                 const std::function<StatusOr<ImageDataset>(const ImageDataset&)>& load_test) {
  if (test_path.empty()) {
    if (c.val_split <= 0)
      return Status::invalid_argument("--data-dir " + c.data_dir + " has no " + missing +
                                      ": pass --val-split 0.1 to hold out 10% of it for evaluation");
    return split_off(train, c.val_split);
  }
  if (c.val_split > 0)
    return Status::invalid_argument("--val-split: " + test_path + " is the test split already (--val-split is for "
                                    "data without one)");
  auto test = load_test(train);
  if (!test.is_ok()) return test.status();
  return std::make_pair(std::move(train), std::move(test).value());
}

// --dataset folder: DIR/train/<class>/ and DIR/test/<class>/ (or DIR/val/), or DIR/<class>/
// alone with --val-split. A run that recorded its classes and channels (resume, eval) reads
// the folders with those, so labels and input keep their meaning.
StatusOr<Splits> load_folder(const TrainConfig& c) {
  const std::string& dir = c.data_dir;
  if (dir.empty())
    return Status::invalid_argument("--dataset folder needs --data-dir DIR: DIR/<class>/<image>.png|.jpg with "
                                    "--val-split, or DIR/train/<class>/ and DIR/test/<class>/");
  if (!is_directory(dir)) return Status::not_found("--data-dir " + dir + ": no such folder");
  std::string train_dir = dir, test_dir;
  if (is_directory(dir + "/train")) {
    train_dir = dir + "/train";
    for (const char* t : {"/test", "/val"})
      if (test_dir.empty() && is_directory(dir + t)) test_dir = dir + t;
  }
  BadSamples bad{.skip = c.skip_bad};
  auto train = load_image_folder(train_dir, c.class_names, c.input_channels, &bad);
  if (!train.is_ok()) return train.status();
  train->skipped = bad;
  return with_test_split(c, std::move(train).value(), test_dir, "test/ (or val/) folder",
                         [&](const ImageDataset& t) -> StatusOr<ImageDataset> {
                           BadSamples test_bad{.skip = c.skip_bad};
                           auto test = load_image_folder(test_dir, t.class_names, t.channels, &test_bad);
                           if (test.is_ok()) test->skipped = test_bad;
                           return test;
                         });
}

// --dataset csv: FILE.csv with --val-split, or DIR/train.csv and DIR/test.csv. The test file
// (and a resumed run) reads the training file's feature columns by name and its classes.
StatusOr<Splits> load_csv(const TrainConfig& c) {
  const std::string& path = c.data_dir;
  if (path.empty())
    return Status::invalid_argument("--dataset csv needs --data-dir FILE.csv (with --val-split) or a folder of "
                                    "train.csv and test.csv");
  std::string train_file = path, test_file;
  if (is_directory(path)) {
    train_file = path + "/train.csv";
    test_file = path + "/test.csv";
    if (::access(train_file.c_str(), F_OK) != 0) return Status::not_found("--data-dir " + path + ": no train.csv in it");
    if (::access(test_file.c_str(), F_OK) != 0) test_file.clear();
  }
  // With --text-column the texts are the samples (byte ids), else the numeric columns.
  auto as_dataset = [&](const CsvTable& table, const std::string& file, const std::vector<std::string>& classes,
                        int num_classes) {
    return c.text_column.empty() ? table_dataset(table, file, classes, num_classes)
                                 : text_table_dataset(table, file, c.max_tokens, classes, num_classes);
  };
  BadSamples bad{.skip = c.skip_bad};
  auto train_table = read_csv_table(train_file, c.label_column, c.feature_names, c.text_column, &bad);
  if (!train_table.is_ok()) return train_table.status();
  auto train = as_dataset(*train_table, train_file, c.class_names, int(c.num_classes));
  if (!train.is_ok()) return train.status();
  train->skipped = bad;
  return with_test_split(c, std::move(train).value(), test_file, "test file (a folder's test.csv)",
                         [&](const ImageDataset& t) -> StatusOr<ImageDataset> {
                           BadSamples test_bad{.skip = c.skip_bad};
                           auto test_table = read_csv_table(test_file, c.label_column, train_table->feature_names,
                                                            c.text_column, &test_bad);
                           if (!test_table.is_ok()) return test_table.status();
                           auto test = as_dataset(*test_table, test_file, t.class_names, t.num_classes);
                           if (test.is_ok()) test->skipped = test_bad;
                           return test;
                         });
}

// --dataset npy: DIR/x_train.npy + y_train.npy, and x_test.npy + y_test.npy or --val-split.
StatusOr<Splits> load_npy_pairs(const TrainConfig& c) {
  const std::string& dir = c.data_dir;
  if (dir.empty())
    return Status::invalid_argument("--dataset npy needs --data-dir DIR holding x_train.npy and y_train.npy (and "
                                    "x_test.npy and y_test.npy, or --val-split)");
  if (!is_directory(dir)) return Status::not_found("--data-dir " + dir + ": no such folder");
  auto train = npy_dataset(dir + "/x_train.npy", dir + "/y_train.npy", int(c.num_classes));
  if (!train.is_ok()) return train.status();
  const std::string test_x = dir + "/x_test.npy";
  const bool has_test = ::access(test_x.c_str(), F_OK) == 0;
  return with_test_split(c, std::move(train).value(), has_test ? test_x : "", "x_test.npy",
                         [&](const ImageDataset& t) -> StatusOr<ImageDataset> {
                           auto test = npy_dataset(test_x, dir + "/y_test.npy", t.num_classes);
                           if (!test.is_ok()) return test.status();
                           if (test->sample_bytes() != t.sample_bytes() || test->height != t.height ||
                               test->tabular != t.tabular)
                             return Status::data_loss(test_x + ": samples of another shape or dtype than "
                                                               "x_train.npy's");
                           return test;
                         });
}

// The model takes the images' size, channels and classes (a table's columns).
StatusOr<nn::ModelSpec> fit_model_to(nn::ModelSpec spec, const ImageDataset& d) {
  if (spec.language_model)
    return Status::invalid_argument("model " + spec.name + " is a language model; --dataset " + d.name +
                                    " is not text");
  if (d.tokens) {  // texts: a model file that starts with an embedding reads their byte ids
    if (spec.file_text.empty())
      return Status::invalid_argument("--text-column: the texts of " + d.source + " need a model file that starts "
                                      "with an embedding layer (e.g. --model models/text-encoder.yaml); model " +
                                      spec.name + " reads " + (spec.name == "mlp" ? "numbers" : "images"));
    spec.token_input = true;
    spec.channels = 1, spec.height = 1, spec.width = d.width, spec.classes = d.num_classes;
    return spec;
  }
  const bool table = d.height == 1 && d.width == 1;
  if (table && spec.name != "mlp" && spec.file_text.empty())
    return Status::invalid_argument("--dataset " + d.name + " is a table of " + std::to_string(d.channels) +
                                    " columns: use --model mlp or a model file (model " + spec.name + " reads images)");
  if (!table && (d.height < 4 || d.width < 4))
    return Status::invalid_argument("dataset " + d.source + ": images of " + std::to_string(d.width) + "x" +
                                    std::to_string(d.height) + " pixels; the image models need at least 4x4");
  if (spec.name == "transformer" && d.channels != 1)
    return Status::invalid_argument("model transformer reads one-channel images (rows as tokens); " + d.source +
                                    " is in colour");
  spec.channels = d.channels;
  spec.height = d.height;
  spec.width = d.width;
  spec.classes = d.num_classes;
  return spec;
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

StatusOr<nn::ModelSpec> model_spec_of(const TrainConfig& config) {
  StatusOr<nn::ModelSpec> spec = Status::internal("unset");
  if (nn::is_model_file(config.model)) {
    // A run's recorded text first: the file may have changed or gone since.
    std::string text = config.model_text;
    if (text.empty()) {
      auto read = nn::read_model_file(config.model);
      if (!read.is_ok()) return Status::invalid_argument("--model " + config.model + ": " + read.status().message());
      text = *read;
    }
    // Until the data says otherwise, the Fashion-MNIST geometry (what --dataset synthetic
    // makes), or a language model's window.
    spec = nn::model_file_spec(config.model, text);
  } else {
    spec = nn::model_spec(config.model);
  }
  if (!spec.is_ok()) return spec.status();
  if (config.input_channels > 0) spec->channels = config.input_channels;
  if (config.input_height > 0) spec->height = config.input_height;
  if (config.input_width > 0) spec->width = config.input_width;
  if (config.num_classes > 0) spec->classes = config.num_classes;
  spec->token_input = !config.text_column.empty();
  return spec;
}

void record_geometry(TrainConfig& config, const DataSplits& data) {
  config.model_text = data.spec.file_text;
  if (config.dataset != "folder" && config.dataset != "csv" && config.dataset != "npy" && data.spec.file_text.empty())
    return;
  config.input_channels = data.spec.channels;
  config.input_height = data.spec.height;
  config.input_width = data.spec.width;
  config.num_classes = data.spec.classes;
  config.class_names = data.train->class_names;
  config.feature_names = data.train->feature_names;
}

StatusOr<std::shared_ptr<const ImageDataset>> load_labelled_set(const TrainConfig& c, const nn::ModelSpec& spec) {
  const std::string& path = c.data_dir;
  StatusOr<ImageDataset> set = Status::internal("not loaded");
  BadSamples bad{.skip = c.skip_bad};
  if (c.dataset == "folder") {
    if (!is_directory(path)) return Status::not_found("--data-dir " + path + ": no such folder");
    // A train/test layout (or a folder holding only its test/) is scored on its test split;
    // any other folder whole, one subfolder per class.
    std::string dir = path;
    for (const char* t : {"/test", "/val"})
      if (dir == path && is_directory(path + t)) dir = path + t;
    if (dir == path && is_directory(path + "/train"))
      return Status::invalid_argument("--data-dir " + path + " holds train/ but no test/ (or val/): eval scores a "
                                      "labelled set; pass --data-dir " + path + "/train to score the training images");
    set = load_image_folder(dir, c.class_names, c.input_channels, &bad);
  } else if (c.dataset == "csv") {
    std::string file = path;
    if (is_directory(path)) {
      file = path + "/test.csv";
      if (::access(file.c_str(), F_OK) != 0)
        return Status::not_found("--data-dir " + path + ": no test.csv in it (or pass the CSV file itself)");
    }
    auto table = read_csv_table(file, c.label_column, c.feature_names, c.text_column, &bad);
    if (!table.is_ok()) return table.status();
    set = c.text_column.empty() ? table_dataset(*table, file, c.class_names, int(c.num_classes))
                                : text_table_dataset(*table, file, c.max_tokens, c.class_names, int(c.num_classes));
  } else {
    return Status::invalid_argument("--dataset " + c.dataset + ": a whole labelled set is read for folder and csv; " +
                                    "the other datasets have their own test split");
  }
  if (!set.is_ok()) return set.status();
  set->skipped = bad;
  MIXPREC_RETURN_IF_ERROR(check_fits(*set, spec));
  MIXPREC_RETURN_IF_ERROR(apply_normalisation(*set, c));
  if (set->count == 0) return Status::invalid_argument("--data-dir " + path + ": no labelled samples in it");
  return std::make_shared<const ImageDataset>(std::move(set).value());
}

StatusOr<DataSplits> load_data(const TrainConfig& config, const nn::ModelSpec& model) {
  nn::ModelSpec spec = model;
  StatusOr<ImageDataset> train = Status::internal("not loaded"), test = Status::internal("not loaded");
  if (config.dataset == "folder" || config.dataset == "csv" || config.dataset == "npy") {
    auto both = config.dataset == "folder" ? load_folder(config)
                : config.dataset == "csv"  ? load_csv(config)
                                           : load_npy_pairs(config);
    if (!both.is_ok()) return both.status();
    auto fitted = fit_model_to(spec, both->first);
    if (!fitted.is_ok()) return fitted.status();
    // A run that recorded its geometry (a resume, eval) needs the same images again.
    if (config.input_height > 0 && (fitted->height != config.input_height || fitted->width != config.input_width))
      return Status::invalid_argument("--data-dir " + config.data_dir + ": images of " + std::to_string(fitted->width) +
                                      "x" + std::to_string(fitted->height) + " pixels, but the run was trained on " +
                                      std::to_string(config.input_width) + "x" + std::to_string(config.input_height));
    spec = *fitted;
    train = std::move(both->first);
    test = std::move(both->second);
  } else {
    if (config.val_split > 0)
      return Status::invalid_argument("--val-split: dataset " + config.dataset + " has a test split (--val-split is "
                                      "for an image folder without one)");
    train = load_split(config, spec, Split::train);
    if (!train.is_ok()) return train.status();
    if (!spec.file_text.empty() && !train->text) {  // a model file takes the data's geometry
      auto fitted = fit_model_to(spec, *train);
      if (!fitted.is_ok()) return fitted.status();
      spec = *fitted;
    }
    if (!spec.file_text.empty() && train->text && !spec.language_model)
      return Status::invalid_argument("--model " + spec.name + ": a classifier; --dataset " + config.dataset +
                                      " is text for a language model: a model file for it ends in lm_head "
                                      "(models/gpt.yaml), or use --model gpt-tiny or gpt");
    test = load_split(config, spec, Split::test);
    if (!test.is_ok()) return test.status();
  }
  MIXPREC_RETURN_IF_ERROR(check_fits(*train, spec));
  MIXPREC_RETURN_IF_ERROR(check_fits(*test, spec));
  MIXPREC_RETURN_IF_ERROR(apply_normalisation(*train, config));
  MIXPREC_RETURN_IF_ERROR(apply_normalisation(*test, config));
  DataSplits s;
  s.spec = spec;
  s.train = std::make_shared<ImageDataset>(config.train_subset >= 0 ? train->subset(config.train_subset)
                                                                    : std::move(train).value());
  s.test = std::make_shared<ImageDataset>(config.test_subset >= 0 ? test->subset(config.test_subset)
                                                                  : std::move(test).value());
  if (s.train->count == 0) return Status::invalid_argument("the training set is empty");
  return s;
}

}  // namespace mixprec::train

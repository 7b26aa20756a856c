// data.h: image datasets (IDX / IDX.gz as MNIST and Fashion-MNIST ship them, CIFAR-10
// binary batches, synthetic data) and a prefetching, seeded-shuffle DataLoader.
//
// Readers validate everything they read: a corrupt, truncated or mislabelled file gives a
// Status (data_loss / not_found / io_error) whose message names the file, the field, the
// byte offset and the expected and actual values. Claimed sizes are checked against limits
// before anything is allocated, so a hostile header or a gzip bomb cannot exhaust memory.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/core/status.h"
#include "mixprec/core/tensor.h"

namespace mixprec {

enum class Split : uint8_t { train, test };
const char* split_name(Split split);  // "train", "test"

// Limits a reader accepts before allocating (why: a header is untrusted input).
inline constexpr int64_t kMaxImageSide = 1024;              // IDX rows / cols
inline constexpr int64_t kMaxDatasetBytes = int64_t(1) << 30;  // pixels of one file

// N images of C x H x W unsigned bytes plus one label byte each.
// --skip-bad: a sample the reader cannot use (an unreadable image, one of another size, a
// ragged CSV row, a cell that is not a finite number, a text with a NUL byte) is skipped and
// counted here instead of ending the load. Problems with the whole file or folder (no header,
// no class folders, a missing column) still fail.
struct BadSamples {
  bool skip = false;       // false: the first bad sample is the error, as without the flag
  int64_t count = 0;       // samples skipped
  std::string first;       // the first one's message (file, row or image, reason)
  void record(const std::string& why) {
    if (count++ == 0) first = why;
  }
  // "; 3 bad samples skipped (first: t.csv: row 4 has 2 fields, the header has 3)", or "".
  std::string summary() const;
};

struct ImageDataset {
  int64_t count = 0, channels = 0, height = 0, width = 0;
  std::vector<uint8_t> images;  // [count, C, H, W], row-major (CHW per sample)
  std::vector<uint8_t> labels;  // [count], each < num_classes
  int num_classes = 0;
  std::string name;             // "fashion-mnist", "mnist", "cifar10", "synthetic", "idx"
  std::string source;           // the files or parameters it came from (for messages)
  // Per-channel normalisation the loader applies: x = (pixel / 255 - mean[c]) / stddev[c].
  std::vector<double> mean, stddev;
  // Samples are windows of `width` bytes of a text (a language model's data), not images:
  // the loader gives each window's first width-1 bytes as tokens and the next byte at every
  // position as labels (load_text_windows).
  bool text = false;
  // A language model's text read in place from a memory-mapped file (load_text_windows):
  // `images` stays empty, `labels` too (the targets are the next bytes), and sample i is the
  // window of `width` bytes at corpus + corpus_begin + i * (width - 1) (the fixed windows, as
  // for a copied text). A shuffling loader draws every training window at a seeded random
  // offset in [corpus_begin, corpus_end - width] instead (text_window_start). Null: the
  // samples are in `images`. Only load_text_windows sets it: the loader drops the pages it
  // has copied from the process (MADV_DONTNEED), which for anything but a read-only file
  // mapping would erase the bytes.
  std::shared_ptr<const uint8_t> corpus;
  int64_t corpus_begin = 0, corpus_end = 0;
  // Samples are short texts to classify (a CSV's text column): each is `width` byte ids in
  // `images` (channels = height = 1), the text's bytes then 0s (byte 0 is the padding, never
  // a text byte); the loader gives them as i64 token ids [batch, width], one label per sample.
  bool tokens = false;
  // The name of each class (an image folder's subfolder names), or empty: classes are numbers.
  std::vector<std::string> class_names;
  // A table of numbers (CSV), not pixels: each sample's C x H x W values are floats in
  // `features` (images stays empty), normalised x = (v - mean[c]) / stddev[c] without the
  // / 255; a table of F columns is F channels of 1 x 1, so each column has its own mean/std.
  bool tabular = false;
  std::vector<float> features;
  std::vector<std::string> feature_names;  // a table's columns, one per channel
  BadSamples skipped;                       // --skip-bad: what the reader left out

  int64_t sample_bytes() const { return channels * height * width; }  // values per sample
  const float* sample_features(int64_t i) const { return features.data() + i * sample_bytes(); }
  const uint8_t* image(int64_t i) const {
    return corpus ? corpus.get() + corpus_begin + i * (width - 1) : images.data() + i * sample_bytes();
  }
  // The first min(first_n, count) samples (negative first_n gives an empty dataset).
  ImageDataset subset(int64_t first_n) const;
  // Samples [begin, end) (clamped to [0, count]), with everything else of this dataset.
  ImageDataset slice(int64_t begin, int64_t end) const;
  // Internal consistency: vector sizes, label range, and when mean/stddev are set, one
  // finite value per channel with stddev > 0.
  Status validate() const;
};

// ---- single files ----
struct IdxImages {
  int64_t count = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // [count, rows, cols]
};
// IDX unsigned-byte 3-D images (magic 0x00000803). Plain or gzip (detected by the magic
// bytes 1f 8b, not by the name). Rejects bad magic, non-square or out-of-range dims,
// truncated data and trailing bytes.
StatusOr<IdxImages> read_idx_images(const std::string& path);
// IDX unsigned-byte 1-D labels (magic 0x00000801), each < num_classes.
StatusOr<std::vector<uint8_t>> read_idx_labels(const std::string& path, int num_classes = 10);
// One CIFAR-10 binary batch: records of 1 label byte + 3072 pixel bytes (3 x 32 x 32, CHW).
StatusOr<ImageDataset> read_cifar10_batch(const std::string& path);

// ---- datasets ----
enum class MnistVariant : uint8_t {
  automatic,      // fashion_mnist if the directory path contains "fashion", else mnist
  mnist,          // mean 0.1307, std 0.3081
  fashion_mnist,  // mean 0.2860, std 0.3530
};
// Finds {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] in dir (plain preferred).
StatusOr<ImageDataset> load_mnist_like(const std::string& dir, Split split,
                                       MnistVariant variant = MnistVariant::automatic);
// data_batch_1..5.bin (train) or test_batch.bin (test), in dir or dir/cifar-10-batches-bin.
StatusOr<ImageDataset> load_cifar10(const std::string& dir, Split split);
// Learnable synthetic images: each class has a fixed random prototype; a sample is its
// class prototype blended with uniform noise. Deterministic in seed (own RNG arithmetic, no
// implementation-defined std distributions). mean/stddev are the data's own statistics.
ImageDataset make_synthetic(int64_t count, int64_t channels, int64_t height, int64_t width,
                            int num_classes, uint64_t seed);
// Exact per-channel mean and std of pixel / 255 over the whole dataset.
void compute_channel_stats(const ImageDataset& dataset, std::vector<double>& mean,
                           std::vector<double>& stddev);
// The statistics a dataset of the user's normalises by: compute_channel_stats, with a
// constant channel's std of 0 replaced by 1 (nothing to scale; dividing by 0 gives NaN).
void compute_normalisation(const ImageDataset& dataset, std::vector<double>& mean, std::vector<double>& stddev);

// ---- image folders (the user's own images) ----
// DIR/<class>/*.png|*.jpg|*.jpeg, one subfolder per class, as torchvision's ImageFolder: the
// sorted subfolder names are classes 0..K-1 (pass `classes` to use another split's, so a
// test folder maps its classes like the train folder; a class it lacks is allowed, one
// train lacks is an error). Other files and hidden entries are ignored (counted in
// `source`). Every image must have the size of the first (no resampling: the error names
// the file and both sizes). Channels: 3 if any image of the folder is in colour, else 1;
// `channels` > 0 forces it (RGB to gray by ITU-R 601 luma, gray to RGB by copying). Mean and
// stddev are the folder's own. Errors name the file or folder: data_loss for an unreadable
// image or a bad layout (sizes, empty or unknown class), not_found for a missing folder.
// With `bad` skipping, an unreadable image or one of another size is recorded and left out.
StatusOr<ImageDataset> load_image_folder(const std::string& dir, const std::vector<std::string>& classes = {},
                                         int64_t channels = 0, BadSamples* bad = nullptr);
// The dataset split in two by a fixed permutation (shuffled_order with seed 0): `fraction`
// of the samples (at least one) go to .second, the rest, in their order, to .first.
StatusOr<std::pair<ImageDataset, ImageDataset>> split_off(const ImageDataset& dataset, double fraction);

// ---- text (byte-level language modelling) ----
// The largest text file read (1 TiB): far beyond any disk here, and small enough that window
// counts and offsets times a shard count stay far from int64's range.
inline constexpr int64_t kMaxTextBytes = int64_t(1) << 40;
// The bytes of a text file (any encoding; UTF-8 is read byte by byte, vocabulary 256) as
// windows of `window` bytes, mapped from the file and never copied (ImageDataset::corpus),
// so a corpus bigger than memory trains in the memory of a small one. The last
// `val_fraction` of the file is the test split, the rest the train split. A split has
// (bytes - 1) / (window - 1) samples: its fixed windows, overlapping by one byte so every
// byte but the first is a prediction target exactly once; an epoch of a shuffling loader is
// as many windows at random offsets (text_window_start). Errors: not_found / io_error naming
// the file; data_loss for a FIFO, directory or device; invalid_argument when a split is
// shorter than one window or the file exceeds kMaxTextBytes.
StatusOr<ImageDataset> load_text_windows(const std::string& path, int64_t window, Split split,
                                         double val_fraction = 0.1);
// Where the training window at `position` of epoch `epoch` starts: uniform over [begin, end -
// window] (end - begin >= window), a function of (seed, epoch, position) alone (a
// counter-based hash, SplitMix64's finaliser, with unbiased rejection). The loader's position
// is batch index x global batch size + row, so a resumed run, which restarts its epoch at a
// batch index, draws exactly the windows an uninterrupted run would have drawn, with no state
// beyond the checkpoint's (epoch, batch).
int64_t text_window_start(uint64_t seed, int64_t epoch, int64_t position, int64_t begin, int64_t end, int64_t window);

// ---- tables (CSV) ----
struct CsvTable {
  std::vector<std::string> feature_names;  // the columns read as features, in file order
  int64_t rows = 0;
  std::vector<float> features;             // [rows, feature_names.size()]
  std::vector<std::string> texts;          // [rows]: the text column's fields, when one was asked for
  std::vector<std::string> labels;         // [rows], as written; empty without a label column
  std::vector<int64_t> line_of_row;        // [rows]: the file's line number of each row, for messages
};
// A CSV text with a header row (RFC 4180 quoting; a quoted field may hold commas and "",
// not line breaks; CRLF accepted; blank lines skipped). `label_column` names the label
// column ("" for none: predict); the feature columns are `feature_names` when given (in that
// order, found by name: how a test file or predict input follows the training file), else
// every other column. Every feature must be a finite number. Errors are invalid_argument
// for a label column that is not there (with the header's names and a suggestion), else
// data_loss naming `source`, the row (1-based, the header is row 1), the column and the
// expected value. At most 65536 columns.
// With `text_column`, that column is read as text (into texts; any bytes but NUL) and no
// column as features.
// With `bad` skipping, a bad row is recorded there and left out.
StatusOr<CsvTable> parse_csv_table(std::string_view text, const std::string& source, const std::string& label_column,
                                   const std::vector<std::string>& feature_names = {},
                                   const std::string& text_column = "", BadSamples* bad = nullptr);
// The same for a file (regular files only, at most kMaxDatasetBytes).
StatusOr<CsvTable> read_csv_table(const std::string& path, const std::string& label_column,
                                  const std::vector<std::string>& feature_names = {},
                                  const std::string& text_column = "", BadSamples* bad = nullptr);
// A table as a dataset of F channels of 1 x 1 (tabular). Labels: when every label is an
// integer in 0..255 they are the classes (num_classes = largest + 1, unless `class_names` or
// `num_classes` say more), else the sorted distinct labels are the class names. Pass a
// training split's class_names/num_classes for its test split: a label outside them is an
// error naming the row.
StatusOr<ImageDataset> table_dataset(const CsvTable& table, const std::string& source,
                                     const std::vector<std::string>& class_names = {}, int num_classes = 0);
// A table read with a text column as a dataset of `tokens`: each text's first `max_tokens`
// bytes, 0-padded (longer texts are cut; how many is in `source`). Labels as table_dataset.
StatusOr<ImageDataset> text_table_dataset(const CsvTable& table, const std::string& source, int64_t max_tokens,
                                          const std::vector<std::string>& class_names = {}, int num_classes = 0);

// ---- NumPy arrays ----
// x (.npy of shape (N, C, H, W), (N, H, W) or (N, F)) and y (.npy of shape (N,), class
// numbers 0..255, any integer or integral float dtype) as a dataset. A uint8 x is pixels (as
// images: / 255, then per-channel mean/std); any other dtype is numbers kept as float32
// (tabular storage: per-channel mean/std of the raw values; a (N, F) table is F channels of
// 1 x 1). Pass a training split's num_classes for its test split. Errors name the file and
// the element: data_loss for a bad shape, a non-finite number or a label out of range.
StatusOr<ImageDataset> npy_dataset(const std::string& x_path, const std::string& y_path, int num_classes = 0);

// ---- augmentation (training images) ----
struct Augmentation {
  // torchvision's RandomCrop(size, padding=crop_padding): pad with zero pixels, crop the
  // original size back at a random offset (0: off).
  int64_t crop_padding = 0;
  bool hflip = false;  // RandomHorizontalFlip(p=0.5), after the crop
  bool active() const { return crop_padding > 0 || hflip; }
};
struct AugmentDraw {
  int64_t dy = 0, dx = 0;  // crop offset into the padded image, in [0, 2 * crop_padding]
  bool flip = false;
};
// The draw for dataset sample `index` in `epoch`: a function of (seed, epoch, index) alone.
AugmentDraw augment_draw(const Augmentation& augmentation, uint64_t seed, int64_t epoch, int64_t index);
// dst (C x H x W pixels) = src cropped from its zero-padded version at (dy, dx), then flipped.
void augment_image(const uint8_t* src, int64_t channels, int64_t height, int64_t width, int64_t padding,
                   const AugmentDraw& draw, uint8_t* dst);

// ---- loader ----
struct DataLoaderOptions {
  int64_t batch_size = 64;
  bool shuffle = true;
  bool drop_last = false;  // drop the final partial batch
  uint64_t seed = 0;       // shuffle seed; epoch e's order depends only on (seed, e)
  int prefetch = 2;        // batches built ahead by a background thread; 0 = synchronous
  bool normalize = true;   // (x/255 - mean)/std; false gives x/255 in [0, 1]
  // Images only: each sample augmented by augment_draw(augment, seed, epoch, its index).
  Augmentation augment{};
  // Data-parallel training: this loader serves shard `shard_rank` of `shard_count`, the
  // positions rank, rank + count, ... of each epoch's order (PyTorch's DistributedSampler),
  // batch_size samples per batch (the global batch is batch_size x shard_count). Global
  // batch k is then exactly batch k of one loader with batch_size x shard_count. Every shard
  // has the same number of batches: the final partial global batch is split over the shards
  // when each gets at least one sample of it, and dropped otherwise (docs/distributed.md).
  int shard_rank = 0;
  int shard_count = 1;
};

struct Batch {
  Tensor images;      // [B, C, H, W] f32, contiguous (text: tokens [B, L-1] i64)
  Tensor labels;      // [B] i64 (text: the next byte at each position, [B, L-1] i64)
  int64_t index = 0;  // position of this batch within its epoch
  int64_t epoch = 0;
};

// The sample order of one epoch: a Fisher-Yates shuffle driven by std::mt19937_64 seeded
// from (seed, epoch) through std::seed_seq, with our own bounded draws, so the order is the
// same on every standard library. Independent of manual_seed().
std::vector<int64_t> shuffled_order(int64_t n, uint64_t seed, int64_t epoch);

// Iterates one epoch at a time:
//   loader.set_epoch(e);                  // or begin_epoch(e, start_batch) to resume
//   while (auto batch = loader.next()) ...
// Batches are built on a background thread (bounded queue of `prefetch` batches) and are
// charged to MemoryCategory::data. Destroying the loader mid-epoch stops the thread.
// One thread drives a loader (next / begin_epoch / set_epoch are not mutually thread-safe).
// Throws Error(invalid_argument) from the constructor on bad options or a bad dataset.
class DataLoader {
 public:
  DataLoader(std::shared_ptr<const ImageDataset> dataset, DataLoaderOptions options = {});
  DataLoader(ImageDataset dataset, DataLoaderOptions options = {});
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  int64_t num_batches() const;
  int64_t num_samples() const;
  const DataLoaderOptions& options() const;
  const ImageDataset& dataset() const;

  // The next next() starts epoch `epoch` from its first batch.
  void set_epoch(int64_t epoch);
  // Starts (or restarts) epoch `epoch` at batch `start_batch` now; any epoch in progress is
  // abandoned. start_batch == num_batches() gives an empty remainder. Errors:
  // invalid_argument when epoch < 0 or start_batch is outside [0, num_batches()].
  Status begin_epoch(int64_t epoch, int64_t start_batch = 0);
  // The next batch of the current epoch, or nullopt once the epoch is exhausted (until
  // set_epoch / begin_epoch). Before any set_epoch / begin_epoch, epoch 0 starts.
  std::optional<Batch> next();

  int64_t epoch() const;     // the epoch next() serves
  int64_t position() const;  // index of the batch next() returns next (for checkpoints)
  // The sample order epoch `epoch` uses (identity when shuffle is off): this loader's shard
  // of it when sharded. For a mapped text (ImageDataset::corpus) the start offsets of the
  // epoch's windows into the file instead (the loader itself computes them batch by batch:
  // this vector is for tests, and has one entry per window of the epoch).
  std::vector<int64_t> epoch_order(int64_t epoch) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace mixprec

// data_loader.cpp: batches of normalised f32 images built ahead of the training loop by one
// background thread, through a bounded queue. An epoch's order depends only on (seed,
// epoch), and an epoch can start at any batch, so a resumed run sees exactly the batches
// an uninterrupted run would have seen. A mapped text's training windows are drawn at
// offsets that are a function of (seed, epoch, position) (text_window_start): the same holds
// for them with no order stored at all.
#include <algorithm>
#include <array>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "io/mapped_file.h"
#include "mixprec/data/data.h"

namespace mixprec {

std::vector<int64_t> shuffled_order(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(size_t(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i) order[size_t(i)] = i;
  // seed_seq mixes all 128 bits, so (seed, epoch) and (seed + 1, epoch - 1) differ.
  std::seed_seq seq{uint32_t(seed), uint32_t(seed >> 32), uint32_t(uint64_t(epoch)),
                    uint32_t(uint64_t(epoch) >> 32)};
  std::mt19937_64 rng(seq);
  for (int64_t i = n - 1; i > 0; --i) {
    // Unbiased draw in [0, i]: reject the top sliver that would favour small values.
    uint64_t range = uint64_t(i) + 1;
    uint64_t limit = UINT64_MAX - UINT64_MAX % range;
    uint64_t x;
    do x = rng(); while (x >= limit);
    std::swap(order[size_t(i)], order[size_t(x % range)]);
  }
  return order;
}

struct DataLoader::State {
  std::shared_ptr<const ImageDataset> ds;
  DataLoaderOptions opt;
  int64_t num_batches = 0;
  int64_t covered = 0;  // positions of an epoch's order that batches use (all shards together)
  int64_t samples = 0;  // of them, this shard's
  std::vector<std::array<float, 256>> lut;  // per channel: pixel byte -> normalised f32

  // Consumer side (the thread calling next()).
  bool started = false;
  int64_t epoch = 0;
  int64_t next_index = 0;      // batch next() returns next
  std::vector<int64_t> order;  // sample order of `epoch` (empty for a mapped text); read-only while a producer runs

  // Producer side, guarded by mu.
  std::thread producer;
  std::mutex mu;
  std::condition_variable not_full, not_empty;
  std::deque<Batch> queue;
  bool stop = false, done = false;
  std::exception_ptr error;

  Batch build(int64_t b) const;
  void produce(int64_t from);
  void stop_producer();
};

// A mapped text's window at this shard's position `local` of the epoch: its position in the
// whole epoch (every shard_count-th, from shard_rank, as epoch_order shards) keys the draw,
// so global batch k holds the same windows however many processes share it.
namespace {
int64_t window_start(const ImageDataset& d, const DataLoaderOptions& opt, int64_t epoch, int64_t local) {
  const int64_t position = local * opt.shard_count + opt.shard_rank;
  if (!opt.shuffle) return d.corpus_begin + position * (d.width - 1);  // the fixed windows, in order
  return text_window_start(opt.seed, epoch, position, d.corpus_begin, d.corpus_end, d.width);
}
}  // namespace

// images[i] = lut[c][pixel] for sample order[b * B + i]; labels widened to i64.
Batch DataLoader::State::build(int64_t b) const {
  MemoryCategoryGuard guard(MemoryCategory::data);
  const ImageDataset& d = *ds;
  const int64_t begin = b * opt.batch_size;
  const int64_t end = std::min(begin + opt.batch_size, samples);
  const int64_t B = end - begin, plane = d.height * d.width;
  Batch out;
  out.index = b;
  out.epoch = epoch;
  if (d.text) {  // a language model's tokens and next-byte targets
    const int64_t L = d.sample_bytes();
    out.images = Tensor::empty({B, L - 1}, DType::i64);
    out.labels = Tensor::empty({B, L - 1}, DType::i64);
    int64_t* tokens = out.images.data_ptr<int64_t>();
    int64_t* next = out.labels.data_ptr<int64_t>();
    for (int64_t i = 0; i < B; ++i) {
      const uint8_t* src = d.corpus ? d.corpus.get() + window_start(d, opt, epoch, begin + i) : d.image(order[size_t(begin + i)]);
      for (int64_t j = 0; j + 1 < L; ++j) {
        *tokens++ = src[j];
        *next++ = src[j + 1];
      }
      // Copied: its pages leave the resident set, which then stays the size of a batch's
      // windows however much of a big file an epoch visits (the page cache keeps them).
      if (d.corpus) io::release_pages(src, size_t(L), d.corpus.get(), size_t(d.corpus_end));
    }
    return out;
  }
  if (d.tokens) {  // texts to classify: their byte ids (0 = padding), one label each
    const int64_t L = d.sample_bytes();
    out.images = Tensor::empty({B, L}, DType::i64);
    out.labels = Tensor::empty({B}, DType::i64);
    int64_t* ids = out.images.data_ptr<int64_t>();
    int64_t* labels = out.labels.data_ptr<int64_t>();
    for (int64_t i = 0; i < B; ++i) {
      const int64_t s = order[size_t(begin + i)];
      const uint8_t* src = d.image(s);
      for (int64_t j = 0; j < L; ++j) *ids++ = src[j];
      labels[i] = d.labels[size_t(s)];
    }
    return out;
  }
  out.images = Tensor::empty({B, d.channels, d.height, d.width}, DType::f32);
  out.labels = Tensor::empty({B}, DType::i64);
  float* dst = out.images.data_ptr<float>();
  int64_t* labels = out.labels.data_ptr<int64_t>();
  if (d.tabular) {  // numbers, normalised per column in double and rounded once
    for (int64_t i = 0; i < B; ++i) {
      const int64_t s = order[size_t(begin + i)];
      const float* src = d.sample_features(s);
      for (int64_t c = 0; c < d.channels; ++c)
        for (int64_t j = 0; j < plane; ++j) {
          const double v = *src++;
          *dst++ = opt.normalize ? float((v - d.mean[size_t(c)]) / d.stddev[size_t(c)]) : float(v);
        }
      labels[i] = d.labels[size_t(s)];
    }
    return out;
  }
  std::vector<uint8_t> augmented(opt.augment.active() ? size_t(d.sample_bytes()) : 0);
  for (int64_t i = 0; i < B; ++i) {
    const int64_t s = order[size_t(begin + i)];
    const uint8_t* src = d.image(s);
    if (opt.augment.active()) {
      augment_image(src, d.channels, d.height, d.width, opt.augment.crop_padding,
                    augment_draw(opt.augment, opt.seed, epoch, s), augmented.data());
      src = augmented.data();
    }
    for (int64_t c = 0; c < d.channels; ++c) {
      const float* table = lut[size_t(c)].data();
      for (int64_t j = 0; j < plane; ++j) *dst++ = table[*src++];
    }
    labels[i] = d.labels[size_t(s)];
  }
  return out;
}

void DataLoader::State::produce(int64_t from) {
  for (int64_t b = from; b < num_batches; ++b) {
    {
      std::unique_lock<std::mutex> lock(mu);
      not_full.wait(lock, [&] { return stop || int64_t(queue.size()) < opt.prefetch; });
      if (stop) return;
    }
    try {
      Batch batch = build(b);
      std::lock_guard<std::mutex> lock(mu);
      if (stop) return;
      queue.push_back(std::move(batch));  // may allocate a deque block: inside the try too
    } catch (...) {  // e.g. allocation failure: hand it to the consumer, never terminate()
      std::lock_guard<std::mutex> lock(mu);
      error = std::current_exception();
      done = true;
      not_empty.notify_all();
      return;
    }
    not_empty.notify_one();
  }
  std::lock_guard<std::mutex> lock(mu);
  done = true;
  not_empty.notify_all();
}

void DataLoader::State::stop_producer() {
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
  }
  not_full.notify_all();
  if (producer.joinable()) producer.join();
  queue.clear();
  stop = false;
  done = false;
  error = nullptr;
}

DataLoader::DataLoader(ImageDataset dataset, DataLoaderOptions options)
    : DataLoader(std::make_shared<const ImageDataset>(std::move(dataset)), options) {}

DataLoader::DataLoader(std::shared_ptr<const ImageDataset> dataset, DataLoaderOptions options)
    : state_(std::make_unique<State>()) {
  if (!dataset) throw Error(Status::invalid_argument("DataLoader: dataset is null"));
  if (options.batch_size < 1)
    throw Error(Status::invalid_argument(
        fmt::format("DataLoader: batch_size {}: expected >= 1", options.batch_size)));
  if (options.prefetch < 0)
    throw Error(Status::invalid_argument(
        fmt::format("DataLoader: prefetch {}: expected >= 0 (0 = no background thread)",
                    options.prefetch)));
  throw_if_error(dataset->validate());
  if (options.augment.active() && (dataset->text || dataset->tabular || dataset->tokens))
    throw Error(Status::invalid_argument(fmt::format(
        "DataLoader: dataset {} is {}: crop and flip augmentation are for images", dataset->name,
        dataset->text || dataset->tokens ? "text" : "a table")));
  if (options.augment.crop_padding < 0)
    throw Error(Status::invalid_argument(
        fmt::format("DataLoader: crop_padding {}: expected >= 0", options.augment.crop_padding)));
  if (options.normalize && dataset->mean.empty() && !dataset->text && !dataset->tokens)
    throw Error(Status::invalid_argument(fmt::format(
        "DataLoader: dataset {} ({}) has no mean/stddev: set them (compute_channel_stats) or "
        "use normalize=false",
        dataset->name, dataset->source)));
  State& s = *state_;
  s.ds = std::move(dataset);
  s.opt = options;
  if (options.shard_count < 1 || options.shard_rank < 0 || options.shard_rank >= options.shard_count)
    throw Error(Status::invalid_argument(fmt::format("DataLoader: shard {} of {}: expected 0 <= rank < count",
                                                     options.shard_rank, options.shard_count)));
  const int64_t n = s.ds->count, bs = options.batch_size, shards = options.shard_count;
  if (shards == 1) {
    s.num_batches = options.drop_last ? n / bs : (n + bs - 1) / bs;
  } else {
    // Global batches of bs x shards samples; a final partial one only when every shard gets
    // at least one sample of it (a rank with an empty batch could not run the model).
    const int64_t global = bs * shards;
    s.num_batches = n / global + (!options.drop_last && n % global >= shards ? 1 : 0);
  }
  s.covered = std::min(n, s.num_batches * bs * shards);
  s.samples = (s.covered - options.shard_rank + shards - 1) / shards;  // positions = rank (mod shards) below covered
  // Pixels go through a table per channel; a table's numbers (tabular) are computed.
  const int64_t lut_channels = s.ds->tabular ? 0 : s.ds->channels;
  s.lut.resize(size_t(lut_channels));
  for (int64_t c = 0; c < lut_channels; ++c) {
    for (int v = 0; v < 256; ++v) {
      // Computed in double and rounded once, so each entry is the correctly rounded value.
      double x = v / 255.0;
      if (options.normalize && !s.ds->text && !s.ds->tokens) x = (x - s.ds->mean[size_t(c)]) / s.ds->stddev[size_t(c)];
      s.lut[size_t(c)][size_t(v)] = float(x);
    }
  }
}

DataLoader::~DataLoader() { state_->stop_producer(); }

int64_t DataLoader::num_batches() const { return state_->num_batches; }
int64_t DataLoader::num_samples() const { return state_->samples; }
const DataLoaderOptions& DataLoader::options() const { return state_->opt; }
const ImageDataset& DataLoader::dataset() const { return *state_->ds; }
int64_t DataLoader::epoch() const { return state_->epoch; }
int64_t DataLoader::position() const { return state_->next_index; }

std::vector<int64_t> DataLoader::epoch_order(int64_t epoch) const {
  const State& s = *state_;
  const int64_t n = s.ds->count;
  std::vector<int64_t> order;
  if (s.ds->corpus) {  // a mapped text: its windows' start offsets (State::window_start)
    order.resize(size_t(s.samples));
    for (int64_t i = 0; i < s.samples; ++i) order[size_t(i)] = window_start(*s.ds, s.opt, epoch, i);
    return order;
  }
  if (s.opt.shuffle) {
    order = shuffled_order(n, s.opt.seed, epoch);
  } else {
    order.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) order[size_t(i)] = i;
  }
  if (s.opt.shard_count == 1) return order;
  // This rank's shard: every shard_count-th position of the epoch's order, from shard_rank
  // (PyTorch's DistributedSampler), so that global batch k is exactly the batch k of one
  // process with batch_size x shard_count.
  std::vector<int64_t> shard;
  shard.reserve(size_t(num_samples()));
  for (int64_t p = s.opt.shard_rank; p < s.covered; p += s.opt.shard_count) shard.push_back(order[size_t(p)]);
  return shard;
}

void DataLoader::set_epoch(int64_t epoch) { throw_if_error(begin_epoch(epoch, 0)); }

Status DataLoader::begin_epoch(int64_t epoch, int64_t start_batch) {
  State& s = *state_;
  if (epoch < 0)
    return Status::invalid_argument(fmt::format("DataLoader::begin_epoch: epoch {}: expected >= 0", epoch));
  if (start_batch < 0 || start_batch > s.num_batches)
    return Status::invalid_argument(fmt::format(
        "DataLoader::begin_epoch: start_batch {}: expected 0..{} (num_batches)", start_batch,
        s.num_batches));
  s.stop_producer();
  if (s.ds->corpus) s.order.clear();  // windows are computed as batches are built: nothing to store
  else s.order = epoch_order(epoch);
  s.epoch = epoch;
  s.next_index = start_batch;
  s.started = true;
  if (s.opt.prefetch > 0 && start_batch < s.num_batches)
    s.producer = std::thread([&s, start_batch] { s.produce(start_batch); });
  return Status::ok();
}

std::optional<Batch> DataLoader::next() {
  State& s = *state_;
  if (!s.started) throw_if_error(begin_epoch(s.epoch, 0));
  if (s.next_index >= s.num_batches) return std::nullopt;
  if (s.opt.prefetch == 0) {
    Batch batch = s.build(s.next_index);  // may throw; the position stays put then
    ++s.next_index;
    return batch;
  }
  std::unique_lock<std::mutex> lock(s.mu);
  s.not_empty.wait(lock, [&] { return !s.queue.empty() || s.done; });
  if (s.queue.empty()) {
    // The producer stopped early: only a failure does that. Keep reporting it.
    MIXPREC_CHECK(s.error != nullptr, "DataLoader: producer finished without all batches");
    std::rethrow_exception(s.error);
  }
  Batch batch = std::move(s.queue.front());
  s.queue.pop_front();
  lock.unlock();
  s.not_full.notify_one();
  MIXPREC_CHECK(batch.index == s.next_index, "DataLoader: batches out of order");
  ++s.next_index;
  return batch;
}

}  // namespace mixprec

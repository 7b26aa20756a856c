// data_parallel.cpp: see data_parallel.h.
#include "train/data_parallel.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/convert.h"
#include "core/storage.h"
#include "io/checksums.h"
#include "io/mapped_file.h"
#include "mixprec/ops/ops.h"

namespace mixprec::train {

namespace {
std::string at_step(int64_t step) { return " at step " + std::to_string(step); }

// Adds the lifetime of the scope to a counter (ms).
class TimeInto {
 public:
  explicit TimeInto(double& ms) : ms_(ms), t0_(std::chrono::steady_clock::now()) {}
  ~TimeInto() { ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count(); }
  TimeInto(const TimeInto&) = delete;
  TimeInto& operator=(const TimeInto&) = delete;

 private:
  double& ms_;
  std::chrono::steady_clock::time_point t0_;
};
}  // namespace

uint64_t hash_tensors(const std::vector<Tensor>& tensors) {
  uint64_t h = 0;
  for (const Tensor& t : tensors) {
    if (!t.defined()) {
      h = io::hash_bytes("undefined", 9, h);
      continue;
    }
    const Tensor c = t.is_contiguous() ? t : t.contiguous();
    for (int64_t d : c.shape()) h = io::hash_bytes(&d, sizeof d, h);
    h = io::hash_bytes(c.data(), size_t(c.numel()) * dtype_size(c.dtype()), h);
  }
  return h;
}

uint64_t hash_text(const std::string& text) { return io::hash_bytes(text.data(), text.size()); }

uint64_t hash_dataset(const ImageDataset& d) {
  if (d.corpus) {
    // A mapped text may be many GiB: its extent and the first and last 64 KiB of it tell
    // ranks given different files apart without reading (and keeping resident) all of it.
    const int64_t range[3] = {d.corpus_begin, d.corpus_end, d.width};
    uint64_t h = io::hash_bytes(range, sizeof range);
    const int64_t n = d.corpus_end - d.corpus_begin, part = std::min<int64_t>(n, 65536);
    const uint8_t* bytes = d.corpus.get() + d.corpus_begin;
    h = io::hash_bytes(bytes, size_t(part), h);
    h = io::hash_bytes(bytes + n - part, size_t(part), h);
    io::release_pages(bytes, size_t(part), d.corpus.get(), size_t(d.corpus_end));
    io::release_pages(bytes + n - part, size_t(part), d.corpus.get(), size_t(d.corpus_end));
    return h;
  }
  uint64_t h = io::hash_bytes(d.images.data(), d.images.size());
  h = io::hash_bytes(d.labels.data(), d.labels.size(), h);
  return io::hash_bytes(d.features.data(), d.features.size() * sizeof(float), h);
}

std::string even_batches_near(int64_t batch, int parts) {
  const int64_t down = batch / parts * parts, up = down + parts;
  return (down > 0 ? std::to_string(down) + " or " : "") + std::to_string(up);
}

uint64_t hash_executable() {
  std::ifstream exe("/proc/self/exe", std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(exe), std::istreambuf_iterator<char>()};
  return hash_text(bytes);
}

StatusOr<double> DataParallel::agree_on_step(int64_t step, int64_t samples) {
  TimeInto timed(communication_ms_);
  auto agreed = comm_.agree_on_step(step, samples);
  if (!agreed.is_ok()) return agreed.status();
  if (agreed->total_samples <= 0)
    return Status(StatusCode::distributed, "no rank has samples" + at_step(step));
  step_ = step;
  step_weight_ = double(samples) * double(comm_.size()) / double(agreed->total_samples);
  return step_weight_;
}

std::shared_ptr<const BatchNormSync> DataParallel::batch_norm_sync() {
  auto sync = std::make_shared<BatchNormSync>();
  sync->sum_statistics = [this](std::span<double> v) {
    TimeInto timed(communication_ms_);
    throw_if_error(comm_.allreduce_sum(v, "BatchNorm statistics all-reduce (--sync-bn)" + at_step(step_)));
  };
  // A rank's gradients count with weight / ranks in the gradient average (reduce): its share
  // of these sums likewise, and dx is then taken back to this rank's own scale.
  sync->sum_gradients = [this](std::span<double> v) {
    TimeInto timed(communication_ms_);
    const double share = step_weight_ / double(comm_.size());
    for (double& x : v) x *= share;
    throw_if_error(comm_.allreduce_sum(v, "BatchNorm gradient all-reduce (--sync-bn)" + at_step(step_)));
    for (double& x : v) x /= share;
  };
  return sync;
}

void DataParallel::begin_gradients(const std::vector<Tensor>& params, double weight, int64_t step) {
  numels_.clear();  // reused: a steady step allocates nothing here
  for (const Tensor& p : params) numels_.push_back(p.numel());
  if (!reducer_.prepared_for(numels_)) reducer_.prepare(numels_);
  reducer_.begin(weight, step);
}

Status DataParallel::finish_gradients(const std::vector<Tensor>& params) {
  grads_.clear();
  for (const Tensor& p : params) grads_.push_back(p.grad());
  const Status s = reducer_.finish(grads_);
  grads_.clear();  // the gradients belong to the parameters
  communication_ms_ += reducer_.wait_ms();
  buckets_reduced_ += reducer_.buckets();
  buckets_started_early_ += reducer_.started_early();
  return s;
}

Status DataParallel::reduce_gradients(const std::vector<Tensor>& params, double weight, int64_t step) {
  begin_gradients(params, weight, step);
  return finish_gradients(params);
}

double DataParallel::take_communication_ms() {
  const double ms = communication_ms_;
  communication_ms_ = 0.0;
  return ms;
}

StatusOr<double> DataParallel::mean_loss(double loss, double weight, int64_t step) {
  TimeInto timed(communication_ms_);
  double v = loss * weight;
  MIXPREC_RETURN_IF_ERROR(comm_.allreduce_sum(std::span<double>(&v, 1), "loss all-reduce" + at_step(step)));
  return v / double(comm_.size());
}

StatusOr<bool> DataParallel::any(bool flag, const std::string& what) {
  TimeInto timed(communication_ms_);
  int64_t v = flag ? 1 : 0;
  MIXPREC_RETURN_IF_ERROR(comm_.allreduce_max(std::span<int64_t>(&v, 1), what));
  return v != 0;
}

Status DataParallel::sync_buffers(nn::Module& model, int64_t step) {
  TimeInto timed(communication_ms_);
  for (auto& [name, b] : model.named_buffers()) {
    MIXPREC_CHECK(b.is_contiguous(), "sync_buffers: buffer " + name + " is not contiguous");
    auto* bytes = static_cast<uint8_t*>(b.data());
    MIXPREC_RETURN_IF_ERROR(comm_.broadcast(std::span<uint8_t>(bytes, size_t(b.numel()) * dtype_size(b.dtype())),
                                            "broadcast of " + name + at_step(step)));
    b.storage()->bump_version();
  }
  return Status::ok();
}

Status DataParallel::check_same(const std::vector<std::pair<std::string, uint64_t>>& items, const std::string& when) {
  for (const auto& [name, hash] : items) {
    auto all = comm_.allgather(hash, "comparing the " + name + " " + when);
    if (!all.is_ok()) return all.status();
    std::string differ;
    for (size_t r = 1; r < all->size(); ++r)
      if ((*all)[r] != (*all)[0]) differ += (differ.empty() ? "" : ", ") + std::to_string(r);
    if (!differ.empty())
      return Status(StatusCode::distributed, "the " + name + " differs between rank 0 and rank(s) " + differ + " " +
                                                 when + ": every rank must run the same command on the same data "
                                                 "with the same mixprec");
  }
  return Status::ok();
}

StatusOr<std::string> DataParallel::broadcast_text(const std::string& text, const std::string& what) {
  uint64_t size = text.size();
  MIXPREC_RETURN_IF_ERROR(comm_.broadcast(std::span<uint8_t>(reinterpret_cast<uint8_t*>(&size), sizeof size), what));
  std::string root(size_t(size), '\0');
  if (comm_.rank() == 0) root = text;
  MIXPREC_RETURN_IF_ERROR(comm_.broadcast(std::span<uint8_t>(reinterpret_cast<uint8_t*>(root.data()), root.size()), what));
  return root;
}

Status DataParallel::check_same_text(const std::string& name, const std::string& json_text, const std::string& when) {
  if (check_same({{name, hash_text(json_text)}}, when).is_ok()) return Status::ok();
  // Every rank takes this branch (the allgather gave all the same answer): rank 0's text to all.
  auto sent = broadcast_text(json_text, "sending rank 0's " + name);
  if (!sent.is_ok()) return sent.status();
  const std::string root = std::move(sent).value();
  std::string keys;
  const auto mine = nlohmann::json::parse(json_text, nullptr, false);
  const auto theirs = nlohmann::json::parse(root, nullptr, false);
  if (mine.is_object() && theirs.is_object()) {
    for (const auto& [key, value] : mine.items()) {
      const auto other = theirs.find(key);
      if (other == theirs.end() || *other != value)
        keys += (keys.empty() ? "" : ", ") + key + " " + value.dump() + " here, " +
                (other == theirs.end() ? std::string("absent") : other->dump()) + " on rank 0";
    }
  }
  if (comm_.rank() == 0 || keys.empty())
    return Status(StatusCode::distributed, "the " + name + " differs between the ranks " + when +
                                               " (see the other ranks' messages): every rank must run the same command");
  return Status(StatusCode::distributed, "the " + name + " differs from rank 0's " + when + ": " + keys +
                                             "; every rank must run the same command");
}

Status DataParallel::check_replicas(const std::vector<Tensor>& params, double scale, int64_t step) {
  uint64_t h = hash_tensors(params);
  h = io::hash_bytes(&scale, sizeof scale, h);
  return check_same({{"weights and loss scale", h}}, at_step(step).substr(1) +
                                                        " (the replicas diverged: a nondeterministic reduction or "
                                                        "a rank-local fault)");
}

}  // namespace mixprec::train

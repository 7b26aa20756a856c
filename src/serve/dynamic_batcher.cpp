// dynamic_batcher.cpp: concurrent requests stacked into one forward pass (mixprec/serve/serve.h).
// Why: on a CPU a forward pass of 64 samples costs far less than 64 passes of one (the GEMMs
// and convolutions reach their rate only with a batch), so a server that runs each request
// alone wastes most of the machine at any real concurrency.
#include <algorithm>

#include "mixprec/serve/serve.h"

namespace mixprec::serve {

DynamicBatcher::DynamicBatcher(BatcherOptions options, int64_t values_per_sample, BatchRunner runner)
    : options_(options), values_per_sample_(values_per_sample), runner_(std::move(runner)) {
  thread_ = std::thread([this] { loop(); });
}

DynamicBatcher::~DynamicBatcher() { stop(); }

void DynamicBatcher::set_batch_observer(std::function<void(int64_t)> observer) {
  std::lock_guard<std::mutex> lock(mu_);
  observer_ = std::move(observer);
}

int64_t DynamicBatcher::queued_samples() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_;
}

StatusOr<std::future<StatusOr<DynamicBatcher::Outputs>>> DynamicBatcher::submit(
    std::vector<std::vector<float>> samples) {
  if (samples.empty()) return Status::invalid_argument("a request with no samples");
  for (size_t i = 0; i < samples.size(); ++i)
    if (int64_t(samples[i].size()) != values_per_sample_)
      return Status::invalid_argument("sample " + std::to_string(i) + " has " + std::to_string(samples[i].size()) +
                                      " values, the model takes " + std::to_string(values_per_sample_));
  const int64_t n = int64_t(samples.size());
  std::future<StatusOr<Outputs>> result;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Status(StatusCode::busy, "the server is shutting down");
    // A request larger than the whole queue could never be taken: it is refused the same way.
    if (queued_ + n > options_.max_queue)
      return Status(StatusCode::busy, "the queue is full (" + std::to_string(queued_) + " of " +
                                        std::to_string(options_.max_queue) + " samples waiting, this request has " +
                                        std::to_string(n) + ")");
    Job job{std::move(samples), {}, std::chrono::steady_clock::now()};
    result = job.done.get_future();
    queue_.push_back(std::move(job));
    queued_ += n;
  }
  wake_.notify_one();
  return result;
}

void DynamicBatcher::arrival_started() {
  std::lock_guard<std::mutex> lock(mu_);
  ++arriving_;
}

void DynamicBatcher::arrival_finished() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (arriving_ > 0) --arriving_;
  }
  wake_.notify_one();
}

void DynamicBatcher::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void DynamicBatcher::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left to answer
    // The oldest request waits at most max_wait_us for requests still arriving to fill the
    // batch, and not at all when none is arriving; when stopping, what is queued runs at once.
    const auto deadline = queue_.front().queued_at + std::chrono::microseconds(options_.max_wait_us);
    wake_.wait_until(lock, deadline,
                     [this] { return stopping_ || queued_ >= options_.max_batch || arriving_ == 0; });
    std::vector<Job> jobs;
    int64_t taken = 0;
    while (!queue_.empty()) {
      const int64_t n = int64_t(queue_.front().samples.size());
      if (!jobs.empty() && taken + n > options_.max_batch) break;
      taken += n;
      jobs.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    queued_ -= taken;
    lock.unlock();
    run(jobs);
    lock.lock();
  }
}

void DynamicBatcher::run(std::vector<Job>& jobs) {
  // The samples of every job back to back; a job never straddles two passes unless it is
  // larger than max_batch on its own (then it is the only job, run in chunks).
  std::vector<const std::vector<float>*> rows;
  for (Job& j : jobs)
    for (const auto& s : j.samples) rows.push_back(&s);
  std::vector<std::vector<float>> outputs;
  outputs.reserve(rows.size());
  Status failed = Status::ok();
  std::function<void(int64_t)> observer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    observer = observer_;
  }
  for (size_t first = 0; first < rows.size() && failed.is_ok(); first += size_t(options_.max_batch)) {
    const size_t n = std::min(rows.size() - first, size_t(options_.max_batch));
    std::vector<float> x;
    x.reserve(n * size_t(values_per_sample_));
    for (size_t i = 0; i < n; ++i) x.insert(x.end(), rows[first + i]->begin(), rows[first + i]->end());
    StatusOr<Outputs> out = Status::internal("the model did not run");
    try {
      out = runner_(x, int64_t(n));
    } catch (const std::exception& e) {  // a model error answers this batch, not the process
      out = Status::internal(std::string("the model failed: ") + e.what());
    }
    if (out.is_ok() && out->size() != n)
      out = Status::internal("the model returned " + std::to_string(out->size()) + " rows for " + std::to_string(n) +
                             " samples");
    if (!out.is_ok()) {
      failed = out.status();
      break;
    }
    if (observer) observer(int64_t(n));
    for (auto& row : *out) outputs.push_back(std::move(row));
  }
  size_t next = 0;
  for (Job& j : jobs) {
    if (!failed.is_ok()) {
      j.done.set_value(failed);
      continue;
    }
    Outputs mine(std::make_move_iterator(outputs.begin() + long(next)),
                 std::make_move_iterator(outputs.begin() + long(next + j.samples.size())));
    next += j.samples.size();
    j.done.set_value(std::move(mine));
  }
}

}  // namespace mixprec::serve

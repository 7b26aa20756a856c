// mixprec/serve/serve.h: the parts of serving a trained model that do not depend on HTTP (issue 17):
// decoding a prediction request's body into the model's samples, the dynamic batcher that
// stacks concurrent requests into one forward pass, and the server's Prometheus metrics.
// `mixprec serve` (tools/mixprec/serve_command.cpp) puts them behind mixprec/http/http.h; a C++
// user can put them behind any transport.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "mixprec/core/status.h"

namespace mixprec::serve {

// ---- requests ---------------------------------------------------------------------------

// What one sample of the model looks like.
struct InputLayout {
  int64_t channels = 1, height = 28, width = 28;  // a table model: features x 1 x 1
  std::vector<std::string> feature_names;         // non-empty: a table model (--dataset csv)
  // A text classifier (--text-column): each input is a text, its first `width` bytes the
  // sample's byte ids (0-padded), as floats.
  bool text = false;
  // A language model (text too): each input is a prompt; its sample is [its length n, its last
  // n <= `width` bytes, 0-padded to `width`] (the model answers the byte after the last).
  bool next_byte = false;
  int64_t values_per_sample() const { return next_byte ? width + 1 : channels * height * width; }
};

// The samples of one request, each values_per_sample() floats ready for the model's
// normalisation: pixels scaled to [0, 1] (what predict and the datasets do), raw feature
// values for a table model.
struct DecodedRequest {
  std::vector<std::vector<float>> samples;
};

// Decodes a POST /v1/predict body. `content_type` chooses the decoder (parameters after ';'
// are ignored):
//  - application/json: {"inputs": [...]} or a bare array. Each input is a nested array in
//    the sample's shape ([C][H][W], [H][W] for one channel, or C*H*W flat) of pixel values
//    0..255, or of values in [0, 1] with "scale": "unit"; a table model takes arrays of its
//    features in training order, or objects {"column": value} naming every feature; a text
//    classifier takes strings (JSON only).
//  - application/x-npy (or application/octet-stream holding .npy bytes): as `predict` reads a
//    .npy file: integer dtypes are pixels, float dtypes values in [0, 1]; [H, W], [C, H, W] or
//    with a leading batch dimension.
//  - image/png, image/jpeg: one image of the model's size (not resized).
// A body without a Content-Type, or labelled application/octet-stream or
// application/x-www-form-urlencoded (what `curl --data-binary` sends unless told otherwise), is
// recognised by its first bytes (.npy, PNG, JPEG, or JSON's { or [).
// At most `max_samples` samples. Errors are invalid_argument with a message naming the field
// and the expected value (what a client gets in a 400); never an exception or a crash.
StatusOr<DecodedRequest> decode_predict_request(std::string_view body, std::string_view content_type,
                                                const InputLayout& layout, int64_t max_samples);

// A POST /v1/generate body for a language model: {"prompt": "text" (required; "" starts from
// a new line), "max_tokens": 1..max_tokens_limit (default 200, or the limit if lower),
// "temperature": finite >= 0 (0.8; 0 = the most likely byte), "top_k": 0..256 (40; 0 = all),
// "seed": 0..2^64-1 (0)}. Unknown keys, wrong types and values out of range are
// invalid_argument naming the key and the range; never an exception or a crash.
struct GenerateRequest {
  std::string prompt;
  int64_t max_tokens = 200, top_k = 40;
  double temperature = 0.8;
  uint64_t seed = 0;
};
StatusOr<GenerateRequest> decode_generate_request(std::string_view body, int64_t max_tokens_limit);

// ---- dynamic batching -------------------------------------------------------------------

struct BatcherOptions {
  int64_t max_batch = 64;      // samples per forward pass
  int64_t max_wait_us = 2000;  // how long the oldest queued request may wait for arriving ones
  int64_t max_queue = 1024;    // samples waiting; a request that does not fit is refused
};

// One forward pass: `inputs` holds n samples of `values_per_sample` floats back to back; the
// result holds n rows of outputs (e.g. class probabilities). Runs on the batcher's thread only.
using BatchRunner = std::function<StatusOr<std::vector<std::vector<float>>>(const std::vector<float>& inputs, int64_t n)>;

// Requests queue here; one thread takes the oldest ones, up to max_batch samples, and runs
// them as one batch as soon as max_batch samples are waiting, or no announced request is
// still arriving (arrival_started/arrival_finished: a server announces a request when its
// headers are read, so its body is read and decoded while the batch waits for it), or the
// oldest has waited max_wait_us. So a lone client never waits for company that is not
// coming, and under load the batch fills with the requests in the pipeline. A request larger
// than max_batch runs alone, in max_batch chunks. The model is only ever called from that
// one thread, so it needs no locking of its own.
class DynamicBatcher {
 public:
  using Outputs = std::vector<std::vector<float>>;
  DynamicBatcher(BatcherOptions options, int64_t values_per_sample, BatchRunner runner);
  ~DynamicBatcher();  // stop(): queued requests are still answered
  DynamicBatcher(const DynamicBatcher&) = delete;
  DynamicBatcher& operator=(const DynamicBatcher&) = delete;

  // Queues one request's samples (each values_per_sample floats). Errors, at once: busy when
  // the queue cannot take them or after stop() (the server's 503), invalid_argument for an
  // empty request or a sample of the wrong size. The future holds the outputs in the
  // samples' order, or the model's error (internal) for every request of that batch.
  StatusOr<std::future<StatusOr<Outputs>>> submit(std::vector<std::vector<float>> samples);

  // A request has arrived and will be submitted (or dropped) soon: a batch waits for it, up
  // to max_wait_us. Every arrival_started() needs one arrival_finished(), after its submit().
  void arrival_started();
  void arrival_finished();

  // Stops accepting, answers everything queued, joins the thread. Idempotent.
  void stop();

  int64_t queued_samples() const;
  // Called on the batcher's thread after each forward pass with its number of samples.
  void set_batch_observer(std::function<void(int64_t)> observer);

 private:
  struct Job {
    std::vector<std::vector<float>> samples;
    std::promise<StatusOr<Outputs>> done;
    std::chrono::steady_clock::time_point queued_at;
  };
  void loop();
  void run(std::vector<Job>& jobs);

  const BatcherOptions options_;
  const int64_t values_per_sample_;
  BatchRunner runner_;
  std::function<void(int64_t)> observer_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Job> queue_;
  int64_t queued_ = 0;
  int64_t arriving_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

// ---- metrics ----------------------------------------------------------------------------

// The server's counters and histograms, rendered in Prometheus' text format (version 0.0.4).
// Thread-safe.
class ServeMetrics {
 public:
  ServeMetrics(int64_t max_batch);
  void record_request(const std::string& route, int status, double seconds);
  void record_batch(int64_t samples);
  void set_queue_depth(int64_t samples);
  // The HTTP server's connections (http::Server::stats()): open now, and shed since start.
  void set_connections(int64_t open, int64_t shed);
  std::string prometheus_text() const;
  int64_t requests(int status) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> requests_;  // (route, status) -> count
  std::vector<double> latency_bounds_, batch_bounds_;
  std::vector<int64_t> latency_counts_, batch_counts_;  // per bucket, not cumulative
  double latency_sum_ = 0, batch_sum_ = 0;
  int64_t latency_count_ = 0, batch_count_ = 0, queue_depth_ = 0, open_connections_ = 0, shed_connections_ = 0;
};

}  // namespace mixprec::serve

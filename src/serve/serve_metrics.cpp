// serve_metrics.cpp: the server's counters and histograms in Prometheus' text exposition
// format (mixprec/serve/serve.h), what GET /metrics returns.
#include <algorithm>
#include <cstdio>

#include "mixprec/serve/serve.h"

namespace mixprec::serve {

namespace {

// Request latency buckets in seconds: 100 us to 10 s, roughly x2.5 apart.
const std::vector<double> kLatencyBounds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                            0.05,   0.1,     0.25,   0.5,   1.0,    2.5,   5.0,  10.0};

std::string number(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

size_t bucket_of(const std::vector<double>& bounds, double v) {
  return size_t(std::lower_bound(bounds.begin(), bounds.end(), v) - bounds.begin());  // == size: +Inf
}

void histogram(std::string& out, const std::string& name, const std::string& help, const std::vector<double>& bounds,
               const std::vector<int64_t>& counts, double sum, int64_t count) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  int64_t cumulative = 0;
  for (size_t i = 0; i < bounds.size(); ++i) {
    cumulative += counts[i];
    out += name + "_bucket{le=\"" + number(bounds[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count) + "\n";
  out += name + "_sum " + number(sum) + "\n" + name + "_count " + std::to_string(count) + "\n";
}

}  // namespace

ServeMetrics::ServeMetrics(int64_t max_batch) : latency_bounds_(kLatencyBounds) {
  // Batch-size buckets 1, 2, 4, ... up to max_batch (and max_batch itself).
  for (int64_t b = 1; b < max_batch; b *= 2) batch_bounds_.push_back(double(b));
  batch_bounds_.push_back(double(std::max<int64_t>(max_batch, 1)));
  latency_counts_.assign(latency_bounds_.size() + 1, 0);
  batch_counts_.assign(batch_bounds_.size() + 1, 0);
}

void ServeMetrics::record_request(const std::string& route, int status, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{route, status}];
  ++latency_counts_[bucket_of(latency_bounds_, seconds)];
  latency_sum_ += seconds;
  ++latency_count_;
}

void ServeMetrics::record_batch(int64_t samples) {
  std::lock_guard<std::mutex> lock(mu_);
  ++batch_counts_[bucket_of(batch_bounds_, double(samples))];
  batch_sum_ += double(samples);
  ++batch_count_;
}

void ServeMetrics::set_queue_depth(int64_t samples) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_depth_ = samples;
}

void ServeMetrics::set_connections(int64_t open, int64_t shed) {
  std::lock_guard<std::mutex> lock(mu_);
  open_connections_ = open;
  shed_connections_ = shed;
}

int64_t ServeMetrics::requests(int status) const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = 0;
  for (const auto& [key, count] : requests_)
    if (key.second == status) n += count;
  return n;
}

std::string ServeMetrics::prometheus_text() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  out += "# HELP mixprec_requests_total HTTP requests answered, by route and status code.\n"
         "# TYPE mixprec_requests_total counter\n";
  for (const auto& [key, count] : requests_)
    out += "mixprec_requests_total{route=\"" + key.first + "\",code=\"" + std::to_string(key.second) + "\"} " +
           std::to_string(count) + "\n";
  int64_t errors = 0;
  for (const auto& [key, count] : requests_)
    if (key.second >= 400) errors += count;
  out += "# HELP mixprec_request_errors_total Requests answered with a 4xx or 5xx status.\n"
         "# TYPE mixprec_request_errors_total counter\nmixprec_request_errors_total " +
         std::to_string(errors) + "\n";
  histogram(out, "mixprec_request_duration_seconds", "Time from a request's arrival to its answer.", latency_bounds_,
            latency_counts_, latency_sum_, latency_count_);
  histogram(out, "mixprec_batch_size", "Samples per forward pass of the dynamic batcher.", batch_bounds_,
            batch_counts_, batch_sum_, batch_count_);
  out += "# HELP mixprec_queue_depth Samples waiting for a forward pass.\n# TYPE mixprec_queue_depth gauge\n"
         "mixprec_queue_depth " + std::to_string(queue_depth_) + "\n";
  out += "# HELP mixprec_open_connections Client connections open now.\n# TYPE mixprec_open_connections gauge\n"
         "mixprec_open_connections " + std::to_string(open_connections_) + "\n";
  out += "# HELP mixprec_connections_shed_total Connections closed to stay within --max-connections (idle ones) or "
         "refused with 503 (when none was idle).\n# TYPE mixprec_connections_shed_total counter\n"
         "mixprec_connections_shed_total " + std::to_string(shed_connections_) + "\n";
  return out;
}

}  // namespace mixprec::serve

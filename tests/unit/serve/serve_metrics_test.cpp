// serve_metrics_test.cpp: GET /metrics' text follows Prometheus' exposition format: counters
// per route and code, cumulative histogram buckets ending in +Inf = count, sums.
#include <gtest/gtest.h>

#include <sstream>

#include "mixprec/serve/serve.h"

namespace mixprec::serve {
namespace {

// The value of the line that starts with `series ` ("" when absent).
std::string value_of(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(series + " ", 0) == 0) return line.substr(series.size() + 1);
  return "";
}

TEST(ServeMetrics, CountsRequestsAndRendersCumulativeHistograms) {
  ServeMetrics m(64);
  m.record_request("/v1/predict", 200, 0.0004);
  m.record_request("/v1/predict", 200, 0.003);
  m.record_request("/v1/predict", 400, 0.00005);
  m.record_request("/healthz", 200, 20.0);  // beyond the last bound: only +Inf
  m.record_batch(1);
  m.record_batch(3);
  m.record_batch(64);
  m.set_queue_depth(7);
  const std::string t = m.prometheus_text();
  EXPECT_EQ(value_of(t, "mixprec_requests_total{route=\"/v1/predict\",code=\"200\"}"), "2");
  EXPECT_EQ(value_of(t, "mixprec_requests_total{route=\"/v1/predict\",code=\"400\"}"), "1");
  EXPECT_EQ(value_of(t, "mixprec_requests_total{route=\"/healthz\",code=\"200\"}"), "1");
  EXPECT_EQ(value_of(t, "mixprec_request_errors_total"), "1");
  EXPECT_EQ(value_of(t, "mixprec_request_duration_seconds_bucket{le=\"0.0001\"}"), "1");
  EXPECT_EQ(value_of(t, "mixprec_request_duration_seconds_bucket{le=\"0.0005\"}"), "2");
  EXPECT_EQ(value_of(t, "mixprec_request_duration_seconds_bucket{le=\"0.005\"}"), "3");
  EXPECT_EQ(value_of(t, "mixprec_request_duration_seconds_bucket{le=\"10\"}"), "3");
  EXPECT_EQ(value_of(t, "mixprec_request_duration_seconds_bucket{le=\"+Inf\"}"), "4");
  EXPECT_EQ(value_of(t, "mixprec_request_duration_seconds_count"), "4");
  EXPECT_EQ(std::stod(value_of(t, "mixprec_request_duration_seconds_sum")), 0.0004 + 0.003 + 0.00005 + 20.0);
  EXPECT_EQ(value_of(t, "mixprec_batch_size_bucket{le=\"1\"}"), "1");
  EXPECT_EQ(value_of(t, "mixprec_batch_size_bucket{le=\"2\"}"), "1");
  EXPECT_EQ(value_of(t, "mixprec_batch_size_bucket{le=\"4\"}"), "2");
  EXPECT_EQ(value_of(t, "mixprec_batch_size_bucket{le=\"64\"}"), "3");
  EXPECT_EQ(value_of(t, "mixprec_batch_size_sum"), "68");
  EXPECT_EQ(value_of(t, "mixprec_queue_depth"), "7");
  EXPECT_NE(t.find("# TYPE mixprec_request_duration_seconds histogram\n"), std::string::npos);
  EXPECT_EQ(m.requests(200), 3);
}

TEST(ServeMetrics, EmptyMetricsStillRenderEveryFamily) {
  const std::string t = ServeMetrics(8).prometheus_text();
  EXPECT_EQ(value_of(t, "mixprec_request_errors_total"), "0");
  EXPECT_EQ(value_of(t, "mixprec_request_duration_seconds_bucket{le=\"+Inf\"}"), "0");
  EXPECT_EQ(value_of(t, "mixprec_batch_size_bucket{le=\"8\"}"), "0");
  EXPECT_EQ(value_of(t, "mixprec_queue_depth"), "0");
}

}  // namespace
}  // namespace mixprec::serve

// serve_routes.h: what `mixprec serve` answers on each route, apart from the HTTP server
// that carries it (mixprec/http/http.h) and the command that starts both (serve_command.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "mixprec/http/http.h"
#include "mixprec/infer/infer.h"
#include "mixprec/serve/serve.h"

namespace mixprec::cli {

// What the handlers share; lives as long as the server.
struct ServeContext {
  const infer::Predictor& predictor;
  serve::DynamicBatcher& batcher;
  serve::ServeMetrics& metrics;
  std::mutex& model_mutex;  // one model, one caller at a time: the batcher's thread or a generation
  int64_t default_top_k = 3;
  int64_t max_inputs = 256;
  int64_t max_batch = 64;
  // The server's connection counts for /metrics (set once the server exists).
  std::function<http::Server::Stats()> connection_stats;
  int threads = 0;  // --threads for the model's work (OpenMP's count is per calling thread)
};

// POST /v1/predict, POST /v1/generate, GET /v1/model, GET /healthz, GET /metrics.
std::vector<http::Route> serve_routes(const ServeContext& context);

// The route label of the metrics: fixed names only, so a client's path cannot make new series.
std::string metrics_route(const std::string& path);

}  // namespace mixprec::cli

// serve_routes.cpp: the handlers of `mixprec serve` (serve_routes.h). Bad requests never reach
// the model: they get 400 with a JSON error naming the problem; a full queue gets 503 with
// Retry-After. Every JSON answer is serialised with invalid UTF-8 replaced (class names,
// paths and a model's bytes need not be UTF-8), so no answer can throw.
#include "serve_routes.h"

#include "commands.h"

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>

namespace mixprec::cli {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// POST /v1/generate makes at most this many bytes per request (a request holds the model for
// its whole generation).
constexpr int64_t kMaxGenerateTokens = 4096;

std::string dump(const json& j, int indent = -1) {
  return j.dump(indent, ' ', false, json::error_handler_t::replace) + "\n";
}

void fail(http::Response& res, int status, const std::string& message) { res = http::error_response(status, message); }

json model_info(const ServeContext& c) {
  const infer::Predictor& p = c.predictor;
  const serve::InputLayout layout = p.layout();
  const nn::ModelSpec& spec = p.spec();
  return {{"model", spec.name},
          {"input_shape", {spec.channels, spec.height, spec.width}},
          {"features", layout.feature_names},
          // What an input is: "image", "table" (features by name) or "text" (strings; the model
          // reads the first max_text_bytes bytes of each).
          {"input", layout.text ? "text" : layout.feature_names.empty() ? "image" : "table"},
          // A language model answers the byte after each prompt (its last max_text_bytes bytes).
          {"task", layout.next_byte ? "next-byte" : "classify"},
          {"max_text_bytes", layout.text ? layout.width : 0},
          {"classes", spec.classes},
          {"class_names", p.class_names()},
          {"precision", p.loaded().preset.name},
          {"parameters", p.parameter_count()},
          {"weight_bytes", p.weight_bytes()},
          {"checkpoint", p.loaded().opened.path},
          {"max_batch", c.max_batch},
          {"max_inputs_per_request", c.max_inputs}};
}

void predict(const ServeContext& c, http::Request& req, http::Response& res) {
  const nn::ModelSpec& spec = c.predictor.spec();
  int64_t top_k = c.default_top_k;
  if (req.has_query("top_k")) {
    const std::string v = req.query_value("top_k");
    char* end = nullptr;
    const long long k = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || k < 1 || k > spec.classes)
      return fail(res, 400, "top_k=" + v + ": expected an integer 1.." + std::to_string(spec.classes));
    top_k = k;
  }
  auto decoded = serve::decode_predict_request(req.body, req.header("content-type"), c.predictor.layout(), c.max_inputs);
  if (!decoded.is_ok()) return fail(res, 400, decoded.status().message());
  auto queued = c.batcher.submit(std::move(decoded->samples));
  req.finish_arrival();  // queued or refused: the batch need not wait for this request any more
  if (!queued.is_ok()) {
    if (queued.status().code() == StatusCode::busy) {
      fail(res, 503, queued.status().message());
      res.set_header("Retry-After", "1");
      return;
    }
    return fail(res, 400, queued.status().message());
  }
  StatusOr<serve::DynamicBatcher::Outputs> outputs = queued->get();
  if (!outputs.is_ok()) return fail(res, 500, outputs.status().message());
  json predictions = json::array();
  for (size_t i = 0; i < outputs->size(); ++i) {
    json top = json::array();
    for (const infer::TopClass& t : c.predictor.top((*outputs)[i], top_k))
      top.push_back({{"class", t.index}, {"name", t.name}, {"probability", t.probability}});
    predictions.push_back({{"input", i}, {"top", top}});
  }
  res.body = dump({{"model", spec.name}, {"precision", c.predictor.loaded().preset.name}, {"predictions", predictions}});
}

// A language model's text, made in the request's thread under the model's lock (a generation
// is a sequence of one-token steps: there is nothing to batch).
void generate(const ServeContext& c, http::Request& req, http::Response& res) {
  const nn::ModelSpec& spec = c.predictor.spec();
  auto* lm = dynamic_cast<nn::StepwiseLanguageModel*>(c.predictor.loaded().model.get());
  if (!spec.language_model || lm == nullptr)
    return fail(res, 404, "POST /v1/generate is for a language model; model " + spec.name + " is a classifier (POST /v1/predict)");
  auto decoded = serve::decode_generate_request(req.body, kMaxGenerateTokens);
  if (!decoded.is_ok()) return fail(res, 400, decoded.status().message());
  const auto t0 = Clock::now();
  std::string text;
  {
    std::lock_guard<std::mutex> lock(c.model_mutex);
    use_threads(c.threads);  // this worker thread runs the model now
    text = infer::generate_text(*lm, c.predictor.loaded().preset.autocast_dtype, decoded->prompt,
                         {decoded->max_tokens, decoded->temperature, decoded->top_k, decoded->seed});
  }
  json bytes = json::array();
  for (unsigned char b : text) bytes.push_back(int(b));
  // Bytes that are not UTF-8 (a model may emit any byte) become U+FFFD in "text"; "bytes" is exact.
  res.body = dump({{"model", spec.name},
                   {"precision", c.predictor.loaded().preset.name},
                   {"text", text},
                   {"bytes", bytes},
                   {"seconds", std::chrono::duration<double>(Clock::now() - t0).count()}});
}

}  // namespace

std::string metrics_route(const std::string& path) {
  for (const char* r : {"/v1/predict", "/v1/generate", "/v1/model", "/healthz", "/metrics"})
    if (path == r) return r;
  return "other";
}

std::vector<http::Route> serve_routes(const ServeContext& context) {
  const ServeContext* c = &context;
  const json model = model_info(context);
  std::vector<http::Route> routes;
  // Cheap answers come from the I/O thread itself, so they answer while every worker waits
  // for the model.
  routes.push_back({"GET", "/healthz", [](http::Request&, http::Response& res) { res.body = "{\"status\": \"ok\"}\n"; },
                    true, {}});
  // The thread count as the model computes now: the adaptive default re-decides before each
  // batch (mixprec/core/threads.h), so it is read per request, not fixed at start.
  routes.push_back({"GET", "/v1/model", [model, c](http::Request&, http::Response& res) {
                      json j = model;
                      const ThreadPolicy& policy = thread_policy(c->threads);
                      j["threads"] = policy.threads();
                      j["thread_policy"] = policy.describe();
                      res.body = dump(j, 2);
                    }, true, {}});
  routes.push_back({"GET", "/metrics", [c](http::Request&, http::Response& res) {
                      c->metrics.set_queue_depth(c->batcher.queued_samples());
                      if (c->connection_stats) {
                        const http::Server::Stats stats = c->connection_stats();
                        c->metrics.set_connections(stats.open_connections, stats.shed_connections);
                      }
                      res.content_type = "text/plain; version=0.0.4";
                      res.body = c->metrics.prometheus_text();
                    }, true, {}});
  // A prediction is announced to the batcher as soon as its head is read, so a batch waits for
  // it while its body arrives and is decoded; the announcement ends once it is queued or
  // refused (the server ends it if the client goes away first).
  routes.push_back({"POST", "/v1/predict", [c](http::Request& req, http::Response& res) { predict(*c, req, res); },
                    false, [c]() -> std::function<void()> {
                      c->batcher.arrival_started();
                      return [c] { c->batcher.arrival_finished(); };
                    }});
  routes.push_back({"POST", "/v1/generate", [c](http::Request& req, http::Response& res) { generate(*c, req, res); },
                    false, {}});
  return routes;
}

}  // namespace mixprec::cli

// serve_command.cpp: `mixprec serve CHECKPOINT`: the model behind an HTTP server (issue 17),
// on Debian's cpp-httplib. Requests are decoded on the HTTP threads (mixprec/serve.h), stacked
// by the dynamic batcher into one forward pass on a single model thread, and answered with
// the same top-k JSON as `predict --json`. This is the only file that includes httplib.h.
//
//   POST /v1/predict   JSON, .npy, PNG or JPEG body -> {"predictions": [{"input": i, "top": [...]}]}
//   POST /v1/generate  a language model's text: {"prompt": ...} -> {"text": ..., "bytes": [...]}
//   GET  /v1/model     name, input shape, classes, precision, parameters, weight bytes
//   GET  /healthz      {"status": "ok"}
//   GET  /metrics      Prometheus text: requests, errors, latency and batch-size histograms, queue
//
// Bad requests never reach the model: 400 (malformed or wrong shape, JSON naming the
// problem), 413 (body over --max-body-bytes), 503 + Retry-After (queue full or shutting
// down), 404/405. SIGTERM or Ctrl-C: stop accepting, answer what is in flight, exit 0.
#include <httplib.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "commands.h"
#include "exit_codes.h"
#include "mixprec/serve.h"
#include "prediction.h"
#include "suggest.h"
#include "text_generation.h"

namespace mixprec::cli {

namespace {

struct ServeFlags {
  std::string checkpoint_positional, checkpoint_flag, precision, host = "127.0.0.1";
  int64_t port = 8080, max_batch = 64, max_wait_us = 2000, max_queue = 1024, workers = 64, top_k = 3;
  int64_t max_body_bytes = 16 << 20, timeout_s = 10, max_inputs = 256;
};

// POST /v1/generate makes at most this many bytes per request (a request holds the model
// for its whole generation).
constexpr int64_t kMaxGenerateTokens = 4096;

std::atomic<bool> g_stop_requested{false};
void request_stop(int) { g_stop_requested.store(true); }

using Clock = std::chrono::steady_clock;
thread_local Clock::time_point t_request_start;  // set by the pre-routing handler
thread_local bool t_request_timed = false;
thread_local bool t_arrival_open = false;  // this thread announced a prediction to the batcher

std::string json_error(const std::string& message) { return nlohmann::json({{"error", message}}).dump() + "\n"; }

// The route label of the metrics: fixed names only, so a client's path cannot make new series.
std::string route_of(const std::string& path) {
  for (const char* r : {"/v1/predict", "/v1/generate", "/v1/model", "/healthz", "/metrics"})
    if (path == r) return r;
  return "other";
}

int run_serve(const ServeFlags& f, const std::string& checkpoint) {
  auto opened = Predictor::open(checkpoint, f.precision);
  if (!opened.is_ok()) return report_predictor_error(opened.status());
  const Predictor predictor = std::move(opened).value();
  const serve::InputLayout layout = predictor.layout();
  const nn::ModelSpec& spec = predictor.spec();
  const std::string precision = predictor.loaded().preset.name;

  serve::ServeMetrics metrics(f.max_batch);
  // One model, used by one caller at a time: the batcher's thread, or a generation.
  std::mutex model_mutex;
  serve::DynamicBatcher batcher(
      {f.max_batch, f.max_wait_us, f.max_queue}, layout.values_per_sample(),
      [&predictor, &model_mutex](const std::vector<float>& x, int64_t n) -> StatusOr<std::vector<std::vector<float>>> {
        std::lock_guard<std::mutex> lock(model_mutex);
        return predictor.probabilities(x, n);
      });
  batcher.set_batch_observer([&metrics](int64_t n) { metrics.record_batch(n); });

  const nlohmann::json model_info = {
      {"model", spec.name},
      {"input_shape", {spec.channels, spec.height, spec.width}},
      {"features", layout.feature_names},
      // What an input is: "image", "table" (features by name) or "text" (strings; the model
      // reads the first max_text_bytes bytes of each).
      {"input", layout.text ? "text" : layout.feature_names.empty() ? "image" : "table"},
      // A language model answers the byte after each prompt (its last max_text_bytes bytes).
      {"task", layout.next_byte ? "next-byte" : "classify"},
      {"max_text_bytes", layout.text ? layout.width : 0},
      {"classes", spec.classes},
      {"class_names", predictor.class_names()},
      {"precision", precision},
      {"parameters", predictor.parameter_count()},
      {"weight_bytes", predictor.weight_bytes()},
      {"checkpoint", predictor.loaded().opened.path},
      {"max_batch", f.max_batch},
      {"max_inputs_per_request", f.max_inputs}};

  httplib::Server server;
  // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, with which a second server
  // on the same port starts silently and takes half the connections.
  int listening_socket = -1;  // the one socket this callback sees: the listening one
  server.set_socket_options([&listening_socket](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listening_socket = sock;
  });
  // Answers go out at once: with Nagle's algorithm on, a small response written in two parts
  // (headers, body) waits for the client's delayed ACK, 40 ms per request on Linux.
  server.set_tcp_nodelay(true);
  const int64_t workers = f.workers;
  server.new_task_queue = [workers] { return new httplib::ThreadPool(size_t(workers)); };
  server.set_payload_max_length(size_t(f.max_body_bytes));
  server.set_read_timeout(time_t(f.timeout_s), 0);
  server.set_write_timeout(time_t(f.timeout_s), 0);

  // A prediction is announced to the batcher as soon as its headers are read, so a batch
  // waits for it while its body is read and decoded; the announcement ends once it is queued
  // or refused (at the latest when its answer is logged).
  auto finish_arrival = [&batcher] {
    if (t_arrival_open) batcher.arrival_finished();
    t_arrival_open = false;
  };
  server.set_pre_routing_handler([&batcher](const httplib::Request& req, httplib::Response&) {
    t_request_start = Clock::now();
    t_request_timed = true;
    if (req.method == "POST" && req.path == "/v1/predict" && !t_arrival_open) {
      batcher.arrival_started();
      t_arrival_open = true;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  server.set_logger([&metrics, finish_arrival](const httplib::Request& req, const httplib::Response& res) {
    finish_arrival();
    const double seconds =
        t_request_timed ? std::chrono::duration<double>(Clock::now() - t_request_start).count() : 0.0;
    t_request_timed = false;
    metrics.record_request(route_of(req.path), res.status, seconds);
  });
  // Errors httplib answers itself (404, 413, a request line it cannot parse) get a JSON body
  // too; the handlers' own errors already have one.
  server.set_error_handler(httplib::Server::HandlerWithResponse(
      [&f](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string message = "HTTP " + std::to_string(res.status);
    if (res.status == 404) message = "no route " + req.method + " " + req.path + " (routes: POST /v1/predict, POST /v1/generate, GET /v1/model, GET /healthz, GET /metrics)";
    if (res.status == 413) message = "the body is larger than --max-body-bytes (" + std::to_string(f.max_body_bytes) + " bytes)";
    if (res.status == 400) message = "a malformed HTTP request";
    res.set_content(json_error(message), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  server.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    res.status = 500;
    res.set_content(json_error("internal error: " + what), "application/json");
  });

  server.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{\"status\": \"ok\"}\n", "application/json");
  });
  server.Get("/v1/model", [&model_info](const httplib::Request&, httplib::Response& res) {
    res.set_content(model_info.dump(2) + "\n", "application/json");
  });
  server.Get("/metrics", [&metrics, &batcher](const httplib::Request&, httplib::Response& res) {
    metrics.set_queue_depth(batcher.queued_samples());
    res.set_content(metrics.prometheus_text(), "text/plain; version=0.0.4");
  });
  server.Post("/v1/predict", [&](const httplib::Request& req, httplib::Response& res) {
    auto fail = [&res, &finish_arrival](int status, const std::string& message) {
      finish_arrival();
      res.status = status;
      res.set_content(json_error(message), "application/json");
    };
    int64_t top_k = f.top_k;
    if (req.has_param("top_k")) {
      const std::string v = req.get_param_value("top_k");
      char* end = nullptr;
      const long long k = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || k < 1 || k > spec.classes)
        return fail(400, "top_k=" + v + ": expected an integer 1.." + std::to_string(spec.classes));
      top_k = k;
    }
    auto decoded = serve::decode_predict_request(req.body, req.get_header_value("Content-Type"), layout, f.max_inputs);
    if (!decoded.is_ok()) return fail(400, decoded.status().message());
    auto queued = batcher.submit(std::move(decoded->samples));
    finish_arrival();
    if (!queued.is_ok()) {
      if (queued.status().code() == StatusCode::busy) {
        res.set_header("Retry-After", "1");
        return fail(503, queued.status().message());
      }
      return fail(400, queued.status().message());
    }
    StatusOr<serve::DynamicBatcher::Outputs> outputs = queued->get();
    if (!outputs.is_ok()) return fail(500, outputs.status().message());
    nlohmann::json predictions = nlohmann::json::array();
    for (size_t i = 0; i < outputs->size(); ++i) {
      nlohmann::json top = nlohmann::json::array();
      for (const TopClass& t : predictor.top((*outputs)[i], top_k))
        top.push_back({{"class", t.index}, {"name", t.name}, {"probability", t.probability}});
      predictions.push_back({{"input", i}, {"top", top}});
    }
    res.set_content(nlohmann::json({{"model", spec.name}, {"precision", precision}, {"predictions", predictions}}).dump() + "\n",
                    "application/json");
  });

  // A language model's text, made in the request's thread under the model's lock (a
  // generation is a sequence of one-token steps: there is nothing to batch).
  server.Post("/v1/generate", [&](const httplib::Request& req, httplib::Response& res) {
    auto fail = [&res](int status, const std::string& message) {
      res.status = status;
      res.set_content(json_error(message), "application/json");
    };
    auto* lm = dynamic_cast<nn::StepwiseLanguageModel*>(predictor.loaded().model.get());
    if (!spec.language_model || lm == nullptr)
      return fail(404, "POST /v1/generate is for a language model; model " + spec.name + " is a classifier (POST /v1/predict)");
    auto decoded = serve::decode_generate_request(req.body, kMaxGenerateTokens);
    if (!decoded.is_ok()) return fail(400, decoded.status().message());
    const auto t0 = Clock::now();
    std::string text;
    {
      std::lock_guard<std::mutex> lock(model_mutex);
      text = generate_text(*lm, predictor.loaded().preset.autocast_dtype, decoded->prompt,
                           {decoded->max_tokens, decoded->temperature, decoded->top_k, decoded->seed});
    }
    nlohmann::json bytes = nlohmann::json::array();
    for (unsigned char c : text) bytes.push_back(int(c));
    const nlohmann::json answer = {{"model", spec.name},
                                   {"precision", precision},
                                   {"text", text},
                                   {"bytes", bytes},
                                   {"seconds", std::chrono::duration<double>(Clock::now() - t0).count()}};
    // Bytes that are not UTF-8 (a model may emit any byte) become U+FFFD in "text"; "bytes" is exact.
    res.set_content(answer.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", "application/json");
  });

  const int port = f.port == 0 ? server.bind_to_any_port(f.host) : (server.bind_to_port(f.host, int(f.port)) ? int(f.port) : -1);
  if (port < 0) {
    std::fprintf(stderr, "mixprec: serve: cannot listen on %s:%lld (in use, or not an address of this machine)\n",
                 f.host.c_str(), (long long)f.port);
    return kExitBusy;
  }
  // cpp-httplib 0.11 listens with a backlog of 5 (compiled into Debian's library): a burst
  // of new connections beyond it was reset. Linux takes a second listen() as a new backlog.
  if (listening_socket >= 0) ::listen(listening_socket, SOMAXCONN);
  // SIGTERM (a service manager) and Ctrl-C stop the server gracefully; the watcher turns the
  // flag into server.stop(), which is not async-signal-safe to call from the handler.
  struct sigaction sa {};
  sa.sa_handler = request_stop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done.load()) {
      if (g_stop_requested.load()) {
        std::fprintf(stderr, "mixprec serve: stopping: no new connections; answering the requests in flight\n");
        server.stop();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });

  std::printf("mixprec serve: model %s (%lld parameters, %s, weights %.2f MiB), %lldx%lldx%lld inputs, %lld classes\n",
              spec.name.c_str(), (long long)predictor.parameter_count(), precision.c_str(),
              double(predictor.weight_bytes()) / (1 << 20), (long long)spec.channels, (long long)spec.height,
              (long long)spec.width, (long long)spec.classes);
  std::printf("mixprec serve: batches of up to %lld samples, waiting up to %lld us; queue %lld samples; %lld HTTP threads\n",
              (long long)f.max_batch, (long long)f.max_wait_us, (long long)f.max_queue, (long long)f.workers);
  std::printf("mixprec serve: listening on http://%s:%d (POST /v1/predict%s, GET /v1/model, /healthz, /metrics)\n",
              f.host.c_str(), port, spec.language_model ? ", POST /v1/generate" : "");
  std::fflush(stdout);
  const bool listened = server.listen_after_bind();
  done.store(true);
  watcher.join();
  batcher.stop();
  if (!listened && !g_stop_requested.load()) {
    std::fprintf(stderr, "mixprec: serve: the listening socket failed\n");
    return kExitRuntime;
  }
  std::fprintf(stderr, "mixprec serve: stopped after %lld requests\n", (long long)(metrics.requests(200)));
  return kExitOk;
}

}  // namespace

Runner add_serve_command(CLI::App& app) {
  auto f = std::make_shared<ServeFlags>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve a checkpoint's model over HTTP with dynamic batching (POST /v1/predict; a language model also POST /v1/generate)");
  add_checkpoint_argument(cmd, f->checkpoint_positional, f->checkpoint_flag,
                          "A .safetensors checkpoint, a run directory or a plain weights file");
  cmd->add_option("--precision", f->precision, inference_precision_help())->check(inference_precision());
  cmd->add_option("--host", f->host, "Address to listen on (0.0.0.0: every interface)")->capture_default_str();
  cmd->add_option("--port", f->port, "TCP port (0: any free port, printed at start)")
      ->check(integer_in(0, 65535))->capture_default_str();
  cmd->add_option("--max-batch", f->max_batch, "Samples per forward pass")->check(integer_in(1, 4096))->capture_default_str();
  cmd->add_option("--max-wait-us", f->max_wait_us, "Longest wait of a queued request for requests already arriving to share its forward pass")
      ->check(integer_in(0, 10'000'000))->capture_default_str();
  cmd->add_option("--max-queue", f->max_queue, "Samples that may wait; beyond it requests get 503 with Retry-After")
      ->check(integer_in(1, 1 << 20))->capture_default_str();
  cmd->add_option("--max-inputs", f->max_inputs, "Inputs per request (400 beyond)")
      ->check(integer_in(1, 1 << 16))->capture_default_str();
  cmd->add_option("--workers", f->workers,
                  "HTTP threads: requests handled at once (each waits for its forward pass, so at least "
                  "--max-batch for full batches)")
      ->check(integer_in(1, 4096))->capture_default_str();
  cmd->add_option("--max-body-bytes", f->max_body_bytes, "Largest request body (413 beyond)")
      ->check(integer_in(64, int64_t(1) << 31))->capture_default_str();
  cmd->add_option("--timeout", f->timeout_s, "Seconds a slow client may take to send a request or read the answer")
      ->check(integer_in(1, 3600))->capture_default_str();
  cmd->add_option("--top-k", f->top_k, "Classes per prediction (a request may ask ?top_k=N)")
      ->check(integer_in(1, 1000))->capture_default_str();
  return [f]() -> int {
    auto checkpoint = chosen_checkpoint(f->checkpoint_positional, f->checkpoint_flag);
    if (!checkpoint) return kExitUsage;
    if (f->max_queue < f->max_inputs) {
      std::fprintf(stderr, "mixprec: usage error: --max-queue (%lld) must be at least --max-inputs (%lld): a full-size "
                   "request would never fit the queue\n", (long long)f->max_queue, (long long)f->max_inputs);
      return kExitUsage;
    }
    return run_serve(*f, *checkpoint);
  };
}

}  // namespace mixprec::cli

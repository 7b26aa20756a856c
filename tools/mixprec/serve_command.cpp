// serve_command.cpp: `mixprec serve CHECKPOINT`: the model behind mixprec's HTTP server
// (mixprec/http/http.h; issues 17 and 31). Requests are decoded on the worker threads
// (mixprec/serve/serve.h), stacked by the dynamic batcher into one forward pass on a single model
// thread, and answered with the same top-k JSON as `predict --json` (serve_routes.cpp).
//
//   POST /v1/predict   JSON, .npy, PNG or JPEG body -> {"predictions": [{"input": i, "top": [...]}]}
//   POST /v1/generate  a language model's text: {"prompt": ...} -> {"text": ..., "bytes": [...]}
//   GET  /v1/model     name, input shape, classes, precision, parameters, weight bytes, threads
//   GET  /healthz      {"status": "ok"}
//   GET  /metrics      Prometheus text: requests, errors, latency and batch-size histograms, queue
//
// Bad requests never reach the model: 400 (malformed or wrong shape, JSON naming the
// problem), 413 (body over --max-body-bytes), 408 (not sent within --timeout), 503 +
// Retry-After (queue full, or --max-connections busy connections), 404/405. SIGTERM or
// Ctrl-C: stop accepting, answer what is in flight, exit 0.
#include <signal.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

#include "commands.h"
#include "exit_codes.h"
#include "inference_messages.h"
#include "mixprec/http/http.h"
#include "mixprec/infer/infer.h"
#include "mixprec/serve/serve.h"
#include "serve_routes.h"
#include "suggest.h"

namespace mixprec::cli {

namespace {

struct ServeFlags {
  int threads = 0;  // --threads (0: OpenMP's choice)
  std::string checkpoint_positional, checkpoint_flag, precision, host = "127.0.0.1";
  int64_t port = 8080, max_batch = 64, max_wait_us = 2000, max_queue = 1024, workers = 64, top_k = 3;
  int64_t max_body_bytes = 16 << 20, timeout_s = 10, max_inputs = 256, max_connections = 512, keep_alive_s = 5;
};

std::atomic<bool> g_stop_requested{false};
void request_stop(int) { g_stop_requested.store(true); }

void print_banner(const ServeFlags& f, const infer::Predictor& predictor, int port) {
  const nn::ModelSpec& spec = predictor.spec();
  std::printf("mixprec serve: model %s (%lld parameters, %s, weights %.2f MiB), %lldx%lldx%lld inputs, %lld classes\n",
              spec.name.c_str(), (long long)predictor.parameter_count(), predictor.loaded().preset.name.c_str(),
              double(predictor.weight_bytes()) / (1 << 20), (long long)spec.channels, (long long)spec.height,
              (long long)spec.width, (long long)spec.classes);
  std::printf("mixprec serve: batches of up to %lld samples, waiting up to %lld us; queue %lld samples; %lld HTTP "
              "threads; at most %lld connections\n",
              (long long)f.max_batch, (long long)f.max_wait_us, (long long)f.max_queue, (long long)f.workers,
              (long long)f.max_connections);
  // The model's thread count, decided now (the model's loading was the policy's first window)
  // so that an operator sees what the server computes on; GET /v1/model says it later.
  ThreadPolicy& threads = thread_policy(f.threads);
  threads.settle();
  std::printf("mixprec serve: threads: %s%s\n", threads.describe().c_str(),
              threads.adaptive() ? ", re-decided before each batch (GET /v1/model: the current count)" : "");
  std::printf("mixprec serve: listening on http://%s:%d (POST /v1/predict%s, GET /v1/model, /healthz, /metrics)\n",
              f.host.c_str(), port, spec.language_model ? ", POST /v1/generate" : "");
  std::fflush(stdout);
}

// SIGTERM (a service manager) and Ctrl-C stop the server gracefully. The handler only sets a
// flag (server.stop() is not async-signal-safe); this thread turns it into stop().
class StopOnSignal {
 public:
  explicit StopOnSignal(http::Server& server) {
    struct sigaction sa {};
    sa.sa_handler = request_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    watcher_ = std::thread([this, &server] {
      while (!done_.load()) {
        if (g_stop_requested.load()) {
          std::fprintf(stderr, "mixprec serve: stopping: no new connections; answering the requests in flight\n");
          server.stop();
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }
  ~StopOnSignal() {
    done_.store(true);
    watcher_.join();
  }

 private:
  std::atomic<bool> done_{false};
  std::thread watcher_;
};

// Each connection is a descriptor: the soft limit (1024 on Debian) is raised towards the hard
// one so that --max-connections, not EMFILE, is what bounds them.
void allow_descriptors_for(int64_t connections) {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return;
  const rlim_t wanted = rlim_t(connections) + 256;  // + the model's files, the log, the epoll set
  if (r.rlim_cur >= wanted) return;
  r.rlim_cur = std::min(wanted, r.rlim_max);
  setrlimit(RLIMIT_NOFILE, &r);
}

int run_serve(const ServeFlags& f, const std::string& checkpoint) {
  auto opened = infer::Predictor::open(checkpoint, f.precision);
  if (!opened.is_ok()) return report_predictor_error(opened.status());
  const infer::Predictor predictor = std::move(opened).value();

  serve::ServeMetrics metrics(f.max_batch);
  std::mutex model_mutex;
  serve::DynamicBatcher batcher(
      {f.max_batch, f.max_wait_us, f.max_queue}, predictor.layout().values_per_sample(),
      [&predictor, &model_mutex, &f](const std::vector<float>& x, int64_t n) -> StatusOr<std::vector<std::vector<float>>> {
        // OpenMP's thread count is per thread: the model runs on the batcher's thread.
        use_threads(f.threads);
        std::lock_guard<std::mutex> lock(model_mutex);
        return predictor.probabilities(x, n);
      });
  batcher.set_batch_observer([&metrics](int64_t n) { metrics.record_batch(n); });
  ServeContext context{predictor, batcher, metrics, model_mutex, f.top_k, f.max_inputs, f.max_batch, {}, int(f.threads)};

  http::ServerOptions options;
  options.host = f.host;
  options.port = int(f.port);
  options.workers = f.workers;
  options.max_connections = f.max_connections;
  options.request_timeout = options.write_timeout = std::chrono::seconds(f.timeout_s);
  options.idle_timeout = std::chrono::seconds(f.keep_alive_s);
  options.limits.max_body_bytes = f.max_body_bytes;
  options.limits.body_limit_flag = "--max-body-bytes";
  options.max_buffered_body_bytes = std::max<int64_t>(f.max_body_bytes, 256 << 20);
  options.on_response = [&metrics](const http::Request& req, int status, double seconds) {
    metrics.record_request(metrics_route(req.path), status, seconds);
  };
  allow_descriptors_for(f.max_connections);
  http::Server server(options, serve_routes(context));
  context.connection_stats = [&server] { return server.stats(); };
  if (Status bound = server.bind(); !bound.is_ok()) {
    std::fprintf(stderr, "mixprec: serve: cannot listen on %s:%lld: %s\n", f.host.c_str(), (long long)f.port,
                 bound.message().c_str());
    return bound.code() == StatusCode::busy ? kExitBusy : kExitUsage;
  }
  print_banner(f, predictor, server.port());
  Status served;
  {
    StopOnSignal stop_on_signal(server);
    served = server.run();
  }
  batcher.stop();
  if (!served.is_ok()) {
    std::fprintf(stderr, "mixprec: serve: %s\n", served.message().c_str());
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
  cmd->add_option("--timeout", f->timeout_s,
                  "Seconds a client may take to send a whole request (from its first byte; 408 beyond), and again to "
                  "read the answer")
      ->check(integer_in(1, 3600))->capture_default_str();
  cmd->add_option("--keep-alive-timeout", f->keep_alive_s, "Seconds an idle connection is kept open for its next request")
      ->check(integer_in(1, 3600))->capture_default_str();
  cmd->add_option("--max-connections", f->max_connections,
                  "Open connections at most: beyond it the longest-idle one is closed, or the newcomer gets 503")
      ->check(integer_in(1, 1 << 16))->capture_default_str();
  cmd->add_option("--top-k", f->top_k, "Classes per prediction (a request may ask ?top_k=N)")
      ->check(integer_in(1, 1000))->capture_default_str();
  add_threads_option(cmd, f->threads);
  return [f]() -> int {
    thread_policy(f->threads);  // measuring starts; each batch applies the policy (use_threads)
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

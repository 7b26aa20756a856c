// dashboard_command.cpp: `mixprec dashboard DIR...`: a local web page of the runs under the
// given folders (issue 33; docs/dashboard.md), served by mixprec's HTTP server
// (mixprec/http/http.h): a table of runs and experiments, each run's charts updating while it
// trains, its config and the command that reproduces it. The page, its script and style are
// compiled in (tools/mixprec/web/); the charts are drawn with Debian's Chart.js
// (libjs-chart.js), read from its installed path and served by this process: the page loads
// nothing from the network. Binds 127.0.0.1 unless told otherwise.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "commands.h"
#include "dashboard_routes.h"
#include "exit_codes.h"
#include "mixprec/io/files.h"

namespace mixprec::cli {

namespace {

// Where Debian's libjs-chart.js (3.9) puts its browser build; MIXPREC_CHART_JS overrides it
// (another distribution's path, or a test of the missing-file message).
constexpr const char* kChartJsPath = "/usr/share/javascript/chart.js/chart.min.js";

struct DashboardFlags {
  std::vector<std::string> dirs;
  std::string host = "127.0.0.1";
  int64_t port = 8080;
};

std::string url_host(const std::string& host) { return host.find(':') != std::string::npos ? "[" + host + "]" : host; }

// The Host headers a browser sends for this address. For a loopback address only these are
// answered (DNS rebinding); a server bound to other interfaces is reached by names we cannot
// know, so any Host is accepted there.
std::vector<std::string> allowed_hosts(const std::string& host, int port) {
  const std::string p = ":" + std::to_string(port);
  if (host == "127.0.0.1" || host == "localhost" || host == "::1")
    return {url_host(host) + p, "127.0.0.1" + p, "localhost" + p, "[::1]" + p};
  return {};
}

int run_dashboard(const DashboardFlags& f) {
  const char* env = std::getenv("MIXPREC_CHART_JS");
  const std::string chart_path = env && *env ? env : kChartJsPath;
  auto chart = io::read_regular_file(chart_path, "Chart.js", 64 << 20);
  if (!chart.is_ok()) {
    std::fprintf(stderr,
                 "mixprec: error: dashboard: cannot read Chart.js at %s (%s): it comes from Debian's package "
                 "libjs-chart.js (scripts/setup installs it; or apt-get install libjs-chart.js). The dashboard draws its "
                 "charts with it and loads nothing from the network\n",
                 chart_path.c_str(), chart.status().message().c_str());
    return kExitRuntime;
  }
  auto roots = runs::RunRoots::open(f.dirs);
  if (!roots.is_ok()) {
    std::fprintf(stderr, "mixprec: usage error: dashboard: %s\n", roots.status().message().c_str());
    return kExitUsage;
  }
  DashboardContext context{std::move(roots).value(), std::move(chart).value(), program_name(), {}, {}, {}};
  const runs::RunIndex index = context.roots.scan();

  // SIGINT and SIGTERM are taken by one thread with sigwait: blocked before the server's
  // threads start, so they inherit the mask and none of them is interrupted.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  http::ServerOptions options;
  options.host = f.host;
  options.port = int(f.port);
  options.workers = 4;  // one person's browser: a few polls at a time
  options.max_connections = 64;
  options.limits.max_body_bytes = 4096;  // every route is a GET
  http::Server server(options, dashboard_routes(context));
  if (Status bound = server.bind(); !bound.is_ok()) {
    std::fprintf(stderr, "mixprec: dashboard: cannot listen on %s:%lld: %s\n", f.host.c_str(), (long long)f.port,
                 bound.message().c_str());
    return bound.code() == StatusCode::busy ? kExitBusy : kExitUsage;
  }
  context.allowed_hosts = allowed_hosts(f.host, server.port());
  std::printf("mixprec dashboard: %zu runs in %zu experiments under", index.runs.size(), index.experiments.size());
  for (const std::string& d : f.dirs) std::printf(" %s", d.c_str());
  std::printf("%s; charts by %s\n", index.truncated ? " (listing stopped at 5000)" : "", chart_path.c_str());
  std::printf("mixprec dashboard: listening on http://%s:%d/ (Ctrl-C stops)\n", url_host(f.host).c_str(), server.port());
  std::fflush(stdout);

  std::thread stopper([&server, stop_signals] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    server.stop();
  });
  const Status served = server.run();
  pthread_kill(stopper.native_handle(), SIGTERM);  // ends the wait if run() ended by itself
  stopper.join();
  if (!served.is_ok()) {
    std::fprintf(stderr, "mixprec: dashboard: %s\n", served.message().c_str());
    return kExitRuntime;
  }
  return kExitOk;
}

}  // namespace

Runner add_dashboard_command(CLI::App& app) {
  auto f = std::make_shared<DashboardFlags>();
  CLI::App* cmd = app.add_subcommand(
      "dashboard", "A local web page of the runs under DIR... (run directories, experiments' trials): tables, live charts, configs");
  cmd->add_option("dirs", f->dirs, "Run directories, or folders holding them (experiments, runs/)")->required()->expected(1, -1);
  cmd->add_option("--host", f->host, "Address to listen on (127.0.0.1: this machine only; 0.0.0.0: every interface)")
      ->capture_default_str();
  cmd->add_option("--port", f->port, "TCP port (0: any free port, printed at start)")->check(integer_in(0, 65535))->capture_default_str();
  return [f]() -> int { return run_dashboard(*f); };
}

}  // namespace mixprec::cli

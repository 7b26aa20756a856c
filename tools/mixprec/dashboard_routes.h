// dashboard_routes.h: what `mixprec dashboard` answers (docs/dashboard.md): its page, Debian's
// Chart.js, and the JSON API over the runs under the folders it was given (run_index.h).
#pragma once
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/http/http.h"
#include "mixprec/io/run_index.h"

namespace mixprec::cli {

// A file of tools/mixprec/web/ compiled into the binary (cmake/embed_web_assets.cmake), or
// an empty view for an unknown name.
std::string_view web_asset(std::string_view name);

// What a run's table row shows, folded from the lines of its metrics.jsonl read so far.
struct RunSummary {
  uint64_t offset = 0;  // of metrics.jsonl: what has been folded in
  std::string file_id;
  std::string last_step;   // the newest step record (JSON text), "" before the first
  std::string last_eval;   // the newest eval record
  double best_accuracy = -1;
  int64_t steps_logged = 0, skipped_steps = 0;
};

struct DashboardContext {
  runs::RunRoots roots;
  std::string chart_js;      // the file's bytes, read at start
  std::string program;       // how the user started mixprec, for the reproduce command
  std::vector<std::string> allowed_hosts;  // Host headers accepted ("127.0.0.1:8080", ...); empty: any
  std::mutex summaries_mutex;
  std::map<std::string, RunSummary> summaries;  // by run id
};

// GET / (the page), /dashboard.js, /dashboard.css, /chart.min.js, /api/runs,
// /api/run?id=ID, /api/metrics?id=ID&from=OFFSET&file=FILE_ID.
std::vector<http::Route> dashboard_routes(DashboardContext& context);

// The largest piece of a metrics.jsonl one /api/metrics answer carries (the page asks again
// at once while "more" is true).
inline constexpr uint64_t kMetricsChunkBytes = 4 << 20;

}  // namespace mixprec::cli

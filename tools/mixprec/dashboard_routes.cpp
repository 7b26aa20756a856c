// dashboard_routes.cpp: the handlers of `mixprec dashboard` (dashboard_routes.h). Every file
// opened comes from an id checked by runs::RunRoots (no "..", no absolute path, no symlink out
// of the given folders); a bad id is a 400, an id naming nothing there a 404. Metrics are read
// incrementally: each run's table row keeps the offset of what it has folded in, and the
// page asks /api/metrics for the lines after its own offset, so no poll reads a file again.
// Every answer is JSON serialised with invalid UTF-8 replaced (folder names are any bytes).
#include "dashboard_routes.h"

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "mixprec/io/files.h"
#include "mixprec/io/run_dir.h"

namespace mixprec::cli {

namespace {

using nlohmann::json;

// No inline script or style from data can run even if escaping failed somewhere: scripts and
// connections only from this server (Chart.js sets canvas sizes through style properties,
// which a CSP does not restrict).
constexpr const char* kContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

// A state file beside an experiment's trials is shown whole; a bigger one is named, not read.
constexpr uint64_t kMaxStateFileBytes = 256 << 10;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n"; }

void fail(http::Response& res, const Status& s) {
  const int code = s.code() == StatusCode::invalid_argument ? 400 : s.code() == StatusCode::not_found ? 404 : 500;
  res = http::error_response(code, s.message());
}

// For a POSIX shell: single quotes, a quote inside as '\''.
std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

json parse_object(const std::string& text) {
  if (!runs::json_depth_ok(text)) return json();
  json j = json::parse(text, nullptr, false);
  return j.is_object() ? j : json();
}

// The settings a table can sort by: config.json's top-level numbers, strings and booleans
// (a model file's text and other long strings left out).
json config_scalars(const json& config) {
  json out = json::object();
  if (!config.is_object()) return out;
  for (auto it = config.begin(); it != config.end(); ++it)
    if (it->is_number() || it->is_boolean() || (it->is_string() && it->get_ref<const std::string&>().size() <= 200))
      out[it.key()] = *it;
  return out;
}

json read_config(const runs::RunRoots& roots, const std::string& id) {
  auto path = roots.resolve_file(id, "config.json");
  if (!path.is_ok()) return json();
  auto text = read_run_config(*path);
  if (!text.is_ok() || !text->has_value()) return json();
  return parse_object(**text);
}

void fold(RunSummary& s, const std::string& line) {
  const json j = parse_object(line);
  if (!j.is_object() || !j.contains("type")) return;
  if (j["type"] == "step") {
    ++s.steps_logged;
    if (j.contains("skipped") && j["skipped"].is_boolean() && j["skipped"].get<bool>()) ++s.skipped_steps;
    s.last_step = line;
  } else if (j["type"] == "eval") {
    s.last_eval = line;
    if (j.contains("accuracy") && j["accuracy"].is_number()) s.best_accuracy = std::max(s.best_accuracy, j["accuracy"].get<double>());
  }
}

// Folds in what the run's log gained since the last call (at most 4 chunks' worth per call:
// a huge log catches up over a few polls instead of holding the answer).
json updated_summary(DashboardContext& c, const std::string& id) {
  auto path = c.roots.resolve_file(id, "metrics.jsonl");
  if (!path.is_ok()) return json();
  std::lock_guard<std::mutex> lock(c.summaries_mutex);
  RunSummary& s = c.summaries[id];
  auto got = runs::read_new_lines(*path, s.offset, s.file_id, 4 * kMetricsChunkBytes);
  if (!got.is_ok()) return {{"error", got.status().message()}};
  if (got->reset) s = RunSummary{};
  for (const std::string& line : got->lines) fold(s, line);
  s.offset = got->offset;
  s.file_id = got->file_id;
  return {{"step", s.last_step.empty() ? json() : parse_object(s.last_step)},
          {"eval", s.last_eval.empty() ? json() : parse_object(s.last_eval)},
          {"best_accuracy", s.best_accuracy < 0 ? json() : json(s.best_accuracy)},
          {"steps_logged", s.steps_logged},
          {"skipped_steps", s.skipped_steps},
          {"caught_up", s.offset >= got->size}};
}

json state_files(const runs::RunRoots& roots, const runs::ExperimentEntry& e) {
  json files = json::array();
  for (const std::string& name : e.json_files) {
    json f = {{"file", name}};
    auto path = roots.resolve_file(e.id, name);
    auto text = path.is_ok() ? io::read_regular_file(*path, "experiment state file", kMaxStateFileBytes)
                             : StatusOr<std::string>(path.status());
    if (!text.is_ok()) {
      f["error"] = text.status().message();
    } else {
      json j = runs::json_depth_ok(*text) ? json::parse(*text, nullptr, false) : json(json::value_t::discarded);
      if (j.is_discarded()) f["error"] = name + ": not valid JSON (or nested deeper than 64 levels)";
      else f["fields"] = std::move(j);
    }
    files.push_back(std::move(f));
  }
  return files;
}

void list_runs(DashboardContext& c, http::Response& res) {
  const runs::RunIndex index = c.roots.scan();
  std::vector<std::string> dirs;
  for (const runs::RunEntry& r : index.runs) {
    auto dir = c.roots.resolve_run(r.id);
    dirs.push_back(dir.is_ok() ? *dir : "");
  }
  const std::vector<bool> held = runs::run_locks_held(dirs);
  json list = json::array();
  for (size_t i = 0; i < index.runs.size(); ++i) {
    const runs::RunEntry& r = index.runs[i];
    if (dirs[i].empty()) continue;  // gone since the scan
    list.push_back({{"id", r.id},
                    {"name", r.name},
                    {"path", c.roots.display_path(r.id)},
                    {"experiment", r.experiment},
                    {"state", held[i] ? "running" : "finished"},
                    {"config", config_scalars(read_config(c.roots, r.id))},
                    {"latest", updated_summary(c, r.id)}});
  }
  json experiments = json::array();
  for (const runs::ExperimentEntry& e : index.experiments)
    experiments.push_back({{"id", e.id}, {"name", e.name}, {"path", c.roots.display_path(e.id)}, {"state_files", state_files(c.roots, e)}});
  res.body = dump({{"roots", c.roots.given()}, {"truncated", index.truncated}, {"experiments", experiments}, {"runs", list}});
}

void run_details(DashboardContext& c, const http::Request& req, http::Response& res) {
  const std::string id = req.query_value("id");
  auto dir = c.roots.resolve_run(id);
  if (!dir.is_ok()) return fail(res, dir.status());
  const std::string path = c.roots.display_path(id);
  std::string copy = path;
  while (copy.size() > 1 && copy.back() == '/') copy.pop_back();
  // A run's own config.json is a recipe (docs/cli.md, --config): the same settings, into a
  // new folder so the original run stays as it is.
  const std::string reproduce = c.program + " train --config " + shell_quote(path + "/config.json") + " --run-dir " +
                                shell_quote(copy + "-reproduced");
  res.body = dump({{"id", id}, {"path", path}, {"config", read_config(c.roots, id)}, {"reproduce", reproduce}});
}

bool parse_offset(const std::string& text, uint64_t& out) {
  if (text.empty()) {
    out = 0;
    return true;
  }
  if (text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos) return false;
  out = std::strtoull(text.c_str(), nullptr, 10);
  return true;
}

void run_metrics(DashboardContext& c, const http::Request& req, http::Response& res) {
  const std::string id = req.query_value("id");
  uint64_t from = 0;
  if (!parse_offset(req.query_value("from"), from))
    return fail(res, Status::invalid_argument("from=" + req.query_value("from") + ": expected a byte offset (an integer >= 0)"));
  auto dir = c.roots.resolve_run(id);
  if (!dir.is_ok()) return fail(res, dir.status());
  auto path = c.roots.resolve_file(id, "metrics.jsonl");
  if (!path.is_ok()) return fail(res, path.status());
  auto got = runs::read_new_lines(*path, from, req.query_value("file"), kMetricsChunkBytes);
  if (!got.is_ok()) return fail(res, got.status());
  json records = json::array();
  int64_t bad = 0;
  for (const std::string& line : got->lines) {
    json j = parse_object(line);
    if (j.is_object()) records.push_back(std::move(j));
    else bad += line.find_first_not_of(" \t\r") != std::string::npos;
  }
  res.body = dump({{"offset", got->offset},
                   {"size", got->size},
                   {"file", got->file_id},
                   {"reset", got->reset},
                   {"more", got->more},
                   {"records", records},
                   {"bad_lines", bad}});
}

// Every answer: the Host check (a web page elsewhere must not reach this server through a
// DNS name rebound to 127.0.0.1) and headers that keep data from ever running as script.
http::Handler guarded(const DashboardContext* c, bool api, http::Handler handler) {
  return [c, api, handler](http::Request& req, http::Response& res) {
    const std::string host = req.header("host");
    if (!c->allowed_hosts.empty() &&
        std::find(c->allowed_hosts.begin(), c->allowed_hosts.end(), host) == c->allowed_hosts.end()) {
      res = http::error_response(403, "Host '" + host + "' is not this dashboard's address (" + c->allowed_hosts.front() +
                                          "): refused, as a page elsewhere could reach it through a DNS name");
    } else {
      handler(req, res);
    }
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Content-Security-Policy", kContentSecurityPolicy);
    res.set_header("Referrer-Policy", "no-referrer");
    res.set_header("Cache-Control", api ? "no-store" : "no-cache");
  };
}

http::Route asset(const DashboardContext* c, const std::string& path, std::string_view body, const char* type) {
  const std::string text(body);
  return {"GET", path, guarded(c, false, [text, type](http::Request&, http::Response& res) {
            res.content_type = type;
            res.body = text;
          }), false, {}};
}

}  // namespace

std::vector<http::Route> dashboard_routes(DashboardContext& context) {
  DashboardContext* c = &context;
  std::vector<http::Route> routes;
  routes.push_back(asset(c, "/", web_asset("dashboard.html"), "text/html; charset=utf-8"));
  routes.push_back(asset(c, "/dashboard.js", web_asset("dashboard.js"), "text/javascript; charset=utf-8"));
  routes.push_back(asset(c, "/dashboard.css", web_asset("dashboard.css"), "text/css; charset=utf-8"));
  routes.push_back(asset(c, "/chart.min.js", context.chart_js, "text/javascript; charset=utf-8"));
  routes.push_back({"GET", "/api/runs", guarded(c, true, [c](http::Request&, http::Response& res) { list_runs(*c, res); }),
                    false, {}});
  routes.push_back({"GET", "/api/run", guarded(c, true, [c](http::Request& req, http::Response& res) { run_details(*c, req, res); }),
                    false, {}});
  routes.push_back({"GET", "/api/metrics",
                    guarded(c, true, [c](http::Request& req, http::Response& res) { run_metrics(*c, req, res); }), false, {}});
  return routes;
}

}  // namespace mixprec::cli

// checkpoint_gc.cpp: see checkpoint_gc.h.
#include "experiment/checkpoint_gc.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "mixprec/io/checkpoint.h"
#include "mixprec/experiment/experiment.h"
#include "mixprec/io/files.h"
#include "mixprec/io/run_dir.h"

namespace mixprec::experiment {

StatusOr<GcResult> collect_checkpoints(const std::string& run_dir, const std::string& metric, bool smaller_is_better,
                                       int64_t keep, bool keep_newest) {
  auto paths = list_checkpoints(run_dir);  // newest first, as paths
  if (!paths.is_ok()) return paths.status();
  GcResult out;
  if (paths->empty()) return out;
  // File names: what pointers hold.
  auto listed = std::make_unique<std::vector<std::pair<int64_t, std::string>>>();
  for (const auto& [step, path] : *paths) listed->emplace_back(step, std::filesystem::path(path).filename().string());
  std::map<int64_t, double> at_step;  // the metric of the evaluation at each step
  auto metrics = read_metrics(run_dir + "/metrics.jsonl");
  if (metrics.is_ok())
    for (const MetricsRecord& r : metrics->records)
      if (r.kind == MetricsRecord::Kind::eval) at_step[r.step] = metric == "loss" ? r.loss : r.accuracy;
  auto value = [&](int64_t step) {
    auto it = at_step.find(step);
    return it == at_step.end() ? NAN : it->second;
  };
  std::vector<std::pair<int64_t, std::string>> ranked = *listed;
  // Best first; a checkpoint without an evaluation ranks last; ties to the newer one.
  std::stable_sort(ranked.begin(), ranked.end(), [&](const auto& a, const auto& b) {
    return better(value(a.first), value(b.first), smaller_is_better);
  });
  std::vector<std::string> kept;
  for (size_t i = 0; i < ranked.size() && int64_t(i) < keep; ++i) kept.push_back(ranked[i].second);
  const std::string newest = listed->front().second;
  if (keep_newest && std::find(kept.begin(), kept.end(), newest) == kept.end()) kept.push_back(newest);
  auto is_kept = [&](const std::string& f) { return std::find(kept.begin(), kept.end(), f) != kept.end(); };
  // The newest kept (listed is newest first), and the best kept.
  std::string newest_kept, best_kept = ranked.front().second;
  for (const auto& [step, file] : *listed)
    if (is_kept(file)) {
      newest_kept = file;
      break;
    }
  namespace fs = std::filesystem;
  // Pointers first: each names a kept file before any other file goes.
  for (const auto& [which, want] : {std::pair<std::string, std::string>{"last", newest_kept}, {"best", best_kept}}) {
    auto text = io::read_regular_file(run_dir + "/" + which + ".json", "pointer", 65536);
    if (!text.is_ok()) continue;  // no such pointer
    const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
    const std::string target = j.is_object() && j.contains("checkpoint") && j["checkpoint"].is_string()
                                   ? j["checkpoint"].get<std::string>() : "";
    if (is_kept(target)) continue;  // it stays: nothing to move
    MIXPREC_RETURN_IF_ERROR(update_pointer(run_dir, which, want));
  }
  for (const auto& [step, file] : *listed) {
    if (is_kept(file)) continue;
    std::error_code ec;
    fs::remove(run_dir + "/" + file, ec);
    if (ec) return Status::io_error("cannot remove checkpoint '" + run_dir + "/" + file + "': " + ec.message());
    out.removed.push_back(file);
  }
  out.kept = kept;
  return out;
}

}  // namespace mixprec::experiment

// io/checkpoint_dir.cpp: a run directory's checkpoints: the last/best pointers (written only
// for a checkpoint that passes load_usable_checkpoint), listing and pruning step files, and
// the newest usable checkpoint of a directory or a list, which --resume and a rollback
// continue from. Above checkpoint.cpp (the format) and checkpoint_checks.cpp (the checks).
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/atomic_file.h"
#include "io/byte_source.h"
#include "io/checkpoint_checks.h"
#include "mixprec/io/checkpoint.h"

namespace mixprec {

namespace {

using json = nlohmann::json;

bool exists(const std::string& path, bool* is_dir = nullptr) {
  struct stat sb;
  if (::stat(path.c_str(), &sb) != 0) return false;
  if (is_dir) *is_dir = S_ISDIR(sb.st_mode);
  return true;
}

Status write_text_atomically(const std::string& path, const std::string& text) {
  auto w = io::AtomicFileWriter::create(path);
  if (!w.is_ok()) return w.status();
  MIXPREC_RETURN_IF_ERROR((*w)->write(text.data(), text.size()));
  return (*w)->commit();
}

bool safe_relative(const std::string& p) {
  if (p.empty() || p[0] == '/') return false;
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    const std::string part = p.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

bool is_directory(const std::string& path) {
  struct stat sb;
  return ::stat(path.c_str(), &sb) == 0 && S_ISDIR(sb.st_mode);
}

// The step of a name checkpoint_filename made (at least 8 digits, no sign), or -1.
int64_t step_of(const std::string& name) {
  static const std::string prefix = "step-", suffix = ".safetensors";
  if (name.size() < prefix.size() + 8 + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return -1;
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(digits);
}

std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

Status update_pointer(const std::string& run_dir, const std::string& which,
                      const std::string& checkpoint_filename) {
  if (which != "last" && which != "best")
    return Status::invalid_argument("update_pointer: which must be 'last' or 'best', got '" + which + "'");
  if (!safe_relative(checkpoint_filename))
    return Status::invalid_argument("update_pointer: checkpoint '" + checkpoint_filename +
                                    "' must be a path relative to the run directory, without '..'");
  // Full validation, not just existence: the pointer must never name a partial file, nor a
  // state a resume or rollback would refuse (what a pointer names is meant to be continued),
  // so it is the same load-and-check a resume makes.
  const std::string file = run_dir + "/" + checkpoint_filename;
  auto ck = load_usable_checkpoint(file);
  if (!ck.is_ok())
    return Status(ck.status().code(), "update_pointer '" + which + "': " + ck.status().message());
  const json j = {{"checkpoint", checkpoint_filename}};
  return write_text_atomically(run_dir + "/" + which + ".json", j.dump() + "\n");
}

StatusOr<std::string> read_pointer(const std::string& run_dir, const std::string& which) {
  const std::string pointer = run_dir + "/" + which + ".json";
  if (!exists(pointer)) return Status::not_found("run directory '" + run_dir + "' has no " + which + ".json");
  // A pointer is a few dozen bytes; anything past 64 KiB is not one of ours. A FIFO or
  // device placed here is refused, not waited on (io/byte_source.h).
  auto read = io::read_regular_file(pointer, "pointer", 65536);
  if (!read.is_ok()) return read.status();
  const std::string& text = *read;
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("checkpoint") || !j["checkpoint"].is_string())
    return Status::data_loss("pointer '" + pointer +
                             "': expected {\"checkpoint\": \"<file name>\"}, got '" + text.substr(0, 80) + "'");
  const std::string name = j["checkpoint"].get<std::string>();
  if (!safe_relative(name))
    return Status::data_loss("pointer '" + pointer + "': field 'checkpoint' must be relative, got '" + name + "'");
  const std::string target = run_dir + "/" + name;
  if (!exists(target)) return Status::not_found("pointer '" + pointer + "' names '" + name + "', which does not exist");
  return target;
}

StatusOr<std::string> resolve_checkpoint(const std::string& path) {
  bool is_dir = false;
  if (!exists(path, &is_dir))
    return Status::not_found("checkpoint '" + path + "': no such file or directory");
  if (!is_dir) return path;
  if (exists(path + "/last.json")) return read_pointer(path, "last");
  const std::string fallback = path + "/last.safetensors";
  if (exists(fallback)) return fallback;
  return Status::not_found("run directory '" + path + "': neither last.json nor last.safetensors exists "
                           "(no checkpoint saved yet?)");
}

StatusOr<std::vector<std::string>> prune_checkpoints(const std::string& run_dir, int64_t keep) {
  std::vector<std::string> removed;
  if (keep < 1) return removed;
  auto listed = list_checkpoints(run_dir);
  if (!listed.is_ok()) return listed.status();
  // What a pointer names stays whatever its age: last.json is what a resume continues from,
  // best.json what predict and serve may be pointed at.
  std::vector<std::string> pinned;
  for (const char* which : {"last", "best"})
    if (auto target = read_pointer(run_dir, which); target.is_ok()) pinned.push_back(*target);
  int64_t kept = 0;
  for (const auto& [step, file] : *listed) {  // newest first
    if (kept < keep) {
      ++kept;
      continue;
    }
    if (std::find(pinned.begin(), pinned.end(), file) != pinned.end()) continue;
    if (std::remove(file.c_str()) != 0 && errno != ENOENT)
      return Status::io_error("cannot remove old checkpoint '" + file + "': " + std::strerror(errno));
    removed.push_back(file);
  }
  return removed;
}

StatusOr<std::vector<std::pair<int64_t, std::string>>> list_checkpoints(const std::string& run_dir) {
  DIR* d = ::opendir(run_dir.c_str());
  if (!d) return Status::io_error("run directory '" + run_dir + "': " + std::strerror(errno));
  std::vector<std::pair<int64_t, std::string>> out;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (const int64_t step = step_of(name); step >= 0) out.emplace_back(step, run_dir + "/" + name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return out;
}

StatusOr<UsableCheckpoint> first_usable_checkpoint(const std::vector<std::string>& files) {
  UsableCheckpoint out;
  for (const std::string& f : files) {
    auto st = load_usable_checkpoint(f);
    if (st.is_ok()) {
      out.file = f;
      out.state = std::move(st).value();
      return out;
    }
    out.skipped.push_back(st.status().message());
  }
  if (files.size() == 1) return Status(StatusCode::bad_checkpoint, out.skipped.front());
  std::string m = "no usable checkpoint among " + std::to_string(files.size()) + " candidates";
  for (const std::string& why : out.skipped) m += "\n  " + why;
  return Status(StatusCode::bad_checkpoint, m);
}

StatusOr<UsableCheckpoint> resolve_usable_checkpoint(const std::string& path) {
  auto target = resolve_checkpoint(path);
  if (!target.is_ok()) return target.status();
  if (!is_directory(path)) return first_usable_checkpoint({*target});
  auto first = first_usable_checkpoint({*target});
  if (first.is_ok()) return first;
  // The pointer's target is not usable: fall back to the newest usable older checkpoint.
  const int64_t target_step = step_of(base_name(*target));
  auto all = list_checkpoints(path);
  if (!all.is_ok()) return all.status();
  std::vector<std::string> older;
  for (const auto& [step, file] : *all)
    if (file != *target && (target_step < 0 || step < target_step)) older.push_back(file);
  if (older.empty())
    return Status(StatusCode::bad_checkpoint, first.status().message() + "\nrun directory '" + path +
                                                  "' holds no older checkpoint to fall back to");
  auto fallback = first_usable_checkpoint(older);
  if (!fallback.is_ok())
    return Status(StatusCode::bad_checkpoint,
                  first.status().message() + "\nand no older checkpoint of '" + path + "' is usable either:\n" +
                      fallback.status().message());
  fallback->skipped.insert(fallback->skipped.begin(), first.status().message());
  return fallback;
}

}  // namespace mixprec

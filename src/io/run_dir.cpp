// io/run_dir.cpp: creating runs/<name>/ and writing its config.json.
#include "mixprec/run_dir.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "io/atomic_file.h"

namespace mixprec {

namespace {

// mkdir -p. EEXIST on a directory is fine; on anything else it is an error.
Status make_dirs(const std::string& path) {
  if (path.empty()) return Status::invalid_argument("run directory: empty path");
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    const std::string prefix = path.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0777) == 0) continue;
    const int err = errno;
    struct stat sb;
    if (err == EEXIST && ::stat(prefix.c_str(), &sb) == 0 && S_ISDIR(sb.st_mode)) continue;
    return Status::io_error("run directory '" + path + "': cannot create '" + prefix + "': " +
                            (err == EEXIST ? "exists and is not a directory" : std::strerror(err)));
  }
  return Status::ok();
}

bool valid_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

Status write_config(const RunDir& dir, const std::string& config_json) {
  if (config_json.empty()) return Status::ok();
  auto j = nlohmann::json::parse(config_json, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return Status::invalid_argument("run directory '" + dir.path + "': config is not a JSON object");
  const std::string text = j.dump(2) + "\n";
  auto w = io::AtomicFileWriter::create(dir.config_path());
  if (!w.is_ok()) return w.status();
  MIXPREC_RETURN_IF_ERROR((*w)->write(text.data(), text.size()));
  return (*w)->commit();
}

std::string base_name(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

}  // namespace

StatusOr<RunDir> create_run_dir(const std::string& base, const std::string& name,
                                const std::string& config_json, const std::string& prefix) {
  if (!name.empty() && !valid_name(name))
    return Status::invalid_argument("run name '" + name + "': must be one path component (no '/')");
  MIXPREC_RETURN_IF_ERROR(make_dirs(base));
  RunDir dir;
  if (!name.empty()) {
    dir.name = name;
    dir.path = base + "/" + name;
    MIXPREC_RETURN_IF_ERROR(make_dirs(dir.path));
  } else {
    // Ultralytics' increment_path: train, train2, train3, ... Bounded so a full disk of
    // runs cannot loop forever.
    for (int i = 1;; ++i) {
      if (i > 100000) return Status::io_error("run directory: no free name under '" + base + "'");
      dir.name = i == 1 ? prefix : prefix + std::to_string(i);
      dir.path = base + "/" + dir.name;
      if (::mkdir(dir.path.c_str(), 0777) == 0) break;
      if (errno != EEXIST)
        return Status::io_error("run directory '" + dir.path + "': " + std::strerror(errno));
    }
  }
  MIXPREC_RETURN_IF_ERROR(write_config(dir, config_json));
  return dir;
}

StatusOr<RunDir> open_run_dir(const std::string& path, const std::string& config_json) {
  MIXPREC_RETURN_IF_ERROR(make_dirs(path));
  RunDir dir{path, base_name(path)};
  MIXPREC_RETURN_IF_ERROR(write_config(dir, config_json));
  return dir;
}

}  // namespace mixprec

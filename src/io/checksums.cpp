// io/checksums.cpp: see checksums.h.
#include "io/checksums.h"

#define XXH_INLINE_ALL  // header-only: no link dependency for mixprec or its CMake package users
#include <xxhash.h>

#include <cinttypes>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "io/json_limits.h"

namespace mixprec::io {

namespace {

std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

std::string tensor_digest(const std::string& name, const Tensor& t) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, name.data(), name.size() + 1);  // with its NUL
  const char* dtype = safetensors_dtype_name(t.dtype());
  XXH3_64bits_update(state, dtype, std::char_traits<char>::length(dtype) + 1);
  for (int64_t d : t.shape()) XXH3_64bits_update(state, &d, sizeof d);  // little-endian host
  const size_t bytes = size_t(t.numel()) * dtype_size(t.dtype());
  if (bytes > 0) XXH3_64bits_update(state, t.data(), bytes);
  const uint64_t digest = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return hex(digest);
}

std::string header_digest(const std::map<std::string, std::string>& metadata) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  for (const auto& [k, v] : metadata) {
    if (k == kChecksumKey) continue;
    XXH3_64bits_update(state, k.data(), k.size() + 1);
    XXH3_64bits_update(state, v.data(), v.size() + 1);
  }
  const uint64_t digest = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return hex(digest);
}

}  // namespace

uint64_t hash_bytes(const void* data, size_t size, uint64_t seed) { return XXH3_64bits_withSeed(data, size, seed); }

std::string checksum_entry(const std::vector<std::pair<std::string, Tensor>>& contiguous_tensors,
                           const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json tensors = nlohmann::ordered_json::object();
  for (const auto& [name, t] : contiguous_tensors) tensors[name] = tensor_digest(name, t);
  nlohmann::ordered_json entry = {{"algorithm", "xxh3-64"}, {"header", header_digest(metadata)}, {"tensors", tensors}};
  return entry.dump();
}

Status verify_checksums(SafetensorsFile& file, const std::string& path) {
  const auto it = file.metadata.find(kChecksumKey);
  if (it == file.metadata.end()) {
    // One flipped byte in the key's name would otherwise turn a mixprec file into a
    // "foreign" one and skip the verification: an entry under another name is corruption.
    for (const auto& [k, v] : file.metadata)
      if (v.rfind(R"({"algorithm":)", 0) == 0)
        return Status::data_loss("safetensors file '" + path + "': metadata '" + k + "' holds a checksum entry, "
                                 "expected under '" + kChecksumKey + "': the file is corrupt");
    file.checksums = "absent";
    return Status::ok();
  }
  const std::string where = "safetensors file '" + path + "': ";
  auto malformed = [&](const std::string& what) {
    return Status::data_loss(where + "metadata '" + kChecksumKey + "': " + what + " (the file is corrupt)");
  };
  if (!json_depth_within(it->second)) return malformed("nested too deeply");
  const nlohmann::json entry = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  if (!entry.is_object()) return malformed("not a JSON object");
  if (!entry.contains("algorithm") || entry["algorithm"] != "xxh3-64")
    return malformed("field 'algorithm': expected \"xxh3-64\"");
  if (!entry.contains("header") || !entry["header"].is_string()) return malformed("field 'header': expected a string");
  if (!entry.contains("tensors") || !entry["tensors"].is_object())
    return malformed("field 'tensors': expected an object");
  const std::string stored_header = entry["header"].get<std::string>(), actual_header = header_digest(file.metadata);
  if (stored_header != actual_header)
    return Status::data_loss(where + "header metadata: checksum " + actual_header + " does not match the stored " +
                             stored_header + ": the file is corrupt (--no-verify-checksums loads it anyway)");
  const nlohmann::json& digests = entry["tensors"];
  std::set<std::string> seen;
  for (const auto& [name, t] : file.tensors) {
    seen.insert(name);
    const auto d = digests.find(name);
    if (d == digests.end() || !d->is_string())
      return Status::data_loss(where + "tensor '" + name + "' has no checksum: the file is corrupt");
    const std::string actual = tensor_digest(name, t);
    if (d->get<std::string>() != actual)
      return Status::data_loss(where + "tensor '" + name + "': checksum " + actual + " does not match the stored " +
                               d->get<std::string>() + ": the file is corrupt (--no-verify-checksums loads it anyway)");
  }
  for (const auto& [name, d] : digests.items())
    if (!seen.count(name))
      return Status::data_loss(where + "tensor '" + name + "' has a checksum but is not in the file: the file is corrupt");
  file.checksums = "verified";
  return Status::ok();
}

}  // namespace mixprec::io

// io/safetensors.cpp: the validating safetensors reader. It follows the checks of the Rust
// library (safetensors/src/tensor.rs, see reference/reliability.md §4.3), in this order:
// bounded header length, the header's grammar and each entry (safetensors_header.cpp), no
// name twice, tensors tiling the data buffer exactly from 0 with no gap or overlap, and
// 8 + N + buffer == file size; then the tensors and their checksums. Nothing is allocated
// from a header-claimed size before it has been checked against the bytes really present.
// The writer is safetensors_write.cpp.
#include "mixprec/io/safetensors.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <new>
#include <tuple>

#include "io/byte_source.h"
#include "io/checksums.h"
#include "io/safetensors_header.h"

namespace mixprec {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host needs byte swaps");

namespace {

using Entry = io::SafetensorsEntry;
using io::shown_name;

// The header's entries against a data buffer of buffer_bytes: no name twice, and the tensors
// tile [0, buffer_bytes) in offset order. Sorts entries into file order.
Status check_tiling(const std::string& file, std::vector<Entry>& entries, uint64_t buffer_bytes,
                    uint64_t file_size) {
  auto loss = [&](const std::string& what) { return io::safetensors_loss(file, what); };
  auto entry_loss = [&](const std::string& name, const std::string& field, const std::string& what) {
    return loss("tensor '" + shown_name(name) + "': field '" + field + "': " + what);
  };
  // Duplicate names (the SAX handler sees each once): sort views, compare neighbours.
  {
    std::vector<const std::string*> names;
    names.reserve(entries.size());
    for (const Entry& e : entries) names.push_back(&e.name);
    std::sort(names.begin(), names.end(),
              [](const std::string* a, const std::string* b) { return *a < *b; });
    for (size_t i = 1; i < names.size(); ++i)
      if (*names[i] == *names[i - 1])
        return loss("tensor '" + shown_name(*names[i]) + "' appears twice in the header");
  }

  // Tensors must tile [0, buffer_bytes) in offset order: no gap, no overlap, nothing after.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  uint64_t expected = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    if (e.begin != expected) {
      const std::string after =
          prev ? "previous tensor '" + shown_name(prev->name) + "' ends at " : "data starts at ";
      return entry_loss(e.name, "data_offsets",
                        "begin " + std::to_string(e.begin) + ", expected " +
                            std::to_string(expected) + " (" + after + std::to_string(expected) +
                            "; " + (e.begin > expected ? "gap" : "overlap") + ")");
    }
    if (e.end > buffer_bytes)
      return entry_loss(e.name, "data_offsets",
                        "end " + std::to_string(e.end) + " is past the data buffer of " +
                            std::to_string(buffer_bytes) + " bytes (file size " +
                            std::to_string(file_size) + ", expected " +
                            std::to_string(file_size - buffer_bytes + e.end) + "; truncated?)");
    expected = e.end;
    prev = &e;
  }
  if (expected != buffer_bytes)
    return loss("file size " + std::to_string(file_size) + ", expected " +
                std::to_string(file_size - buffer_bytes + expected) + ": tensors cover " +
                std::to_string(expected) + " bytes but the data buffer has " +
                std::to_string(buffer_bytes) + " (trailing data)");
  return Status::ok();
}

StatusOr<SafetensorsFile> read_all(io::ByteSource& src, const std::string& file) {
  auto loss = [&](const std::string& what) { return io::safetensors_loss(file, what); };
  const uint64_t file_size = src.size();
  if (file_size < 8)
    return loss("file size " + std::to_string(file_size) +
                       " bytes, expected at least 8 (the header length field); truncated?");
  uint64_t n = 0;
  MIXPREC_RETURN_IF_ERROR(src.read_at(0, &n, 8));  // little-endian host
  if (n > kSafetensorsMaxHeaderBytes)
    return loss("field 'header length': " + std::to_string(n) + " bytes, expected at most " +
                       std::to_string(kSafetensorsMaxHeaderBytes));
  if (n > file_size - 8)
    return loss("field 'header length': " + std::to_string(n) + " bytes, but only " +
                       std::to_string(file_size - 8) +
                       " bytes follow the length field (file size " + std::to_string(file_size) +
                       "; truncated?)");
  std::string text(size_t(n), '\0');
  MIXPREC_RETURN_IF_ERROR(src.read_at(8, text.data(), size_t(n)));

  SafetensorsFile out;
  std::vector<Entry> entries;
  const uint64_t data_start = 8 + n;
  MIXPREC_RETURN_IF_ERROR(io::parse_safetensors_header(file, text, entries, out.metadata));
  MIXPREC_RETURN_IF_ERROR(check_tiling(file, entries, file_size - data_start, file_size));

  // Every size below was checked to lie inside the file, so allocation is bounded by it.
  out.tensors.reserve(entries.size());
  for (const Entry& e : entries) {
    Tensor t;
    try {
      t = Tensor::empty(e.shape, e.dtype);
    } catch (const std::bad_alloc&) {
      return Status::internal("safetensors file '" + file + "': out of memory allocating " +
                              std::to_string(e.nbytes) + " bytes for tensor '" + shown_name(e.name) +
                              "'");
    }
    if (e.nbytes > 0)
      MIXPREC_RETURN_IF_ERROR(src.read_at(data_start + e.begin, t.data(), size_t(e.nbytes)));
    out.tensors.emplace_back(e.name, std::move(t));
  }
  if (verify_checksums_enabled())
    MIXPREC_RETURN_IF_ERROR(io::verify_checksums(out, file));
  else
    out.checksums = out.metadata.count(io::kChecksumKey) ? "not checked" : "absent";
  // Format plumbing, not the caller's metadata: a load then save round-trips the metadata,
  // and the save computes fresh checksums.
  out.metadata.erase(io::kChecksumKey);
  return out;
}

std::atomic<bool> g_verify_checksums{true};

}  // namespace

void set_verify_checksums(bool verify) { g_verify_checksums = verify; }
bool verify_checksums_enabled() { return g_verify_checksums; }

const Tensor* SafetensorsFile::find(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

StatusOr<SafetensorsFile> load_safetensors(const std::string& path) {
  auto src = io::FileSource::open(path);
  if (!src.is_ok()) return src.status();
  return read_all(*src.value(), path);
}

StatusOr<SafetensorsFile> parse_safetensors(const uint8_t* data, size_t size,
                                            const std::string& name) {
  io::MemorySource src(data, size, name);
  return read_all(src, name);
}

}  // namespace mixprec

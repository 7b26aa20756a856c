// io/safetensors_write.cpp: the safetensors writer. Tensors sorted by name, the header with
// the checksums of every tensor and of the metadata (checksums.h), padded so the data starts
// 8-byte aligned, as the Python library writes it; to a file atomically, or to bytes.
#include <algorithm>
#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "io/atomic_file.h"
#include "io/checksums.h"
#include "mixprec/io/safetensors.h"

namespace mixprec {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host needs byte swaps");

namespace {

using ordered_json = nlohmann::ordered_json;

struct Prepared {
  std::string name;
  Tensor data;  // contiguous, detached
  uint64_t nbytes;
};

// Sorted, validated tensors and the padded header they describe.
Status prepare(const std::vector<std::pair<std::string, Tensor>>& tensors,
               const std::map<std::string, std::string>& metadata, std::vector<Prepared>& out,
               std::string& header) {
  out.clear();
  std::set<std::string> seen;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__")
      return Status::invalid_argument("save_safetensors: tensor name '__metadata__' is reserved");
    if (!seen.insert(name).second)
      return Status::invalid_argument("save_safetensors: duplicate tensor name '" + name + "'");
    if (!t.defined())
      return Status::invalid_argument("save_safetensors: tensor '" + name + "' is undefined");
    // Logical row-major order whatever the strides (channels-last is only a stride order).
    Tensor c = t.detach().contiguous();
    out.push_back({name, c, uint64_t(c.numel()) * dtype_size(c.dtype())});
  }
  // Deterministic bytes: sorted by name, as the Python library does for equal dtypes.
  std::sort(out.begin(), out.end(),
            [](const Prepared& a, const Prepared& b) { return a.name < b.name; });

  // A checksum entry in `metadata` (a loaded file's metadata saved again) is replaced by the
  // one computed here.
  std::vector<std::pair<std::string, Tensor>> contiguous;
  contiguous.reserve(out.size());
  for (const auto& p : out) contiguous.emplace_back(p.name, p.data);
  ordered_json h = ordered_json::object();
  ordered_json m = ordered_json::object();
  for (const auto& [k, v] : metadata)
    if (k != io::kChecksumKey) m[k] = v;
  m[io::kChecksumKey] = io::checksum_entry(contiguous, metadata);
  h["__metadata__"] = std::move(m);
  uint64_t offset = 0;
  for (const auto& p : out) {
    ordered_json e = ordered_json::object();
    e["dtype"] = safetensors_dtype_name(p.data.dtype());
    e["shape"] = p.data.shape();
    e["data_offsets"] = ordered_json::array({offset, offset + p.nbytes});
    h[p.name] = std::move(e);
    offset += p.nbytes;
  }
  try {
    header = h.dump();
  } catch (const nlohmann::json::exception& e) {  // a name or metadata string not UTF-8
    return Status::invalid_argument(std::string("save_safetensors: header not encodable: ") +
                                    e.what());
  }
  // Spaces up to a multiple of 8 so the data buffer starts 8-byte aligned (Python does this).
  header.append((8 - header.size() % 8) % 8, ' ');
  return Status::ok();
}

template <typename Sink>
Status emit(const std::string& header, const std::vector<Prepared>& tensors, Sink&& sink) {
  const uint64_t n = header.size();
  unsigned char len[8];
  std::memcpy(len, &n, 8);  // little-endian host (static_assert above)
  MIXPREC_RETURN_IF_ERROR(sink(len, 8));
  MIXPREC_RETURN_IF_ERROR(sink(header.data(), header.size()));
  for (const auto& p : tensors)
    if (p.nbytes > 0) MIXPREC_RETURN_IF_ERROR(sink(p.data.data(), size_t(p.nbytes)));
  return Status::ok();
}

}  // namespace

StatusOr<std::vector<uint8_t>> serialize_safetensors(
    const std::vector<std::pair<std::string, Tensor>>& tensors,
    const std::map<std::string, std::string>& metadata) {
  std::vector<Prepared> prepared;
  std::string header;
  MIXPREC_RETURN_IF_ERROR(prepare(tensors, metadata, prepared, header));
  std::vector<uint8_t> bytes;
  MIXPREC_RETURN_IF_ERROR(emit(header, prepared, [&](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
    return Status::ok();
  }));
  return bytes;
}

Status save_safetensors(const std::string& path,
                        const std::vector<std::pair<std::string, Tensor>>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  std::vector<Prepared> prepared;
  std::string header;
  MIXPREC_RETURN_IF_ERROR(prepare(tensors, metadata, prepared, header));
  auto writer = io::AtomicFileWriter::create(path);
  if (!writer.is_ok()) return writer.status();
  MIXPREC_RETURN_IF_ERROR(
      emit(header, prepared, [&](const void* p, size_t n) { return writer.value()->write(p, n); }));
  return writer.value()->commit();
}

}  // namespace mixprec

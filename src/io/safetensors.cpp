// io/safetensors.cpp: the safetensors writer and the validating reader.
// The reader follows the checks of the Rust library (safetensors/src/tensor.rs, see
// reference/reliability.md §4.3): bounded header length, JSON object, known dtypes,
// overflow-checked sizes, tensors tiling the data buffer exactly from 0 with no gap or overlap,
// and 8 + N + buffer == file size. Nothing is allocated from a header-claimed size before it
// has been checked against the bytes really present.
#include "mixprec/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <new>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "io/atomic_file.h"
#include "io/byte_source.h"

namespace mixprec {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host needs byte swaps");

namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

struct DTypeName {
  DType dtype;
  const char* name;
};
constexpr DTypeName kDTypeNames[] = {
    {DType::f32, "F32"}, {DType::f16, "F16"}, {DType::bf16, "BF16"}, {DType::f64, "F64"},
    {DType::i64, "I64"}, {DType::i32, "I32"}, {DType::u8, "U8"}};
constexpr size_t kMaxDims = 64;  // PyTorch's limit too; bounds per-tensor bookkeeping

const DType* dtype_from_name(const std::string& name) {
  for (const auto& d : kDTypeNames)
    if (name == d.name) return &d.dtype;
  return nullptr;
}

// ---------------------------------------------------------------- writer

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

  ordered_json h = ordered_json::object();
  if (!metadata.empty()) {
    ordered_json m = ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    h["__metadata__"] = std::move(m);
  }
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

// ---------------------------------------------------------------- reader

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end, nbytes;
};

// Type words for messages. Containers are never dumped: a hostile header may nest them
// deeply, and dump() recurses.
std::string describe(const json& j) {
  if (j.is_object() || j.is_array() || j.is_null()) return std::string("a JSON ") + j.type_name();
  std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 40) + "...";
  return std::string("the ") + j.type_name() + " " + s;
}

std::string shape_text(const json& dims) {  // dims: a JSON array, elements not yet checked
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i == 16) return s + ", ... (" + std::to_string(dims.size()) + " dims)]";
    s += i ? ", " : "";
    s += dims[i].is_number_unsigned() ? std::to_string(dims[i].get<uint64_t>()) : "?";
  }
  return s + "]";
}

// A name as messages show it: a hostile header may hold megabyte-long keys.
std::string shown(const std::string& name) {
  return name.size() <= 80 ? name
                           : name.substr(0, 80) + "...(" + std::to_string(name.size()) + " bytes)";
}

class HeaderParser {
 public:
  explicit HeaderParser(std::string file) : file_(std::move(file)) {}

  Status loss(const std::string& what) const {
    return Status::data_loss("safetensors file '" + file_ + "': " + what);
  }
  Status entry_loss(const std::string& name, const std::string& field,
                    const std::string& what) const {
    return loss("tensor '" + shown(name) + "': field '" + field + "': " + what);
  }

  Status parse_entry(const std::string& name, const json& v, Entry& e) const {
    e.name = name;
    if (!v.is_object())
      return loss("tensor '" + shown(name) + "': entry is " + describe(v) +
                  ", expected an object with dtype, shape and data_offsets");
    for (const char* field : {"dtype", "shape", "data_offsets"})
      if (!v.contains(field)) return entry_loss(name, field, "missing");

    const json& dt = v["dtype"];
    if (!dt.is_string()) return entry_loss(name, "dtype", describe(dt) + ", expected a string");
    const DType* dtype = dtype_from_name(dt.get_ref<const std::string&>());
    if (dtype == nullptr)
      return entry_loss(name, "dtype",
                        "unknown dtype '" + shown(dt.get<std::string>()) +
                            "', expected one of F32, F16, BF16, F64, I64, I32, U8");
    e.dtype = *dtype;

    const json& shape = v["shape"];
    if (!shape.is_array())
      return entry_loss(name, "shape", describe(shape) + ", expected an array");
    if (shape.size() > kMaxDims)
      return entry_loss(
          name, "shape",
          std::to_string(shape.size()) + " dims, expected at most " + std::to_string(kMaxDims));
    int64_t numel = 1;
    for (size_t i = 0; i < shape.size(); ++i) {
      const json& d = shape[i];
      if (!d.is_number_unsigned() ||
          d.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
        return entry_loss(name, "shape",
                          "dim " + std::to_string(i) + " is " + describe(d) +
                              ", expected an integer in [0, 2^63)");
      e.shape.push_back(int64_t(d.get<uint64_t>()));
      if (__builtin_mul_overflow(numel, e.shape.back(), &numel))
        return entry_loss(name, "shape",
                          "element count of " + shape_text(shape) + " overflows int64");
    }
    if (__builtin_mul_overflow(uint64_t(numel), uint64_t(dtype_size(e.dtype)), &e.nbytes))
      return entry_loss(name, "shape",
                        "byte size of " + shape_text(shape) + " x " + dt.get<std::string>() +
                            " overflows uint64");

    const json& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2)
      return entry_loss(
          name, "data_offsets",
          describe(off) +
              (off.is_array() ? " of " + std::to_string(off.size()) + " elements" : "") +
              ", expected [begin, end]");
    for (size_t i = 0; i < 2; ++i)
      if (!off[i].is_number_unsigned())
        return entry_loss(name, "data_offsets",
                          std::string(i ? "end" : "begin") + " is " + describe(off[i]) +
                              ", expected a non-negative integer");
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    if (e.end < e.begin)
      return entry_loss(name, "data_offsets",
                        "end " + std::to_string(e.end) + " < begin " + std::to_string(e.begin));
    if (e.end - e.begin != e.nbytes)
      return entry_loss(name, "data_offsets",
                        "[" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "] spans " +
                            std::to_string(e.end - e.begin) + " bytes, expected " +
                            std::to_string(e.nbytes) + " (shape " + shape_text(shape) + " x " +
                            dt.get<std::string>() + " of " + std::to_string(dtype_size(e.dtype)) +
                            " bytes)");
    return Status::ok();
  }

  Status parse_metadata(const json& m, std::map<std::string, std::string>& out) const {
    if (!m.is_object())
      return loss("field '__metadata__': " + describe(m) + ", expected an object of strings");
    for (const auto& [k, v] : m.items()) {
      if (!v.is_string())
        return loss("field '__metadata__': key '" + shown(k) + "' is " + describe(v) +
                    ", expected a string");
      out[k] = v.get<std::string>();
    }
    return Status::ok();
  }

  // Validates the header against a data buffer of buffer_bytes; entries come back in file order.
  Status parse(const std::string& text, uint64_t buffer_bytes, uint64_t file_size,
               std::vector<Entry>& entries, std::map<std::string, std::string>& metadata) const {
    // The DOM keeps only the last of duplicate keys, so duplicates are caught during parsing.
    std::set<std::string> keys;
    std::string duplicate;
    auto on_event = [&](int depth, json::parse_event_t ev, json& parsed) {
      if (ev == json::parse_event_t::key && depth == 1 && duplicate.empty() &&
          !keys.insert(parsed.get<std::string>()).second)
        duplicate = parsed.get<std::string>();
      return true;
    };
    // nlohmann's lexer takes a NUL byte for the end of input, which would hide whatever
    // follows; JSON allows none outside strings and none raw inside them.
    if (const size_t nul = text.find('\0'); nul != std::string::npos)
      return loss("header is not valid JSON: NUL byte at header offset " + std::to_string(nul));
    json h;
    try {
      h = json::parse(text, on_event);
    } catch (const json::exception& e) {  // parse_error, or out_of_range for 1e400
      return loss("header is not valid JSON: " + std::string(e.what()));
    }
    if (!h.is_object()) return loss("header is " + describe(h) + ", expected a JSON object");
    if (!duplicate.empty())
      return loss("tensor '" + shown(duplicate) + "' appears twice in the header");

    entries.clear();
    for (const auto& [k, v] : h.items()) {
      if (k == "__metadata__") {
        MIXPREC_RETURN_IF_ERROR(parse_metadata(v, metadata));
        continue;
      }
      Entry e;
      MIXPREC_RETURN_IF_ERROR(parse_entry(k, v, e));
      entries.push_back(std::move(e));
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
            prev ? "previous tensor '" + shown(prev->name) + "' ends at " : "data starts at ";
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

 private:
  std::string file_;
};

StatusOr<SafetensorsFile> read_all(io::ByteSource& src, const std::string& file) {
  const HeaderParser parser(file);
  const uint64_t file_size = src.size();
  if (file_size < 8)
    return parser.loss("file size " + std::to_string(file_size) +
                       " bytes, expected at least 8 (the header length field); truncated?");
  uint64_t n = 0;
  MIXPREC_RETURN_IF_ERROR(src.read_at(0, &n, 8));  // little-endian host
  if (n > kSafetensorsMaxHeaderBytes)
    return parser.loss("field 'header length': " + std::to_string(n) + " bytes, expected at most " +
                       std::to_string(kSafetensorsMaxHeaderBytes));
  if (n > file_size - 8)
    return parser.loss("field 'header length': " + std::to_string(n) + " bytes, but only " +
                       std::to_string(file_size - 8) +
                       " bytes follow the length field (file size " + std::to_string(file_size) +
                       "; truncated?)");
  std::string text(size_t(n), '\0');
  MIXPREC_RETURN_IF_ERROR(src.read_at(8, text.data(), size_t(n)));

  SafetensorsFile out;
  std::vector<Entry> entries;
  const uint64_t data_start = 8 + n;
  MIXPREC_RETURN_IF_ERROR(
      parser.parse(text, file_size - data_start, file_size, entries, out.metadata));

  // Every size below was checked to lie inside the file, so allocation is bounded by it.
  out.tensors.reserve(entries.size());
  for (const Entry& e : entries) {
    Tensor t;
    try {
      t = Tensor::empty(e.shape, e.dtype);
    } catch (const std::bad_alloc&) {
      return Status::internal("safetensors file '" + file + "': out of memory allocating " +
                              std::to_string(e.nbytes) + " bytes for tensor '" + shown(e.name) +
                              "'");
    }
    if (e.nbytes > 0)
      MIXPREC_RETURN_IF_ERROR(src.read_at(data_start + e.begin, t.data(), size_t(e.nbytes)));
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

}  // namespace

const char* safetensors_dtype_name(DType dtype) {
  for (const auto& d : kDTypeNames)
    if (d.dtype == dtype) return d.name;
  MIXPREC_CHECK(false, "safetensors_dtype_name: dtype missing from the table");
  return "";
}

const Tensor* SafetensorsFile::find(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

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

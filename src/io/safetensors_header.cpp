// io/safetensors_header.cpp: the safetensors header grammar, as a SAX handler (HeaderSax):
// entries and metadata are built and checked as the tokens arrive, following the checks of
// the Rust library (safetensors/src/tensor.rs, see reference/reliability.md §4.3): a JSON
// object, known dtypes, at most 64 dims, overflow-checked sizes, offsets that match them.
// Also the dtype names of the format (safetensors_dtype_name). The reader that uses this is
// safetensors.cpp; the writer is safetensors_write.cpp.
// Long because the handler is one state machine: each context (Ctx) says what the next token
// may be, and the checks of an entry's fields refer to each other (offsets against the size
// of dtype x shape); split, the states would be read apart from their transitions.
#include "io/safetensors_header.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "mixprec/io/safetensors.h"

namespace mixprec {

namespace {

using json = nlohmann::json;
using Entry = io::SafetensorsEntry;

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

// Type words for messages. Containers are never dumped: a hostile header may nest them
// deeply, and dump() recurses.
std::string describe(const json& j) {
  if (j.is_object() || j.is_array() || j.is_null()) return std::string("a JSON ") + j.type_name();
  std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 40) + "...";
  return std::string("the ") + j.type_name() + " " + s;
}

std::string shape_text(const Shape& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i == 16) return s + ", ... (" + std::to_string(dims.size()) + " dims)]";
    s += i ? ", " : "";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

std::string shown(const std::string& name) { return io::shown_name(name); }

// Nesting allowed in the header. The schema itself needs 3 levels (root, entry, shape); the
// rest is for unknown fields of an entry, which are skipped, never stored.
constexpr size_t kMaxHeaderDepth = 64;

// The header grammar as a SAX handler (nlohmann's parser is iterative): entries and metadata
// are built and checked as the tokens arrive, never as a DOM. So parsing is linear in the
// header (the DOM parser with a callback, used before, rescanned the root object at every
// entry: 40,000 tensors took minutes), memory is bounded by the header's own size (values of
// unknown fields are skipped: a 90 MB header of nested arrays took 2.2 GB as a DOM), and
// nesting beyond kMaxHeaderDepth is refused. The first violation stops the parse.
class HeaderSax {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  HeaderSax(const std::string& file, std::vector<Entry>& entries,
            std::map<std::string, std::string>& metadata)
      : file_(file), entries_(entries), metadata_(metadata) {}

  Status status() const { return status_; }
  Status loss(const std::string& what) const {
    return Status::data_loss("safetensors file '" + file_ + "': " + what);
  }
  Status entry_loss(const std::string& name, const std::string& field,
                    const std::string& what) const {
    return loss("tensor '" + shown(name) + "': field '" + field + "': " + what);
  }

  // ---- nlohmann's SAX interface
  bool null() { return scalar(json(nullptr)); }
  bool boolean(bool v) { return scalar(json(v)); }
  bool number_integer(number_integer_t v) { return scalar(json(v)); }
  bool number_unsigned(number_unsigned_t v) {
    if (ctx_ == Ctx::shape) return shape_dim(v);
    if (ctx_ == Ctx::offsets) return offset(v);
    return scalar(json(v));
  }
  bool number_float(number_float_t v, const string_t&) { return scalar(json(v)); }
  bool string(string_t& v) {
    if (ctx_ == Ctx::meta_value) {
      metadata_[meta_key_] = std::move(v);  // a repeated key: the last wins, as in a DOM
      ctx_ = Ctx::meta;
      return true;
    }
    if (ctx_ == Ctx::dtype) return dtype(v);
    if (ctx_ == Ctx::skip || ctx_ == Ctx::skip_value) return scalar(json());
    return scalar(json(std::move(v)));
  }
  bool binary(binary_t&) { return fail(loss("header is not valid JSON: binary value")); }
  bool start_object(std::size_t) { return open(/*object=*/true); }
  bool start_array(std::size_t) { return open(/*object=*/false); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(string_t& k) {
    switch (ctx_) {
      case Ctx::root:
        if (k == "__metadata__") {
          if (seen_metadata_) return fail(loss("tensor '__metadata__' appears twice in the header"));
          seen_metadata_ = true;
          ctx_ = Ctx::metadata;
          return true;
        }
        entry_ = Entry{};
        entry_.name = std::move(k);
        ctx_ = Ctx::entry_value;
        return true;
      case Ctx::meta:
        meta_key_ = std::move(k);
        ctx_ = Ctx::meta_value;
        return true;
      case Ctx::entry:
        if (k == "dtype") {
          ctx_ = Ctx::dtype;
        } else if (k == "shape") {
          ctx_ = Ctx::shape_value;
        } else if (k == "data_offsets") {
          ctx_ = Ctx::offsets_value;
        } else {
          ctx_ = Ctx::skip_value;  // an unknown field: ignored, as the Rust library does
        }
        return true;
      default:  // keys inside a skipped value
        return true;
    }
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    // parse_error, or out_of_range for a number like 1e400
    return fail(loss("header is not valid JSON: " + std::string(e.what())));
  }

 private:
  // Where the parser is: what the next token may be.
  enum class Ctx {
    top,            // before the root value
    root,           // in the root object: a key or its end
    metadata,       // after "__metadata__" in root: its object
    meta,           // in __metadata__: a key or its end
    meta_value,     // after a key in __metadata__: a string
    entry_value,    // after a tensor name: its entry object
    entry,          // in an entry: a field name or its end
    dtype,          // the dtype's value
    shape_value,    // the shape's value (array)
    shape,          // in the shape array
    offsets_value,  // data_offsets' value (array)
    offsets,        // in data_offsets
    skip_value,     // an unknown field's value
    skip,           // inside an unknown field's value (skip_depth_ levels)
    done,           // after the root object
  };

  bool fail(Status s) {
    if (status_.is_ok()) status_ = std::move(s);
    return false;
  }

  // Any value the context did not take by type: in the schema's places, an error. Values
  // inside unknown fields are dropped unseen (describe() would copy them).
  bool scalar(const json& v) {
    if (ctx_ == Ctx::skip) return true;
    if (ctx_ == Ctx::skip_value) {
      ctx_ = Ctx::entry;
      return true;
    }
    return value(describe(v), /*container=*/false, false);
  }

  // A value arrives (scalar, or the start of a container described as `what`).
  bool value(const std::string& what, bool container, bool object) {
    switch (ctx_) {
      case Ctx::top:
        return fail(loss("header is " + what + ", expected a JSON object"));
      case Ctx::metadata:
        if (container && object) {
          ctx_ = Ctx::meta;
          return true;
        }
        return fail(loss("field '__metadata__': " + what + ", expected an object of strings"));
      case Ctx::meta_value:
        return fail(loss("field '__metadata__': key '" + shown(meta_key_) + "' is " + what +
                         ", expected a string"));
      case Ctx::entry_value:
        if (container && object) {
          ctx_ = Ctx::entry;
          return true;
        }
        return fail(loss("tensor '" + shown(entry_.name) + "': entry is " + what +
                         ", expected an object with dtype, shape and data_offsets"));
      case Ctx::dtype:
        return fail(entry_loss(entry_.name, "dtype", what + ", expected a string"));
      case Ctx::shape_value:
        if (container && !object) {
          entry_.shape.clear();
          have_shape_ = true;
          ctx_ = Ctx::shape;
          return true;
        }
        return fail(entry_loss(entry_.name, "shape", what + ", expected an array"));
      case Ctx::shape:
        return fail(entry_loss(entry_.name, "shape",
                               "dim " + std::to_string(entry_.shape.size()) + " is " + what +
                                   ", expected an integer in [0, 2^63)"));
      case Ctx::offsets_value:
        if (container && !object) {
          n_offsets_ = 0;
          ctx_ = Ctx::offsets;
          return true;
        }
        return fail(entry_loss(entry_.name, "data_offsets", what + ", expected [begin, end]"));
      case Ctx::offsets:
        if (n_offsets_ >= 2) return too_many_offsets();
        return fail(entry_loss(entry_.name, "data_offsets",
                               std::string(n_offsets_ ? "end" : "begin") + " is " + what +
                                   ", expected a non-negative integer"));
      case Ctx::skip_value:
        if (container) {
          skip_depth_ = 1;
          ctx_ = Ctx::skip;
        } else {
          ctx_ = Ctx::entry;
        }
        return true;
      case Ctx::skip:
        if (container) ++skip_depth_;
        return true;
      default:  // root, meta, entry, done: the parser only sends keys or ends there
        return fail(loss("header is not valid JSON: unexpected value"));
    }
  }

  bool open(bool object) {
    if (++depth_ > kMaxHeaderDepth)
      return fail(loss("header nests deeper than " + std::to_string(kMaxHeaderDepth) +
                       " levels, expected at most that (" +
                       (entry_.name.empty() ? std::string("in the header")
                                            : "in tensor '" + shown(entry_.name) + "'") +
                       ")"));
    if (ctx_ == Ctx::top) {
      if (!object) return value("a JSON array", true, false);
      ctx_ = Ctx::root;
      return true;
    }
    return value(object ? "a JSON object" : "a JSON array", true, object);
  }

  bool close() {
    --depth_;
    switch (ctx_) {
      case Ctx::root:
        ctx_ = Ctx::done;
        return true;
      case Ctx::meta:
        ctx_ = Ctx::root;
        return true;
      case Ctx::entry:
        ctx_ = Ctx::root;
        return finish_entry();
      case Ctx::shape:
        ctx_ = Ctx::entry;
        return true;
      case Ctx::offsets:
        if (n_offsets_ != 2)
          return fail(entry_loss(entry_.name, "data_offsets",
                                 "a JSON array of " + std::to_string(n_offsets_) +
                                     " elements, expected [begin, end]"));
        have_offsets_ = true;
        ctx_ = Ctx::entry;
        return true;
      case Ctx::skip:
        if (--skip_depth_ == 0) ctx_ = Ctx::entry;
        return true;
      default:
        return fail(loss("header is not valid JSON: unexpected end of a container"));
    }
  }

  bool dtype(const std::string& name) {
    const DType* dt = dtype_from_name(name);
    if (dt == nullptr)
      return fail(entry_loss(entry_.name, "dtype",
                             "unknown dtype '" + shown(name) +
                                 "', expected one of F32, F16, BF16, F64, I64, I32, U8"));
    entry_.dtype = *dt;
    have_dtype_ = true;
    ctx_ = Ctx::entry;
    return true;
  }

  bool shape_dim(uint64_t d) {
    if (entry_.shape.size() == kMaxDims)
      return fail(entry_loss(entry_.name, "shape",
                             "more than " + std::to_string(kMaxDims) + " dims, expected at most " +
                                 std::to_string(kMaxDims)));
    if (d > uint64_t(std::numeric_limits<int64_t>::max()))
      return fail(entry_loss(entry_.name, "shape",
                             "dim " + std::to_string(entry_.shape.size()) + " is " +
                                 std::to_string(d) + ", expected an integer in [0, 2^63)"));
    entry_.shape.push_back(int64_t(d));
    return true;
  }

  bool too_many_offsets() {
    return fail(entry_loss(entry_.name, "data_offsets",
                           "a JSON array of more than 2 elements, expected [begin, end]"));
  }

  bool offset(uint64_t v) {
    if (n_offsets_ >= 2) return too_many_offsets();
    (n_offsets_ == 0 ? entry_.begin : entry_.end) = v;
    ++n_offsets_;
    return true;
  }

  // The entry's object ended: every field present, sizes consistent.
  bool finish_entry() {
    Entry& e = entry_;
    const bool have[] = {have_dtype_, have_shape_, have_offsets_};
    const char* fields[] = {"dtype", "shape", "data_offsets"};
    have_dtype_ = have_shape_ = have_offsets_ = false;
    for (int i = 0; i < 3; ++i)
      if (!have[i]) return fail(entry_loss(e.name, fields[i], "missing"));
    const char* dt = safetensors_dtype_name(e.dtype);
    int64_t numel = 1;
    for (int64_t d : e.shape)
      if (__builtin_mul_overflow(numel, d, &numel))
        return fail(entry_loss(e.name, "shape",
                               "element count of " + shape_text(e.shape) + " overflows int64"));
    if (__builtin_mul_overflow(uint64_t(numel), uint64_t(dtype_size(e.dtype)), &e.nbytes))
      return fail(entry_loss(e.name, "shape",
                             "byte size of " + shape_text(e.shape) + " x " + dt +
                                 " overflows uint64"));
    if (e.end < e.begin)
      return fail(entry_loss(e.name, "data_offsets",
                             "end " + std::to_string(e.end) + " < begin " +
                                 std::to_string(e.begin)));
    if (e.end - e.begin != e.nbytes)
      return fail(entry_loss(
          e.name, "data_offsets",
          "[" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "] spans " +
              std::to_string(e.end - e.begin) + " bytes, expected " + std::to_string(e.nbytes) +
              " (shape " + shape_text(e.shape) + " x " + dt + " of " +
              std::to_string(dtype_size(e.dtype)) + " bytes)"));
    entries_.push_back(std::move(e));
    entry_ = Entry{};
    return true;
  }

  const std::string& file_;
  std::vector<Entry>& entries_;
  std::map<std::string, std::string>& metadata_;
  Status status_;
  Ctx ctx_ = Ctx::top;
  size_t depth_ = 0, skip_depth_ = 0;
  Entry entry_{};
  bool have_dtype_ = false, have_shape_ = false, have_offsets_ = false;
  int n_offsets_ = 0;
  bool seen_metadata_ = false;
  std::string meta_key_;
};

}  // namespace

const char* safetensors_dtype_name(DType dtype) {
  for (const auto& d : kDTypeNames)
    if (d.dtype == dtype) return d.name;
  MIXPREC_CHECK(false, "safetensors_dtype_name: dtype missing from the table");
  return "";
}

namespace io {

Status safetensors_loss(const std::string& file, const std::string& what) {
  return Status::data_loss("safetensors file '" + file + "': " + what);
}

std::string shown_name(const std::string& name) {
  return name.size() <= 80 ? name
                           : name.substr(0, 80) + "...(" + std::to_string(name.size()) + " bytes)";
}

Status parse_safetensors_header(const std::string& file, const std::string& text, std::vector<Entry>& entries,
                                std::map<std::string, std::string>& metadata) {
  // nlohmann's lexer takes a NUL byte for the end of input, which would hide whatever
  // follows; JSON allows none outside strings and none raw inside them.
  if (const size_t nul = text.find('\0'); nul != std::string::npos)
    return safetensors_loss(file, "header is not valid JSON: NUL byte at header offset " + std::to_string(nul));
  entries.clear();
  HeaderSax sax(file, entries, metadata);
  bool ok = false;
  try {
    ok = json::sax_parse(text, &sax, json::input_format_t::json, /*strict=*/true);
  } catch (const json::exception& e) {  // not expected from a SAX parse; never let one out
    return safetensors_loss(file, "header is not valid JSON: " + std::string(e.what()));
  }
  if (!ok) {
    Status s = sax.status();
    return s.is_ok() ? safetensors_loss(file, "header is not valid JSON") : s;
  }
  return Status::ok();
}

}  // namespace io

}  // namespace mixprec

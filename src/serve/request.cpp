// request.cpp: a prediction request's body -> the model's samples (mixprec/serve/serve.h). Every
// refusal is invalid_argument with a message a client can act on; the limits come first, so
// a hostile body costs at most a linear scan of its bytes.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "io/json_limits.h"
#include "mixprec/core/names.h"
#include "mixprec/data/image.h"
#include "mixprec/data/npy.h"
#include "mixprec/serve/serve.h"

namespace mixprec::serve {

namespace {

using nlohmann::json;

Status refuse(const std::string& what) { return Status::invalid_argument(what); }

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// The shapes one sample may be given in: [C, H, W], [H, W] for one channel, and flat.
std::vector<std::vector<int64_t>> sample_shapes(const InputLayout& l) {
  std::vector<std::vector<int64_t>> shapes;
  if (!l.feature_names.empty()) return {{l.values_per_sample()}};
  shapes.push_back({l.channels, l.height, l.width});
  if (l.channels == 1) shapes.push_back({l.height, l.width});
  shapes.push_back({l.values_per_sample()});
  return shapes;
}

std::string expected_shapes(const InputLayout& l) {
  std::string out;
  for (const auto& s : sample_shapes(l)) out += (out.empty() ? "" : " or ") + shape_text(s);
  return out;
}

bool is_sample_shape(const std::vector<int64_t>& shape, const InputLayout& l) {
  for (const auto& s : sample_shapes(l))
    if (s == shape) return true;
  return false;
}

// How the numbers of a request are read.
enum class Scale { pixels, unit, raw };

Status check_value(double v, Scale scale, const std::string& where) {
  // Raw values become f32 model inputs: a double beyond f32's range would turn into inf.
  if (scale == Scale::raw ? std::abs(v) <= double(std::numeric_limits<float>::max())
                          : (v >= 0.0 && v <= (scale == Scale::pixels ? 255.0 : 1.0)))
    return Status::ok();
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return refuse(where + " is " + buf + ", expected " +
                (scale == Scale::pixels ? "a pixel value 0..255 (or send \"scale\": \"unit\" for values in [0, 1])"
                 : scale == Scale::unit ? "a value in [0, 1] (\"scale\": \"unit\")"
                                        : "a finite number within float32's range (|x| <= 3.4e38)"));
}

float scaled(double v, Scale scale) { return float(scale == Scale::pixels ? v / 255.0 : v); }

// A nested JSON array of numbers -> its shape and values (row-major), refusing ragged arrays,
// non-numbers and more than `limit` values.
Status flatten(const json& j, const std::string& where, std::vector<int64_t>& shape, std::vector<double>& values,
               size_t limit) {
  // The shape comes from the first element at each depth; every element is then checked.
  shape.clear();
  const json* probe = &j;
  while (probe->is_array()) {
    shape.push_back(int64_t(probe->size()));
    if (probe->empty()) return refuse(where + ": an empty array, expected " + std::string("numbers"));
    probe = &(*probe)[0];
  }
  if (shape.empty()) return refuse(where + ": expected an array of numbers, got " + std::string(j.type_name()));
  values.clear();
  // Iterative walk: the depth is bounded by the parser's limit anyway.
  struct Frame { const json* node; size_t depth; };
  std::vector<Frame> stack{{&j, 0}};
  std::vector<const json*> leaves;
  while (!stack.empty()) {
    const Frame f = stack.back();
    stack.pop_back();
    if (f.depth < shape.size()) {
      if (!f.node->is_array() || int64_t(f.node->size()) != shape[f.depth])
        return refuse(where + ": a ragged array: every array at depth " + std::to_string(f.depth + 1) + " must hold " +
                      std::to_string(shape[f.depth]) + " elements (shape " + shape_text(shape) + ")");
      for (size_t i = f.node->size(); i-- > 0;) stack.push_back({&(*f.node)[i], f.depth + 1});
    } else {
      if (!f.node->is_number())
        return refuse(where + ": element " + std::to_string(values.size()) + " is " + f.node->type_name() +
                      ", expected a number");
      if (values.size() >= limit) return refuse(where + ": more than " + std::to_string(limit) + " values");
      values.push_back(f.node->get<double>());
    }
  }
  return Status::ok();
}

// One input of a JSON request: an array in a sample shape, or for a table model an object
// naming every feature.
StatusOr<std::vector<float>> json_sample(const json& input, const std::string& where, const InputLayout& l,
                                         Scale scale) {
  std::vector<float> out;
  if (l.text != input.is_string())
    return refuse(where + ": " + (l.text ? std::string("got ") + input.type_name() +
                                               (l.next_byte ? "; this language model continues texts: send a JSON string"
                                                            : "; this model classifies texts: send a JSON string")
                                         : "a string; this model takes " +
                                               (l.feature_names.empty() ? "images: an array of shape " + expected_shapes(l)
                                                                        : std::string("a table row"))));
  if (l.next_byte) {  // a prompt: its length, then its last `width` bytes (0 is a byte like any other here)
    const std::string& text = input.get_ref<const std::string&>();
    if (text.empty()) return refuse(where + ": an empty prompt (a language model continues at least one byte)");
    const size_t n = std::min(text.size(), size_t(l.width)), from = text.size() - n;
    out.assign(size_t(l.width) + 1, 0.0f);
    out[0] = float(n);  // exact: width <= 65536
    for (size_t j = 0; j < n; ++j) out[1 + j] = float(uint8_t(text[from + j]));
    return out;
  }
  if (l.text) {  // its bytes as ids, cut or 0-padded to the model's length
    const std::string& text = input.get_ref<const std::string&>();
    if (text.find('\0') != std::string::npos) return refuse(where + ": the text holds a NUL character");
    out.assign(size_t(l.width), 0.0f);
    for (size_t j = 0; j < text.size() && j < size_t(l.width); ++j) out[j] = float(uint8_t(text[j]));
    return out;
  }
  if (input.is_object()) {
    if (l.feature_names.empty())
      return refuse(where + ": an object; this model takes images: an array of shape " + expected_shapes(l));
    out.reserve(l.feature_names.size());
    for (const std::string& name : l.feature_names) {
      auto it = input.find(name);
      if (it == input.end()) return refuse(where + ": no value for feature '" + name + "'");
      if (!it->is_number()) return refuse(where + "." + name + ": expected a number, got " + it->type_name());
      const double v = it->get<double>();
      if (Status s = check_value(v, scale, where + "." + name); !s.is_ok()) return s;
      out.push_back(float(v));
    }
    if (input.size() != l.feature_names.size())
      for (auto it = input.begin(); it != input.end(); ++it)
        if (std::find(l.feature_names.begin(), l.feature_names.end(), it.key()) == l.feature_names.end())
          return refuse(where + ": unknown feature '" + it.key() + "' (the model's features are its training columns)");
    return out;
  }
  std::vector<int64_t> shape;
  std::vector<double> values;
  if (Status s = flatten(input, where, shape, values, size_t(l.values_per_sample())); !s.is_ok()) return s;
  if (!is_sample_shape(shape, l))
    return refuse(where + ": shape " + shape_text(shape) + ", expected " + expected_shapes(l));
  out.reserve(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if (Status s = check_value(values[i], scale, where + " element " + std::to_string(i)); !s.is_ok()) return s;
    out.push_back(scaled(values[i], scale));
  }
  return out;
}

// Counts the commas outside strings: at least (number of values - 1) for any array of values.
size_t commas_outside_strings(std::string_view text) {
  size_t commas = 0;
  bool in_string = false, escaped = false;
  for (char ch : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (ch == '\\') escaped = true;
      else if (ch == '"') in_string = false;
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == ',') {
      ++commas;
    }
  }
  return commas;
}

StatusOr<DecodedRequest> decode_json(std::string_view body, const InputLayout& l, int64_t max_samples) {
  if (!io::json_depth_within(body, 8))
    return refuse("JSON body: nested deeper than 8 levels (an input is at most [C][H][W] inside \"inputs\")");
  // A bound on the values before anything is allocated for them.
  const size_t most_values = size_t(max_samples) * size_t(l.values_per_sample() + l.channels * l.height + l.channels + 1) + 16;
  if (commas_outside_strings(body) > most_values)
    return refuse("JSON body: more values than " + std::to_string(max_samples) + " inputs of " +
                  std::to_string(l.values_per_sample()) + " values can hold");
  json doc;
  try {
    doc = json::parse(body.begin(), body.end());
  } catch (const json::exception& e) {
    std::string what = e.what();
    const auto pos = what.find("] ");  // nlohmann's "[json.exception.parse_error.101] " prefix
    return refuse("malformed JSON: " + (pos == std::string::npos ? what : what.substr(pos + 2)));
  }
  Scale scale = l.feature_names.empty() ? Scale::pixels : Scale::raw;
  const json* list = nullptr;
  std::optional<json> single;
  if (doc.is_object()) {
    for (auto it = doc.begin(); it != doc.end(); ++it)
      if (it.key() != "inputs" && it.key() != "scale")
        return refuse("JSON body: unknown key '" + it.key() + "' (expected \"inputs\" and optionally \"scale\")");
    auto in = doc.find("inputs");
    if (in == doc.end()) return refuse("JSON body: no \"inputs\" key (expected {\"inputs\": [input, ...]})");
    if (!in->is_array()) return refuse("JSON body: \"inputs\" is " + std::string(in->type_name()) + ", expected a list of inputs");
    list = &*in;
    if (auto s = doc.find("scale"); s != doc.end()) {
      if (!l.feature_names.empty()) return refuse("JSON body: \"scale\" applies to images; a table model takes raw feature values");
      if (*s == "pixels") scale = Scale::pixels;
      else if (*s == "unit") scale = Scale::unit;
      else return refuse("JSON body: \"scale\" is " + s->dump() + ", expected \"pixels\" (0..255) or \"unit\" ([0, 1])");
    }
  } else if (doc.is_array()) {
    // A bare array is one input when it has a sample's shape, else a list of inputs.
    std::vector<int64_t> shape;
    std::vector<double> values;
    if (flatten(doc, "body", shape, values, size_t(l.values_per_sample())).is_ok() && is_sample_shape(shape, l)) {
      single = json::array({std::move(doc)});
      list = &*single;
    } else {
      list = &doc;
    }
  } else {
    return refuse("JSON body: a " + std::string(doc.type_name()) + ", expected {\"inputs\": [input, ...]} or an array");
  }
  if (list->empty()) return refuse("JSON body: no inputs");
  if (int64_t(list->size()) > max_samples)
    return refuse("JSON body: " + std::to_string(list->size()) + " inputs, at most " + std::to_string(max_samples) +
                  " per request");
  DecodedRequest out;
  out.samples.reserve(list->size());
  for (size_t i = 0; i < list->size(); ++i) {
    auto sample = json_sample((*list)[i], "inputs[" + std::to_string(i) + "]", l, scale);
    if (!sample.is_ok()) return sample.status();
    out.samples.push_back(std::move(sample).value());
  }
  return out;
}

StatusOr<DecodedRequest> decode_npy(std::string_view body, const InputLayout& l, int64_t max_samples) {
  auto a = parse_npy(reinterpret_cast<const uint8_t*>(body.data()), body.size(), "request body (.npy)");
  if (!a.is_ok()) return refuse(a.status().message());
  const std::vector<int64_t>& s = a->shape;
  const Scale scale = !l.feature_names.empty() ? Scale::raw : a->descr[1] == 'f' ? Scale::unit : Scale::pixels;
  std::vector<int64_t> per_sample = s;
  int64_t n = 1;
  if (!is_sample_shape(s, l)) {
    per_sample.assign(s.begin() + (s.empty() ? 0 : 1), s.end());
    if (s.empty() || !is_sample_shape(per_sample, l))
      return refuse("request body (.npy): shape " + shape_text(s) + ", expected " + expected_shapes(l) +
                    " per sample, optionally with a leading batch dimension");
    n = s[0];
  }
  if (n < 1) return refuse("request body (.npy): no samples (shape " + shape_text(s) + ")");
  if (n > max_samples)
    return refuse("request body (.npy): " + std::to_string(n) + " samples, at most " + std::to_string(max_samples) +
                  " per request");
  const int64_t per = l.values_per_sample();
  DecodedRequest out;
  out.samples.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    out.samples[size_t(i)].resize(size_t(per));
    for (int64_t j = 0; j < per; ++j) {
      const double v = a->values[size_t(i * per + j)];
      if (Status st = check_value(v, scale, "request body (.npy) element " + std::to_string(i * per + j)); !st.is_ok())
        return st;
      out.samples[size_t(i)][size_t(j)] = scaled(v, scale);
    }
  }
  return out;
}

StatusOr<DecodedRequest> decode_image(std::string_view body, const InputLayout& l) {
  if (!l.feature_names.empty()) return refuse("an image body; this model takes table rows (JSON or .npy)");
  // The model's size bounds the decode: a larger image is refused from its header.
  auto img = decode_image_bytes(std::string(body), "request body", std::max(l.height, l.width));
  if (!img.is_ok()) return refuse(img.status().message() + " (this model takes " + std::to_string(l.width) + "x" +
                                  std::to_string(l.height) + " images)");
  if (img->width != l.width || img->height != l.height)
    return refuse("request body: image of " + std::to_string(img->width) + "x" + std::to_string(img->height) +
                  " pixels, this model takes " + std::to_string(l.width) + "x" + std::to_string(l.height) +
                  " (resize it first; the server does not resample)");
  const std::vector<uint8_t> chw = to_chw(*img, l.channels);
  DecodedRequest out;
  out.samples.emplace_back(chw.size());
  for (size_t i = 0; i < chw.size(); ++i) out.samples[0][i] = float(chw[i] / 255.0);
  return out;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && std::memcmp(s.data(), prefix.data(), prefix.size()) == 0;
}

}  // namespace

StatusOr<DecodedRequest> decode_predict_request(std::string_view body, std::string_view content_type,
                                                const InputLayout& layout, int64_t max_samples) {
  if (layout.values_per_sample() < 1 || max_samples < 1) return refuse("the server has no input layout");
  std::string type(content_type.substr(0, content_type.find(';')));
  type.erase(std::remove_if(type.begin(), type.end(), [](unsigned char c) { return std::isspace(c); }), type.end());
  std::transform(type.begin(), type.end(), type.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (body.empty()) return refuse("an empty body (expected JSON, .npy, PNG or JPEG)");
  // Unlabelled or generic bodies are recognised by their first bytes; so are curl's
  // --data-binary bodies, which curl labels as a form unless told otherwise (issue 31).
  if (type.empty() || type == "application/octet-stream" || type == "application/x-www-form-urlencoded") {
    if (starts_with(body, "\x93NUMPY")) type = "application/x-npy";
    else if (starts_with(body, "\x89PNG")) type = "image/png";
    else if (starts_with(body, "\xff\xd8\xff")) type = "image/jpeg";
    else if (body.find_first_not_of(" \t\r\n") != std::string_view::npos &&
             (body[body.find_first_not_of(" \t\r\n")] == '{' || body[body.find_first_not_of(" \t\r\n")] == '['))
      type = "application/json";
    else return refuse("a body that is neither JSON, .npy, PNG nor JPEG (by its first bytes); set Content-Type");
  }
  if (type == "application/json" || type == "text/json") return decode_json(body, layout, max_samples);
  if (layout.text)
    return refuse("Content-Type " + type + (layout.next_byte ? ": this language model continues texts"
                                                              : ": this model classifies texts") +
                  ": send JSON {\"inputs\": [\"a text\", ...]}");
  if (type == "application/x-npy" || type == "application/npy") return decode_npy(body, layout, max_samples);
  if (type == "image/png" || type == "image/jpeg" || type == "image/jpg") return decode_image(body, layout);
  return refuse("Content-Type '" + std::string(content_type) +
                "' is not one of application/json, application/x-npy, image/png, image/jpeg");
}

StatusOr<GenerateRequest> decode_generate_request(std::string_view body, int64_t max_tokens_limit) {
  if (!io::json_depth_within(body, 4)) return refuse("JSON body: nested deeper than 4 levels (expected a flat object)");
  json doc;
  try {
    doc = json::parse(body.begin(), body.end());
  } catch (const json::exception& e) {
    std::string what = e.what();
    const auto pos = what.find("] ");
    return refuse("malformed JSON: " + (pos == std::string::npos ? what : what.substr(pos + 2)));
  }
  if (!doc.is_object())
    return refuse("JSON body: expected an object {\"prompt\": \"text\", ...}, got " + std::string(doc.type_name()));
  GenerateRequest r;
  r.max_tokens = std::min<int64_t>(r.max_tokens, max_tokens_limit);
  bool has_prompt = false;
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const std::string& k = it.key();
    const json& v = it.value();
    auto integer = [&](int64_t lo, int64_t hi) -> StatusOr<int64_t> {
      // A non-negative integer is stored unsigned: compare it as one (a value past 2^63 stays
      // out of range instead of wrapping), then the range's lower end.
      const bool in_range = v.is_number_unsigned() ? v.get<uint64_t>() <= uint64_t(hi) && int64_t(v.get<uint64_t>()) >= lo
                            : v.is_number_integer() && v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
      if (!in_range)
        return refuse("\"" + k + "\": " + v.dump().substr(0, 40) + ", expected an integer in " + std::to_string(lo) +
                      ".." + std::to_string(hi));
      return v.get<int64_t>();
    };
    if (k == "prompt") {
      if (!v.is_string()) return refuse("\"prompt\": a " + std::string(v.type_name()) + ", expected a string");
      r.prompt = v.get<std::string>();
      has_prompt = true;
    } else if (k == "max_tokens") {
      auto n = integer(1, max_tokens_limit);
      if (!n.is_ok()) return n.status();
      r.max_tokens = *n;
    } else if (k == "top_k") {
      auto n = integer(0, 256);
      if (!n.is_ok()) return n.status();
      r.top_k = *n;
    } else if (k == "temperature") {
      if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
        return refuse("\"temperature\": " + v.dump().substr(0, 40) + ", expected a finite number >= 0");
      r.temperature = v.get<double>();
    } else if (k == "seed") {
      if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
        return refuse("\"seed\": " + v.dump().substr(0, 40) + ", expected an integer in 0..18446744073709551615");
      r.seed = v.get<uint64_t>();
    } else {
      return refuse("JSON body: unknown key '" + k + "'" +
                    did_you_mean(k, {"prompt", "max_tokens", "temperature", "top_k", "seed"}) +
                    " (expected prompt, max_tokens, temperature, top_k, seed)");
    }
  }
  if (!has_prompt) return refuse("JSON body: no \"prompt\" (expected {\"prompt\": \"text\", ...})");
  return r;
}

}  // namespace mixprec::serve

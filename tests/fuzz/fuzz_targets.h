// fuzz_targets.h: what each fuzz harness does with one input, shared by the libFuzzer
// executables (tests/fuzz/<name>_fuzz.cpp, built with MIXPREC_FUZZ=ON) and the ordinary test
// suite (tests/unit/io/fuzz_corpus_replay_test.cpp replays every seed and every crasher).
//
// Each target feeds the bytes to one public parser and checks the contract beyond "no
// crash": a refusal is a Status with the documented code (never an exception, never another
// code), and what is accepted is consistent (a safetensors file re-serialises to bytes that
// parse to the same tensors). A violation comes back as a message; the harness aborts on it,
// so libFuzzer records the input as a crasher.
#pragma once
#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "mixprec/io/checkpoint.h"
#include "mixprec/data/data.h"
#include "mixprec/data/image.h"
#include "nn/model_plan.h"
#include "mixprec/data/npy.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/serve/serve.h"
#include "mixprec/train/train_config.h"

namespace mixprec::fuzz {

// "" when the contract holds, else what broke. Each target also reports through `accepted`
// (may be null) whether the parser accepted the input, so the replay test can check that the
// valid_* seeds really pass validation.
using Violation = std::string;

inline void set(bool* accepted, bool v) {
  if (accepted != nullptr) *accepted = v;
}

inline Violation expect_code(const Status& s, StatusCode code, const char* what) {
  if (s.is_ok() || s.code() == code) return {};
  return std::string(what) + ": unexpected status code " + std::to_string(int(s.code())) + ": " +
         s.message().substr(0, 300);
}

// The file readers take a path: the input goes to a per-process file in /dev/shm (tmpfs,
// no disk traffic at thousands of inputs a second) or $TMPDIR.
inline std::string scratch_path(const char* tag) {
  const char* dir = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/mixprec_fuzz_" + tag + "_" +
         std::to_string(::getpid());
}

inline bool write_scratch(const std::string& path, const uint8_t* data, size_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  size_t done = 0;
  while (done < size) {
    const ssize_t w = ::write(fd, data + done, size - done);
    if (w <= 0) break;
    done += size_t(w);
  }
  ::close(fd);
  return done == size;
}

// safetensors: the in-memory parser (header + every tensor's bytes); an accepted file must
// serialise again and the result parse to the same names, shapes, dtypes, bytes and metadata.
inline Violation safetensors(const uint8_t* data, size_t size, bool* accepted = nullptr) {
  auto r = parse_safetensors(data, size, "fuzz.safetensors");
  set(accepted, r.is_ok());
  if (!r.is_ok()) return expect_code(r.status(), StatusCode::data_loss, "parse_safetensors");
  auto bytes = serialize_safetensors(r->tensors, r->metadata);
  if (!bytes.is_ok()) return "accepted file does not serialise: " + bytes.status().message();
  auto again = parse_safetensors(bytes->data(), bytes->size(), "fuzz.reserialised");
  if (!again.is_ok()) return "re-serialised file does not parse: " + again.status().message();
  if (again->metadata != r->metadata) return "metadata changed by a round trip";
  if (again->tensors.size() != r->tensors.size()) return "tensor count changed by a round trip";
  for (const auto& [name, t] : r->tensors) {
    const Tensor* u = again->find(name);
    if (u == nullptr) return "tensor '" + name + "' lost by a round trip";
    if (u->shape() != t.shape() || u->dtype() != t.dtype()) return "tensor '" + name + "' changed";
    const size_t n = size_t(t.numel()) * dtype_size(t.dtype());
    if (n > 0 && std::memcmp(u->data(), t.data(), n) != 0) return "bytes of '" + name + "' changed";
  }
  return {};
}

// A whole checkpoint: safetensors container, then format, version, counters, scaler,
// model_tensors, config (the metadata state a resume restores).
inline Violation checkpoint(const uint8_t* data, size_t size, bool* accepted = nullptr) {
  auto r = parse_checkpoint(data, size, "fuzz.ckpt");
  set(accepted, r.is_ok());
  return expect_code(r.status(), StatusCode::data_loss, "parse_checkpoint");
}

// config.json: parsed as a configuration, adopted as a saved one on --resume, and read as a
// user's --config file.
inline Violation config_json(const uint8_t* data, size_t size, bool* accepted = nullptr) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto c = train::config_from_json(text);
  set(accepted, c.is_ok());
  if (Violation v = expect_code(c.status(), StatusCode::invalid_argument, "config_from_json"); !v.empty())
    return v;
  auto a = train::adopt_saved_config(train::TrainConfig{}, text,
                                     [](const std::string& key) { return key.size() % 2 == 0; });
  if (Violation v = expect_code(a.status(), StatusCode::invalid_argument, "adopt_saved_config"); !v.empty())
    return v;
  auto f = train::apply_config_file(train::TrainConfig{}, text, "fuzz.json",
                                    [](const std::string& key) { return key.size() % 3 == 0; });
  if (Violation v = expect_code(f.status(), StatusCode::invalid_argument, "apply_config_file"); !v.empty())
    return v;
  // The same bytes as a YAML --config file (yaml-cpp, then our conversion to JSON).
  auto y = train::apply_config_file(train::TrainConfig{}, text, "fuzz.yaml",
                                    [](const std::string& key) { return key.size() % 3 == 0; });
  if (Violation v = expect_code(y.status(), StatusCode::invalid_argument, "apply_config_file (YAML)"); !v.empty())
    return v;
  if (c.is_ok()) {  // what was accepted prints and parses back
    auto back = train::config_from_json(train::config_to_json(*c));
    if (!back.is_ok()) return "config_to_json output does not parse: " + back.status().message();
  }
  return {};
}

// IDX (MNIST): the same bytes as an image file and as a label file, plain or gzip (the
// reader picks by the magic bytes 1f 8b).
inline Violation idx(const uint8_t* data, size_t size, bool* accepted = nullptr) {
  const std::string path = scratch_path("idx");
  set(accepted, false);
  if (!write_scratch(path, data, size)) return "cannot write the scratch file " + path;
  const Status images = read_idx_images(path).status();
  const Status labels = read_idx_labels(path, 10).status();
  set(accepted, images.is_ok() || labels.is_ok());
  Violation v = expect_code(images, StatusCode::data_loss, "read_idx_images");
  if (v.empty()) v = expect_code(labels, StatusCode::data_loss, "read_idx_labels");
  ::unlink(path.c_str());
  return v;
}

// A CIFAR-10 binary batch, plain or gzip.
inline Violation cifar(const uint8_t* data, size_t size, bool* accepted = nullptr) {
  const std::string path = scratch_path("cifar");
  set(accepted, false);
  if (!write_scratch(path, data, size)) return "cannot write the scratch file " + path;
  const Status s = read_cifar10_batch(path).status();
  set(accepted, s.is_ok());
  Violation v = expect_code(s, StatusCode::data_loss, "read_cifar10_batch");
  ::unlink(path.c_str());
  return v;
}

// A NumPy .npy array (parsed in memory): data_loss for anything malformed, invalid_argument
// for a valid file of an unsupported dtype or order; an accepted array holds exactly the
// elements its shape says.
inline Violation npy(const uint8_t* data, size_t size, bool* accepted = nullptr) {
  set(accepted, false);
  auto a = parse_npy(data, size, "fuzz.npy");
  if (!a.is_ok()) {
    if (a.status().code() == StatusCode::data_loss || a.status().code() == StatusCode::invalid_argument) return {};
    return expect_code(a.status(), StatusCode::data_loss, "parse_npy");
  }
  set(accepted, true);
  uint64_t count = 1;
  for (int64_t d : a->shape) count *= uint64_t(d);
  if (count != a->values.size())
    return "parse_npy: shape says " + std::to_string(count) + " elements, got " + std::to_string(a->values.size());
  return {};
}

// A PNG or JPEG in memory (decode_image_bytes: what predict, serve and an image-folder
// dataset decode), at most 64 pixels a side: data_loss for anything else; an accepted image
// is 1..64 pixels a side, gray or RGB, holds exactly width x height x channels pixels, and
// converts to 1 and to 3 channels (to_chw) at the sizes those say.
inline Violation image(const uint8_t* data, size_t size, bool* accepted = nullptr) {
  set(accepted, false);
  auto img = decode_image_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz.img", 64);
  if (!img.is_ok()) return expect_code(img.status(), StatusCode::data_loss, "decode_image_bytes");
  set(accepted, true);
  const int64_t w = img->width, h = img->height, c = img->channels;
  if (w < 1 || w > 64 || h < 1 || h > 64 || (c != 1 && c != 3))
    return "decode_image_bytes: accepted " + std::to_string(w) + "x" + std::to_string(h) + " with " +
           std::to_string(c) + " channels";
  if (img->pixels.size() != size_t(w * h * c))
    return "decode_image_bytes: " + std::to_string(img->pixels.size()) + " pixel bytes for " + std::to_string(w) +
           "x" + std::to_string(h) + "x" + std::to_string(c);
  for (int64_t channels : {1, 3})
    if (to_chw(*img, channels).size() != size_t(channels * w * h)) return "to_chw: wrong size";
  return {};
}

// A CSV table (parsed in memory, label column "label"): data_loss for anything malformed,
// invalid_argument only for a missing label column; an accepted table holds rows x columns
// finite numbers and one label per row, and becomes a dataset or is refused with data_loss.
inline Violation csv_numbers(const uint8_t* data, size_t size, bool* accepted = nullptr) {
  set(accepted, false);
  auto t = parse_csv_table(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.csv", "label");
  if (!t.is_ok()) {
    if (t.status().code() == StatusCode::invalid_argument) return {};
    return expect_code(t.status(), StatusCode::data_loss, "parse_csv_table");
  }
  if (t->features.size() != size_t(t->rows) * t->feature_names.size() || t->labels.size() != size_t(t->rows))
    return "parse_csv_table: " + std::to_string(t->rows) + " rows of " + std::to_string(t->feature_names.size()) +
           " columns but " + std::to_string(t->features.size()) + " values";
  for (float v : t->features)
    if (!std::isfinite(v)) return "parse_csv_table: accepted a non-finite value";
  auto d = table_dataset(*t, "fuzz.csv");
  if (!d.is_ok()) return expect_code(d.status(), StatusCode::data_loss, "table_dataset");
  set(accepted, true);
  return {};
}

// The same bytes as a table of texts (column "text"), read with --skip-bad: refusals as above;
// an accepted table holds one text and one label per row, no text holds byte 0, and as a
// dataset of 16-byte token sequences it validates (or refuses with data_loss).
inline Violation csv_text(const uint8_t* data, size_t size, bool* accepted = nullptr) {
  set(accepted, false);
  BadSamples bad{.skip = true};
  auto t = parse_csv_table(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.csv", "label", {}, "text",
                           &bad);
  if (!t.is_ok()) {
    if (t.status().code() == StatusCode::invalid_argument) return {};
    return expect_code(t.status(), StatusCode::data_loss, "parse_csv_table (text)");
  }
  if (t->texts.size() != size_t(t->rows) || t->labels.size() != size_t(t->rows) || !t->features.empty())
    return "parse_csv_table (text): " + std::to_string(t->rows) + " rows but " + std::to_string(t->texts.size()) +
           " texts and " + std::to_string(t->features.size()) + " feature values";
  for (const std::string& text : t->texts)
    if (text.find('\0') != std::string::npos) return "parse_csv_table (text): accepted a NUL byte";
  if (bad.count > 0 && bad.first.empty()) return "BadSamples: a count without the first message";
  auto d = text_table_dataset(*t, "fuzz.csv", 16);
  if (!d.is_ok()) return expect_code(d.status(), StatusCode::data_loss, "text_table_dataset");
  if (d->images.size() != size_t(d->count) * 16) return "text_table_dataset: wrong token count";
  set(accepted, true);
  return {};
}

// A model file (YAML or JSON) planned for 1x8x8 inputs and 3 classes, or (token_input) as a
// text classifier or language model over 8 byte ids, with a budget of 2^20 parameters
// (plan_model_file: every check build_model_file makes, no allocation): refusals are
// invalid_argument; an accepted plan stays within the budget and ends in [3] (a language
// model, which only the text reading accepts, in [8, 256] from its lm_head), and a text
// model starts with an embedding.
inline Violation model_file_plan(const uint8_t* data, size_t size, bool* accepted, bool token_input) {
  set(accepted, false);
  const char* what = token_input ? "plan_model_file (text)" : "plan_model_file";
  std::vector<nn::ModelFileLayer> rows;
  auto plan = nn::plan_model_file(std::string(reinterpret_cast<const char*>(data), size), "fuzz.yaml", 1,
                                  token_input ? 1 : 8, 8, 3, &rows, int64_t(1) << 20, token_input);
  if (!plan.is_ok()) return expect_code(plan.status(), StatusCode::invalid_argument, what);
  set(accepted, true);
  int64_t total = 0;
  for (const nn::LayerPlan& p : *plan) total += p.parameters;
  if (total > (int64_t(1) << 20)) return std::string(what) + ": accepted " + std::to_string(total) + " parameters";
  const bool language_model = !plan->empty() && plan->back().type == "lm_head";
  if (language_model && !token_input) return std::string(what) + ": accepted a language model over images";
  const std::vector<int64_t> out = language_model ? std::vector<int64_t>{8, 256} : std::vector<int64_t>{3};
  if (plan->empty() || plan->back().output_shape != out)
    return std::string(what) + ": accepted a model whose last layer does not output " +
           (language_model ? "[8, 256]" : "[3]");
  if (token_input && plan->front().type != "embedding")
    return std::string(what) + ": accepted a text classifier that does not start with an embedding";
  return {};
}
inline Violation model_file_images(const uint8_t* data, size_t size, bool* accepted = nullptr) {
  return model_file_plan(data, size, accepted, false);
}
inline Violation model_file_text(const uint8_t* data, size_t size, bool* accepted = nullptr) {
  return model_file_plan(data, size, accepted, true);
}

// The csv and model_file harnesses run both readings of their input; "accepted" when either
// accepted it (a valid_* seed is a table of numbers or of texts, an image or a text model).
inline Violation either(Violation (*a)(const uint8_t*, size_t, bool*), Violation (*b)(const uint8_t*, size_t, bool*),
                        const uint8_t* data, size_t size, bool* accepted) {
  bool first = false, second = false;
  if (Violation v = a(data, size, &first); !v.empty()) return v;
  if (Violation v = b(data, size, &second); !v.empty()) return v;
  set(accepted, first || second);
  return {};
}
inline Violation csv(const uint8_t* data, size_t size, bool* accepted = nullptr) {
  return either(csv_numbers, csv_text, data, size, accepted);
}
inline Violation model_file(const uint8_t* data, size_t size, bool* accepted = nullptr) {
  return either(model_file_images, model_file_text, data, size, accepted);
}

// A POST /v1/predict body (serve::decode_predict_request). The first byte picks the
// Content-Type (JSON, .npy, PNG, none: sniffed) and the model's input (1x4x3 pixels, 3x4x3
// pixels, a table of 3 named features, or with the top bit a text classifier of 6 bytes, and
// with the next bit too a language model of context 6); the rest is the body. Refusals are
// invalid_argument; an accepted request holds 1..8 samples of exactly the model's size,
// finite, and pixels scaled into [0, 1]; a language model's sample is a prompt length 1..6,
// then that many bytes and zeros after them. The body is also decoded as a POST /v1/generate
// request, whose accepted settings must lie in their ranges.
inline Violation serve_request(const uint8_t* data, size_t size, bool* accepted = nullptr) {
  set(accepted, false);
  if (size == 0) return {};
  static const char* const kTypes[] = {"application/json", "application/x-npy", "image/png", ""};
  serve::InputLayout layout;
  layout.height = 4;
  layout.width = 3;
  const int shape = (data[0] >> 2) % 3;
  if (shape == 1) layout.channels = 3;
  if (shape == 2) layout = {3, 1, 1, {"a", "b", "c"}};
  if (data[0] & 0x80) layout = {1, 1, 6, {}, /*text=*/true};  // a text classifier of 6 bytes
  if ((data[0] & 0xc0) == 0xc0) layout.next_byte = true;       // a language model of context 6
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  // The same bytes as a POST /v1/generate body (a language model's), limit 64 bytes: an
  // accepted request stays within every range.
  if (auto g = serve::decode_generate_request(body, 64); g.is_ok()) {
    if (g->max_tokens < 1 || g->max_tokens > 64 || g->top_k < 0 || g->top_k > 256 || !std::isfinite(g->temperature) ||
        g->temperature < 0)
      return "decode_generate_request: accepted settings out of range";
  } else if (g.status().code() != StatusCode::invalid_argument) {
    return expect_code(g.status(), StatusCode::invalid_argument, "decode_generate_request");
  }
  auto r = serve::decode_predict_request(body, kTypes[data[0] & 3], layout, 8);
  if (!r.is_ok()) return expect_code(r.status(), StatusCode::invalid_argument, "decode_predict_request");
  set(accepted, true);
  if (r->samples.empty() || r->samples.size() > 8)
    return "decode_predict_request: accepted " + std::to_string(r->samples.size()) + " samples (limit 8)";
  for (const auto& sample : r->samples) {
    if (int64_t(sample.size()) != layout.values_per_sample())
      return "decode_predict_request: a sample of " + std::to_string(sample.size()) + " values";
    if (layout.next_byte) {
      const float n = sample[0];
      if (!(n >= 1.f && n <= float(layout.width) && n == std::floor(n)))
        return "decode_predict_request: a prompt length of " + std::to_string(n);
      for (size_t j = 1 + size_t(n); j < sample.size(); ++j)
        if (sample[j] != 0.f) return "decode_predict_request: a value after the prompt's end";
    }
    for (float v : sample)
      if (!std::isfinite(v) || (layout.text ? !(v >= 0.f && v <= 255.f && v == std::floor(v))
                                            : layout.feature_names.empty() && !(v >= 0.f && v <= 1.f)))
        return "decode_predict_request: accepted the value " + std::to_string(v);
  }
  return {};
}

}  // namespace mixprec::fuzz

#include "fuzz/http_fuzz_target.h"
#include "fuzz/experiment_fuzz_target.h"

// The body of every harness: run the target, abort on a violation (a crasher for libFuzzer).
#define MIXPREC_FUZZ_TARGET(target)                                              \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {      \
    const mixprec::fuzz::Violation v = mixprec::fuzz::target(data, size);        \
    if (!v.empty()) {                                                            \
      std::fprintf(stderr, "mixprec fuzz target " #target ": %s\n", v.c_str()); \
      std::abort();                                                              \
    }                                                                            \
    return 0;                                                                    \
  }

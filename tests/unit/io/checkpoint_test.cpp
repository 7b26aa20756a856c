// checkpoint_test.cpp: TrainingState round trip (bit-exact tensors, every metadata field),
// the on-disk layout read back with a plain JSON + bytes reader (standard safetensors), every
// kind of corruption rejected as data_loss naming the file, and the last/best pointers; the
// inf/NaN scan, the resume-time checks of scaler/counters/rng_state, and the choice of the
// checkpoint a resume or rollback continues from (never a non-finite one). Long because it
// holds one case per corruption and per resume check; each case is a few lines.
#include "mixprec/io/checkpoint.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/convert.h"
#include "core/random.h"
#include "mixprec/autograd/autograd.h"
#include "mixprec/data/data.h"
#include "mixprec/amp/precision.h"
#include "mixprec/nn/models.h"
#include "mixprec/io/safetensors.h"
#include "train/precision_step.h"

namespace mixprec {
namespace {

using json = nlohmann::json;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mixprec_ckpt_test_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  std::string dir_;
};

std::vector<uint8_t> read_bytes(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void write_bytes(const std::string& p, const std::vector<uint8_t>& b) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}
std::vector<uint8_t> raw(const Tensor& t) {
  const Tensor c = t.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.data());
  return {p, p + c.numel() * int64_t(dtype_size(c.dtype()))};
}
template <typename T>
std::vector<uint8_t> le_bytes(std::initializer_list<T> values) {
  std::vector<uint8_t> out;
  for (T v : values) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out.insert(out.end(), b, b + sizeof(T));
  }
  return out;
}

// Values chosen so their encodings are known by hand (see the bit patterns below).
TrainingState sample_state() {
  TrainingState s;
  // Model order is deliberately not alphabetical (weight before bias), as named_parameters().
  s.model.emplace_back("conv1.weight", Tensor::from_vector({1.5f, -2.25f, 0.1f, 3e-39f}, {1, 1, 2, 2}));
  s.model.emplace_back("conv1.bias", Tensor::from_vector({-0.0f}, {1}));
  s.model.emplace_back("fc1.weight", Tensor::from_vector({1.5f, -2.25f, 5.9604645e-08f}, {3, 1}, DType::f16));
  s.model.emplace_back("fc1.bias", Tensor::from_vector({1.5f, -2.25f}, {2}, DType::bf16));
  s.model.emplace_back("bn.num_batches_tracked", Tensor::from_vector_i64({42}, {}));
  s.optimizer["exp_avg.0"] = Tensor::from_vector({0.25f, -0.5f, 1e-30f, 7.0f}, {1, 1, 2, 2});
  s.optimizer["exp_avg_sq.0"] = Tensor::from_vector({1e-12f, 2e-12f, 3e-12f, 4e-12f}, {1, 1, 2, 2});
  s.optimizer_steps = 17;
  s.masters["fc1.weight"] = Tensor::from_vector({1.5f, -2.25f, 5.96e-08f}, {3, 1});
  s.scaler = {{"scale", 32768.0}, {"growth_factor", 2.0}, {"backoff_factor", 0.5},
              {"growth_interval", 2000.0}, {"_growth_tracker", 7.0}, {"odd", 0.1}};
  s.rng_state = generator_state();  // a real generator state: check_resumable parses it
  s.epoch = 3;
  s.batch_in_epoch = 11;
  s.global_step = 1234567890123LL;
  s.config_json = R"({"model":"cnn","lr":0.001,"dataset":"synthetic"})";
  s.precision = "amp-fp16";
  s.model_name = "cnn";
  return s;
}

TEST_F(CheckpointTest, RoundTripKeepsEveryFieldBitExact) {
  const TrainingState in = sample_state();
  ASSERT_TRUE(save_checkpoint(path("a.safetensors"), in).is_ok());
  auto out = load_checkpoint(path("a.safetensors"));
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  ASSERT_EQ(out->model.size(), 5u);
  const char* order[] = {"conv1.weight", "conv1.bias", "fc1.weight", "fc1.bias", "bn.num_batches_tracked"};
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(out->model[i].first, order[i]);
  // f32 bit patterns by hand: 1.5 = 0x3FC00000, -2.25 = 0xC0100000, -0 = 0x80000000.
  const Tensor& w = out->model[0].second;
  EXPECT_EQ(w.dtype(), DType::f32);
  EXPECT_EQ(w.shape(), (Shape{1, 1, 2, 2}));
  uint32_t bits[4];
  std::memcpy(bits, w.data(), 16);
  EXPECT_EQ(bits[0], 0x3FC00000u);
  EXPECT_EQ(bits[1], 0xC0100000u);
  EXPECT_EQ(bits[2], 0x3DCCCCCDu);  // 0.1f
  float denormal = 3e-39f;          // an f32 subnormal must survive untouched
  uint32_t denormal_bits;
  std::memcpy(&denormal_bits, &denormal, 4);
  EXPECT_EQ(bits[3], denormal_bits);
  EXPECT_EQ(raw(out->model[1].second), le_bytes<uint32_t>({0x80000000u}));
  // f16: 1.5 = 0x3E00, -2.25 = 0xC080, 2^-24 = 0x0001 (smallest subnormal).
  EXPECT_EQ(out->model[2].second.dtype(), DType::f16);
  EXPECT_EQ(raw(out->model[2].second), le_bytes<uint16_t>({0x3E00, 0xC080, 0x0001}));
  // bf16: 1.5 = 0x3FC0, -2.25 = 0xC010.
  EXPECT_EQ(out->model[3].second.dtype(), DType::bf16);
  EXPECT_EQ(raw(out->model[3].second), le_bytes<uint16_t>({0x3FC0, 0xC010}));
  EXPECT_EQ(out->model[4].second.dtype(), DType::i64);
  EXPECT_EQ(out->model[4].second.shape(), Shape{});
  EXPECT_EQ(raw(out->model[4].second), le_bytes<int64_t>({42}));

  ASSERT_EQ(out->optimizer.size(), 2u);
  EXPECT_EQ(raw(out->optimizer.at("exp_avg.0")), raw(in.optimizer.at("exp_avg.0")));
  EXPECT_EQ(raw(out->optimizer.at("exp_avg_sq.0")), raw(in.optimizer.at("exp_avg_sq.0")));
  ASSERT_EQ(out->masters.size(), 1u);
  EXPECT_EQ(raw(out->masters.at("fc1.weight")), raw(in.masters.at("fc1.weight")));
  EXPECT_EQ(out->optimizer_steps, 17);
  EXPECT_EQ(out->scaler, in.scaler);  // exact doubles, 0.1 included (shortest round-trip JSON)
  EXPECT_EQ(out->rng_state, in.rng_state);
  EXPECT_EQ(out->epoch, 3);
  EXPECT_EQ(out->batch_in_epoch, 11);
  EXPECT_EQ(out->global_step, 1234567890123LL);
  EXPECT_EQ(json::parse(out->config_json), json::parse(in.config_json));
  EXPECT_EQ(out->precision, "amp-fp16");
  EXPECT_EQ(out->model_name, "cnn");
}

TEST_F(CheckpointTest, NonFiniteScalerValuesAndEmptyParts) {
  TrainingState in;
  in.model.emplace_back("w", Tensor::from_vector({1.0f}, {1}));
  in.scaler = {{"scale", std::numeric_limits<double>::infinity()}, {"x", std::nan("")}};
  ASSERT_TRUE(save_checkpoint(path("b.safetensors"), in).is_ok());
  auto out = load_checkpoint(path("b.safetensors"));
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_TRUE(std::isinf(out->scaler.at("scale")) && out->scaler.at("scale") > 0);
  EXPECT_TRUE(std::isnan(out->scaler.at("x")));
  EXPECT_TRUE(out->optimizer.empty());
  EXPECT_TRUE(out->masters.empty());
  EXPECT_EQ(out->config_json, "{}");
}

// The file is standard safetensors: a reader that knows only the format (u64 LE length,
// JSON header, raw little-endian bytes) finds the model under plain names.
TEST_F(CheckpointTest, PlainSafetensorsReaderSeesStateDictNames) {
  ASSERT_TRUE(save_checkpoint(path("c.safetensors"), sample_state()).is_ok());
  const std::vector<uint8_t> bytes = read_bytes(path("c.safetensors"));
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[size_t(i)];
  ASSERT_LE(8 + n, bytes.size());
  const json header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + long(n));
  const json& w = header.at("conv1.weight");
  EXPECT_EQ(w.at("dtype"), "F32");
  EXPECT_EQ(w.at("shape"), json::array({1, 1, 2, 2}));
  const uint64_t begin = w.at("data_offsets")[0], end = w.at("data_offsets")[1];
  ASSERT_EQ(end - begin, 16u);
  const std::vector<uint8_t> data(bytes.begin() + long(8 + n + begin), bytes.begin() + long(8 + n + end));
  const std::vector<uint8_t> expect_first = le_bytes<uint32_t>({0x3FC00000u, 0xC0100000u});
  EXPECT_TRUE(std::equal(expect_first.begin(), expect_first.end(), data.begin()));
  EXPECT_EQ(header.at("fc1.bias").at("dtype"), "BF16");
  EXPECT_EQ(header.at("fc1.weight").at("dtype"), "F16");
  EXPECT_TRUE(header.contains("optimizer.exp_avg.0"));
  EXPECT_TRUE(header.contains("master.fc1.weight"));
  const json& md = header.at("__metadata__");
  EXPECT_EQ(md.at("format"), "mixprec-checkpoint");
  EXPECT_EQ(md.at("version"), "1");
  EXPECT_EQ(md.at("global_step"), "1234567890123");
  for (const auto& [k, v] : md.items()) EXPECT_TRUE(v.is_string()) << k;  // the format's rule
  EXPECT_EQ(json::parse(md.at("scaler").get<std::string>()).at("scale"), 32768.0);
}

// Every corruption must be data_loss naming the file.
void expect_data_loss(const std::string& p, const std::string& needle = "") {
  auto r = load_checkpoint(p);
  ASSERT_FALSE(r.is_ok()) << p << " loaded";
  EXPECT_EQ(r.status().code(), StatusCode::data_loss) << r.status().message();
  EXPECT_NE(r.status().message().find(p), std::string::npos) << r.status().message();
  if (!needle.empty()) EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
}

TEST_F(CheckpointTest, TruncatedAtEveryRegionIsDataLoss) {
  ASSERT_TRUE(save_checkpoint(path("good.safetensors"), sample_state()).is_ok());
  const std::vector<uint8_t> bytes = read_bytes(path("good.safetensors"));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[size_t(i)];
  for (size_t cut : {size_t(0), size_t(4), size_t(8), size_t(8 + n / 2), size_t(8 + n), size_t(8 + n + 3),
                     bytes.size() - 1}) {
    const std::string p = path("cut" + std::to_string(cut) + ".safetensors");
    write_bytes(p, std::vector<uint8_t>(bytes.begin(), bytes.begin() + long(cut)));
    SCOPED_TRACE("cut at " + std::to_string(cut));
    expect_data_loss(p);
  }
  std::vector<uint8_t> longer = bytes;  // trailing bytes (a polyglot file) too
  longer.push_back(0);
  write_bytes(path("long.safetensors"), longer);
  expect_data_loss(path("long.safetensors"));
}

TEST_F(CheckpointTest, FlippedHeaderBytesAreDataLoss) {
  ASSERT_TRUE(save_checkpoint(path("good.safetensors"), sample_state()).is_ok());
  const std::vector<uint8_t> bytes = read_bytes(path("good.safetensors"));
  ASSERT_EQ(bytes[8], '{');
  const size_t first_quote = 9 + size_t(std::find(bytes.begin() + 9, bytes.end(), '"') - (bytes.begin() + 9));
  // Length field low byte, length field high byte, the opening brace, the first quote.
  for (size_t pos : {size_t(0), size_t(7), size_t(8), first_quote}) {
    std::vector<uint8_t> b = bytes;
    b[pos] ^= 0x41;
    const std::string p = path("flip" + std::to_string(pos) + ".safetensors");
    write_bytes(p, b);
    SCOPED_TRACE("flip at " + std::to_string(pos));
    expect_data_loss(p);
  }
}

std::vector<uint8_t> tensor_bytes(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.data());
  return std::vector<uint8_t>(p, p + t.numel() * int64_t(dtype_size(t.dtype())));
}
bool same_tensors(const std::vector<std::pair<std::string, Tensor>>& a,
                  const std::vector<std::pair<std::string, Tensor>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].first != b[i].first || a[i].second.dtype() != b[i].second.dtype() ||
        a[i].second.shape() != b[i].second.shape() || tensor_bytes(a[i].second) != tensor_bytes(b[i].second))
      return false;
  return true;
}
std::vector<std::pair<std::string, Tensor>> as_list(const std::map<std::string, Tensor>& m) {
  return {m.begin(), m.end()};
}
bool same_state(const TrainingState& a, const TrainingState& b) {
  return same_tensors(a.model, b.model) && same_tensors(as_list(a.optimizer), as_list(b.optimizer)) &&
         same_tensors(as_list(a.masters), as_list(b.masters)) && a.scaler == b.scaler && a.rng_state == b.rng_state &&
         a.optimizer_steps == b.optimizer_steps && a.epoch == b.epoch && a.batch_in_epoch == b.batch_in_epoch &&
         a.global_step == b.global_step && a.config_json == b.config_json && a.precision == b.precision &&
         a.model_name == b.model_name;
}

// Issue 12's bar: a flipped byte anywhere in a checkpoint is detected or provably harmless.
// Every byte of a real checkpoint (tensors of four dtypes, optimizer state, masters, scaler,
// a real RNG state, config text), flipped one bit: refused, or loaded as the very same state.
TEST_F(CheckpointTest, EverySingleByteFlipIsDetectedOrHarmless) {
  ASSERT_TRUE(save_checkpoint(path("good.safetensors"), sample_state()).is_ok());
  const std::vector<uint8_t> bytes = read_bytes(path("good.safetensors"));
  auto original = parse_checkpoint(bytes.data(), bytes.size(), "good");
  ASSERT_TRUE(original.is_ok()) << original.status().message();
  int refused = 0, harmless = 0, silent = 0;
  size_t first_silent = 0;
  for (size_t pos = 0; pos < bytes.size(); ++pos) {
    std::vector<uint8_t> b = bytes;
    b[pos] ^= 0x01;
    auto st = parse_checkpoint(b.data(), b.size(), "flipped");
    if (!st.is_ok()) {
      ++refused;
    } else if (same_state(*st, *original)) {
      ++harmless;
    } else if (silent++ == 0) {
      first_silent = pos;
    }
  }
  std::printf("  %zu-byte checkpoint, every byte flipped: %d refused, %d harmless, %d silently different\n",
              bytes.size(), refused, harmless, silent);
  EXPECT_EQ(silent, 0) << "first at byte " << first_silent;
  EXPECT_GT(refused, int(bytes.size() * 9 / 10));
}

// Re-saves the sample's tensors with edited metadata (the container stays valid).
class CheckpointMetadataTest : public CheckpointTest {
 protected:
  std::string with_metadata(const std::string& name,
                            const std::function<void(std::map<std::string, std::string>&)>& edit,
                            std::vector<std::pair<std::string, Tensor>> extra = {}) {
    EXPECT_TRUE(save_checkpoint(path("base.safetensors"), sample_state()).is_ok());
    auto f = load_safetensors(path("base.safetensors"));
    EXPECT_TRUE(f.is_ok());
    edit(f->metadata);
    auto tensors = f->tensors;
    for (auto& e : extra) tensors.push_back(e);
    const std::string p = path(name);
    EXPECT_TRUE(save_safetensors(p, tensors, f->metadata).is_ok());
    return p;
  }
};

TEST_F(CheckpointMetadataTest, EveryRequiredKeyIsChecked) {
  for (const char* key : {"format", "version", "model_name", "precision", "model_tensors", "scaler",
                          "rng_state", "optimizer_steps", "epoch", "batch_in_epoch", "global_step", "config"}) {
    SCOPED_TRACE(key);
    const std::string p = with_metadata(std::string("missing_") + key, [&](auto& md) { md.erase(key); });
    expect_data_loss(p, std::string("'") + key + "'");
  }
}

TEST_F(CheckpointMetadataTest, WrongValuesAndTypesAreDataLossNamingTheKey) {
  struct Case {
    const char* key;
    const char* value;
  };
  const Case cases[] = {
      {"format", "pytorch"},          {"version", "2"},
      {"epoch", "-1"},                {"global_step", "12abc"},
      {"batch_in_epoch", ""},         {"optimizer_steps", "1e3"},
      {"epoch", "99999999999999999999"}, {"scaler", "[1, 2]"},
      {"scaler", R"({"scale": "big"})"}, {"scaler", "not json"},
      {"config", "[]"},               {"config", "{"},
      {"model_tensors", "{}"},        {"model_tensors", R"(["conv1.weight", 3])"},
      {"model_tensors", R"(["conv1.weight", "conv1.weight"])"},
      {"model_tensors", R"(["no.such.tensor"])"},
  };
  int i = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.key) + " = " + c.value);
    const std::string p = with_metadata("bad" + std::to_string(i++), [&](auto& md) { md[c.key] = c.value; });
    expect_data_loss(p, std::string("'") + c.key + "'");
  }
}

TEST_F(CheckpointMetadataTest, UnclaimedTensorIsDataLoss) {
  const std::string p = with_metadata("stray", [](auto&) {}, {{"stray.weight", Tensor::zeros({2})}});
  expect_data_loss(p, "stray.weight");
}

TEST_F(CheckpointTest, PlainSafetensorsWithoutMetadataIsNotACheckpoint) {
  ASSERT_TRUE(save_safetensors(path("plain.safetensors"), {{"w", Tensor::zeros({2})}}).is_ok());
  expect_data_loss(path("plain.safetensors"), "'format'");
}

TEST_F(CheckpointTest, MissingFileIsNotFound) {
  auto r = load_checkpoint(path("nope.safetensors"));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::not_found);
  EXPECT_NE(r.status().message().find("nope.safetensors"), std::string::npos);
}

TEST_F(CheckpointTest, ParseFromMemoryNamesTheBuffer) {
  auto bytes = serialize_safetensors({{"w", Tensor::zeros({1})}}, {{"format", "mixprec-checkpoint"}});
  ASSERT_TRUE(bytes.is_ok());
  auto r = parse_checkpoint(bytes->data(), bytes->size(), "<memory>");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::data_loss);
  EXPECT_NE(r.status().message().find("<memory>"), std::string::npos);
  EXPECT_NE(r.status().message().find("'version'"), std::string::npos);
}

TEST_F(CheckpointTest, SaveRejectsBadStateAndKeepsTheOldFile) {
  const std::string p = path("keep.safetensors");
  ASSERT_TRUE(save_checkpoint(p, sample_state()).is_ok());
  const std::vector<uint8_t> before = read_bytes(p);
  TrainingState bad = sample_state();
  bad.epoch = -1;
  EXPECT_EQ(save_checkpoint(p, bad).code(), StatusCode::invalid_argument);
  bad = sample_state();
  bad.model.emplace_back("optimizer.x", Tensor::zeros({1}));
  EXPECT_EQ(save_checkpoint(p, bad).code(), StatusCode::invalid_argument);
  bad = sample_state();
  bad.config_json = "{not json";
  EXPECT_EQ(save_checkpoint(p, bad).code(), StatusCode::invalid_argument);
  bad = sample_state();
  bad.model.emplace_back("broken", Tensor());  // fails inside the writer, after the checks
  EXPECT_FALSE(save_checkpoint(p, bad).is_ok());
  EXPECT_EQ(read_bytes(p), before);
  // No temp files left behind.
  std::set<std::string> names;
  DIR* d = ::opendir(dir_.c_str());
  while (dirent* e = ::readdir(d)) names.insert(e->d_name);
  ::closedir(d);
  EXPECT_EQ(names, (std::set<std::string>{".", "..", "keep.safetensors"}));
}

// kill -9 at arbitrary moments of a save loop: the final name always holds a complete
// checkpoint, the old one or the new one, never a mix (only stale temp files may remain).
TEST_F(CheckpointTest, KillDuringSaveLeavesOldOrNewFile) {
  const std::string p = path("live.safetensors");
  TrainingState first = sample_state();
  first.global_step = 1;
  ASSERT_TRUE(save_checkpoint(p, first).is_ok());
  for (int round = 0; round < 4; ++round) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      TrainingState st = sample_state();
      // 4 MiB so that a save takes long enough for the kill to land mid-write.
      st.model.emplace_back("big", Tensor::full({1 << 20}, 0.5));
      for (int i = 2; i < 1000; ++i) {
        st.global_step = i;
        if (!save_checkpoint(p, st).is_ok()) ::_exit(3);
      }
      ::_exit(0);
    }
    ::usleep(useconds_t(20000 + 37000 * round));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child finished before the kill (status " << status << ")";
    auto r = load_checkpoint(p);
    ASSERT_TRUE(r.is_ok()) << "round " << round << ": " << r.status().message();
    EXPECT_GE(r->global_step, 1);
    EXPECT_EQ(r->model_name, "cnn");
    if (r->global_step > 1) {
      ASSERT_EQ(r->model.back().first, "big");
      EXPECT_EQ(r->model.back().second.at((1 << 20) - 1), 0.5);
    }
  }
  // Informational: kills that landed mid-write leave "<name>.tmp.<pid>" behind.
  int stale = 0;
  DIR* d = ::opendir(dir_.c_str());
  while (dirent* e = ::readdir(d)) stale += std::string(e->d_name).find(".tmp.") != std::string::npos;
  ::closedir(d);
  std::printf("kills that interrupted a write: %d of 4\n", stale);
}

// What a checkpoint holds is enough for a bit-exact resume: train 4 steps straight, or 2
// steps, save, rebuild everything from scratch (other seed), load, 2 more steps. The losses
// and the final weights must match to the bit. Under o2-fp16 this covers the f32 masters,
// Adam's moments and step count, and the GradScaler state.
void resume_matches_uninterrupted(const std::string& preset_name, const std::string& file) {
  const nn::ModelSpec spec = nn::model_spec("cnn").value();
  const amp::Preset preset = amp::preset_by_name(preset_name).value();
  train::TrainConfig cfg;
  cfg.growth_interval = 1;  // the scale changes every step, so a lost scaler state shows
  auto data = std::make_shared<const ImageDataset>(make_synthetic(64, 1, 28, 28, 10, 7));
  const DataLoaderOptions lo{.batch_size = 16, .shuffle = true, .seed = 5, .prefetch = 0};
  auto params_bytes = [](nn::Module& m) {
    std::vector<uint8_t> out;
    for (auto& [n, t] : m.named_parameters()) {
      auto r = raw(t);
      out.insert(out.end(), r.begin(), r.end());
    }
    return out;
  };

  manual_seed(0);
  train::PrecisionStep a(preset, nn::make_model(spec), cfg);
  DataLoader la(data, lo);
  la.set_epoch(0);
  for (int i = 0; i < 2; ++i) a.run({*la.next()});
  TrainingState st;
  st.model = a.model().named_parameters();
  for (auto& b : a.model().named_buffers()) st.model.push_back(b);
  st.optimizer = a.optimizer().state_tensors();
  st.optimizer_steps = a.optimizer().step_count();
  if (a.masters())
    for (auto& [n, t] : a.masters()->named_masters()) st.masters[n] = t;
  st.scaler = a.scaler().is_enabled() ? a.scaler().state_dict() : std::map<std::string, double>{};
  st.rng_state = generator_state();
  st.epoch = la.epoch();
  st.batch_in_epoch = la.position();
  st.global_step = 2;
  st.precision = preset.name;
  st.model_name = spec.name;
  ASSERT_TRUE(save_checkpoint(file, st).is_ok());
  std::vector<double> straight;
  for (int i = 0; i < 2; ++i) straight.push_back(a.run({*la.next()}).loss);

  manual_seed(999);  // a different init: everything must come from the file
  train::PrecisionStep b(preset, nn::make_model(spec), cfg);
  auto ck = load_checkpoint(file);
  ASSERT_TRUE(ck.is_ok()) << ck.status().message();
  {
    NoGradGuard ng;
    std::map<std::string, Tensor> by_name(ck->model.begin(), ck->model.end());
    for (auto& [n, t] : b.model().named_parameters()) {
      Tensor dst = t;
      dst.copy_(by_name.at(n));
    }
    if (b.masters())
      for (auto& [n, t] : b.masters()->named_masters()) {
        Tensor dst = t;
        dst.copy_(ck->masters.at(n));
      }
  }
  b.optimizer().load_state_tensors(ck->optimizer);
  b.optimizer().set_step_count(ck->optimizer_steps);
  if (!ck->scaler.empty()) b.scaler().load_state_dict(ck->scaler);
  set_generator_state(ck->rng_state);
  DataLoader lb(data, lo);
  ASSERT_TRUE(lb.begin_epoch(ck->epoch, ck->batch_in_epoch).is_ok());
  std::vector<double> resumed;
  for (int i = 0; i < 2; ++i) resumed.push_back(b.run({*lb.next()}).loss);

  EXPECT_EQ(resumed, straight);  // bitwise: same data, same state, same kernels
  EXPECT_TRUE(params_bytes(b.model()) == params_bytes(a.model())) << "weights differ after the resume";
  if (a.scaler().is_enabled()) EXPECT_EQ(b.scaler().state_dict(), a.scaler().state_dict());
}

TEST_F(CheckpointTest, ResumeIsBitExactAmpBf16) { resume_matches_uninterrupted("amp-bf16", path("r1.safetensors")); }
TEST_F(CheckpointTest, ResumeIsBitExactO2Fp16WithScaler) {
  resume_matches_uninterrupted("o2-fp16", path("r2.safetensors"));
}

std::string read_text(const std::string& p) {
  const auto b = read_bytes(p);
  return {b.begin(), b.end()};
}

TEST_F(CheckpointTest, PointerOnlyEverNamesACompleteFile) {
  ASSERT_TRUE(save_checkpoint(path(checkpoint_filename(2)), sample_state()).is_ok());
  EXPECT_EQ(checkpoint_filename(2), "step-00000002.safetensors");
  ASSERT_TRUE(update_pointer(dir_, "last", checkpoint_filename(2)).is_ok());
  EXPECT_EQ(json::parse(read_text(path("last.json"))), json({{"checkpoint", "step-00000002.safetensors"}}));
  auto r = resolve_checkpoint(dir_);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(*r, path("step-00000002.safetensors"));

  // A missing target and a truncated one are refused; the pointer keeps its old value.
  Status s = update_pointer(dir_, "last", "step-00000004.safetensors");
  EXPECT_EQ(s.code(), StatusCode::not_found) << s.message();
  auto bytes = read_bytes(path(checkpoint_filename(2)));
  bytes.resize(bytes.size() - 5);
  write_bytes(path("partial.safetensors"), bytes);
  s = update_pointer(dir_, "last", "partial.safetensors");
  EXPECT_EQ(s.code(), StatusCode::data_loss) << s.message();
  EXPECT_NE(s.message().find("partial.safetensors"), std::string::npos);
  EXPECT_EQ(json::parse(read_text(path("last.json"))).at("checkpoint"), "step-00000002.safetensors");

  EXPECT_EQ(update_pointer(dir_, "middle", checkpoint_filename(2)).code(), StatusCode::invalid_argument);
  EXPECT_EQ(update_pointer(dir_, "best", "../x.safetensors").code(), StatusCode::invalid_argument);
  EXPECT_EQ(update_pointer(dir_, "best", "/etc/passwd").code(), StatusCode::invalid_argument);
  ASSERT_TRUE(update_pointer(dir_, "best", checkpoint_filename(2)).is_ok());
  // Only final names in the directory: the pointer write left no temp file.
  std::set<std::string> names;
  DIR* d = ::opendir(dir_.c_str());
  while (dirent* e = ::readdir(d)) names.insert(e->d_name);
  ::closedir(d);
  EXPECT_EQ(names, (std::set<std::string>{".", "..", "step-00000002.safetensors", "partial.safetensors",
                                          "last.json", "best.json"}));
}

TEST_F(CheckpointTest, ResolveFallsBackAndReportsProblems) {
  EXPECT_EQ(resolve_checkpoint(path("none")).status().code(), StatusCode::not_found);
  auto empty = resolve_checkpoint(dir_);
  EXPECT_EQ(empty.status().code(), StatusCode::not_found);
  EXPECT_NE(empty.status().message().find(dir_), std::string::npos);
  ASSERT_TRUE(save_checkpoint(path("last.safetensors"), sample_state()).is_ok());
  EXPECT_EQ(resolve_checkpoint(dir_).value(), path("last.safetensors"));
  EXPECT_EQ(resolve_checkpoint(path("last.safetensors")).value(), path("last.safetensors"));
  write_bytes(path("last.json"), {'{', '"', 'c'});  // a pointer cut short
  auto bad = resolve_checkpoint(dir_);
  EXPECT_EQ(bad.status().code(), StatusCode::data_loss);
  EXPECT_NE(bad.status().message().find("last.json"), std::string::npos);
  const std::string escape = R"({"checkpoint": "../evil.safetensors"})";
  write_bytes(path("last.json"), std::vector<uint8_t>(escape.begin(), escape.end()));
  EXPECT_EQ(resolve_checkpoint(dir_).status().code(), StatusCode::data_loss);
  const std::string gone = R"({"checkpoint": "gone.safetensors"})";
  write_bytes(path("last.json"), std::vector<uint8_t>(gone.begin(), gone.end()));
  auto missing = resolve_checkpoint(dir_);
  EXPECT_EQ(missing.status().code(), StatusCode::not_found);
  EXPECT_NE(missing.status().message().find("gone.safetensors"), std::string::npos);
}

// ---- the inf/NaN scan ----

// bits of one element of a 16-bit tensor, or of an f32/f64 one, for the value to inject
void put(Tensor& t, int64_t index, double v) {
  store_from_double(t.data(), t.dtype(), index, v);
}

TEST(FindNonFinite, EveryDtypeEveryKindAtTheTailOfOddSizes) {
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  // Odd sizes put the bad element past every vector width's last full block; 200003 is above
  // the kernel's parallel threshold (128 Ki elements), so the threaded path is covered too.
  for (DType dt : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
    for (int64_t n : {int64_t(1), int64_t(7), int64_t(33), int64_t(4097), int64_t(200003)}) {
      for (double bad : {nan, inf, -inf}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " n=" + std::to_string(n) + " bad=" + std::to_string(bad));
        TrainingState st;
        Tensor clean = Tensor::full({n}, 0.5, dt);
        st.model.emplace_back("clean", clean);
        EXPECT_FALSE(find_nonfinite(st).has_value());
        Tensor t = Tensor::full({n}, -1.25, dt);
        put(t, n - 1, bad);
        st.model.emplace_back("w", t);
        auto r = find_nonfinite(st);
        ASSERT_TRUE(r.has_value());
        EXPECT_EQ(r->first_tensor, "w");
        EXPECT_EQ(r->first_index, n - 1);
        EXPECT_EQ(r->first_count, 1);
        EXPECT_EQ(r->tensors, 1);
        EXPECT_EQ(r->values, 1);
        if (std::isnan(bad)) EXPECT_TRUE(std::isnan(r->first_value));
        else EXPECT_EQ(r->first_value, bad);
      }
    }
  }
}

TEST(FindNonFinite, LargestFiniteSubnormalsAndNegativeZeroAreFinite) {
  TrainingState st;
  // The largest finite value of each type is one exponent step below inf: a mask that is
  // off by one bit would flag it.
  st.model.emplace_back("f32", Tensor::from_vector({3.4028235e38f, -3.4028235e38f, 1e-45f, -0.0f}, {4}));
  st.model.emplace_back("f16", Tensor::from_vector({65504.0f, -65504.0f, 5.9604645e-08f, -0.0f}, {4}, DType::f16));
  st.model.emplace_back("bf16", Tensor::from_vector({3.3895314e38f, -3.3895314e38f, 9.2e-41f, -0.0f}, {4}, DType::bf16));
  st.model.emplace_back("f64", Tensor::from_vector_f64({1.7976931348623157e308, -4.9e-324, -0.0}, {3}));
  // Integer tensors are not floating: any bit pattern is a value.
  st.model.emplace_back("steps", Tensor::from_vector_i64({-1, 0x7ff0000000000000LL}, {2}));
  EXPECT_FALSE(find_nonfinite(st).has_value());
}

TEST(FindNonFinite, ScansModelThenMastersThenOptimizerAndCountsAll) {
  TrainingState st;
  st.model.emplace_back("a", Tensor::zeros({5}));
  st.masters["m"] = Tensor::zeros({4});
  st.optimizer["exp_avg_sq.0"] = Tensor::zeros({6});
  put(st.optimizer["exp_avg_sq.0"], 2, std::numeric_limits<double>::infinity());
  put(st.optimizer["exp_avg_sq.0"], 4, std::nan(""));
  auto r = find_nonfinite(st);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->first_tensor, "optimizer.exp_avg_sq.0");  // named as in the file
  EXPECT_EQ(r->first_index, 2);
  EXPECT_EQ(r->first_count, 2);
  put(st.masters["m"], 3, -std::numeric_limits<double>::infinity());
  r = find_nonfinite(st);
  EXPECT_EQ(r->first_tensor, "master.m");
  EXPECT_EQ(r->tensors, 2);
  EXPECT_EQ(r->values, 3);
  EXPECT_NE(r->describe().find("tensor 'master.m' holds 1 inf/NaN value (first: -inf at flat index 3)"),
            std::string::npos) << r->describe();
  EXPECT_NE(r->describe().find("2 tensors, 3 values in all"), std::string::npos);
  // A channels-last (dense, not contiguous) tensor is scanned in its buffer order.
  Tensor w = Tensor::empty({1, 2, 2, 3}, DType::bf16, MemoryFormat::channels_last);
  w.fill_(1.0);
  put(w, 7, std::nan(""));
  st.model.emplace_back("z", w);
  r = find_nonfinite(st);
  EXPECT_EQ(r->first_tensor, "z");
  EXPECT_EQ(r->first_index, 7);
}

// ---- resume-time checks ----

// One line per problem; every line names the file and the field.
std::vector<std::string> problem_lines(const Status& s) {
  std::vector<std::string> lines;
  std::istringstream in(s.message());
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

TEST(CheckResumable, AValidStatePasses) {
  TrainingState st = sample_state();
  EXPECT_TRUE(check_resumable(st, "f").is_ok()) << check_resumable(st, "f").message();
  st.scaler.clear();  // a preset without loss scaling
  EXPECT_TRUE(check_resumable(st, "f").is_ok());
  st = sample_state();
  st.scaler["scale"] = double(std::numeric_limits<float>::max());  // the largest float32 still fits
  st.scaler["_growth_tracker"] = 1999;
  st.scaler["_hysteresis_tracker"] = 1;
  st.optimizer_steps = st.global_step;
  EXPECT_TRUE(check_resumable(st, "f").is_ok()) << check_resumable(st, "f").message();
}

TEST(CheckResumable, EveryBadScaleIsRefusedNamingFileAndField) {
  for (double bad : {std::nan(""), std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                     0.0, -0.0, -1.0, 1e39}) {
    SCOPED_TRACE(bad);
    TrainingState st = sample_state();
    st.scaler["scale"] = bad;
    const Status s = check_resumable(st, "runs/x/step-00000004.safetensors");
    EXPECT_EQ(s.code(), StatusCode::data_loss);
    const auto lines = problem_lines(s);
    ASSERT_EQ(lines.size(), 1u) << s.message();
    EXPECT_NE(lines[0].find("checkpoint 'runs/x/step-00000004.safetensors': metadata key 'scaler', entry 'scale'"),
              std::string::npos) << lines[0];
  }
}

TEST(CheckResumable, HandCorruptedStateGivesOneLinePerProblemInOnePass) {
  TrainingState st = sample_state();
  st.scaler["scale"] = std::nan("");
  st.scaler["growth_factor"] = 1.0;
  st.scaler["backoff_factor"] = 1.5;
  st.scaler["growth_interval"] = 2000;
  st.scaler["_growth_tracker"] = 2000;        // must be < growth_interval
  st.scaler["_hysteresis_tracker"] = 0;       // reset to >= 1, never left at 0
  st.scaler["applied_steps"] = 2.5;           // not an integer
  st.scaler["skipped_steps"] = 1e300;         // beyond 2^53
  st.global_step = 10;
  st.optimizer_steps = 11;                    // more optimizer steps than training steps
  st.epoch = int64_t(1) << 60;                // beyond 2^53
  st.rng_state = "1 2 3";
  const Status s = check_resumable(st, "ck.safetensors");
  const auto lines = problem_lines(s);
  const char* fields[] = {"entry 'scale'", "entry 'growth_factor'", "entry 'backoff_factor'",
                          "entry '_growth_tracker'", "entry '_hysteresis_tracker'", "entry 'applied_steps'",
                          "entry 'skipped_steps'", "'optimizer_steps'", "'epoch'", "'rng_state'"};
  ASSERT_EQ(lines.size(), std::size(fields)) << s.message();
  for (const char* f : fields) {
    SCOPED_TRACE(f);
    int hits = 0;
    for (const auto& l : lines) hits += l.find(f) != std::string::npos;
    EXPECT_EQ(hits, 1) << s.message();
  }
  for (const auto& l : lines) EXPECT_EQ(l.rfind("checkpoint 'ck.safetensors': metadata key '", 0), 0u) << l;
}

TEST(CheckResumable, MissingScalerKeysAndBadIntervalAreNamed) {
  TrainingState st = sample_state();
  st.scaler = {{"scale", 1024.0}, {"growth_interval", 0.0}, {"_growth_tracker", -1.0}};
  const auto lines = problem_lines(check_resumable(st, "f"));
  ASSERT_EQ(lines.size(), 4u);  // growth_factor, backoff_factor missing; interval 0; tracker -1
  EXPECT_NE(lines[0].find("'growth_factor': missing"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("'backoff_factor': missing"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("'growth_interval': expected an integer in [1, 2^53], got 0"), std::string::npos) << lines[2];
  EXPECT_NE(lines[3].find("'_growth_tracker'"), std::string::npos) << lines[3];
}

TEST(CheckResumable, GarbageRngStateIsRefused) {
  const std::string good = generator_state();
  std::vector<std::string> words;
  std::istringstream in(good);
  for (std::string w; in >> w;) words.push_back(w);
  ASSERT_EQ(words.size(), 313u);  // libstdc++: 312 state words and the position
  auto join = [](const std::vector<std::string>& w) {
    std::string s;
    for (const auto& x : w) s += (s.empty() ? "" : " ") + x;
    return s;
  };
  auto past_end = words;
  past_end.back() = "313";  // a position past the 312 words would read out of bounds
  auto negative = words;
  negative[5] = "-1";
  auto huge = words;
  huge[7] = "99999999999999999999999";  // does not fit 64 bits
  for (const std::string& bad : {std::string(""), std::string("garbage"), std::string("1 2 3"), join(past_end),
                                 join(negative), join(huge), good + " 7"}) {
    SCOPED_TRACE(bad.substr(0, 40));
    TrainingState st = sample_state();
    st.rng_state = bad;
    const auto lines = problem_lines(check_resumable(st, "f"));
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_NE(lines[0].find("metadata key 'rng_state'"), std::string::npos) << lines[0];
  }
  TrainingState st = sample_state();
  st.rng_state = good;
  EXPECT_TRUE(check_resumable(st, "f").is_ok());
}

// ---- which checkpoint a resume or rollback continues from ----

TrainingState state_at(int64_t step, bool finite = true) {
  TrainingState s = sample_state();
  s.global_step = step;
  s.optimizer_steps = step;
  if (!finite) put(s.optimizer["exp_avg_sq.0"], 3, std::nan(""));
  return s;
}

TEST_F(CheckpointTest, ListCheckpointsIsNewestFirstAndSkipsDiagnosticsAndTemps) {
  for (int64_t step : {3, 12, 7}) ASSERT_TRUE(save_checkpoint(path(checkpoint_filename(step)), state_at(step)).is_ok());
  ASSERT_TRUE(save_checkpoint(path(nonfinite_checkpoint_filename(20)), state_at(20, false)).is_ok());
  EXPECT_EQ(nonfinite_checkpoint_filename(20), "nonfinite-step-00000020.safetensors");
  write_bytes(path("step-00000030.safetensors.tmp.4242"), {1, 2, 3});
  write_bytes(path("step-xyz.safetensors"), {1});
  write_bytes(path("last.json"), {'{', '}'});
  auto l = list_checkpoints(dir_);
  ASSERT_TRUE(l.is_ok());
  ASSERT_EQ(l->size(), 3u);
  EXPECT_EQ((*l)[0], (std::pair<int64_t, std::string>{12, path("step-00000012.safetensors")}));
  EXPECT_EQ((*l)[1].first, 7);
  EXPECT_EQ((*l)[2].first, 3);
  EXPECT_EQ(list_checkpoints(path("nope")).status().code(), StatusCode::io_error);
}

TEST_F(CheckpointTest, PruneKeepsTheNewestAndWhatThePointersName) {
  for (int64_t step : {1, 2, 3, 4, 5, 6}) ASSERT_TRUE(save_checkpoint(path(checkpoint_filename(step)), state_at(step)).is_ok());
  ASSERT_TRUE(save_checkpoint(path(nonfinite_checkpoint_filename(7)), state_at(7, false)).is_ok());
  ASSERT_TRUE(update_pointer(dir_, "last", checkpoint_filename(6)).is_ok());
  ASSERT_TRUE(update_pointer(dir_, "best", checkpoint_filename(2)).is_ok());
  auto removed = prune_checkpoints(dir_, 2);
  ASSERT_TRUE(removed.is_ok()) << removed.status().message();
  // Kept: 6 (newest, and last), 5 (second newest), 2 (best); removed: 4, 3, 1.
  EXPECT_EQ(*removed, (std::vector<std::string>{path(checkpoint_filename(4)), path(checkpoint_filename(3)),
                                                path(checkpoint_filename(1))}));
  auto left = list_checkpoints(dir_);
  ASSERT_TRUE(left.is_ok());
  std::vector<int64_t> steps;
  for (const auto& [step, file] : *left) steps.push_back(step);
  EXPECT_EQ(steps, (std::vector<int64_t>{6, 5, 2}));
  EXPECT_EQ(::access(path(nonfinite_checkpoint_filename(7)).c_str(), F_OK), 0);  // a diagnostic, not a checkpoint
  EXPECT_TRUE(resolve_checkpoint(dir_).is_ok());
  // keep 0: nothing is removed.
  auto none = prune_checkpoints(dir_, 0);
  ASSERT_TRUE(none.is_ok());
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(list_checkpoints(dir_)->size(), 3u);
}

TEST_F(CheckpointTest, PointerRefusesANonFiniteOrUnresumableCheckpoint) {
  ASSERT_TRUE(save_checkpoint(path(checkpoint_filename(2)), state_at(2)).is_ok());
  ASSERT_TRUE(update_pointer(dir_, "last", checkpoint_filename(2)).is_ok());
  ASSERT_TRUE(save_checkpoint(path(checkpoint_filename(4)), state_at(4, false)).is_ok());
  Status s = update_pointer(dir_, "last", checkpoint_filename(4));
  EXPECT_EQ(s.code(), StatusCode::bad_checkpoint);
  EXPECT_NE(s.message().find("tensor 'optimizer.exp_avg_sq.0' holds 1 inf/NaN value"), std::string::npos)
      << s.message();
  EXPECT_EQ(update_pointer(dir_, "best", checkpoint_filename(4)).code(), StatusCode::bad_checkpoint);
  TrainingState zero_scale = state_at(6);
  zero_scale.scaler["scale"] = 0.0;
  ASSERT_TRUE(save_checkpoint(path(checkpoint_filename(6)), zero_scale).is_ok());
  s = update_pointer(dir_, "last", checkpoint_filename(6));
  EXPECT_EQ(s.code(), StatusCode::bad_checkpoint);
  EXPECT_NE(s.message().find("entry 'scale'"), std::string::npos) << s.message();
  EXPECT_EQ(json::parse(read_text(path("last.json"))).at("checkpoint"), checkpoint_filename(2));
  EXPECT_FALSE(std::ifstream(path("best.json")).good());
}

TEST_F(CheckpointTest, ResumeOfARunDirSkipsNonFiniteCheckpointsAndSaysWhich) {
  // As an older mixprec left it: last.json names a checkpoint that holds NaN, and so does
  // the one before; a diagnostic file is newest of all and must never be picked.
  ASSERT_TRUE(save_checkpoint(path(checkpoint_filename(3)), state_at(3)).is_ok());
  ASSERT_TRUE(save_checkpoint(path(checkpoint_filename(6)), state_at(6, false)).is_ok());
  ASSERT_TRUE(save_checkpoint(path(checkpoint_filename(9)), state_at(9, false)).is_ok());
  ASSERT_TRUE(save_checkpoint(path(nonfinite_checkpoint_filename(12)), state_at(12)).is_ok());
  const std::string ptr = R"({"checkpoint": "step-00000009.safetensors"})";
  write_bytes(path("last.json"), std::vector<uint8_t>(ptr.begin(), ptr.end()));
  auto r = resolve_usable_checkpoint(dir_);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->file, path(checkpoint_filename(3)));
  EXPECT_EQ(r->state.global_step, 3);
  ASSERT_EQ(r->skipped.size(), 2u);
  EXPECT_NE(r->skipped[0].find("step-00000009.safetensors' holds inf/NaN: tensor 'optimizer.exp_avg_sq.0'"),
            std::string::npos) << r->skipped[0];
  EXPECT_NE(r->skipped[1].find("step-00000006.safetensors"), std::string::npos);
  EXPECT_FALSE(find_nonfinite(r->state).has_value());

  // A file named explicitly is refused, not replaced: the user asked for that one.
  auto explicit_file = resolve_usable_checkpoint(path(checkpoint_filename(9)));
  EXPECT_EQ(explicit_file.status().code(), StatusCode::bad_checkpoint);
  EXPECT_NE(explicit_file.status().message().find("holds inf/NaN"), std::string::npos);
  // Nothing usable: every candidate is named.
  ASSERT_TRUE(save_checkpoint(path(checkpoint_filename(3)), state_at(3, false)).is_ok());
  auto none = resolve_usable_checkpoint(dir_);
  EXPECT_EQ(none.status().code(), StatusCode::bad_checkpoint);
  for (int64_t step : {9, 6, 3})
    EXPECT_NE(none.status().message().find(checkpoint_filename(step)), std::string::npos) << none.status().message();
  // A healthy last.json target is taken as is, with nothing skipped.
  ASSERT_TRUE(save_checkpoint(path(checkpoint_filename(9)), state_at(9)).is_ok());
  auto healthy = resolve_usable_checkpoint(dir_);
  ASSERT_TRUE(healthy.is_ok());
  EXPECT_EQ(healthy->file, path(checkpoint_filename(9)));
  EXPECT_TRUE(healthy->skipped.empty());
}

TEST_F(CheckpointTest, FirstUsableCheckpointTriesInOrderAndChecksEverything) {
  TrainingState bad_rng = state_at(5);
  bad_rng.rng_state = "garbage";
  ASSERT_TRUE(save_checkpoint(path("a.safetensors"), state_at(8, false)).is_ok());
  ASSERT_TRUE(save_checkpoint(path("b.safetensors"), bad_rng).is_ok());
  ASSERT_TRUE(save_checkpoint(path("c.safetensors"), state_at(2)).is_ok());
  auto r = first_usable_checkpoint({path("a.safetensors"), path("missing.safetensors"), path("b.safetensors"),
                                    path("c.safetensors")});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->file, path("c.safetensors"));
  ASSERT_EQ(r->skipped.size(), 3u);
  EXPECT_NE(r->skipped[0].find("inf/NaN"), std::string::npos);
  EXPECT_NE(r->skipped[1].find("missing.safetensors"), std::string::npos);
  EXPECT_NE(r->skipped[2].find("'rng_state'"), std::string::npos);
  EXPECT_EQ(first_usable_checkpoint({}).status().code(), StatusCode::bad_checkpoint);
}

}  // namespace
}  // namespace mixprec

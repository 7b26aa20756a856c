// checksums_test.cpp: every file mixprec saves carries XXH3-64 checksums of each tensor and of
// its metadata, and every load verifies them (issue 12: 161 of 520 single-byte flips in a
// checkpoint used to load silently). The exhaustive test flips every byte of a small
// checkpoint-like file two ways and requires each flip to be refused, or to load exactly
// the original content.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <map>
#include <string>
#include <vector>

#include "mixprec/io/safetensors.h"
#include "mixprec/core/status.h"

namespace mixprec {
namespace {

using Bytes = std::vector<uint8_t>;

// Small, but with every kind of content a checkpoint has: f32/bf16/i64 tensors, an empty
// one, and metadata text no parser can judge (an RNG state, a config's JSON text).
std::vector<std::pair<std::string, Tensor>> sample_tensors() {
  return {{"conv1.weight", Tensor::from_vector({0.5f, -1.25f, 3.0f, 0.0f, 7.5f, -0.125f}, {2, 3})},
          {"fc.bias", Tensor::from_vector({1.0f, 2.0f, -3.0f}, {3}).to(DType::bf16)},
          {"optimizer.step", Tensor::from_vector_f64({42}, {1}, DType::i64)},
          {"empty", Tensor::zeros({0, 4})}};
}
const std::map<std::string, std::string> kMetadata = {
    {"format", "mixprec-checkpoint"},
    {"rng_state", "1791095845 4282876139 3093770124 4005303368 491263"},
    {"config", R"({"lr":0.001,"batch_size":256,"precision":"amp-bf16"})"},
    {"global_step", "1234"}};

Bytes sample_bytes() {
  auto bytes = serialize_safetensors(sample_tensors(), kMetadata);
  EXPECT_TRUE(bytes.is_ok()) << bytes.status().message();
  return bytes.is_ok() ? bytes.value() : Bytes{};
}

Bytes raw(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.data());
  return Bytes(p, p + t.numel() * int64_t(dtype_size(t.dtype())));
}

// A file with header `header` (JSON) and 4 data bytes: 1.0f.
Bytes hand_made(const std::string& header) {
  Bytes b(8);
  const uint64_t n = header.size();
  std::memcpy(b.data(), &n, 8);
  b.insert(b.end(), header.begin(), header.end());
  for (uint8_t x : {0x00, 0x00, 0x80, 0x3f}) b.push_back(x);
  return b;
}

bool same_content(const SafetensorsFile& a, const SafetensorsFile& b) {
  if (a.metadata != b.metadata || a.tensors.size() != b.tensors.size()) return false;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const auto& [na, ta] = a.tensors[i];
    const auto& [nb, tb] = b.tensors[i];
    if (na != nb || ta.dtype() != tb.dtype() || ta.shape() != tb.shape() || raw(ta) != raw(tb)) return false;
  }
  return true;
}

TEST(Checksums, SavedFilesAreVerifiedOnLoadAndTheEntryIsNotMetadata) {
  const Bytes bytes = sample_bytes();
  auto f = parse_safetensors(bytes.data(), bytes.size(), "sample");
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f->checksums, "verified");
  EXPECT_EQ(f->metadata, kMetadata);  // "mixprec.checksums" is format plumbing, not returned
  EXPECT_EQ(f->tensors.size(), 4u);
}

TEST(Checksums, EverySingleByteFlipIsRefusedOrHarmless) {
  const Bytes good = sample_bytes();
  auto original = parse_safetensors(good.data(), good.size(), "sample");
  ASSERT_TRUE(original.is_ok()) << original.status().message();
  int refused = 0, harmless = 0, silent = 0;
  std::string first_silent;
  for (size_t pos = 0; pos < good.size(); ++pos) {
    for (uint8_t mask : {uint8_t(0x01), uint8_t(0x20)}) {
      Bytes b = good;
      b[pos] ^= mask;
      auto f = parse_safetensors(b.data(), b.size(), "flipped");
      if (!f.is_ok()) {
        ++refused;
        EXPECT_EQ(f.status().code(), StatusCode::data_loss) << "byte " << pos << ": " << f.status().message();
      } else if (same_content(*f, *original)) {
        ++harmless;  // e.g. a space of the header's padding turned into another whitespace
      } else {
        ++silent;
        if (first_silent.empty()) first_silent = "byte " + std::to_string(pos) + " ^ " + std::to_string(mask);
      }
    }
  }
  std::printf("  %zu bytes x 2 flips: %d refused, %d loaded the same content, %d loaded different content\n",
              good.size(), refused, harmless, silent);
  EXPECT_EQ(silent, 0) << "first silent flip: " << first_silent;
  EXPECT_GT(refused, int(good.size()));  // the test really flipped and loaded
}

TEST(Checksums, MismatchNamesTheTensorOrTheHeaderAndBothDigests) {
  const Bytes good = sample_bytes();
  // The last data byte belongs to the last tensor in offset order (names sorted: "optimizer.step").
  Bytes b = good;
  b.back() ^= 0x40;
  auto f = parse_safetensors(b.data(), b.size(), "ckpt.safetensors");
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.status().code(), StatusCode::data_loss);
  EXPECT_NE(f.status().message().find("'ckpt.safetensors'"), std::string::npos) << f.status().message();
  EXPECT_NE(f.status().message().find("tensor 'optimizer.step': checksum "), std::string::npos) << f.status().message();
  EXPECT_NE(f.status().message().find("--no-verify-checksums"), std::string::npos) << f.status().message();

  // A digit of the RNG state: still valid JSON and a valid string, caught only by the checksum.
  const std::string text(good.begin(), good.end());
  const size_t at = text.find("1791095845");
  ASSERT_NE(at, std::string::npos);
  Bytes m = good;
  m[at] = '2';
  auto g = parse_safetensors(m.data(), m.size(), "ckpt.safetensors");
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("header metadata: checksum "), std::string::npos) << g.status().message();
}

TEST(Checksums, ForeignFilesWithoutChecksumsLoadUnverified) {
  // As PyTorch's safetensors library writes it: no "mixprec.checksums".
  const Bytes b = hand_made(R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})");
  auto f = parse_safetensors(b.data(), b.size(), "torch.safetensors");
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f->checksums, "absent");
  EXPECT_EQ(f->metadata.at("format"), "pt");
}

TEST(Checksums, MalformedEntryIsDataLoss) {
  for (const std::string& entry : {std::string("not json"), std::string(R"({"algorithm":"md5"})"),
                                   std::string(R"({"algorithm":"xxh3-64","header":1,"tensors":{}})"),
                                   std::string(R"({"algorithm":"xxh3-64","header":"0","tensors":[]})"),
                                   std::string(200, '[')}) {
    SCOPED_TRACE(entry.substr(0, 40));
    nlohmann::json header = {{"__metadata__", {{"mixprec.checksums", entry}}},
                             {"w", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {0, 4}}}}};
    const Bytes b = hand_made(header.dump());
    auto f = parse_safetensors(b.data(), b.size(), "bad-entry");
    ASSERT_FALSE(f.is_ok());
    EXPECT_EQ(f.status().code(), StatusCode::data_loss);
    EXPECT_NE(f.status().message().find("metadata 'mixprec.checksums'"), std::string::npos) << f.status().message();
  }
}

TEST(Checksums, VerificationCanBeTurnedOffToSalvageAFile) {
  Bytes b = sample_bytes();
  b.back() ^= 0x40;
  set_verify_checksums(false);
  auto f = parse_safetensors(b.data(), b.size(), "damaged");
  set_verify_checksums(true);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f->checksums, "not checked");
  EXPECT_FALSE(parse_safetensors(b.data(), b.size(), "damaged").is_ok());  // on again
}

TEST(Checksums, ResavingALoadedFileComputesFreshChecksums) {
  const Bytes good = sample_bytes();
  auto f = parse_safetensors(good.data(), good.size(), "sample");
  ASSERT_TRUE(f.is_ok());
  auto again = serialize_safetensors(f->tensors, f->metadata);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again.value(), good);  // same content, same bytes, same checksums
}

}  // namespace
}  // namespace mixprec

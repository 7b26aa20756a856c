// request_decode_test.cpp: serve::decode_predict_request, what `mixprec serve` makes of a
// POST /v1/predict body: every accepted form gives exactly the values `predict` would use
// (pixels / 255, unit floats, raw table features), and every refusal names the problem.
#include <gtest/gtest.h>
#include <png.h>

#include <cstring>
#include <string>

#include "mixprec/serve/serve.h"

namespace mixprec::serve {
namespace {

InputLayout image_layout(int64_t c = 1, int64_t h = 4, int64_t w = 3) {
  InputLayout l;
  l.channels = c;
  l.height = h;
  l.width = w;
  return l;
}

// "[[0,1,2],[3,4,5],...]": an H x W array whose element i is (i * step) % 256.
std::string grid(int64_t h, int64_t w, int64_t step = 1) {
  std::string s = "[";
  for (int64_t y = 0; y < h; ++y) {
    s += (y ? ",[" : "[");
    for (int64_t x = 0; x < w; ++x) s += (x ? "," : "") + std::to_string(((y * w + x) * step) % 256);
    s += "]";
  }
  return s + "]";
}

std::string error_of(const StatusOr<DecodedRequest>& r) {
  EXPECT_FALSE(r.is_ok());
  if (r.is_ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::invalid_argument) << r.status().message();
  return r.status().message();
}

TEST(RequestDecode, BareArrayInTheSampleShapeIsOneInputOfPixelsOver255) {
  auto r = decode_predict_request(grid(4, 3, 20), "application/json", image_layout(), 8);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->samples.size(), 1u);
  ASSERT_EQ(r->samples[0].size(), 12u);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(r->samples[0][size_t(i)], float(((i * 20) % 256) / 255.0)) << i;
}

TEST(RequestDecode, InputsListTakesEverySampleShapeAndKeepsOrder) {
  // [C][H][W], [H][W] and flat: the same pixels three ways, then a different one.
  const std::string flat = "[0,1,2,3,4,5,6,7,8,9,10,11]";
  const std::string body = "{\"inputs\": [[" + grid(4, 3) + "], " + grid(4, 3) + ", " + flat + ", " + grid(4, 3, 7) + "]}";
  auto r = decode_predict_request(body, "application/json; charset=utf-8", image_layout(), 8);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->samples.size(), 4u);
  EXPECT_EQ(r->samples[0], r->samples[1]);
  EXPECT_EQ(r->samples[1], r->samples[2]);
  EXPECT_NE(r->samples[2], r->samples[3]);
  EXPECT_EQ(r->samples[3][11], float(77 / 255.0));
}

TEST(RequestDecode, UnitScaleTakesValuesInZeroOne) {
  auto r = decode_predict_request("{\"scale\": \"unit\", \"inputs\": [[0.5,0,0,0,0,0,0,0,0,0,0,1]]}", "application/json",
                                  image_layout(), 8);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->samples[0][0], 0.5f);
  EXPECT_EQ(r->samples[0][11], 1.0f);
  EXPECT_NE(error_of(decode_predict_request("{\"scale\": \"unit\", \"inputs\": [[2,0,0,0,0,0,0,0,0,0,0,1]]}",
                                            "application/json", image_layout(), 8))
                .find("inputs[0] element 0 is 2, expected a value in [0, 1]"),
            std::string::npos);
}

TEST(RequestDecode, RefusalsNameTheProblem) {
  const InputLayout l = image_layout();
  struct Case {
    std::string body, expected;
  } cases[] = {
      {"{\"inputs\": [[1,2,3]]}", "inputs[0]: shape [3], expected [1, 4, 3] or [4, 3] or [12]"},
      {"{\"inputs\": [[[1,2,3],[4,5]]]}", "ragged array"},
      {"{\"inputs\": [[0,0,0,0,0,0,0,0,0,0,0,256]]}", "element 11 is 256, expected a pixel value 0..255"},
      {"{\"inputs\": [[0,0,0,0,0,0,0,0,0,0,0,\"x\"]]}", "element 11 is string, expected a number"},
      {"{\"inputs\": [[0,0,0,0,0,0,0,0,0,0,0,-1]]}", "element 11 is -1"},
      {"{\"inputs\": 3}", "\"inputs\" is number, expected a list of inputs"},
      {"{\"input\": []}", "unknown key 'input'"},
      {"{\"scale\": \"pixels\"}", "no \"inputs\" key"},
      {"{\"inputs\": []}", "no inputs"},
      {"{\"inputs\": [[0,0,0,0,0,0,0,0,0,0,0,0]], \"scale\": \"percent\"}", "\"scale\" is \"percent\""},
      {"{\"inputs\": [[1,2,3,", "malformed JSON"},
      {"\"hello\"", "neither JSON"},  // sniffed without a JSON type below
      {"[[[[[[[[[[1]]]]]]]]]]", "nested deeper than 8 levels"},
  };
  for (const Case& c : cases) {
    const bool sniff = c.body == "\"hello\"";
    const std::string msg = error_of(decode_predict_request(c.body, sniff ? "" : "application/json", l, 8));
    EXPECT_NE(msg.find(c.expected), std::string::npos) << c.body << " -> " << msg;
  }
  EXPECT_NE(error_of(decode_predict_request("", "application/json", l, 8)).find("empty body"), std::string::npos);
  EXPECT_NE(error_of(decode_predict_request("a,b", "text/csv", l, 8)).find("Content-Type 'text/csv'"), std::string::npos);
}

TEST(RequestDecode, LimitsComeBeforeParsing) {
  const InputLayout l = image_layout();
  std::string many = "{\"inputs\": [";
  for (int i = 0; i < 9; ++i) many += (i ? "," : "") + grid(4, 3);
  many += "]}";
  EXPECT_NE(error_of(decode_predict_request(many, "application/json", l, 8)).find("9 inputs, at most 8 per request"),
            std::string::npos);
  // Millions of values in a body meant for at most 8 inputs are refused by a scan, not parsed.
  std::string huge = "[" + std::string(2'000'000, '0');
  for (size_t i = 2; i < huge.size(); i += 2) huge[i] = ',';
  huge += "]";
  EXPECT_NE(error_of(decode_predict_request(huge, "application/json", l, 8)).find("more values than 8 inputs"),
            std::string::npos);
}

// A .npy file in memory: header for `descr` and `shape`, then the raw little-endian data.
std::string npy(const std::string& descr, const std::string& shape, const std::string& data) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += char(1);
  out += char(0);
  out += char(header.size() & 0xff);
  out += char(header.size() >> 8);
  return out + header + data;
}

TEST(RequestDecode, NpyBodiesReadAsPredictReadsNpyFiles) {
  const InputLayout l = image_layout();
  std::string pixels(24, '\0');
  for (int i = 0; i < 24; ++i) pixels[size_t(i)] = char(i * 10);
  // Sniffed from the magic bytes under a generic type: uint8 = pixels, batch of 2.
  auto r = decode_predict_request(npy("|u1", "(2, 4, 3)", pixels), "application/octet-stream", l, 8);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->samples.size(), 2u);
  EXPECT_EQ(r->samples[1][0], float(120 / 255.0));
  // float32 = values in [0, 1]; one sample [H, W].
  std::string floats(48, '\0');
  const float half = 0.5f;
  for (int i = 0; i < 12; ++i) std::memcpy(&floats[size_t(i) * 4], &half, 4);
  auto f = decode_predict_request(npy("<f4", "(4, 3)", floats), "application/x-npy", l, 8);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f->samples[0][5], 0.5f);
  EXPECT_NE(error_of(decode_predict_request(npy("|u1", "(2, 3, 4)", pixels), "application/x-npy", l, 8))
                .find("shape [2, 3, 4], expected [1, 4, 3] or [4, 3] or [12] per sample"),
            std::string::npos);
  EXPECT_NE(error_of(decode_predict_request(npy("|u1", "(2, 4, 3)", pixels), "application/x-npy", l, 1))
                .find("2 samples, at most 1 per request"),
            std::string::npos);
  EXPECT_FALSE(decode_predict_request(npy("|u1", "(2, 4, 3)", pixels.substr(0, 20)), "application/x-npy", l, 8).is_ok());
}

std::string png_of(int width, int height, uint8_t value) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  image.width = png_uint_32(width);
  image.height = png_uint_32(height);
  image.format = PNG_FORMAT_GRAY;
  std::vector<uint8_t> pixels(size_t(width * height), value);
  pixels[0] = 7;
  png_alloc_size_t size = 0;
  EXPECT_TRUE(png_image_write_to_memory(&image, nullptr, &size, 0, pixels.data(), 0, nullptr));
  std::string out(size, '\0');
  EXPECT_TRUE(png_image_write_to_memory(&image, out.data(), &size, 0, pixels.data(), 0, nullptr));
  out.resize(size);
  return out;
}

TEST(RequestDecode, PngBodiesMustHaveTheModelsSize) {
  auto r = decode_predict_request(png_of(3, 4, 200), "image/png", image_layout(), 8);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->samples.size(), 1u);
  EXPECT_EQ(r->samples[0][0], float(7 / 255.0));
  EXPECT_EQ(r->samples[0][11], float(200 / 255.0));
  // Gray to RGB by copying, as predict does.
  auto rgb = decode_predict_request(png_of(3, 4, 200), "", image_layout(3), 8);
  ASSERT_TRUE(rgb.is_ok()) << rgb.status().message();
  EXPECT_EQ(rgb->samples[0].size(), 36u);
  // curl --data-binary @image.png labels the body as a form unless told otherwise (issue 31).
  auto curl_default = decode_predict_request(png_of(3, 4, 200), "application/x-www-form-urlencoded", image_layout(), 8);
  ASSERT_TRUE(curl_default.is_ok()) << curl_default.status().message();
  EXPECT_EQ(curl_default->samples[0], r->samples[0]);
  EXPECT_NE(error_of(decode_predict_request(png_of(4, 4, 1), "image/png", image_layout(), 8))
                .find("image of 4x4 pixels, this model takes 3x4"),
            std::string::npos);
  // A much larger image is refused from its header (the model's largest side bounds it).
  EXPECT_NE(error_of(decode_predict_request(png_of(5000, 1, 1), "image/png", image_layout(), 8)).find("size 5000x1"),
            std::string::npos);
  EXPECT_NE(error_of(decode_predict_request(std::string("\x89PNG\r\n\x1a\n garbage", 17), "image/png", image_layout(), 8))
                .find("not a readable PNG"),
            std::string::npos);
}

TEST(RequestDecode, TableModelsTakeFeatureArraysOrNamedObjects) {
  InputLayout l = image_layout(3, 1, 1);
  l.feature_names = {"age", "height", "weight"};
  auto r = decode_predict_request("{\"inputs\": [[31, 1.8, 80.5], {\"weight\": 60, \"age\": 20, \"height\": 1.6}]}",
                                  "application/json", l, 8);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->samples[0], (std::vector<float>{31.f, 1.8f, 80.5f}));
  EXPECT_EQ(r->samples[1], (std::vector<float>{20.f, 1.6f, 60.f}));
  EXPECT_NE(error_of(decode_predict_request("{\"inputs\": [{\"age\": 1, \"height\": 2}]}", "application/json", l, 8))
                .find("no value for feature 'weight'"),
            std::string::npos);
  EXPECT_NE(error_of(decode_predict_request("{\"inputs\": [{\"age\": 1, \"height\": 2, \"weight\": 3, \"bmi\": 4}]}",
                                            "application/json", l, 8))
                .find("unknown feature 'bmi'"),
            std::string::npos);
  EXPECT_NE(error_of(decode_predict_request("{\"inputs\": [[1, 2]]}", "application/json", l, 8)).find("expected [3]"),
            std::string::npos);
  // A number beyond f32's range would reach the model as inf (found by the serve_request fuzzer).
  EXPECT_NE(error_of(decode_predict_request("[9, 4e45, 25]", "application/json", l, 8))
                .find("inputs[0] element 1 is 4e+45, expected a finite number within float32's range"),
            std::string::npos);
  EXPECT_NE(error_of(decode_predict_request(png_of(1, 1, 1), "image/png", l, 8)).find("takes table rows"),
            std::string::npos);
}

TEST(RequestDecode, TextClassifiersTakeStringsAsPaddedByteIds) {
  InputLayout l;
  l.channels = l.height = 1;
  l.width = 4;
  l.text = true;
  auto r = decode_predict_request(R"({"inputs": ["ab", "hello", ""]})", "application/json", l, 8);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->samples.size(), 3u);
  EXPECT_EQ(r->samples[0], (std::vector<float>{97, 98, 0, 0}));
  EXPECT_EQ(r->samples[1], (std::vector<float>{104, 101, 108, 108}));  // cut to the model's 4 bytes
  EXPECT_EQ(r->samples[2], (std::vector<float>{0, 0, 0, 0}));
  auto bare = decode_predict_request(R"(["caf\u00e9"])", "application/json", l, 8);  // UTF-8 bytes
  ASSERT_TRUE(bare.is_ok()) << bare.status().message();
  EXPECT_EQ(bare->samples[0], (std::vector<float>{99, 97, 102, 0xc3}));
  EXPECT_NE(decode_predict_request(R"({"inputs": [[1, 2, 3, 4]]})", "application/json", l, 8)
                .status().message().find("inputs[0]: got array; this model classifies texts: send a JSON string"),
            std::string::npos);
  EXPECT_NE(decode_predict_request(R"({"inputs": ["a\u0000b"]})", "application/json", l, 8)
                .status().message().find("the text holds a NUL character"),
            std::string::npos);
  EXPECT_NE(decode_predict_request("\x93NUMPY", "application/x-npy", l, 8).status().message().find(
                "this model classifies texts"),
            std::string::npos);
  EXPECT_EQ(decode_predict_request(R"({"inputs": ["a", "b", "c"]})", "application/json", l, 2).status().code(),
            StatusCode::invalid_argument);  // more inputs than allowed
  // An image model refuses strings.
  EXPECT_NE(decode_predict_request(R"({"inputs": ["hi"]})", "application/json", InputLayout{}, 8)
                .status().message().find("a string; this model takes images"),
            std::string::npos);
}

// A language model's prompt: its length, then its last `width` bytes, 0-padded (0 is a byte
// like any other in a prompt, hence the explicit length).
TEST(RequestDecode, LanguageModelsTakePromptsAsLengthAndLastBytes) {
  InputLayout l;
  l.channels = l.height = 1;
  l.width = 4;
  l.text = l.next_byte = true;
  EXPECT_EQ(l.values_per_sample(), 5);
  auto r = decode_predict_request(R"({"inputs": ["ab", "hello", "x\u0000"]})", "application/json", l, 8);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->samples.size(), 3u);
  EXPECT_EQ(r->samples[0], (std::vector<float>{2, 97, 98, 0, 0}));
  EXPECT_EQ(r->samples[1], (std::vector<float>{4, 101, 108, 108, 111}));  // "ello": the last 4 bytes
  EXPECT_EQ(r->samples[2], (std::vector<float>{2, 120, 0, 0, 0}));        // a NUL byte is part of the prompt
  EXPECT_NE(decode_predict_request(R"({"inputs": [""]})", "application/json", l, 8).status().message().find(
                "an empty prompt"),
            std::string::npos);
  EXPECT_NE(decode_predict_request(R"({"inputs": [[1, 2, 3, 4]]})", "application/json", l, 8)
                .status().message().find("this language model continues texts: send a JSON string"),
            std::string::npos);
  EXPECT_NE(decode_predict_request("\x93NUMPY", "application/x-npy", l, 8).status().message().find(
                "this language model continues texts"),
            std::string::npos);
}

TEST(RequestDecode, GenerateRequestsTakeTheirSettingsInRange) {
  auto d = decode_generate_request(R"({"prompt": "In the"})", 4096);
  ASSERT_TRUE(d.is_ok()) << d.status().message();
  EXPECT_EQ(d->prompt, "In the");
  EXPECT_EQ(d->max_tokens, 200);  // the defaults: generate's
  EXPECT_EQ(d->top_k, 40);
  EXPECT_EQ(d->temperature, 0.8);
  EXPECT_EQ(d->seed, 0u);
  EXPECT_EQ(decode_generate_request(R"({"prompt": ""})", 100)->max_tokens, 100);  // a default above the limit
  auto all = decode_generate_request(
      R"({"prompt": "x", "max_tokens": 4096, "top_k": 0, "temperature": 0, "seed": 18446744073709551615})", 4096);
  ASSERT_TRUE(all.is_ok()) << all.status().message();
  EXPECT_EQ(all->seed, UINT64_MAX);
  EXPECT_EQ(all->top_k, 0);
  const std::pair<const char*, const char*> refused[] = {
      {R"({"prompt": "x", "max_tokens": 0})", "\"max_tokens\": 0, expected an integer in 1..4096"},
      {R"({"prompt": "x", "max_tokens": 4097})", "expected an integer in 1..4096"},
      {R"({"prompt": "x", "max_tokens": 18446744073709551615})", "expected an integer in 1..4096"},
      {R"({"prompt": "x", "max_tokens": 2.5})", "expected an integer in 1..4096"},
      {R"({"prompt": "x", "top_k": 257})", "expected an integer in 0..256"},
      {R"({"prompt": "x", "top_k": -1})", "expected an integer in 0..256"},
      {R"({"prompt": "x", "temperature": -0.5})", "expected a finite number >= 0"},
      {R"({"prompt": "x", "seed": -1})", "expected an integer in 0..18446744073709551615"},
      {R"({"prompt": 3})", "\"prompt\": a number, expected a string"},
      {R"({"max_tokens": 3})", "no \"prompt\""},
      {R"({"prompt": "x", "temprature": 1})", "unknown key 'temprature' (did you mean 'temperature'?)"},
      {R"(["x"])", "expected an object"},
      {R"({"prompt": "x",)", "malformed JSON"},
  };
  for (const auto& [body, message] : refused) {
    auto r = decode_generate_request(body, 4096);
    ASSERT_FALSE(r.is_ok()) << body;
    EXPECT_EQ(r.status().code(), StatusCode::invalid_argument) << body;
    EXPECT_NE(r.status().message().find(message), std::string::npos) << body << ": " << r.status().message();
  }
}

}  // namespace
}  // namespace mixprec::serve

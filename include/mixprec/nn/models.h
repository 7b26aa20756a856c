// models.h: the models the CLI and benchmarks train, built from nn layers.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/nn/nn.h"
#include "mixprec/nn/nn_attention.h"
#include "mixprec/core/status.h"

namespace mixprec::nn {

// The CNN of the seed articles: conv(C->32, 3x3, pad 1) -> ReLU -> max-pool 2 ->
// conv(32->64, 3x3, pad 1) -> ReLU -> max-pool 2 -> flatten -> fc1(64*H/4*W/4 -> 256) ->
// ReLU -> fc2(256 -> classes). Parameters: conv1.*, conv2.*, fc1.*, fc2.*.
class Cnn : public Module {
 public:
  Cnn(int64_t in_channels, int64_t height, int64_t width, int64_t classes = 10);
  Tensor forward(const Tensor& input) override;
  const char* type_name() const override { return "Cnn"; }
  std::shared_ptr<Conv2d> conv1, conv2;
  std::shared_ptr<Linear> fc1, fc2;
};

// Multi-layer perceptron on flattened input: fc1 -> ReLU -> fc2 -> ReLU -> fc3.
class Mlp : public Module {
 public:
  Mlp(int64_t in_features, int64_t hidden, int64_t classes = 10);
  Tensor forward(const Tensor& input) override;
  const char* type_name() const override { return "Mlp"; }
  std::shared_ptr<Linear> fc1, fc2, fc3;
};

// One transformer encoder block over a sequence of feature vectors, then mean-pooling and a
// classifier: images [B, 1, S, W] (or [B, S, W]) are read as S tokens of W features ->
// input_proj (Linear W -> d_model, only when W != d_model) -> encoder
// (TransformerEncoderLayer(d_model, heads, ffn), GELU, no dropout) -> mean over S ->
// fc (d_model -> classes). Parameters: [input_proj.*], encoder.self_attn.*, encoder.linear1.*,
// ..., fc.*, as PyTorch names nn.TransformerEncoderLayer's.
class TransformerClassifier : public Module {
 public:
  TransformerClassifier(int64_t seq, int64_t features, int64_t classes = 10, int64_t d_model = 256,
                        int64_t heads = 4, int64_t ffn = 1024);
  Tensor forward(const Tensor& input) override;
  const char* type_name() const override { return "TransformerClassifier"; }
  std::shared_ptr<Linear> input_proj;  // null when features == d_model
  std::shared_ptr<TransformerEncoderLayer> encoder;
  std::shared_ptr<Linear> fc;
  int64_t seq, features;
};

// torchvision's BasicBlock: conv3x3(stride) -> bn -> ReLU -> conv3x3 -> bn, plus the
// shortcut (identity, or downsample = 1x1 conv(stride) -> bn when the shape changes), then
// ReLU. Convolutions have no bias (the batch norm's shift replaces it), as torchvision's.
// Parameters: conv1.weight, bn1.*, conv2.weight, bn2.*, [downsample.0.weight, downsample.1.*].
class BasicBlock : public Module {
 public:
  BasicBlock(int64_t in_channels, int64_t out_channels, int64_t stride);
  Tensor forward(const Tensor& input) override;
  const char* type_name() const override { return "BasicBlock"; }
  std::shared_ptr<Conv2d> conv1, conv2;
  std::shared_ptr<BatchNorm2d> bn1, bn2;
  std::shared_ptr<Sequential> downsample;  // null for an identity shortcut
};

// The CIFAR ResNet of He et al. 2016 (section 4.2): conv3x3(C -> w) -> bn -> ReLU, three
// stages of n BasicBlocks with widths w, 2w, 4w (the first block of stages 2 and 3 has
// stride 2), global average pooling, fc(4w -> classes). Depth 6n + 2: n = 3 is ResNet-20
// (0.27M parameters at w = 16). Any input size (the pooling is global).
// Parameters as torchvision names them: conv1.weight, bn1.*, layer1.0.conv1.weight, ...,
// layer3.2.bn2.*, fc.*.
class ResNet : public Module {
 public:
  ResNet(int64_t in_channels, int64_t classes, int64_t blocks_per_stage = 3, int64_t width = 16);
  Tensor forward(const Tensor& input) override;
  const char* type_name() const override { return "ResNet"; }
  std::shared_ptr<Conv2d> conv1;
  std::shared_ptr<BatchNorm2d> bn1;
  std::shared_ptr<Sequential> layer1, layer2, layer3;
  std::shared_ptr<Linear> fc;
};

// A GPT block's feed-forward part: c_proj(GELU(c_fc(x))), 4x wide, over every position.
class GptMlp : public Module {
 public:
  explicit GptMlp(int64_t d_model);
  Tensor forward(const Tensor& input) override;  // [B, T, d] -> [B, T, d]
  const char* type_name() const override { return "GptMlp"; }
  std::shared_ptr<Linear> c_fc, c_proj;
};

// One pre-norm GPT-2 block: x + attn(ln_1(x)), then x + mlp(ln_2(x)) with causal multi-head
// self-attention and mlp = c_proj(GELU(c_fc(.))), 4x wide. Parameters: ln_1.*, attn.in_proj_*,
// attn.out_proj.*, ln_2.*, mlp.c_fc.*, mlp.c_proj.*.
class GptBlock : public Module {
 public:
  GptBlock(int64_t d_model, int64_t heads);
  Tensor forward(const Tensor& input) override;  // [B, T, d] -> [B, T, d]
  // forward(x + pending) as the residual stream and the MLP's branch not yet added to it:
  // forward() is their sum; Gpt leaves the add to the next block's first LayerNorm (one
  // pass, add_layer_norm). pending may be undefined (nothing to add).
  std::pair<Tensor, Tensor> forward_residual(const Tensor& x, const Tensor& pending);
  // One position x [1, d] after the ones whose keys and values the caches hold (they grow by
  // one): forward()'s row at that position, up to rounding. No autograd.
  Tensor forward_step(const Tensor& x, Tensor& key_cache, Tensor& value_cache);
  const char* type_name() const override { return "GptBlock"; }
  std::shared_ptr<LayerNorm> ln_1, ln_2;
  std::shared_ptr<MultiheadAttention> attn;
  std::shared_ptr<GptMlp> mlp;
};

// A GPT-2-style decoder-only language model over bytes (vocabulary 256, so no tokenizer):
// token embedding wte [256, d] plus learned positions wpe [context, d], `layers` GptBlocks,
// ln_f, and logits = x wte^T: the output head shares the token embedding (weight tying).
// Input: tokens [B, T] i64 with T <= context. Output: logits [B, T, 256].
// Initialisation as GPT-2's: weights N(0, 0.02), each block's output projections
// N(0, 0.02 / sqrt(2 layers)), biases 0, layer norms 1 / 0.
// The keys and values of the positions a Gpt has already read, per layer ([H, t, D] each):
// text generation feeds one token at a time without recomputing the past.
struct KvCache {
  std::vector<Tensor> keys, values;
  int64_t length = 0;  // positions cached
};

// A language model that reads one token at a time with a key/value cache (what `mixprec
// generate` samples from): the built-in Gpt and a model file ending in lm_head.
class StepwiseLanguageModel {
 public:
  virtual ~StepwiseLanguageModel() = default;
  virtual int64_t context_length() const = 0;  // positions it can attend over
  // The logits [vocab] for the next token after `token`, which stands at position
  // cache.length (< context_length()); its keys and values join the cache. Equal to the last
  // row of forward() on the whole sequence, up to rounding. No autograd.
  virtual Tensor forward_step(int64_t token, KvCache& cache) = 0;
};

// forward_step's checks, the same for every StepwiseLanguageModel: `token` is one of the
// `vocab` values and the cache has room for it within `context` positions.
void check_next_token(int64_t token, int64_t vocab, const KvCache& cache, int64_t context);

// GPT-2's initialisation of a block in a stack of `layers`: weights N(0, 0.02), the output
// projections (attn.out_proj, mlp.c_proj) N(0, 0.02 / sqrt(2 layers)) so that the residual
// stream's variance does not grow with depth, the MLP's biases 0.
void init_gpt2_block(GptBlock& block, int64_t layers);

class Gpt : public Module, public StepwiseLanguageModel {
 public:
  Gpt(int64_t context, int64_t layers, int64_t d_model, int64_t heads, int64_t vocab = 256);
  Tensor forward(const Tensor& tokens) override;
  Tensor forward_step(int64_t token, KvCache& cache) override;
  int64_t context_length() const override { return context; }
  const char* type_name() const override { return "Gpt"; }
  std::shared_ptr<Embedding> wte, wpe;
  std::shared_ptr<Sequential> h;  // blocks h.0 .. h.{layers-1}
  std::shared_ptr<LayerNorm> ln_f;
  int64_t context;
};

struct ModelSpec {
  // "cnn" (1x28x28), "seed-cnn" (3x32x32), "mlp" (784-4096-4096-10), "transformer"
  // (1x128x256: 128 tokens of 256 features), "resnet20" (1x28x28), "resnet20-cifar" (3x32x32),
  // "gpt-tiny" (4 layers, 128 wide, context 128), "gpt" (6 layers, 384 wide, context 256)
  std::string name;
  int64_t channels, height, width, classes;
  // A language model: its input is `width` - 1 byte tokens, its classes the 256 bytes, and
  // its data windows of `width` bytes of text (--dataset kjv / text).
  bool language_model = false;
  // A model file's text (--model my_net.yaml, model_file.h): the network it describes, built
  // for this geometry; empty for the built-in models.
  std::string file_text;
  // A model of the caller's own (train::run with a Custom): make_model calls it.
  std::function<std::shared_ptr<Module>()> factory;
  // Its input is `width` byte ids per sample (texts to classify: --dataset csv --text-column),
  // not numbers: a model file for it starts with an embedding layer.
  bool token_input = false;
};

// The names `mixprec train --model` accepts, with their input geometry.
StatusOr<ModelSpec> model_spec(const std::string& name);
// The geometry a model file (model_file.h) is built for until the data says otherwise: a
// language model (its last layer lm_head) reads windows of its context + 1 bytes and predicts
// 256 bytes; a text classifier (its first layer an embedding) 128 byte ids; anything else
// Fashion-MNIST's 1x28x28 images; 10 classes for the classifiers.
ModelSpec model_file_spec(const std::string& name, const std::string& text);
// Every name model_spec accepts, in the order of --help.
const std::vector<std::string>& model_names();
std::shared_ptr<Module> make_model(const ModelSpec& spec);  // throws Error for a bad model file
// make_model, with a model file's errors as a Status (file:line:column, the layer, shapes).
StatusOr<std::shared_ptr<Module>> build_model(const ModelSpec& spec);

}  // namespace mixprec::nn

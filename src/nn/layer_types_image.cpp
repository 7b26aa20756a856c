// layer_types_image.cpp: the layer types of images [C, H, W] (layer_type.h): conv2d,
// maxpool2d, batchnorm2d, global_avgpool (also a sequence's mean), flatten, sequence (an
// image's rows as tokens), conv1d (over channels by length [C, L]) and conv_transpose2d. Each entry: its parameters, its plan (shapes, parameter count,
// errors), its module, its ONNX nodes, its summary row.
#include <algorithm>
#include <string>

#include "mixprec/nn/nn_attention.h"
#include "nn/layer_type.h"
#include "nn/model_planner.h"

namespace mixprec::nn {
namespace {

using plan_detail::kMaxKernel;
using plan_detail::kMaxWidth;
using plan_detail::Planner;
using plan_detail::product;
using plan_detail::shape_text;
using Shape_ = std::vector<int64_t>;

// The convolutions' dilation and groups (PyTorch's meaning): a dilated kernel of k taps spans
// dilation (k - 1) + 1 positions; groups split both channel counts evenly.
Status plan_dilation_groups(Planner& pl, const LayerArgs& a, const char* type, int64_t in, int64_t out,
                            int64_t& dilation, int64_t& groups) {
  MIXPREC_TAKE(d, pl.integer(a.p, "dilation", a.at, 1, 1, kMaxKernel));
  MIXPREC_TAKE(g, pl.integer(a.p, "groups", a.at, 1, 1, kMaxWidth));
  if (in % g != 0 || out % g != 0)
    return pl.error(a.at + "/groups", std::string(type) + ": groups " + std::to_string(g) + " must divide the input's " +
                                          std::to_string(in) + " channels and the " + std::to_string(out) + " output channels");
  dilation = d, groups = g;
  return Status::ok();
}

// ---- conv2d: [C, H, W] -> [out, H', W']
Status plan_conv2d(Planner& pl, const LayerArgs& a, Shape_& shape, LayerPlan& m) {
  MIXPREC_RETURN_IF_ERROR(pl.needs_image("conv2d", a.at, shape));
  MIXPREC_TAKE(out, pl.integer(a.p, "out", a.at, std::nullopt, 1, kMaxWidth));
  MIXPREC_TAKE(k, pl.integer(a.p, "kernel", a.at, 3, 1, kMaxKernel));
  MIXPREC_TAKE(s, pl.integer(a.p, "stride", a.at, 1, 1, kMaxKernel));
  MIXPREC_TAKE(pad, pl.integer(a.p, "padding", a.at, 0, 0, kMaxKernel));
  MIXPREC_TAKE(bias, pl.boolean(a.p, "bias", a.at, true));
  MIXPREC_RETURN_IF_ERROR(plan_dilation_groups(pl, a, "conv2d", shape[0], out, m.dilation, m.groups));
  const int64_t span = m.dilation * (k - 1) + 1;  // <= 64 * 63 + 1
  if (shape[1] + 2 * pad < span || shape[2] + 2 * pad < span)
    return pl.error(a.at, "conv2d: a " + std::to_string(k) + "x" + std::to_string(k) + " kernel" +
                              (m.dilation > 1 ? " dilated by " + std::to_string(m.dilation) : "") +
                              " does not fit the input " + shape_text(shape) + " with padding " + std::to_string(pad));
  const int64_t h = (shape[1] + 2 * pad - span) / s + 1, w = (shape[2] + 2 * pad - span) / s + 1;
  // Each factor is at most 65536 or 64: the product fits int64 exactly.
  m.parameters = out * (shape[0] / m.groups) * k * k + (bias ? out : 0);
  MIXPREC_RETURN_IF_ERROR(pl.budget(a.at, m.parameters));
  m.in = shape[0], m.out = out, m.kernel = k, m.stride = s, m.padding = pad, m.bias = bias;
  shape = {out, h, w};
  return Status::ok();
}

const LayerType conv2d_type{
    .name = "conv2d",
    .params = {{"out", LayerParam::integer}, {"kernel", LayerParam::integer}, {"stride", LayerParam::integer},
               {"padding", LayerParam::integer}, {"bias", LayerParam::boolean}, {"dilation", LayerParam::integer},
               {"groups", LayerParam::integer}},
    .plan = plan_conv2d,
    .build = MIXPREC_MODULE_PART([](const LayerPlan& p, BuildState&) -> std::shared_ptr<Module> {
      return std::make_shared<Conv2d>(p.in, p.out, p.kernel, p.stride, p.padding, p.bias, p.dilation, p.groups);
    }),
    .emits = MIXPREC_MODULE_PART([](const Module& m, const OnnxValue&) { return dynamic_cast<const Conv2d*>(&m) != nullptr; }),
    .emit_onnx = MIXPREC_MODULE_PART([](const Module& m, OnnxWriter& w, const std::string& path, const OnnxValue& x) -> StatusOr<OnnxValue> {
      return onnx_conv2d(static_cast<const Conv2d&>(m), w, path, x);
    }),
    .output_op = amp::OpId::conv2d,
    .example = "layers: [conv2d: {out: 4, kernel: 3, stride: 2, padding: 1}, conv2d: {out: 4, kernel: 2, padding: 2, "
               "dilation: 2, groups: 4}, flatten, linear: {out: classes}]",
};

// ---- conv1d: [C, L] -> [out_channels, L'], channels by length (an image's rows after
// `sequence`: C*H rows of W values)
Status plan_conv1d(Planner& pl, const LayerArgs& a, Shape_& shape, LayerPlan& m) {
  if (shape.size() != 2)
    return pl.error(a.at, "conv1d takes channels by length [C, L] (e.g. an image's rows after sequence); its input "
                          "here is " + shape_text(shape));
  MIXPREC_TAKE(out, pl.integer(a.p, "out_channels", a.at, std::nullopt, 1, kMaxWidth));
  MIXPREC_TAKE(k, pl.integer(a.p, "kernel_size", a.at, std::nullopt, 1, kMaxKernel));
  MIXPREC_TAKE(s, pl.integer(a.p, "stride", a.at, 1, 1, kMaxKernel));
  MIXPREC_TAKE(pad, pl.integer(a.p, "padding", a.at, 0, 0, kMaxKernel));
  MIXPREC_TAKE(bias, pl.boolean(a.p, "bias", a.at, true));
  MIXPREC_RETURN_IF_ERROR(plan_dilation_groups(pl, a, "conv1d", shape[0], out, m.dilation, m.groups));
  const int64_t span = m.dilation * (k - 1) + 1;
  if (shape[1] + 2 * pad < span)
    return pl.error(a.at, "conv1d: a kernel of " + std::to_string(k) +
                              (m.dilation > 1 ? " dilated by " + std::to_string(m.dilation) : "") +
                              " does not fit the input " + shape_text(shape) + " with padding " + std::to_string(pad));
  m.parameters = out * (shape[0] / m.groups) * k + (bias ? out : 0);  // factors <= 65536, 65536, 64: exact
  MIXPREC_RETURN_IF_ERROR(pl.budget(a.at, m.parameters));
  m.in = shape[0], m.out = out, m.kernel = k, m.stride = s, m.padding = pad, m.bias = bias;
  shape = {out, (shape[1] + 2 * pad - span) / s + 1};
  return Status::ok();
}

const LayerType conv1d_type{
    .name = "conv1d",
    .params = {{"out_channels", LayerParam::integer}, {"kernel_size", LayerParam::integer},
               {"stride", LayerParam::integer}, {"padding", LayerParam::integer}, {"bias", LayerParam::boolean},
               {"dilation", LayerParam::integer}, {"groups", LayerParam::integer}},
    .plan = plan_conv1d,
    .build = MIXPREC_MODULE_PART([](const LayerPlan& p, BuildState&) -> std::shared_ptr<Module> {
      return std::make_shared<Conv1d>(p.in, p.out, p.kernel, p.stride, p.padding, p.dilation, p.groups, p.bias);
    }),
    .emits = MIXPREC_MODULE_PART([](const Module& m, const OnnxValue&) { return dynamic_cast<const Conv1d*>(&m) != nullptr; }),
    .emit_onnx = MIXPREC_MODULE_PART([](const Module& module, OnnxWriter& w, const std::string& path,
                                        const OnnxValue& x) -> StatusOr<OnnxValue> {
      const auto& m = static_cast<const Conv1d&>(module);
      std::vector<std::string> in{x.name, w.weight(onnx_join(path, "weight"), m.weight)};
      if (m.bias.defined()) in.push_back(w.weight(onnx_join(path, "bias"), m.bias));
      return OnnxValue{w.node("Conv", in, onnx_join(path, "out"),
                              {{"kernel_shape", std::vector<int64_t>{m.weight.size(2)}},
                               {"strides", std::vector<int64_t>{m.stride}},
                               {"pads", std::vector<int64_t>{m.padding, m.padding}},
                               {"dilations", std::vector<int64_t>{m.dilation}},
                               {"group", m.groups}}),
                       3};
    }),
    .output_op = amp::OpId::conv1d,
    .example = "layers: [sequence, conv1d: {out_channels: 4, kernel_size: 3, stride: 2, padding: 1, dilation: 2, "
               "groups: 2}, relu, flatten, linear: {out: classes}]",
};

// ---- conv_transpose2d: [C, H, W] -> [out_channels, H', W'], H' = (H - 1) stride - 2 padding +
// kernel_size + output_padding: a decoder's or segmentation head's upsampling
Status plan_conv_transpose2d(Planner& pl, const LayerArgs& a, Shape_& shape, LayerPlan& m) {
  MIXPREC_RETURN_IF_ERROR(pl.needs_image("conv_transpose2d", a.at, shape));
  MIXPREC_TAKE(out, pl.integer(a.p, "out_channels", a.at, std::nullopt, 1, kMaxWidth));
  MIXPREC_TAKE(k, pl.integer(a.p, "kernel_size", a.at, std::nullopt, 1, kMaxKernel));
  MIXPREC_TAKE(s, pl.integer(a.p, "stride", a.at, 1, 1, kMaxKernel));
  MIXPREC_TAKE(pad, pl.integer(a.p, "padding", a.at, 0, 0, kMaxKernel));
  MIXPREC_TAKE(output_padding, pl.integer(a.p, "output_padding", a.at, 0, 0, kMaxKernel));
  MIXPREC_TAKE(bias, pl.boolean(a.p, "bias", a.at, true));
  MIXPREC_RETURN_IF_ERROR(plan_dilation_groups(pl, a, "conv_transpose2d", shape[0], out, m.dilation, m.groups));
  if (output_padding >= std::max(s, m.dilation))
    return pl.error(a.at + "/output_padding", "output_padding: " + std::to_string(output_padding) +
                                                  " must be smaller than the stride " + std::to_string(s) +
                                                  " or the dilation " + std::to_string(m.dilation) +
                                                  " (it picks one of the stride's output sizes)");
  // H, W <= 2^20 and each factor <= 64: no overflow. Bounded, so that upsampling layers cannot
  // grow a shape past what flatten and the parameter counts assume.
  const int64_t span = m.dilation * (k - 1) + 1;
  const int64_t h = (shape[1] - 1) * s - 2 * pad + span + output_padding,
                w = (shape[2] - 1) * s - 2 * pad + span + output_padding;
  if (h < 1 || w < 1 || h > kMaxWidth || w > kMaxWidth)
    return pl.error(a.at, "conv_transpose2d: the input " + shape_text(shape) + " gives " + std::to_string(h) + "x" +
                              std::to_string(w) + " (expected 1.." + std::to_string(kMaxWidth) + " each)");
  m.parameters = shape[0] * (out / m.groups) * k * k + (bias ? out : 0);
  MIXPREC_RETURN_IF_ERROR(pl.budget(a.at, m.parameters));
  m.in = shape[0], m.out = out, m.kernel = k, m.stride = s, m.padding = pad, m.output_padding = output_padding;
  m.bias = bias;
  shape = {out, h, w};
  return Status::ok();
}

const LayerType conv_transpose2d_type{
    .name = "conv_transpose2d",
    .params = {{"out_channels", LayerParam::integer}, {"kernel_size", LayerParam::integer},
               {"stride", LayerParam::integer}, {"padding", LayerParam::integer},
               {"output_padding", LayerParam::integer}, {"bias", LayerParam::boolean},
               {"dilation", LayerParam::integer}, {"groups", LayerParam::integer}},
    .plan = plan_conv_transpose2d,
    .build = MIXPREC_MODULE_PART([](const LayerPlan& p, BuildState&) -> std::shared_ptr<Module> {
      return std::make_shared<ConvTranspose2d>(p.in, p.out, p.kernel, p.stride, p.padding, p.output_padding, p.groups,
                                               p.bias, p.dilation);
    }),
    .emits = MIXPREC_MODULE_PART(
        [](const Module& m, const OnnxValue&) { return dynamic_cast<const ConvTranspose2d*>(&m) != nullptr; }),
    .emit_onnx = MIXPREC_MODULE_PART([](const Module& module, OnnxWriter& w, const std::string& path,
                                        const OnnxValue& x) -> StatusOr<OnnxValue> {
      // ONNX's ConvTranspose weight is [C_in, C_out, kH, kW], as PyTorch's.
      const auto& m = static_cast<const ConvTranspose2d&>(module);
      const int64_t k = m.weight.size(2), s = m.stride, p = m.padding, op = m.output_padding, d = m.dilation;
      std::vector<std::string> in{x.name, w.weight(onnx_join(path, "weight"), m.weight)};
      if (m.bias.defined()) in.push_back(w.weight(onnx_join(path, "bias"), m.bias));
      return OnnxValue{w.node("ConvTranspose", in, onnx_join(path, "out"),
                              {{"kernel_shape", std::vector<int64_t>{k, k}},
                               {"strides", std::vector<int64_t>{s, s}},
                               {"pads", std::vector<int64_t>{p, p, p, p}},
                               {"output_padding", std::vector<int64_t>{op, op}},
                               {"dilations", std::vector<int64_t>{d, d}},
                               {"group", m.groups}}),
                       4};
    }),
    .output_op = amp::OpId::conv_transpose2d,
    .example = "layers: [conv_transpose2d: {out_channels: 4, kernel_size: 3, stride: 2, padding: 1, output_padding: 1, "
               "dilation: 2, groups: 2}, "
               "global_avgpool, linear: {out: classes}]",
};

// ---- maxpool2d: [C, H, W] -> [C, H', W']
Status plan_maxpool2d(Planner& pl, const LayerArgs& a, Shape_& shape, LayerPlan& m) {
  MIXPREC_RETURN_IF_ERROR(pl.needs_image("maxpool2d", a.at, shape));
  MIXPREC_TAKE(k, pl.integer(a.p, "kernel", a.at, 2, 1, kMaxKernel));
  MIXPREC_TAKE(s, pl.integer(a.p, "stride", a.at, k, 1, kMaxKernel));
  MIXPREC_TAKE(pad, pl.integer(a.p, "padding", a.at, 0, 0, k / 2));
  if (shape[1] + 2 * pad < k || shape[2] + 2 * pad < k)
    return pl.error(a.at, "maxpool2d: a " + std::to_string(k) + "x" + std::to_string(k) +
                              " window does not fit the input " + shape_text(shape));
  m.kernel = k, m.stride = s, m.padding = pad;
  shape = {shape[0], (shape[1] + 2 * pad - k) / s + 1, (shape[2] + 2 * pad - k) / s + 1};
  return Status::ok();
}

const LayerType maxpool2d_type{
    .name = "maxpool2d",
    .params = {{"kernel", LayerParam::integer}, {"stride", LayerParam::integer}, {"padding", LayerParam::integer}},
    .plan = plan_maxpool2d,
    .build = MIXPREC_MODULE_PART([](const LayerPlan& p, BuildState&) -> std::shared_ptr<Module> {
      return std::make_shared<MaxPool2d>(p.kernel, p.stride, p.padding);
    }),
    .emits = MIXPREC_MODULE_PART([](const Module& m, const OnnxValue&) { return dynamic_cast<const MaxPool2d*>(&m) != nullptr; }),
    .emit_onnx = MIXPREC_MODULE_PART([](const Module& m, OnnxWriter& w, const std::string& path, const OnnxValue& x) -> StatusOr<OnnxValue> {
      const auto& p = static_cast<const MaxPool2d&>(m);
      return onnx_max_pool(w, x, p.kernel(), p.stride(), p.padding(), path);
    }),
    .output_op = amp::OpId::max_pool2d,
    .example = "layers: [maxpool2d: {kernel: 3, stride: 2, padding: 1}, flatten, linear: {out: classes}]",
};

// ---- batchnorm2d: [C, H, W], running statistics
Status plan_batchnorm2d(Planner& pl, const LayerArgs& a, Shape_& shape, LayerPlan& m) {
  MIXPREC_RETURN_IF_ERROR(pl.needs_image("batchnorm2d", a.at, shape));
  MIXPREC_TAKE(eps, pl.number(a.p, "eps", a.at, 1e-5, 1e-12, 1.0, false));
  MIXPREC_TAKE(momentum, pl.number(a.p, "momentum", a.at, 0.1, 0.0, 1.0, false));
  MIXPREC_RETURN_IF_ERROR(pl.budget(a.at, 4 * shape[0]));  // weight, bias and the two running statistics
  m.parameters = 2 * shape[0];
  m.in = shape[0], m.eps = eps, m.momentum = momentum;
  return Status::ok();
}

const LayerType batchnorm2d_type{
    .name = "batchnorm2d",
    .params = {{"eps", LayerParam::number}, {"momentum", LayerParam::number}},
    .plan = plan_batchnorm2d,
    .build = MIXPREC_MODULE_PART([](const LayerPlan& p, BuildState&) -> std::shared_ptr<Module> {
      return std::make_shared<BatchNorm2d>(p.in, p.eps, p.momentum);
    }),
    .emits = MIXPREC_MODULE_PART([](const Module& m, const OnnxValue&) { return dynamic_cast<const BatchNorm2d*>(&m) != nullptr; }),
    .emit_onnx = MIXPREC_MODULE_PART([](const Module& m, OnnxWriter& w, const std::string& path, const OnnxValue& x) -> StatusOr<OnnxValue> {
      return onnx_batch_norm(static_cast<const BatchNorm2d&>(m), w, path, x);
    }),
    .output_op = amp::OpId::batch_norm,
    .normalization = true,
    .kept_activations = [](const LayerPlan& p) { return 2 * double(product(p.output_shape)); },  // and x-hat
    .example = "layers: [batchnorm2d, global_avgpool, linear: {out: classes}]",
};

// ---- global_avgpool: [C, H, W] -> [C]; a sequence [T, E] -> [E], the mean over its positions
Status plan_global_avgpool(Planner& pl, const LayerArgs& a, Shape_& shape, LayerPlan&) {
  if (shape.size() == 2) {
    shape = {shape[1]};
    return Status::ok();
  }
  MIXPREC_RETURN_IF_ERROR(pl.needs_image("global_avgpool", a.at, shape));
  shape = {shape[0]};
  return Status::ok();
}

const LayerType global_avgpool_type{
    .name = "global_avgpool",
    .params = {},
    .plan = plan_global_avgpool,
    .build = MIXPREC_MODULE_PART([](const LayerPlan& p, BuildState&) -> std::shared_ptr<Module> {
      if (p.input_shape.size() == 2) return std::make_shared<SequenceMeanPool>();
      return std::make_shared<GlobalAvgPool>();
    }),
    .emits = MIXPREC_MODULE_PART([](const Module& m, const OnnxValue&) {
      return dynamic_cast<const GlobalAvgPool*>(&m) != nullptr || dynamic_cast<const SequenceMeanPool*>(&m) != nullptr;
    }),
    .emit_onnx = MIXPREC_MODULE_PART([](const Module& m, OnnxWriter& w, const std::string& path, const OnnxValue& x) -> StatusOr<OnnxValue> {
      if (dynamic_cast<const GlobalAvgPool*>(&m)) {
        const std::string pooled = w.node("GlobalAveragePool", {x.name}, onnx_join(path, "avgpool"));
        return OnnxValue{w.node("Flatten", {pooled}, onnx_join(path, "flat"), {{"axis", int64_t(1)}}), 2};
      }
      // [B, T, E] -> [B, E], as mean_over_positions; a masked text classifier's mean over its
      // text's own positions: [B, 1, S] weights x [B, S, E].
      if (w.pool_weights.empty())
        return OnnxValue{w.node("ReduceMean", {x.name}, onnx_join(path, "mean"),
                                {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t(0)}}),
                         2};
      const std::string pooled = w.node("MatMul", {w.to_compute(w.pool_weights), x.name}, onnx_join(path, "masked_mean"));
      return OnnxValue{w.node("Reshape", {pooled, w.ints(onnx_join(path, "pooled_shape"), {0, -1})}, onnx_join(path, "pooled")),
                       2};
    }),
    .output_op = amp::OpId::mean,
    .example = "layers: [global_avgpool, linear: {out: classes}]",
};

// ---- sequence: [C, H, W] -> [C*H, W], the image's rows as tokens (for encoder layers)
#ifndef MIXPREC_LAYER_PLAN_ONLY
bool is_sequence(const Module& m, const OnnxValue& x) {
  auto* f = dynamic_cast<const Flatten*>(&m);
  return f != nullptr && f->start_dim() == 1 && f->end_dim() == 2 && x.rank == 4;
}
#endif

const LayerType sequence_type{
    .name = "sequence",
    .params = {},
    .plan = [](Planner& pl, const LayerArgs& a, Shape_& shape, LayerPlan&) -> Status {
      MIXPREC_RETURN_IF_ERROR(pl.needs_image("sequence", a.at, shape));
      shape = {shape[0] * shape[1], shape[2]};
      return Status::ok();
    },
    .build = MIXPREC_MODULE_PART([](const LayerPlan&, BuildState&) -> std::shared_ptr<Module> {
      return std::make_shared<Flatten>(1, 2);  // [N, C, H, W] -> [N, C*H, W]
    }),
    .emits = MIXPREC_MODULE_PART(is_sequence),
    .emit_onnx = MIXPREC_MODULE_PART([](const Module&, OnnxWriter& w, const std::string& path, const OnnxValue& x) -> StatusOr<OnnxValue> {
      // The target shape [B, -1, W] read off the input, so the batch stays dynamic.
      const std::string shape = w.node("Shape", {x.name}, onnx_join(path, "shape"));
      const std::string b = w.node(
          "Slice", {shape, w.ints(onnx_join(path, "b_from"), {0}), w.ints(onnx_join(path, "b_to"), {1})}, onnx_join(path, "batch"));
      const std::string wd = w.node(
          "Slice", {shape, w.ints(onnx_join(path, "w_from"), {3}), w.ints(onnx_join(path, "w_to"), {4})}, onnx_join(path, "width"));
      const std::string target = w.node("Concat", {b, w.ints(onnx_join(path, "rows"), {-1}), wd}, onnx_join(path, "target"),
                                        {{"axis", int64_t(0)}});
      return OnnxValue{w.node("Reshape", {x.name, target}, onnx_join(path, "tokens")), 3};
    }),
    .output_op = amp::OpId::flatten,
    .example = "layers: [sequence, layernorm, global_avgpool, linear: {out: classes}]",
};

// ---- flatten: [C, H, W] -> [C*H*W]
const LayerType flatten_type{
    .name = "flatten",
    .params = {},
    .plan = [](Planner&, const LayerArgs&, Shape_& shape, LayerPlan&) -> Status {
      shape = {product(shape)};  // C <= 65536, H and W < 2^20 even after 4096 padded layers: < 2^56
      return Status::ok();
    },
    .build = MIXPREC_MODULE_PART([](const LayerPlan&, BuildState&) -> std::shared_ptr<Module> { return std::make_shared<Flatten>(); }),
    .emits = MIXPREC_MODULE_PART([](const Module& m, const OnnxValue& x) { return dynamic_cast<const Flatten*>(&m) != nullptr && !is_sequence(m, x); }),
    .emit_onnx = MIXPREC_MODULE_PART([](const Module& m, OnnxWriter& w, const std::string& path, const OnnxValue& x) -> StatusOr<OnnxValue> {
      const auto& f = static_cast<const Flatten&>(m);
      if (f.start_dim() != 1 || !(f.end_dim() == -1 || f.end_dim() == x.rank - 1))
        return Status::unimplemented("ONNX export: " + path + " flattens dims " + std::to_string(f.start_dim()) + ".." +
                                     std::to_string(f.end_dim()) + "; only Flatten(1, -1) is exported");
      return onnx_flatten(w, x, path);
    }),
    .output_op = amp::OpId::flatten,
    .kept_activations = [](const LayerPlan&) { return 0.0; },  // a view of its input
    .example = "layers: [flatten, linear: {out: classes}]",
};

#undef MIXPREC_TAKE

}  // namespace

#ifndef MIXPREC_LAYER_PLAN_ONLY
OnnxValue onnx_conv2d(const Conv2d& m, OnnxWriter& w, const std::string& path, const OnnxValue& x) {
  const int64_t k = m.weight.size(2), s = m.stride, p = m.padding, d = m.dilation;
  std::vector<std::string> in{x.name, w.weight(onnx_join(path, "weight"), m.weight)};
  if (m.bias.defined()) in.push_back(w.weight(onnx_join(path, "bias"), m.bias));
  return {w.node("Conv", in, onnx_join(path, "out"),
                 {{"kernel_shape", std::vector<int64_t>{k, k}},
                  {"strides", std::vector<int64_t>{s, s}},
                  {"pads", std::vector<int64_t>{p, p, p, p}},
                  {"dilations", std::vector<int64_t>{d, d}},
                  {"group", m.groups}}),
          4};
}

OnnxValue onnx_max_pool(OnnxWriter& w, const OnnxValue& x, int64_t kernel, int64_t stride, int64_t padding,
                        const std::string& path) {
  // PyTorch's (and mixprec's) floor mode is ONNX's default ceil_mode = 0; both pad with -inf.
  return {w.node("MaxPool", {x.name}, path,
                 {{"kernel_shape", std::vector<int64_t>{kernel, kernel}},
                  {"strides", std::vector<int64_t>{stride, stride}},
                  {"pads", std::vector<int64_t>{padding, padding, padding, padding}}}),
          x.rank};
}

OnnxValue onnx_batch_norm(const BatchNorm2d& m, OnnxWriter& w, const std::string& path, const OnnxValue& x) {
  const std::string y = w.node("BatchNormalization",
                               {w.to_f32(x.name), w.weight_f32(onnx_join(path, "weight"), m.weight),
                                w.weight_f32(onnx_join(path, "bias"), m.bias),
                                w.weight_f32(onnx_join(path, "running_mean"), m.running_mean),
                                w.weight_f32(onnx_join(path, "running_var"), m.running_var)},
                               onnx_join(path, "out"), {{"epsilon", float(m.eps)}});
  return {w.to_compute(y), x.rank};
}

OnnxValue onnx_flatten(OnnxWriter& w, const OnnxValue& x, const std::string& path) {
  return {w.node("Flatten", {x.name}, path, {{"axis", int64_t(1)}}), 2};
}

#endif  // MIXPREC_LAYER_PLAN_ONLY

std::vector<const LayerType*> image_layer_types() {
  return {&conv2d_type,         &maxpool2d_type, &batchnorm2d_type, &global_avgpool_type,
          &flatten_type,        &sequence_type,  &conv1d_type,      &conv_transpose2d_type};
}

}  // namespace mixprec::nn

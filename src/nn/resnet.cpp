// resnet.cpp: BasicBlock and the CIFAR-style ResNet (models.h), composed of public ops:
// conv2d, batch_norm, relu, add, mean (the global average pooling) and linear.
#include "mixprec/nn/models.h"

namespace mixprec::nn {

namespace {

std::shared_ptr<Conv2d> conv3x3(int64_t in, int64_t out, int64_t stride) {
  return std::make_shared<Conv2d>(in, out, 3, stride, 1, /*bias=*/false);
}

std::shared_ptr<Sequential> stage(int64_t in, int64_t out, int64_t blocks, int64_t stride) {
  auto s = std::make_shared<Sequential>();
  for (int64_t i = 0; i < blocks; ++i) s->add(std::make_shared<BasicBlock>(i == 0 ? in : out, out, i == 0 ? stride : 1));
  return s;
}

}  // namespace

BasicBlock::BasicBlock(int64_t in_channels, int64_t out_channels, int64_t stride) {
  conv1 = register_module("conv1", conv3x3(in_channels, out_channels, stride));
  bn1 = register_module("bn1", std::make_shared<BatchNorm2d>(out_channels));
  conv2 = register_module("conv2", conv3x3(out_channels, out_channels, 1));
  bn2 = register_module("bn2", std::make_shared<BatchNorm2d>(out_channels));
  if (stride != 1 || in_channels != out_channels)
    downsample = register_module(
        "downsample", std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
                          std::make_shared<Conv2d>(in_channels, out_channels, 1, stride, 0, /*bias=*/false),
                          std::make_shared<BatchNorm2d>(out_channels)}));
}

Tensor BasicBlock::forward(const Tensor& input) {
  Tensor y = relu((*bn1)((*conv1)(input)));
  y = (*bn2)((*conv2)(y));
  const Tensor shortcut = downsample ? (*downsample)(input) : input;
  return relu(add(y, shortcut));
}

ResNet::ResNet(int64_t in_channels, int64_t classes, int64_t blocks_per_stage, int64_t width) {
  if (in_channels < 1 || classes < 1 || blocks_per_stage < 1 || width < 1)
    throw Error(Status::invalid_argument("ResNet: channels " + std::to_string(in_channels) + ", classes " +
                                         std::to_string(classes) + ", blocks per stage " +
                                         std::to_string(blocks_per_stage) + " and width " + std::to_string(width) +
                                         " must all be >= 1"));
  conv1 = register_module("conv1", conv3x3(in_channels, width, 1));
  bn1 = register_module("bn1", std::make_shared<BatchNorm2d>(width));
  layer1 = register_module("layer1", stage(width, width, blocks_per_stage, 1));
  layer2 = register_module("layer2", stage(width, 2 * width, blocks_per_stage, 2));
  layer3 = register_module("layer3", stage(2 * width, 4 * width, blocks_per_stage, 2));
  fc = register_module("fc", std::make_shared<Linear>(4 * width, classes));
}

Tensor ResNet::forward(const Tensor& input) {
  Tensor x = relu((*bn1)((*conv1)(input)));
  x = (*layer3)((*layer2)((*layer1)(x)));
  x = mean(x, {2, 3});  // global average pooling: [N, 4w, H', W'] -> [N, 4w]
  return (*fc)(x);
}

}  // namespace mixprec::nn

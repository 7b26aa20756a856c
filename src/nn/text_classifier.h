// text_classifier.h: what a text-classifier model file whose embedding has mask_padding is
// built into (model_file.cpp): its layers run in order, as a Sequential, with the byte-0
// padding of each text masked: encoder layers attend to real positions only (PyTorch's
// src_key_padding_mask) and global_avgpool averages them only, so a text's logits do not
// depend on how much padding follows it.
#pragma once

#include "mixprec/nn/nn.h"
#include "mixprec/nn/nn_attention.h"

namespace mixprec::nn {

class FileTextClassifier : public Sequential {
 public:
  Tensor forward(const Tensor& ids) override;  // byte ids [B, S] (i64, 0 = padding) -> logits
  const char* type_name() const override { return "FileTextClassifier"; }
};

}  // namespace mixprec::nn

// text_classifier.cpp: a model file's text classifier with its padding masked
// (text_classifier.h).
#include "nn/text_classifier.h"

namespace mixprec::nn {

Tensor FileTextClassifier::forward(const Tensor& ids) {
  const Tensor weights = padding_weights(ids);  // [B, S]: 1 / count at real positions
  const Tensor mask = key_padding_mask(ids);     // [B, S]: 0, or kPaddingScore at padding
  Tensor x = ids;
  for (const auto& [name, layer] : children()) {
    if (auto* encoder = dynamic_cast<TransformerEncoderLayer*>(layer.get())) {
      x = encoder->with_precision(x, [&](const Tensor& in) { return encoder->forward(in, mask); });
    } else if (dynamic_cast<SequenceMeanPool*>(layer.get())) {
      x = layer->with_precision(x, [&](const Tensor& in) { return mean_over_positions(in, weights); });
    } else {
      x = (*layer)(x);
    }
  }
  return x;
}

}  // namespace mixprec::nn

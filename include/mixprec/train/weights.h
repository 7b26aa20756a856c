// weights.h: model weights from a .safetensors file (a mixprec checkpoint, or a file saved by
// PyTorch with the same parameter names), into a Module of any dtype.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "mixprec/nn/nn.h"
#include "mixprec/core/status.h"
#include "mixprec/core/tensor.h"

namespace mixprec::train {

// Copies weights saved by name (by PyTorch or another run) into the model, converting the
// dtype; every missing, unexpected or mis-shaped name is reported.
Status load_weights(nn::Module& model, const std::string& path);
// The same from tensors already read (a checkpoint's model tensors); `file` names them.
Status load_weights(nn::Module& model, const std::vector<std::pair<std::string, Tensor>>& tensors,
                    const std::string& file);

}  // namespace mixprec::train

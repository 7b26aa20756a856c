// backend/onednn/dispatch_log.h: the MIXPREC_VERBOSE=dispatch log of which oneDNN
// implementation each kernel got, and the short descriptions of tensors it and the error
// messages print.
#pragma once
#include <string>

#include "backend/dispatch_log.h"
#include "mixprec/core/tensor.h"

namespace mixprec::backend::onednn {

// "bf16 [256, 32, 16, 16] nhwc" / "f32 [256, 10]"
std::string describe(const Tensor& t);
std::string describe(const Shape& shape, DType d);

// dispatch_verbose() (MIXPREC_VERBOSE=dispatch) is backend/dispatch_log.h's, the one switch
// and log shared with the ops' route. Prints "mixprec: dispatch <kind> -> <impl> (oneDNN)" to stderr once per distinct line
// when dispatch_verbose(); kind names the kernel and dtype, e.g. "conv2d_forward f32".
// Reference kernels (impl "ref:*") are flagged as slow.
// `detail` (shapes, layouts) is printed only for reference kernels, to find the culprit.
void dispatch_log(const std::string& kind, const std::string& impl_name,
                  const std::string& detail = "");

}  // namespace mixprec::backend::onednn

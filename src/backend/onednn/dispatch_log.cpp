// backend/onednn/dispatch_log.cpp: see dispatch_log.h.
#include "backend/onednn/dispatch_log.h"

namespace mixprec::backend::onednn {

std::string describe(const Shape& shape, DType d) {
  return std::string(dtype_name(d)) + " " + shape_str(shape);
}

std::string describe(const Tensor& t) {
  std::string s = describe(t.shape(), t.dtype());
  if (t.dim() == 4) s += t.is_contiguous() ? " nchw" : t.is_channels_last() ? " nhwc" : " strided";
  return s;
}

void dispatch_log(const std::string& kind, const std::string& impl_name,
                  const std::string& detail) {
  if (!dispatch_verbose()) return;
  std::string line = kind + " -> " + impl_name + " (oneDNN)";
  // oneDNN's reference kernels run scalar loops: f32 conv1 backward-data as ref:any took
  // 7-12 s at batch 256 (limits.md §2), so make them stand out.
  if (impl_name.rfind("ref:", 0) == 0)
    line += " [slow reference kernel" + (detail.empty() ? "" : ": " + detail) + "]";
  dispatch_log_line(line);
}

}  // namespace mixprec::backend::onednn

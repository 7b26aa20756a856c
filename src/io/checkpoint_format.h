// io/checkpoint_format.h: how a checkpoint names its tensors (docs/checkpoints.md): model
// tensors under their own names, optimizer state under "optimizer.", f32 master weights under
// "master.". Shared by the reader/writer (checkpoint.cpp) and the checks (checkpoint_checks.cpp).
#pragma once

namespace mixprec::io {

inline constexpr const char* kOptimizerPrefix = "optimizer.";
inline constexpr const char* kMasterPrefix = "master.";

}  // namespace mixprec::io

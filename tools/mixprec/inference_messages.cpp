// inference_messages.cpp: see inference_messages.h.
#include "inference_messages.h"

#include <cstdio>

#include "exit_codes.h"
#include "mixprec/amp/precision.h"

namespace mixprec::cli {

int report_load_error(const Status& status) {
  const bool usage = status.code() == StatusCode::invalid_argument;
  std::fprintf(stderr, "mixprec: %s: %s\n", usage ? "usage error" : "checkpoint error", status.message().c_str());
  return exit_code_for(status);
}

int report_predictor_error(const Status& status) {
  if (status.code() == StatusCode::bad_checkpoint || status.code() == StatusCode::invalid_argument)
    return report_load_error(status);
  std::fprintf(stderr, "mixprec: data error: %s\n", status.message().c_str());
  return exit_code_for(status);
}

std::string inference_precision_help() {
  return "fp32, bf16 or fp16 (weights cast once, normalisation layers in f32), or a preset: " + amp::preset_names() +
         " (default: the checkpoint's)";
}

}  // namespace mixprec::cli

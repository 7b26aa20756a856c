// inference_messages.h: what the commands built on mixprec/infer/infer.h (predict, serve, generate,
// eval, infer, export) tell the user: a load or open error printed with its exit code, and the
// --precision help text. The inference itself is the library's.
#pragma once
#include <string>

#include "mixprec/core/status.h"

namespace mixprec::cli {

// Prints infer::load_model's error ("mixprec: checkpoint error: ..." or "usage error") and
// returns its exit code (4 or 2).
int report_load_error(const Status& status);

// Prints infer::Predictor::open's error ("checkpoint error", "usage error" or "data error")
// and returns its exit code (4, 2 or 3).
int report_predictor_error(const Status& status);

// "fp32, bf16 or fp16 (...), or a preset: ..." for --help (the flag's check: suggest.h).
std::string inference_precision_help();

}  // namespace mixprec::cli

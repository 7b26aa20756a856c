// model_file_fuzz.cpp: libFuzzer harness for model files: build_model_file (YAML/JSON, shapes,
// limits). Build and run: scripts/fuzz --harness model_file. The target is in fuzz_targets.h.
#include "fuzz/fuzz_targets.h"

MIXPREC_FUZZ_TARGET(model_file)

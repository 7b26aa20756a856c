// checkpoint_fuzz.cpp: libFuzzer harness for a whole checkpoint in memory: the safetensors container and the metadata state (scaler, counters, model_tensors, config, RNG).
// Build and run: scripts/fuzz --harness checkpoint. The target itself is in fuzz_targets.h.
#include "fuzz/fuzz_targets.h"

MIXPREC_FUZZ_TARGET(checkpoint)

// safetensors_fuzz.cpp: libFuzzer harness for a safetensors file in memory: header JSON, offsets, every tensor's bytes; accepted files must round-trip.
// Build and run: scripts/fuzz --harness safetensors. The target itself is in fuzz_targets.h.
#include "fuzz/fuzz_targets.h"

MIXPREC_FUZZ_TARGET(safetensors)

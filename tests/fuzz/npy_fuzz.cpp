// npy_fuzz.cpp: libFuzzer harness for a NumPy .npy array (mixprec predict's input).
// Build and run: scripts/fuzz --harness npy. The target itself is in fuzz_targets.h.
#include "fuzz/fuzz_targets.h"

MIXPREC_FUZZ_TARGET(npy)

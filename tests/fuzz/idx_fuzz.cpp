// idx_fuzz.cpp: libFuzzer harness for an IDX (MNIST) file, plain or gzip, read as images and as labels.
// Build and run: scripts/fuzz --harness idx. The target itself is in fuzz_targets.h.
#include "fuzz/fuzz_targets.h"

MIXPREC_FUZZ_TARGET(idx)

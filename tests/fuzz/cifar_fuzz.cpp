// cifar_fuzz.cpp: libFuzzer harness for a CIFAR-10 binary batch, plain or gzip.
// Build and run: scripts/fuzz --harness cifar. The target itself is in fuzz_targets.h.
#include "fuzz/fuzz_targets.h"

MIXPREC_FUZZ_TARGET(cifar)

// image_fuzz.cpp: libFuzzer harness for PNG and JPEG bytes (predict's, serve's and an image
// folder's decoder). Build and run: scripts/fuzz --harness image. The target is in
// fuzz_targets.h.
#include "fuzz/fuzz_targets.h"

MIXPREC_FUZZ_TARGET(image)

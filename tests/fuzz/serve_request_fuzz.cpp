// serve_request_fuzz.cpp: libFuzzer harness for a POST /v1/predict body as `mixprec serve`
// decodes it (JSON, .npy, PNG). Build and run: scripts/fuzz --harness serve_request. The
// target itself is in fuzz_targets.h.
#include "fuzz/fuzz_targets.h"

MIXPREC_FUZZ_TARGET(serve_request)

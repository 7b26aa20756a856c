// http_request_fuzz.cpp: libFuzzer harness for the bytes a client sends `mixprec serve`
// (http::RequestParser, fed whole and in pieces). Build and run: scripts/fuzz --harness
// http_request. The target itself is in http_fuzz_target.h.
#include "fuzz/fuzz_targets.h"

MIXPREC_FUZZ_TARGET(http_request)

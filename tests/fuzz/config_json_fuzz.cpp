// config_json_fuzz.cpp: libFuzzer harness for config.json text: config_from_json and adopt_saved_config.
// Build and run: scripts/fuzz --harness config_json. The target itself is in fuzz_targets.h.
#include "fuzz/fuzz_targets.h"

MIXPREC_FUZZ_TARGET(config_json)

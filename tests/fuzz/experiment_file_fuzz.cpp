// experiment_file_fuzz.cpp: libFuzzer harness for `mixprec sweep`'s experiment file and state
// file (parse_experiment, state_from_json). Build and run: scripts/fuzz --harness
// experiment_file. The target itself is in experiment_fuzz_target.h.
#include "fuzz/fuzz_targets.h"

MIXPREC_FUZZ_TARGET(experiment_file)

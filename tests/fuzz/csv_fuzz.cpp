// csv_fuzz.cpp: libFuzzer harness for CSV tables: parse_csv_table and table_dataset.
// Build and run: scripts/fuzz --harness csv. The target itself is in fuzz_targets.h.
#include "fuzz/fuzz_targets.h"

MIXPREC_FUZZ_TARGET(csv)

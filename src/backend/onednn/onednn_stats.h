// backend/onednn/onednn_stats.h: counters of the oneDNN backend, for benchmarks and tests.
// Free of dnnl.hpp, so bench/ and tests may include it from src/.
#pragma once
#include <cstdint>

namespace mixprec::backend::onednn {

// Primitives created since start (every kind, reorders included). A steady-state training
// step must leave this unchanged.
int64_t onednn_primitive_creations();
// Entries in the primitive cache (cached failures included).
int64_t onednn_primitive_cache_size();
// Drops every cached primitive (tests; frees JIT code and reordered descs).
void onednn_clear_primitive_cache();
// Weight reorders executed (plain PyTorch layout -> oneDNN's blocked layout). Unchanged
// weights (same buffer, same version) are not reordered again.
int64_t onednn_weight_reorders();
// Cached reordered weight buffers currently held.
int64_t onednn_weight_cache_size();
void onednn_clear_weight_cache();

}  // namespace mixprec::backend::onednn

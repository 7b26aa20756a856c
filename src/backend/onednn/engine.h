// backend/onednn/engine.h: the one CPU engine and stream every oneDNN call in mixprec uses.
// Internal to src/backend/onednn/ (it includes dnnl.hpp).
//
// Threading: Debian's libdnnl is built with OpenMP, so each primitive runs on
// omp_get_max_threads() threads read at execution time: omp_set_num_threads() and
// OMP_NUM_THREADS apply with no extra plumbing. The stream is in-order and execution is
// synchronous on CPU; the library-mode scratchpad oneDNN uses by default is per thread.
#pragma once
#include <dnnl.hpp>
#include <string>

namespace mixprec::backend::onednn {

// Created on first use (thread-safe static initialisation).
dnnl::engine& cpu_engine();
dnnl::stream& cpu_stream();

// "oneDNN 2.6.3, isa avx512_core_amx, 2 threads" for start-up banners and verbose logs.
std::string engine_description();

}  // namespace mixprec::backend::onednn

// omp_wait.h: the OpenMP wait setting a run has, for `mixprec bench`'s header. libgomp (GCC's
// OpenMP, used by mixprec's kernels and by oneDNN) lets an idle worker spin ~300,000
// iterations before it sleeps: the fastest on a machine of one's own, but beside other busy
// processes the spinning takes time slices the step's own threads need; OMP_WAIT_POLICY=passive
// can then be faster (bench/omp_wait.sh measures it; docs/cli.md, Environment). A benchmark
// figure is only explainable with the setting it ran under.
#pragma once

#include <string>

namespace mixprec::cli {

// "libgomp's default", or the variables set: "OMP_WAIT_POLICY=passive, GOMP_SPINCOUNT=1000
// (environment)".
std::string omp_wait_description();

}  // namespace mixprec::cli

// omp_wait.cpp: see omp_wait.h.
#include "omp_wait.h"

#include <cstdlib>
#include <string>

namespace mixprec::cli {

std::string omp_wait_description() {
  std::string d;
  for (const char* name : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"})
    if (const char* v = std::getenv(name)) d += (d.empty() ? "" : ", ") + std::string(name) + "=" + v;
  return d.empty() ? "libgomp's default" : d + " (environment)";
}

}  // namespace mixprec::cli

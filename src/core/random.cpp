// random.cpp: the global generator and its serialisable state.
#include "core/random.h"

#include <sstream>

#include "mixprec/core/tensor.h"

namespace mixprec {

std::mt19937_64& global_generator() {
  static std::mt19937_64 gen(0x6d69787072656300ULL);  // fixed default: runs are reproducible
  return gen;
}

void manual_seed(uint64_t seed) { global_generator().seed(seed); }

std::string generator_state() {
  std::ostringstream os;
  os << global_generator();
  return os.str();
}

void set_generator_state(const std::string& state) {
  std::istringstream is(state);
  is >> global_generator();
}

}  // namespace mixprec

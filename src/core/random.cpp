// random.cpp: the global generator and its serialisable state.
#include "core/random.h"

#include <sstream>

#include "mixprec/core/tensor.h"

namespace mixprec {

namespace {
thread_local std::mt19937_64* t_generator = nullptr;  // a ThreadGenerator's, while one lives
}  // namespace

std::mt19937_64& global_generator() {
  if (t_generator) return *t_generator;
  static std::mt19937_64 gen(0x6d69787072656300ULL);  // fixed default: runs are reproducible
  return gen;
}

ThreadGenerator::ThreadGenerator(const std::mt19937_64& state) : gen_(state) { t_generator = &gen_; }
ThreadGenerator::~ThreadGenerator() { t_generator = nullptr; }

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

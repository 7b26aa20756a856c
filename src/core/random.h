// random.h: the process-wide generator behind manual_seed (parameter init, dropout,
// Tensor::uniform/normal). One generator, so a seed fixes a whole run.
#pragma once
#include <cstdint>
#include <random>
#include <string>

namespace mixprec {

std::mt19937_64& global_generator();
// Saves/restores the generator (checkpoints store it for an exact resume).
std::string generator_state();
void set_generator_state(const std::string& state);

}  // namespace mixprec

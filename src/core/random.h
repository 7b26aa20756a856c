// random.h: the process-wide generator behind manual_seed (parameter init, dropout,
// Tensor::uniform/normal). One generator, so a seed fixes a whole run; a thread that is a rank
// of an in-process data-parallel step draws from its own (ThreadGenerator).
#pragma once
#include <cstdint>
#include <random>
#include <string>

namespace mixprec {

// The calling thread's ThreadGenerator if it has one, else the process-wide generator.
std::mt19937_64& global_generator();

// While alive, the calling thread draws from its own generator, which starts as a copy of
// `state`: a worker that is one rank of an in-process data-parallel step (train/step_workers.h)
// draws what an mpirun rank would (every rank seeded alike), and no two threads share one
// generator. Not nestable.
class ThreadGenerator {
 public:
  explicit ThreadGenerator(const std::mt19937_64& state);
  ~ThreadGenerator();
  ThreadGenerator(const ThreadGenerator&) = delete;
  ThreadGenerator& operator=(const ThreadGenerator&) = delete;

 private:
  std::mt19937_64 gen_;
};
// Saves/restores the generator (checkpoints store it for an exact resume).
std::string generator_state();
void set_generator_state(const std::string& state);

}  // namespace mixprec

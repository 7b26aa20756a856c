// thread_generator_test.cpp: a thread's own generator (core/random.h's ThreadGenerator), which
// a worker rank of an in-process data-parallel step draws from: it starts where the process
// generator was, its draws leave the process generator alone, and the thread is back on the
// process generator when the guard ends.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "core/random.h"
#include "mixprec/core/tensor.h"

namespace mixprec {
namespace {

std::vector<uint64_t> draws(int n) {
  std::vector<uint64_t> v;
  for (int i = 0; i < n; ++i) v.push_back(global_generator()());
  return v;
}

TEST(ThreadGenerator, StartsFromTheGivenStateAndLeavesTheProcessGeneratorAlone) {
  manual_seed(11);
  const std::mt19937_64 start = global_generator();
  std::vector<uint64_t> in_thread, after_guard_in_thread;
  std::thread t([&] {
    {
      ThreadGenerator own(start);
      in_thread = draws(5);
    }
    after_guard_in_thread = draws(1);  // the process generator again
  });
  t.join();
  manual_seed(11);
  const std::vector<uint64_t> expected = draws(6);  // what the process generator gives from seed 11
  EXPECT_EQ(in_thread, std::vector<uint64_t>(expected.begin(), expected.begin() + 5));
  // The thread's five draws did not advance the process generator: its first draw after the
  // guard was the process generator's first from seed 11.
  EXPECT_EQ(after_guard_in_thread[0], expected[0]);
}

TEST(ThreadGenerator, TwoThreadsDrawTheSameSequenceIndependently) {
  manual_seed(3);
  const std::mt19937_64 start = global_generator();
  std::vector<uint64_t> a, b;
  std::thread ta([&] { ThreadGenerator own(start); a = draws(1000); });
  std::thread tb([&] { ThreadGenerator own(start); b = draws(1000); });
  ta.join();
  tb.join();
  EXPECT_EQ(a, b);  // as two mpirun ranks seeded alike
  std::mt19937_64 reference = start;
  for (uint64_t v : a) ASSERT_EQ(v, reference());
}

}  // namespace
}  // namespace mixprec

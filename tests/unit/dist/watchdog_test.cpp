// watchdog_test.cpp: the Watchdog that bounds a blocking collective (src/dist/watchdog.h): it
// ends the process with its exit code and a message naming the rank and the wait when a
// Watch outlives its deadline, and never while no Watch is armed or after one is disarmed.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "dist/watchdog.h"

namespace mixprec::dist {
namespace {

TEST(WatchdogDeathTest, AnOverdueWaitEndsTheProcessNamingIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Watchdog dog("rank 3 (host-a)", 7);
        Watchdog::Watch watch(dog, "gradient all-reduce at step 5", 1.0);
        std::this_thread::sleep_for(std::chrono::seconds(20));
      },
      ::testing::ExitedWithCode(7),
      "rank 3 \\(host-a\\): gradient all-reduce at step 5 did not complete within 1 s: another rank stopped "
      "responding");
}

TEST(Watchdog, DisarmedWatchesNeverFire) {
  Watchdog dog("rank 0", 7);
  for (int i = 0; i < 20; ++i) {
    Watchdog::Watch watch(dog, "a quick collective", 0.3);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Past every deadline armed above: a watchdog that fired would have ended this process.
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  SUCCEED();
}

}  // namespace
}  // namespace mixprec::dist

// watchdog.cpp: see watchdog.h.
#include "dist/watchdog.h"

#include <unistd.h>

#include <cstdio>

namespace mixprec::dist {

Watchdog::Watchdog(std::string who, int exit_code) : who_(std::move(who)), exit_code_(exit_code) {
  thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

Watchdog::Watch::Watch(Watchdog& dog, const std::string& what, double seconds) : dog_(dog) {
  {
    std::lock_guard<std::mutex> lock(dog_.mu_);
    dog_.armed_ = true;
    dog_.what_ = what;
    dog_.seconds_ = seconds;
    dog_.deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }
  dog_.cv_.notify_all();
}

Watchdog::Watch::~Watch() {
  {
    std::lock_guard<std::mutex> lock(dog_.mu_);
    dog_.armed_ = false;
  }
  dog_.cv_.notify_all();
}

void Watchdog::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (stopping_) return;
    if (!armed_) {
      cv_.wait(lock);
      continue;
    }
    if (cv_.wait_until(lock, deadline_) == std::cv_status::timeout && armed_ && Clock::now() >= deadline_) {
      // The blocked call cannot be cancelled; only leaving the process frees the job. The
      // message is written with one call so that ranks' lines do not interleave.
      std::string msg = "\nmixprec: error: " + who_ + ": " + what_ + " did not complete within " +
                        std::to_string(int(seconds_)) +
                        " s: another rank stopped responding (it died, hangs, or is still in an earlier step); "
                        "ending the job (raise --dist-timeout if a step is legitimately this slow)\n";
      std::fwrite(msg.data(), 1, msg.size(), stderr);
      std::fflush(stderr);
      _exit(exit_code_);
    }
  }
}

}  // namespace mixprec::dist

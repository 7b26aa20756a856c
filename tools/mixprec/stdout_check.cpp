// stdout_check.cpp: see stdout_check.h.
#include "stdout_check.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace mixprec::cli {

namespace {
int g_first_errno = 0;  // of the first failed flush; 0: none seen (or a write inside printf)
bool g_reported = false;
}  // namespace

bool flush_stdout() {
  errno = 0;
  if (std::fflush(stdout) != 0 && g_first_errno == 0) g_first_errno = errno != 0 ? errno : EIO;
  return std::ferror(stdout) == 0;
}

bool finish_stdout() {
  if (flush_stdout()) return true;
  if (!g_reported) {
    g_reported = true;
    // A write that failed inside printf left no errno we saw: say what is known.
    std::fprintf(stderr, "mixprec: cannot write the output: %s\n",
                 g_first_errno != 0 ? std::strerror(g_first_errno) : "a write to standard output failed");
  }
  return false;
}

}  // namespace mixprec::cli

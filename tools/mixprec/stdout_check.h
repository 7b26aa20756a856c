// stdout_check.h: whether what a command printed reached its standard output. stdout is
// buffered, so a full disk, a closed descriptor or a broken pipe shows only when the buffer is
// written; glibc then drops the buffer and a later fflush succeeds, so the first failure's
// reason must be kept when it happens (issue 31 item 12: `predict ... > /dev/full` exited 0
// with its output lost).
#pragma once

namespace mixprec::cli {

// Flushes stdout; false when this or an earlier write to it failed (the first failure's errno
// is kept for finish_stdout). For output streamed as it is made (generate).
bool flush_stdout();

// At the end of every command (main.cpp): flush_stdout(), and when anything printed was lost
// prints "mixprec: cannot write the output: No space left on device" on stderr (once) and
// returns false; the exit code is then 1 (docs/cli.md) unless the command failed already.
bool finish_stdout();

}  // namespace mixprec::cli

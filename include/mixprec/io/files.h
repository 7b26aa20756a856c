// files.h: reading a file mixprec did not write itself. Every such reader (checkpoints,
// datasets, pointers, metrics logs, config.json, images, CSV and .npy inputs) opens it through
// open_regular_file, so that a FIFO, a directory or a device (/dev/zero, a tty) is refused at
// once instead of blocking forever or never ending.
#pragma once
#include <cstdint>
#include <string>

#include "mixprec/core/status.h"

namespace mixprec::io {

// Opens path read-only without blocking (O_NONBLOCK: opening a FIFO with no writer would
// otherwise wait forever), checks the descriptor itself with fstat (no window for a swap
// between check and open), refuses anything but a regular file, then clears O_NONBLOCK.
// Returns the descriptor (O_CLOEXEC; the caller closes it). `what` names the file's role in
// messages ("checkpoint", "metrics log", ...). Errors: not_found when path does not exist;
// data_loss naming the path when it is not a regular file (saying what it is: a directory, a
// FIFO, a character device, ...): the input is wrong, as for a corrupt file; io_error when
// the OS refuses to open it.
StatusOr<int> open_regular_file(const std::string& path, const std::string& what);

// The whole of a regular file (opened as above), refused with data_loss when it holds more
// than max_bytes (a pointer file is a few dozen bytes; a huge one is not ours): its size is
// checked before anything is read, and the message gives it.
StatusOr<std::string> read_regular_file(const std::string& path, const std::string& what,
                                        uint64_t max_bytes);

}  // namespace mixprec::io

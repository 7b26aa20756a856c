// dispatch_log.h: MIXPREC_VERBOSE=dispatch, the one switch and the one log for every kernel
// choice: the ops' route (ops/dispatch.h: which backend ran an op) and oneDNN's choice of
// implementation inside its backend (backend/onednn) both write here.
#pragma once
#include <functional>
#include <string>

namespace mixprec::backend {

// MIXPREC_VERBOSE contains "dispatch" (read once), unless a test set it.
bool dispatch_verbose();
void set_dispatch_verbose(bool on);

// Writes "mixprec: dispatch <text>" to stderr, once per distinct text.
void dispatch_log_line(const std::string& text);

// Tests: a sink set here receives every line's text (repeats included) instead of stderr;
// an empty function restores stderr.
void set_dispatch_sink(std::function<void(const std::string&)> sink);

}  // namespace mixprec::backend

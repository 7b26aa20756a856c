// exit_codes.h: what `mixprec` returns, documented in docs/cli.md. Scripts rely on these.
#pragma once
#include "mixprec/core/status.h"

namespace mixprec::cli {

enum ExitCode : int {
  kExitOk = 0,
  kExitRuntime = 1,     // unexpected runtime or library error
  kExitUsage = 2,       // bad flag or flag value (the message names the flag and accepted values)
  kExitData = 3,        // dataset missing, corrupt or truncated
  kExitCheckpoint = 4,  // checkpoint missing, corrupt or truncated
  kExitDiverged = 5,    // training produced a non-finite loss
  kExitBusy = 6,        // the run directory is in use by another mixprec process
  kExitDistributed = 7,  // mpirun job: the ranks disagree (config, data, binary, weights) or one stopped responding
  kExitMemory = 8,       // not enough memory: refused from the run's estimate, or an allocation failed
  kExitInterrupted = 130,  // Ctrl-C (128 + SIGINT, as a shell reports it); a checkpoint was saved
};

inline int exit_code_for(const Status& s) {
  switch (s.code()) {
    case StatusCode::ok: return kExitOk;
    case StatusCode::invalid_argument: return kExitUsage;
    case StatusCode::data_loss:
    case StatusCode::not_found: return kExitData;
    case StatusCode::diverged: return kExitDiverged;
    case StatusCode::bad_checkpoint: return kExitCheckpoint;
    case StatusCode::busy: return kExitBusy;
    case StatusCode::distributed: return kExitDistributed;
    case StatusCode::resource_exhausted: return kExitMemory;
    default: return kExitRuntime;
  }
}

}  // namespace mixprec::cli

"""Runs a command of the Python package's tests (pytest, an example) under AddressSanitizer +
UndefinedBehaviorSanitizer with leak checking, then reads the sanitizer logs with
lsan_ours.py. The one place that says how: scripts/sanitize's ctest (python/CMakeLists.txt
with MIXPREC_SANITIZE) and python/sanitize_module.sh both run their Python tests through it.

    run_sanitized.py --preload LIBASAN:LIBUBSAN --logs DIR -- COMMAND...

The interpreter is not instrumented, so the runtimes are preloaded (LD_PRELOAD) into COMMAND
only, not into this process (its own exit report would be the interpreter's). Exit status:
COMMAND's when it failed, else 1 when lsan_ours.py found an ASan/UBSan error or a leak with a
mixprec frame in any log under DIR (the CLI's too, when a test runs it), else COMMAND's (0,
or 77: all skipped)."""
import argparse
import os
import pathlib
import subprocess
import sys

import lsan_ours


def sanitizer_environment(preload, logs):
    env = dict(os.environ)
    env["LD_PRELOAD"] = preload
    # exitcode=86: an ASan error ends the process with a status of its own (the test fails);
    # log_path: the reports, leaks at exit included, go to DIR/lsan.PID for lsan_ours.py.
    env["ASAN_OPTIONS"] = f"detect_leaks=1:abort_on_error=0:exitcode=86:log_path={logs}/lsan"
    # exitcode=0: the exit leak report is read by lsan_ours.py (CPython leaves its own
    # objects to the OS at exit: those are not failures). use_tls=0: scanning the OpenMP
    # worker threads' thread-local storage crashes LeakSanitizer's tracer here ("Tracer
    # caught signal 11", no report at all); a block held only from TLS could then show as a
    # leak, which lsan_ours.py would name with its stack.
    env["LSAN_OPTIONS"] = "exitcode=0:use_tls=0"
    # The CLI that a test runs (helpers.cli_env) is an instrumented executable with no
    # dlopen'ed module: scanning its TLS works, and without it the thread-local scratch
    # buffers of its OpenMP workers (alive at exit) would show as leaks.
    env["MIXPREC_CLI_LSAN_OPTIONS"] = "exitcode=0"
    env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
    env["PYTHONMALLOC"] = "malloc"  # Python objects through malloc: ASan sees their lifetimes
    return env


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preload", required=True, help="LD_PRELOAD for COMMAND: libasan.so:libubsan.so")
    parser.add_argument("--logs", required=True, type=pathlib.Path, help="directory for the sanitizer logs")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to run")
    args.logs.mkdir(parents=True, exist_ok=True)
    for old in args.logs.glob("lsan.*"):  # a previous run's reports are not this run's
        old.unlink()
    status = subprocess.call(command, env=sanitizer_environment(args.preload, args.logs.resolve()))
    found = lsan_ours.main([str(p) for p in sorted(args.logs.glob("lsan.*"))])
    if status not in (0, 77):
        return status
    return found or status  # a finding fails even a file whose tests were all skipped


if __name__ == "__main__":
    sys.exit(main())

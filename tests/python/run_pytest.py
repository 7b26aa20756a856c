"""Runs one pytest file for ctest. Exit code 77 (ctest: skipped) when nothing in the file
ran, because everything in it was skipped (torch not installed, say): a file of skips is never
reported as passed. A file where nothing was collected at all fails."""
import sys

import pytest


class _Outcomes:
    def __init__(self):
        self.passed = self.failed = self.skipped = 0

    def pytest_runtest_logreport(self, report):
        if report.failed:
            self.failed += 1
        elif report.skipped:
            self.skipped += 1
        elif report.when == "call" and report.passed:
            self.passed += 1

    def pytest_collectreport(self, report):
        if report.skipped:
            self.skipped += 1
        elif report.failed:
            self.failed += 1


def main():
    outcomes = _Outcomes()
    rc = pytest.main(["-q", "-rs", "-p", "no:cacheprovider", *sys.argv[1:]], plugins=[outcomes])
    if outcomes.failed == 0 and outcomes.passed == 0 and outcomes.skipped > 0:
        print(f"run_pytest: all {outcomes.skipped} skipped: reporting the file as skipped (77)")
        return 77
    return int(rc)


if __name__ == "__main__":
    sys.exit(main())

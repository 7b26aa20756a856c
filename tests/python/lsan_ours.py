"""Reads the sanitizer logs of python/sanitize_module.sh: any AddressSanitizer or
UndefinedBehaviorSanitizer error fails; of LeakSanitizer's exit report only the leaks with a
frame in mixprec's code (the binding module or the library) count, since CPython leaves its
own objects to the OS at exit. Prints a summary; exit 1 if anything of ours was found."""
import re
import sys

OURS = re.compile(r"_mixprec\.cpython|mixprec::|libmixprec")
# Leaks that are by design, each with why. The first frame after the allocator must match.
KNOWN_AT_EXIT = {
    # A from_numpy tensor still alive when the interpreter finalises (a module global, a
    # cached weight) keeps its array's reference: release_python_object cannot hand it back
    # to a finalised interpreter (tensor.cpp). Releases while Python runs are checked by
    # test_memory.py's reference counts (10,000 from_numpy cycles leave the count unchanged).
    "mixprec::python::tensor_from_numpy": "py::object owner of a from_numpy tensor alive at exit",
}


def leaks(text):
    """The leak reports of one log: (header line, stack lines) each."""
    blocks = re.split(r"\n(?=(?:Direct|Indirect) leak of )", text)
    for block in blocks:
        if block.startswith(("Direct leak of ", "Indirect leak of ")):
            lines = block.strip().splitlines()
            yield lines[0], [line for line in lines[1:] if line.strip().startswith("#")]


def main(paths):
    errors, ours, by_design, theirs = [], [], [], 0
    for path in paths:
        text = open(path, errors="replace").read()
        for m in re.finditer(r"ERROR: (AddressSanitizer|UndefinedBehaviorSanitizer): .*", text):
            if "detected memory leaks" not in m.group(0):
                errors.append(f"{path}: {m.group(0)}")
        for m in re.finditer(r"(LeakSanitizer has encountered a fatal error|Tracer caught signal).*", text):
            errors.append(f"{path}: {m.group(0)} (no leak report: the check did not run)")
        for m in re.finditer(r"runtime error: .*", text):
            errors.append(f"{path}: {m.group(0)}")
        for header, stack in leaks(text):
            first = stack[1] if len(stack) > 1 else ""
            known = [why for name, why in KNOWN_AT_EXIT.items() if f" in {name}(" in first]
            if known:
                by_design.append(f"{header} ({known[0]})")
            elif any(OURS.search(frame) for frame in stack):
                ours.append(f"{path}: {header}\n    " + "\n    ".join(stack[:12]))
            else:
                theirs += 1
    for e in errors:
        print("sanitizer error:", e)
    for leak in ours:
        print("leak with a mixprec frame:", leak)
    for leak in by_design:
        print("known at-exit leak:", leak)
    print(f"lsan_ours: {len(paths)} logs, {len(errors)} sanitizer errors, {len(ours)} leaks with a "
          f"mixprec frame, {len(by_design)} known at exit, {theirs} leaks of the interpreter and "
          f"other libraries only (not ours)")
    return 1 if errors or ours else 0


if __name__ == "__main__":
    sys.exit(main([p for p in sys.argv[1:] if not p.endswith("*")]))

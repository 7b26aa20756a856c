"""Reads the sanitizer logs of python/sanitize_module.sh: any AddressSanitizer or
UndefinedBehaviorSanitizer error fails; of LeakSanitizer's exit report only the leaks with a
frame in mixprec's code (the binding module or the library) count, since CPython leaves its
own objects to the OS at exit. Prints a summary; exit 1 if anything of ours was found."""
import re
import sys

OURS = re.compile(r"_mixprec\.cpython|mixprec::|libmixprec")
# Leaks that are not leaks of ours, each with why: (pattern of the report's first line,
# pattern of its first frame after the allocator, why). Both must match.
KNOWN_AT_EXIT = [
    # A from_numpy tensor still alive when the interpreter finalises (a module global, a
    # cached weight) keeps its array's reference: release_python_object cannot hand it back
    # to a finalised interpreter (tensor.cpp). Releases while Python runs are checked by
    # test_memory.py's reference counts (10,000 from_numpy cycles leave the count unchanged).
    (r"", r" in mixprec::python::tensor_from_numpy\(", "py::object owner of a from_numpy tensor alive at exit"),
    # libgomp's per-thread ICVs: omp_set_num_threads (mixprec.set_num_threads) on a thread
    # outside a parallel region mallocs a struct gomp_task of 216 bytes (gomp_new_icv, through
    # gomp_malloc) and keeps it in its thread-local gomp_thread. Reachable, but only from TLS,
    # which run_sanitized.py's use_tls=0 leaves unscanned (scanning it crashes LeakSanitizer's
    # tracer here). libgomp has no symbols, so the frame is the library and the size: 216 bytes
    # per object, one per thread that set its thread count.
    (r"^Direct leak of (?P<bytes>\d+) byte\(s\) in (?P<objects>\d+) object", r"\(/\S*/libgomp\.so\.1\+0x[0-9a-f]+\)$",
     "libgomp's thread-local ICVs of a thread that called omp_set_num_threads (held from TLS)"),
]
GOMP_TASK_BYTES = 216  # sizeof(struct gomp_task), gcc 12's libgomp on x86-64


def known(header, first):
    """Why a leak report is not ours, or None."""
    for head_pattern, frame_pattern, why in KNOWN_AT_EXIT:
        head = re.search(head_pattern, header)
        if not head or not re.search(frame_pattern, first):
            continue
        sizes = head.groupdict()
        if sizes and int(sizes["bytes"]) != GOMP_TASK_BYTES * int(sizes["objects"]):
            continue  # another libgomp allocation: not the ICVs, so not known
        return why
    return None


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
            why = known(header, first)
            if why:
                by_design.append(f"{header} ({why})")
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

#!/usr/bin/env bash
# python/sanitize_module.sh: the Python package's tests under AddressSanitizer +
# UndefinedBehaviorSanitizer without a whole sanitized build (scripts/sanitize builds every
# target instrumented; on a loaded 2-core machine that takes hours). The binding
# (python/src/*.cpp: buffer protocol, from_numpy's owners, capsules, views, the GIL) is
# compiled instrumented into BUILD_DIR-asan-py/python/mixprec and linked against BUILD_DIR's
# ordinary libmixprec.a; the ASan runtime is preloaded into the (uninstrumented) interpreter,
# so its malloc/free interceptors see every allocation of the process and the binding's
# reads and writes are checked. The library's own loads and stores are not (scripts/sanitize
# covers those with its C++ tests).
#
#   python/sanitize_module.sh                         build, then every tests/python file
#   python/sanitize_module.sh tests/python/test_memory.py -k cycles     pytest arguments
#
# Leaks: CPython does not free its own objects at exit, so LeakSanitizer's exit report is
# full of the interpreter's; it is kept (logs under BUILD_DIR-asan-py/sanitizer-logs/) and
# only leaks with a frame in mixprec's code fail the run (tests/python/run_sanitized.py runs
# pytest with the runtimes preloaded, tests/python/lsan_ours.py reads the logs).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
OUT=${BUILD_DIR}-asan-py
link_txt=$BUILD_DIR/python/CMakeFiles/_mixprec.dir/link.txt
[[ -f $BUILD_DIR/libmixprec.a && -f $link_txt ]] || {
  echo "sanitize_module: build the library and the package first: cmake --build $BUILD_DIR --target _mixprec" >&2
  exit 2
}
CXX=${CXX:-c++}
# ccache when there: the instrumented objects of a rerun or of another checkout come back.
launcher=$(command -v ccache || true)
SAN=(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
mkdir -p "$OUT/obj" "$OUT/python/mixprec"
cp -r python/mixprec/. "$OUT/python/mixprec/"
objs=()
pyinclude=$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
jobs=0
for src in python/src/*.cpp; do
  obj=$OUT/obj/$(basename "$src" .cpp).o
  if [[ ! -f $obj || $src -nt $obj || python/src/bindings.h -nt $obj ]]; then
    echo "sanitize_module: compiling $src" >&2
    rm -f "$obj"  # a compile that fails leaves no object for the link, nor for the next run
    $launcher $CXX -O1 -g "${SAN[@]}" -fPIC -fvisibility=hidden -fopenmp -std=c++20 -Iinclude \
      -isystem "$pyinclude" -c "$src" -o "$obj" &
    # $(nproc) compiles at a time (pybind11's templates make each one long).
    if ((++jobs >= $(nproc))); then wait -n; ((jobs--)); fi
  fi
  objs+=("$obj")
done
wait
for obj in "${objs[@]}"; do
  [[ -f $obj ]] || { echo "sanitize_module: $obj did not compile" >&2; exit 1; }
done
# The libraries the ordinary module links (CMake's own link line, after its objects).
libs=$(sed -e 's/.*\.cpp\.o //' "$link_txt" | sed -e "s#\.\./libmixprec\.a#$BUILD_DIR/libmixprec.a#")
so=$OUT/python/mixprec/$(basename "$(ls "$BUILD_DIR"/python/mixprec/_mixprec*.so)")
echo "sanitize_module: linking $so" >&2
# shellcheck disable=SC2086
$CXX -shared -fPIC -O1 -flto "${SAN[@]}" -fopenmp -o "$so" "${objs[@]}" $libs

# The CLI beside the package, where the tests that compare with it look (not instrumented).
ln -sf "$PWD/$BUILD_DIR/mixprec" "$OUT/mixprec"

asan=$($CXX -print-file-name=libasan.so)
ubsan=$($CXX -print-file-name=libubsan.so)
export PYTHONPATH=$PWD/$OUT/python OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} MIXPREC_SOURCE_DIR=$PWD
[[ $# -gt 0 ]] || set -- tests/python
# The sanitizer environment (preload, leak checking, logs) and the reading of the logs are
# tests/python/run_sanitized.py's, as for scripts/sanitize's Python tests.
exec /usr/bin/python3 tests/python/run_sanitized.py --preload "$asan:$ubsan" --logs "$OUT/sanitizer-logs" \
  -- /usr/bin/python3 -m pytest -q -p no:cacheprovider "$@"

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
# full of the interpreter's; it is kept (log under BUILD_DIR-asan-py/lsan.*) and only leaks
# with a frame in mixprec's code fail the run (tests/python/lsan_ours.py reads the logs).
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
SAN=(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
mkdir -p "$OUT/obj" "$OUT/python/mixprec"
cp -r python/mixprec/. "$OUT/python/mixprec/"
objs=()
for src in python/src/*.cpp; do
  obj=$OUT/obj/$(basename "$src" .cpp).o
  if [[ ! -f $obj || $src -nt $obj || python/src/bindings.h -nt $obj ]]; then
    echo "sanitize_module: compiling $src" >&2
    $CXX -O1 -g "${SAN[@]}" -fPIC -fvisibility=hidden -fopenmp -std=c++20 -Iinclude \
      -isystem "$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')" \
      -c "$src" -o "$obj"
  fi
  objs+=("$obj")
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
rm -f "$OUT"/lsan.*
export LD_PRELOAD="$asan:$ubsan"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=86:log_path=$PWD/$OUT/lsan"
# exitcode=0: the exit report is read below, not taken as a failure. use_tls=0: scanning the
# OpenMP worker threads' thread-local storage crashes LeakSanitizer's tracer here ("Tracer
# caught signal 11", no report at all); without it a block held only from TLS could show as
# a leak, which lsan_ours.py would then name with its stack.
export LSAN_OPTIONS="exitcode=0:use_tls=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export PYTHONMALLOC=malloc  # Python objects through malloc: ASan sees their lifetimes too
export PYTHONPATH=$PWD/$OUT/python OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} MIXPREC_SOURCE_DIR=$PWD
[[ $# -gt 0 ]] || set -- tests/python
status=0
/usr/bin/python3 -m pytest -q -p no:cacheprovider "$@" || status=$?
unset LD_PRELOAD
/usr/bin/python3 tests/python/lsan_ours.py "$OUT"/lsan.* || status=$?
exit $status

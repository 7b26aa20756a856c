#!/usr/bin/env bash
# install_consumer_test.sh: `cmake --install` the build, then configure, build and run
# examples/consumer against it with find_package(mixprec), as another project would.
set -euo pipefail
BUILD_DIR=$1
SOURCE_DIR=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cmake --install "$BUILD_DIR" --prefix "$WORK/prefix" > "$WORK/install.log"
test -f "$WORK/prefix/include/mixprec/mixprec.h" || { echo "headers not installed"; exit 1; }
ls "$WORK"/prefix/lib*/cmake/mixprec/mixprecConfig.cmake > /dev/null || { echo "no CMake package"; exit 1; }
cmake -S "$SOURCE_DIR/examples/consumer" -B "$WORK/consumer" -DCMAKE_PREFIX_PATH="$WORK/prefix" \
  -DCMAKE_BUILD_TYPE=Release > "$WORK/configure.log" || { cat "$WORK/configure.log"; exit 1; }
cmake --build "$WORK/consumer" -j2 > "$WORK/build.log" || { cat "$WORK/build.log"; exit 1; }
"$WORK/consumer/consumer"

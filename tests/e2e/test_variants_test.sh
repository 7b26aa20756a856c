#!/usr/bin/env bash
# test_variants_test.sh: the unit tests' variants (tests/CMakeLists.txt: _no_avx512, _no_bf16,
# _scalar, onednn_half_emulation_test_bf16) run with the MIXPREC_CPU_DISABLE that makes them a
# variant. Until 2026-11-28 every variant ran on the default kernels: gtest_discover_tests had
# split ENVIRONMENT "OMP_NUM_THREADS=2;MIXPREC_CPU_DISABLE=..." at the semicolon and kept the
# first variable alone, and the variants all passed without testing their fallbacks. This
# reads what ctest would run (ctest -N -V: each test's environment) and fails on a variant
# without its variable, or with the wrong value.
set -uo pipefail
BUILD_DIR=$(cd "$1" && pwd)

listing=$(ctest --test-dir "$BUILD_DIR" -N -V -R '_no_avx512\.|_no_bf16\.|_scalar\.|half_emulation_test_bf16\.' 2>&1)
# Per test: its number's environment lines come before its "Test #N: name" line.
report=$(awk '
  /^[0-9]+: Environment variables:/ { split($1, a, ":"); num = a[1]; env[num] = ""; next }
  /^[0-9]+:  [A-Z_]+=/ { split($1, a, ":"); env[a[1]] = env[a[1]] " " $2; next }
  /Test +#[0-9]+:/ {
    match($0, /#[0-9]+:/); num = substr($0, RSTART + 1, RLENGTH - 2)
    rest = substr($0, RSTART + RLENGTH); sub(/^ +/, "", rest); split(rest, words, " "); name = words[1]
    want = ""
    if (name ~ /_no_avx512\./) want = "MIXPREC_CPU_DISABLE=avx512f,avx512bw,avx512vl"
    else if (name ~ /_no_bf16\./) want = "MIXPREC_CPU_DISABLE=avx512_bf16"
    else if (name ~ /_scalar\./) want = "MIXPREC_CPU_DISABLE=avx512f,avx512bw,avx512vl,avx2,fma"
    else if (name ~ /half_emulation_test_bf16\./) want = "MIXPREC_CPU_DISABLE=avx512f,avx512bw,avx512vl"
    n++
    if (index(env[num] " ", " " want " ") == 0) { bad++; print "BAD " name ": environment [" env[num] " ] lacks " want }
  }
  END { print "CHECKED " n + 0 " BAD " bad + 0 }' <<< "$listing")

echo "$report" | grep '^BAD ' | head -20
checked=$(sed -n 's/^CHECKED \([0-9]*\) BAD .*/\1/p' <<< "$report")
bad=$(sed -n 's/^CHECKED [0-9]* BAD \([0-9]*\)$/\1/p' <<< "$report")
# A listing that matched nothing (a renamed variant, an unbuilt tree) must fail too: the
# variant lists hold well over 100 tests.
if [[ -z $checked || $checked -lt 100 ]]; then
  echo "FAIL: only ${checked:-0} test variants found in $BUILD_DIR (expected over 100)"
  exit 1
fi
if [[ $bad -ne 0 ]]; then
  echo "FAIL: $bad of $checked test variants run without their MIXPREC_CPU_DISABLE"
  exit 1
fi
echo "PASS: $checked test variants each run with their MIXPREC_CPU_DISABLE"

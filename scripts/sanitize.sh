#!/usr/bin/env bash
# Builds the unit tests with AddressSanitizer + UndefinedBehaviorSanitizer and runs them.
# Expects the packages from scripts/setup.sh. Uses build-asan/ (BUILD_DIR to change).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-asan}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DPLANNER_SANITIZE=address,undefined \
  -DPLANNER_BUILD_GUI=OFF -DPLANNER_CUDA=OFF -DPLANNER_BUILD_BENCH=OFF
cmake --build "$BUILD_DIR" -j "$(nproc)" --target unit-tests
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir "$BUILD_DIR" -L unit --output-on-failure -j "$(nproc)"

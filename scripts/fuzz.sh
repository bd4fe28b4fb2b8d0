#!/usr/bin/env bash
# Builds planner's libFuzzer targets (fuzz/) with clang and runs each for SECONDS (default 60).
#
#   scripts/fuzz.sh [SECONDS]                      every target, SECONDS each
#   TARGETS="fuzz_topology" scripts/fuzz.sh 600    one target for 10 minutes
#   BUILD_DIR=out scripts/fuzz.sh                  build elsewhere (default build-fuzz/)
#   JOBS=1 scripts/fuzz.sh                         build with one job (default: every core)
#
# Every library is compiled with -fsanitize=fuzzer-no-link,address,undefined in a separate build
# directory (the normal GCC build is untouched). Seeds: the shipped presets, the plans and configs
# under tests/data/ and the bad-input corpora; what the fuzzer learns accumulates in
# $BUILD_DIR/corpus/<target>/. A crash, a sanitizer report, a leak, an input slower than 10 s or
# one using more than 2 GB fails the script, and the input is left in
# $BUILD_DIR/artifacts/<target>/: reproduce it with `$BUILD_DIR/bin/<target> FILE`, fix the bug,
# and add the file to the bad-input corpus (tests/data/bad*/, with its .expected) as a regression.
# Needs clang-14 and libclang-rt-14-dev (scripts/setup.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-60}
BUILD_DIR=${BUILD_DIR:-build-fuzz}
CC=${FUZZ_CC:-clang-14}
CXX=${FUZZ_CXX:-clang++-14}
TARGETS=${TARGETS:-fuzz_documents fuzz_hf_import fuzz_sweep_spec fuzz_topology}
MAX_LEN=${MAX_LEN:-16384}

sanitize="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# -O1 with line tables: fast to build, fast enough to fuzz, stack traces with lines; assertions on.
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_C_FLAGS="$sanitize" -DCMAKE_CXX_FLAGS="$sanitize" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DPLANNER_BUILD_FUZZ=ON -DPLANNER_WERROR=OFF -DPLANNER_BUILD_TESTS=OFF -DPLANNER_BUILD_BENCH=OFF \
  -DPLANNER_BUILD_GUI=OFF -DPLANNER_BUILD_EXECUTOR=OFF -DPLANNER_CUDA=OFF >/dev/null
# shellcheck disable=SC2086
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target $TARGETS

# Seed folders per target (read-only; the fuzzer writes new inputs to the first folder only).
seeds() {
  case "$1" in
    fuzz_documents)
      echo core/presets/gpus core/presets/models core/presets/profiles core/presets/prices \
        scripts/calibration-plans tests/data/exec tests/data/reference tests/data/bad ;;
    fuzz_hf_import) echo tests/data/hf tests/data/bad-hf ;;
    fuzz_sweep_spec) echo fuzz/seeds/sweep tests/data/bad-sweep ;;
    fuzz_topology) echo topologies/presets tests/data/bad-topology ;;
  esac
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=()
for t in $TARGETS; do
  corpus="$BUILD_DIR/corpus/$t"
  artifacts="$BUILD_DIR/artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  dirs=()
  for d in $(seeds "$t"); do
    [ -d "$d" ] && dirs+=("$d")
  done
  echo "=== $t: ${SECONDS_PER_TARGET} s (seeds: ${dirs[*]})"
  if ! "$BUILD_DIR/bin/$t" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 \
      -max_len="$MAX_LEN" -dict=fuzz/json.dict -artifact_prefix="$artifacts/" \
      -print_final_stats=1 "$corpus" "${dirs[@]}" >"$BUILD_DIR/$t.log" 2>&1; then
    failed+=("$t")
    tail -n 60 "$BUILD_DIR/$t.log"
    echo "=== $t FAILED: reproducer(s) in $artifacts/ (log: $BUILD_DIR/$t.log)"
  else
    grep -E "^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)" "$BUILD_DIR/$t.log" |
      tr '\n' ' '
    echo
  fi
done
if ((${#failed[@]})); then
  echo "fuzz: ${#failed[@]} target(s) failed: ${failed[*]}"
  exit 1
fi
echo "fuzz: every target ran ${SECONDS_PER_TARGET} s without a failure"

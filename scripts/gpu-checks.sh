#!/usr/bin/env bash
# The GPU checks on binaries already built (scripts/gpu-bench.sh builds them here; a bundle from
# scripts/gpu-bundle.sh carries them to another machine): runs the `gpu` tests (every CUDA kernel
# against the CPU kernel; the cuda backend's loss curves against the cpu backend's, NCCL
# collectives against MPI's, fp16 loss scaling, bounded waits; the 2-rank tests when the machine
# has 2 GPUs), the GPU benchmarks (cuBLAS GEMMs on real models' shapes, fused attention,
# memory-bound kernels) with a JSON profile of the measurements and their provenance, and trains
# single-GPU plans through `planner exec --backend cuda` (a tiny GPT in bf16, fp16 and fp32, and
# Megatron's 1.7B model in bf16 when it fits the GPU), recording them in a database.
#
#   scripts/gpu-checks.sh BIN_DIR
#
# BIN_DIR holds planner, kernels_cuda_gpu_test, exec_cuda_gpu_1_test, exec_cuda_gpu_2_test and
# bench_cuda_kernels (the cuda backend module beside them at ../lib/planner). Environment (all
# optional):
#   OUT_DIR       results directory (default out/gpu-checks-<UTC date>)
#   GPU_PRESET    planner GPU preset for the peaks (default: matched from the device name)
#   BENCH_FILTER  Google Benchmark regex to run a subset (default: everything; each benchmark times
#                 10 batches of about 20 ms)
#   PLANNER_MPIRUN  the mpirun to start ranks with (default: mpirun on the PATH)
#   CUDA_VISIBLE_DEVICES  which GPU (the tests and benchmarks use device 0 of those visible)
#
# Writes into OUT_DIR:
#   gpu-tests.log, <test>*.xml     the gpu tests' output and JUnit reports (one a rank)
#   bench.json                     Google Benchmark's full output
#   gpu-profile.json               the summary ("kind": "gpu_benchmark"): GPU, driver, CUDA, cuBLAS and
#                                  NCCL versions, date, host, planner commit, the preset's peaks, and
#                                  per shape TFLOP/s or GB/s with the fraction of peak
#   exec-<plan>.json, exec-<plan>.log   `planner exec --backend cuda --json` of each plan (losses,
#                                  step time, tokens/s, peak memory, MFU) and its progress lines
#   runs.db                        the exec runs, op by op (planner db list / show / export)
#   nvidia-smi.txt                 `nvidia-smi -q` at the start
# Exits 1 when a gpu test fails, the benchmarks cannot run or a plan fails to train, 2 when BIN_DIR
# lacks a binary; without a GPU the tests and the benchmarks say that they skipped, planner exec
# says that the cuda backend needs a GPU, and the script exits 0.
set -euo pipefail

if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 BIN_DIR (a folder with planner and the gpu test binaries)" >&2
  exit 2
fi
BIN=$(cd "$1" && pwd)
for b in planner kernels_cuda_gpu_test exec_cuda_gpu_1_test exec_cuda_gpu_2_test bench_cuda_kernels; do
  if [ ! -x "$BIN/$b" ]; then
    echo "gpu-checks: $BIN/$b: no such program (build the cuda backend's targets first)" >&2
    exit 2
  fi
done
OUT_DIR=${OUT_DIR:-out/gpu-checks-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
MPIRUN=${PLANNER_MPIRUN:-mpirun}
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

driver=""
gpu_count=0
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi -q >"$OUT_DIR/nvidia-smi.txt" 2>&1 || true
  driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1 || true)
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv || true
  gpu_count=$(nvidia-smi --list-gpus 2>/dev/null | wc -l || true)
else
  echo "gpu-checks: nvidia-smi not found: no GPU driver here, so the gpu tests and benchmarks will skip"
fi

# The gpu tests: gtest binaries, the exec ones under mpirun with as many ranks as their name says.
# Every rank writes its own JUnit report (NAME.xml, or NAME.rank-R.xml under mpirun); rank 0's is
# counted (the test main reduces each test's result over the ranks).
tests="passed"
passed=0 failed=0 skipped=0
: >"$OUT_DIR/gpu-tests.log"
# run_test NAME RANKS: runs $BIN/NAME alone (RANKS 0) or under mpirun with RANKS ranks.
run_test() {
  local name=$1 ranks=$2 report
  echo "gpu-checks: $name" | tee -a "$OUT_DIR/gpu-tests.log"
  local status=0
  if [ "$ranks" -eq 0 ]; then
    report="$OUT_DIR/$name.xml"
    "$BIN/$name" --gtest_output="xml:$report" >>"$OUT_DIR/gpu-tests.log" 2>&1 || status=$?
  else
    report="$OUT_DIR/$name.rank-0.xml"
    "$MPIRUN" -n "$ranks" bash -c 'exec "$0" --gtest_output="xml:$1.rank-${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}.xml"' \
      "$BIN/$name" "$OUT_DIR/$name" >>"$OUT_DIR/gpu-tests.log" 2>&1 || status=$?
  fi
  [ "$status" -eq 0 ] || tests="failed"
  local counts skips
  counts=$(sed -n 's/.*<testsuites tests="\([0-9]*\)" failures="\([0-9]*\)" disabled="[0-9]*" errors="\([0-9]*\)".*/\1 \2 \3/p' \
    "$report" 2>/dev/null || true)
  skips=$(grep -c 'result="skipped"' "$report" 2>/dev/null || true)
  if [ -z "$counts" ]; then
    echo "gpu-checks: $name wrote no report" | tee -a "$OUT_DIR/gpu-tests.log"
    tests="failed"
    return
  fi
  read -r n f e <<<"$counts"
  failed=$((failed + f + e))
  skipped=$((skipped + skips))
  passed=$((passed + n - f - e - skips))
}
run_test kernels_cuda_gpu_test 0
run_test exec_cuda_gpu_1_test 1
if [ "$gpu_count" -ge 2 ]; then
  run_test exec_cuda_gpu_2_test 2
fi
summary="$passed passed, $failed failed, $skipped skipped"
echo "gpu-checks: gpu tests $tests: $summary"

bench_args=(--summary_json="$OUT_DIR/gpu-profile.json" --gpu_tests="$tests: $summary"
  --benchmark_out="$OUT_DIR/bench.json" --benchmark_out_format=json)
[ -n "$driver" ] && bench_args+=(--driver_version="$driver")
[ -n "${GPU_PRESET:-}" ] && bench_args+=(--gpu_preset="$GPU_PRESET")
[ -n "${BENCH_FILTER:-}" ] && bench_args+=(--benchmark_filter="$BENCH_FILTER")
"$BIN/bench_cuda_kernels" "${bench_args[@]}"

# Single-GPU plans through planner exec on the GPU preset the benchmark matched (or GPU_PRESET).
planner="$BIN/planner"
matched=$(sed -n 's/.*"gpu_preset": *"\([^"]*\)".*/\1/p' "$OUT_DIR/gpu-profile.json" 2>/dev/null |
  head -n 1 || true)
preset=${GPU_PRESET:-${matched:-H100-SXM5-80GB}}
exec_status="passed"
# plan NAME MODEL PRECISION GBS SEQ MICRO_BATCH RECOMPUTE: writes $OUT_DIR/plan-NAME.json.
plan() {
  cat >"$OUT_DIR/plan-$1.json" <<JSON
{
  "schema_version": 1, "kind": "plan", "name": "$1 on one $preset",
  "model": "$2",
  "cluster": {"nodes": 1, "gpus_per_node": 1, "gpu": "$preset"},
  "training": {"global_batch_size": $4, "seq_length": $5, "precision": "$3", "seed": 1234},
  "parallel": {"tp": 1, "pp": 1, "micro_batch_size": $6, "recompute": "$7"}
}
JSON
}
plan gpt-tiny-bf16 gpt-tiny bf16 8 64 2 none
plan gpt-tiny-fp16 gpt-tiny fp16 8 64 2 none
plan gpt-tiny-fp32 gpt-tiny fp32 8 64 2 none
plan megatron-1.7b-bf16 megatron-1.7b bf16 8 2048 1 selective
for name in gpt-tiny-bf16 gpt-tiny-fp16 gpt-tiny-fp32 megatron-1.7b-bf16; do
  steps=20
  [ "$name" = megatron-1.7b-bf16 ] && steps=10
  if PLANNER_MPIRUN="$MPIRUN" "$planner" exec "$OUT_DIR/plan-$name.json" --backend cuda \
    --launch local -n 1 --steps "$steps" --warmup 3 --db "$OUT_DIR/runs.db" --json \
    >"$OUT_DIR/exec-$name.json" 2>"$OUT_DIR/exec-$name.log"; then
    echo "gpu-checks: planner exec $name: $(tr -d '\n ' <"$OUT_DIR/exec-$name.json" | head -c 300)"
  else
    code=$?
    echo "gpu-checks: planner exec $name exited $code: $(tail -n 3 "$OUT_DIR/exec-$name.log")"
    # Without a GPU the cuda backend refuses (exit 1, expected); a plan too large for this GPU is
    # refused as bad input (exit 2, skipped). Anything else on a GPU machine is a failure.
    if [ "$gpu_count" -gt 0 ] && [ "$code" -ne 2 ]; then exec_status="failed"; fi
  fi
done

echo "gpu-checks: results in $OUT_DIR (gpu tests $tests, planner exec $exec_status)"
[ "$tests" = "passed" ] && [ "$exec_status" = "passed" ]

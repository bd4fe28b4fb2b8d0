#!/usr/bin/env bash
# The GPU checks in one command, for a machine with an NVIDIA GPU, the CUDA toolkit and NCCL:
# builds planner's cuda backend for this GPU; runs the `gpu` tests (every CUDA kernel against the
# CPU kernel; the cuda backend's loss curves against the cpu backend's, NCCL collectives against
# MPI's, fp16 loss scaling, bounded waits; the 2-rank tests need 2 GPUs and skip otherwise); runs
# the GPU benchmarks (cuBLAS GEMMs on real models' shapes, fused attention, memory-bound kernels)
# and writes a JSON profile of the measurements with their provenance; then trains single-GPU plans
# through `planner exec --backend cuda` (a tiny GPT in bf16, fp16 and fp32, and Megatron's 1.7B
# model in bf16 when it fits the GPU), recording them in a database.
#
#   scripts/gpu-bench.sh
#   OUT_DIR=out/h100 GPU_PRESET=h100-sxm5-80gb BENCH_FILTER='Gemm/llama3' scripts/gpu-bench.sh
#
# Environment (all optional):
#   BUILD_DIR     build directory (default build-gpu)
#   BUILD_TYPE    CMake build type (default RelWithDebInfo, the project's default; device code is
#                 optimised the same way in every build type)
#   OUT_DIR       results directory (default out/gpu-bench-<UTC date>)
#   CUDA_ARCHS    CMAKE_CUDA_ARCHITECTURES (default native: the GPUs of this machine)
#   GPU_PRESET    planner GPU preset for the peaks (default: matched from the device name)
#   BENCH_FILTER  Google Benchmark regex to run a subset (default: everything, ~10 minutes on an H100)
#   CUDA_VISIBLE_DEVICES  which GPU (the tests and benchmarks use device 0 of those visible)
#
# Writes into OUT_DIR:
#   gpu-tests.log, gpu-tests.xml   ctest output and JUnit report of `ctest -L gpu`
#   bench.json                     Google Benchmark's full output
#   gpu-profile.json               the summary ("kind": "gpu_benchmark"): GPU, driver, CUDA, cuBLAS and
#                                  NCCL versions, date, host, planner commit, the preset's peaks, and
#                                  per shape TFLOP/s or GB/s with the fraction of peak
#   exec-<plan>.json, exec-<plan>.log   `planner exec --backend cuda --json` of each plan (losses,
#                                  step time, tokens/s, peak memory, MFU) and its progress lines
#   runs.db                        the exec runs, op by op (planner db list / show / export)
#   nvidia-smi.txt                 `nvidia-smi -q` at the start
# Exits 1 when a gpu test fails, the benchmarks cannot run or a plan fails to train; without a GPU
# the tests and the benchmarks say that they skipped, planner exec says that the cuda backend needs
# a GPU, and the script exits 0.
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-gpu}
BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo}
OUT_DIR=${OUT_DIR:-out/gpu-bench-$(date -u +%Y%m%dT%H%M%SZ)}
CUDA_ARCHS=${CUDA_ARCHS:-native}
mkdir -p "$OUT_DIR"

driver=""
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi -q >"$OUT_DIR/nvidia-smi.txt" 2>&1 || true
  driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1 || true)
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv || true
else
  echo "gpu-bench: nvidia-smi not found: no GPU driver here, so the gpu tests and benchmarks will skip"
  CUDA_ARCHS=${CUDA_ARCHS/native/80;90}
fi

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" -DPLANNER_CUDA=ON \
  -DPLANNER_BUILD_GUI=OFF -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS"
cmake --build "$BUILD_DIR" -j "$(nproc)" --target kernels_cuda_gpu_test kernels_cuda_unit_test \
  exec_cuda_gpu_1_test exec_cuda_gpu_2_test bench_cuda_kernels planner

tests="passed"
if ! ctest --test-dir "$BUILD_DIR" -L gpu --output-on-failure -j 1 \
  --output-junit "$(realpath "$OUT_DIR")/gpu-tests.xml" 2>&1 | tee "$OUT_DIR/gpu-tests.log"; then
  tests="failed"
fi
summary=$(grep -E "tests passed|tests failed" "$OUT_DIR/gpu-tests.log" | tail -n 1 || true)
skipped=$(grep -c "(Skipped)" "$OUT_DIR/gpu-tests.log" || true)
echo "gpu-bench: gpu tests $tests: $summary ($skipped skipped)"

bench_args=(--summary_json="$OUT_DIR/gpu-profile.json" --gpu_tests="$tests: $summary ($skipped skipped)"
  --benchmark_out="$OUT_DIR/bench.json" --benchmark_out_format=json)
[ -n "$driver" ] && bench_args+=(--driver_version="$driver")
[ -n "${GPU_PRESET:-}" ] && bench_args+=(--gpu_preset="$GPU_PRESET")
[ -n "${BENCH_FILTER:-}" ] && bench_args+=(--benchmark_filter="$BENCH_FILTER")
"$BUILD_DIR/bin/bench_cuda_kernels" "${bench_args[@]}"

# Single-GPU plans through planner exec on the GPU preset the benchmark matched (or GPU_PRESET).
planner="$BUILD_DIR/bin/planner"
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
gpu_count=$(nvidia-smi --list-gpus 2>/dev/null | wc -l || true)
for name in gpt-tiny-bf16 gpt-tiny-fp16 gpt-tiny-fp32 megatron-1.7b-bf16; do
  steps=20
  [ "$name" = megatron-1.7b-bf16 ] && steps=10
  if "$planner" exec "$OUT_DIR/plan-$name.json" --backend cuda --launch local -n 1 \
    --steps "$steps" --warmup 3 --db "$OUT_DIR/runs.db" --json \
    >"$OUT_DIR/exec-$name.json" 2>"$OUT_DIR/exec-$name.log"; then
    echo "gpu-bench: planner exec $name: $(tr -d '\n ' <"$OUT_DIR/exec-$name.json" | head -c 300)"
  else
    code=$?
    echo "gpu-bench: planner exec $name exited $code: $(tail -n 3 "$OUT_DIR/exec-$name.log")"
    # Without a GPU the cuda backend refuses (exit 1, expected); a plan too large for this GPU is
    # refused as bad input (exit 2, skipped). Anything else on a GPU machine is a failure.
    if [ "${gpu_count:-0}" -gt 0 ] && [ "$code" -ne 2 ]; then exec_status="failed"; fi
  fi
done

echo "gpu-bench: results in $OUT_DIR (gpu tests $tests, planner exec $exec_status)"
[ "$tests" = "passed" ] && [ "$exec_status" = "passed" ]

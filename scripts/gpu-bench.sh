#!/usr/bin/env bash
# The GPU checks in one command, for a machine with an NVIDIA GPU, the CUDA toolkit and NCCL:
# builds planner's cuda backend for this GPU, runs the `gpu` tests (every CUDA kernel against the
# CPU kernel) and the GPU benchmarks (cuBLAS GEMMs on real models' shapes, fused attention,
# memory-bound kernels), and writes a JSON profile of the measurements with their provenance.
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
#   nvidia-smi.txt                 `nvidia-smi -q` at the start
# Exits 1 when a gpu test fails or the benchmarks cannot run; without a GPU the tests and the
# benchmarks say that they skipped and the script exits 0.
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
  bench_cuda_kernels

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

echo "gpu-bench: results in $OUT_DIR"
[ "$tests" = "passed" ]

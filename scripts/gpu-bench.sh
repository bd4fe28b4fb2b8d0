#!/usr/bin/env bash
# The GPU checks in one command, for a machine with an NVIDIA GPU, the CUDA toolkit and NCCL:
# builds planner's cuda backend for this GPU, then runs scripts/gpu-checks.sh on what it built:
# the `gpu` tests (every CUDA kernel against the CPU kernel; the cuda backend's loss curves
# against the cpu backend's, NCCL collectives against MPI's, fp16 loss scaling, bounded waits;
# the 2-rank tests need 2 GPUs and are left out otherwise), the GPU benchmarks (cuBLAS GEMMs on
# real models' shapes, fused attention, memory-bound kernels) with a JSON profile of the
# measurements and their provenance, and single-GPU plans trained through `planner exec --backend
# cuda` (a tiny GPT in bf16, fp16 and fp32, and Megatron's 1.7B model in bf16 when it fits the
# GPU), recorded in a database. For a GPU machine without the build's dependencies (no compiler,
# MPI or SQLite there), build here and carry scripts/gpu-bundle.sh's folder instead.
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
#   GPU_PRESET, BENCH_FILTER, PLANNER_MPIRUN, CUDA_VISIBLE_DEVICES: see scripts/gpu-checks.sh
#
# Writes into OUT_DIR what scripts/gpu-checks.sh writes (the tests' logs and JUnit reports,
# bench.json, gpu-profile.json, exec-<plan>.json and .log, runs.db, nvidia-smi.txt). Exits as it
# does: 1 when a gpu test fails, the benchmarks cannot run or a plan fails to train; without a GPU
# the tests and the benchmarks say that they skipped, planner exec says that the cuda backend
# needs a GPU, and the script exits 0.
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-gpu}
BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo}
export OUT_DIR=${OUT_DIR:-out/gpu-bench-$(date -u +%Y%m%dT%H%M%SZ)}
CUDA_ARCHS=${CUDA_ARCHS:-native}
if ! command -v nvidia-smi >/dev/null 2>&1; then
  CUDA_ARCHS=${CUDA_ARCHS/native/80;90}  # no GPU to detect the architecture of
fi

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" -DPLANNER_CUDA=ON \
  -DPLANNER_BUILD_GUI=OFF -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS"
cmake --build "$BUILD_DIR" -j "$(nproc)" --target kernels_cuda_gpu_test kernels_cuda_unit_test \
  exec_cuda_gpu_1_test exec_cuda_gpu_2_test bench_cuda_kernels planner planner_cuda_backend
exec scripts/gpu-checks.sh "$BUILD_DIR/bin"

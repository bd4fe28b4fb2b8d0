#!/usr/bin/env bash
# Installs everything planner needs from Debian 12 packages, then configures and builds it.
#
#   scripts/setup.sh                 install (when something is missing), configure, build into build/:
#                                    first planner and planner-gui (the main job), then everything else
#                                    (tests, benchmarks)
#   scripts/setup.sh --main          only planner and planner-gui: the quickest way to the main job
#   BUILD_DIR=out scripts/setup.sh   build elsewhere
#   BUILD_TYPE=Debug scripts/setup.sh
#   PLANNER_CMAKE_ARGS="-DPLANNER_CUDA=OFF" scripts/setup.sh
#
# Idempotent: packages already installed are not reinstalled, and an existing build directory is
# reused. CUDA and NCCL are not Debian packages: when the CUDA toolkit is installed in its standard
# location (or CUDAToolkit_ROOT / NCCL_HOME point at it) the cuda backend is built too; otherwise
# configure says so and builds everything else. clang-14 and its runtime libraries are for the
# fuzz targets (scripts/fuzz.sh), which build separately; the main build uses the default compiler.
# llvm-14 brings llvm-symbolizer, which puts file and line into the fuzzers' crash reports;
# scripts/fuzz.sh compiles through ccache when it is there.
set -euo pipefail

cd "$(dirname "$0")/.."
only_main=0
for arg in "$@"; do
  case "$arg" in
    --main) only_main=1 ;;
    *) echo "setup: unknown argument $arg (expected --main)" >&2; exit 2 ;;
  esac
done
BUILD_DIR=${BUILD_DIR:-build}
BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo}

packages=(
  build-essential cmake ninja-build git pkg-config
  nlohmann-json3-dev libcli11-dev
  libsqlite3-dev sqlite3
  libboost-graph-dev
  libopenmpi-dev openmpi-bin
  libopenblas-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  qt6-base-dev qt6-base-dev-tools libqt6charts6-dev libqt6opengl6-dev libqt6svg6-dev
  libxkbcommon-dev libvulkan-dev libgl-dev
  fonts-dejavu-core xvfb xauth
  slurm-wlm slurmctld slurmd
  jq
  clang-14 libclang-rt-14-dev llvm-14 ccache
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "setup: installing ${#missing[@]} Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "setup: all Debian packages present"
fi

# shellcheck disable=SC2086
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" ${PLANNER_CMAKE_ARGS:-}
# The main job's binaries first, so that they are usable as early as possible.
main_targets=(planner)
if [[ "$(cmake --build "$BUILD_DIR" --target help)" == *planner-gui* ]]; then
  main_targets+=(planner-gui)
fi
cmake --build "$BUILD_DIR" -j "$(nproc)" --target "${main_targets[@]}"
if ((only_main)); then
  echo "setup: built ${main_targets[*]} into $BUILD_DIR/bin (scripts/setup.sh without --main builds the rest)"
  exit 0
fi
cmake --build "$BUILD_DIR" -j "$(nproc)"
echo "setup: built into $BUILD_DIR/ (binaries in $BUILD_DIR/bin)"

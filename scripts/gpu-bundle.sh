#!/usr/bin/env bash
# Packs planner's GPU checks into a folder that runs on another machine: one with an NVIDIA driver
# and the CUDA libraries (cuBLAS, NCCL) but none of the build's other dependencies, such as the
# GPU nodes of a cluster or a fresh CUDA image. Builds the cuda backend's targets here (or uses
# them as built), then copies into BUNDLE:
#   bin/              planner, the gpu test binaries and bench_cuda_kernels, debug info stripped
#   lib/planner/      the cuda backend module (libplanner_cuda_backend.so)
#   lib/deps/         every shared library they load that is not the C runtime, libstdc++ or CUDA's
#                     (SQLite, OpenBLAS, Open MPI's libraries, Google Benchmark, hwloc, libevent, ...)
#   mpi/, pmix/       Open MPI's launcher, plugins and help files, and PMIx's, relocated (OPAL_PREFIX,
#                     PMIX_INSTALL_PREFIX)
#   env.sh            sets the environment: the folders above, and cuBLAS and NCCL found on the
#                     target (CUDA_LIB_DIRS, else /usr/local/cuda*/lib64 or the nvidia-* Python wheels)
#   gpu-checks.sh     scripts/gpu-checks.sh, run on the bundled binaries:
#                       BUNDLE/gpu-checks.sh [OUT_DIR]
# The target needs x86-64 Linux with glibc and libstdc++ at least as new as this machine's.
#
#   scripts/gpu-bundle.sh [BUNDLE]          (default out/gpu-bundle)
#   BUILD_DIR=build-gpu NO_BUILD=1 scripts/gpu-bundle.sh /tmp/bundle && tar -C /tmp -czf bundle.tgz bundle
#
# Environment: BUILD_DIR (default build), NO_BUILD=1 to use the binaries as built. Exits 2 when the
# build has no cuda backend (configure found no CUDA toolkit) or a library cannot be found.
set -euo pipefail

cd "$(dirname "$0")/.."
SRC=$(pwd)
BUILD_DIR=${BUILD_DIR:-build}
BUNDLE=${1:-out/gpu-bundle}
programs=(planner kernels_cuda_gpu_test exec_cuda_gpu_1_test exec_cuda_gpu_2_test bench_cuda_kernels)

fail() {
  echo "gpu-bundle: $*" >&2
  exit 2
}
[ -f "$BUILD_DIR/CMakeCache.txt" ] || fail "$BUILD_DIR is not a configured build (scripts/setup.sh makes one)"
if [ -z "${NO_BUILD:-}" ]; then
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target "${programs[@]}" planner_cuda_backend
fi
module="$BUILD_DIR/lib/planner/libplanner_cuda_backend.so"
[ -f "$module" ] || fail "$module: no such file: this build has no cuda backend (configure found no CUDA toolkit)"
for p in "${programs[@]}"; do
  [ -x "$BUILD_DIR/bin/$p" ] || fail "$BUILD_DIR/bin/$p: no such program"
done

rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/bin" "$BUNDLE/lib/planner" "$BUNDLE/lib/deps"
BUNDLE=$(cd "$BUNDLE" && pwd)
for p in "${programs[@]}"; do
  objcopy --strip-debug "$BUILD_DIR/bin/$p" "$BUNDLE/bin/$p"
done
objcopy --strip-debug "$module" "$BUNDLE/lib/planner/$(basename "$module")"

# Libraries the target provides itself: the C runtime and the compiler's, the CUDA driver's and
# the CUDA toolkit's (the driver must match the machine; cuBLAS and NCCL come with its CUDA).
provided='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libutil\.|libresolv\.|libstdc\+\+\.|libgcc_s\.|libcuda\.|libnvidia|libcublas|libcublasLt|libnccl|libcudart)'
# copy_deps ONLY FILE...: every library FILE loads (ldd resolves them transitively) whose name
# matches the regex ONLY, into lib/deps. With ONLY '.', a library this machine cannot find fails
# the bundle; with a narrower ONLY it is left out (an Open MPI plugin for a fabric this machine
# lacks: Open MPI skips a plugin it cannot load).
copy_deps() {
  local only=$1 f name arrow path
  shift
  for f in "$@"; do
    while read -r name arrow path _; do
      [ "$arrow" = "=>" ] || continue
      [[ "$name" =~ $provided ]] && continue
      [[ "$name" =~ $only ]] || continue
      if [ "$path" = "not" ]; then
        [ "$only" = "." ] && fail "$f needs $name, which this machine cannot find"
        continue
      fi
      [ -e "$BUNDLE/lib/deps/$name" ] || cp -L "$path" "$BUNDLE/lib/deps/$name"
    done < <(ldd "$f" 2>/dev/null)
  done
}
copy_deps . "$BUNDLE"/bin/* "$BUNDLE"/lib/planner/*.so

# Open MPI, relocatable under OPAL_PREFIX: its install paths relative to its prefix.
command -v ompi_info >/dev/null 2>&1 || fail "ompi_info not found: Open MPI's launcher cannot be bundled"
ompi_path() { ompi_info --path "$1" --parsable | sed -n "s/^path:$1:\(.*\)/\1/p"; }
prefix=$(ompi_path prefix)
mkdir -p "$BUNDLE/mpi"
# The plugins and help files; the libraries themselves are in lib/deps (Open MPI's libdir holds
# only links to them and headers).
for what in pkglibdir pkgdatadir; do
  dir=$(ompi_path "$what")
  rel=${dir#"$prefix"/}
  [ "$rel" != "$dir" ] || fail "Open MPI's $what ($dir) is not under its prefix ($prefix)"
  mkdir -p "$BUNDLE/mpi/$rel"
  cp -a "$dir/." "$BUNDLE/mpi/$rel/"
  if [ "$what" = pkglibdir ]; then plugins_rel=$rel; fi
done
bindir=$(ompi_path bindir)
bindir_rel=${bindir#"$prefix"/}
mkdir -p "$BUNDLE/mpi/$bindir_rel"
for b in orterun orted; do
  [ -x "$bindir/$b" ] || fail "$bindir/$b: no such program (Open MPI 4 launches ranks with it)"
  cp -L "$bindir/$b" "$BUNDLE/mpi/$bindir_rel/$b"
done
ln -s orterun "$BUNDLE/mpi/$bindir_rel/mpirun"
# The launcher's and the plugins' own libraries: PMIx, hwloc, libevent and Open MPI's (those of
# fabrics such as UCX or libfabric are left out).
copy_deps '^lib(pmix|hwloc|event|open-|mpi|mca_common|z\.|udev|numa)' \
  "$BUNDLE/mpi/$plugins_rel"/*.so "$BUNDLE/mpi/$bindir_rel"/orte*
# PMIx (Open MPI 4 starts ranks through it): its prefix holds its own plugins.
pmix_lib=$(ldconfig -p | awk '$1 == "libpmix.so.2" && !seen {print $NF; seen = 1}')
if [ -n "$pmix_lib" ]; then
  pmix_prefix=$(dirname "$(dirname "$(readlink -f "$pmix_lib")")")
  mkdir -p "$BUNDLE/pmix"
  cp -a "$pmix_prefix/." "$BUNDLE/pmix/"
fi

cat >"$BUNDLE/env.sh" <<ENV
# Source me: planner's bundled binaries, their libraries, Open MPI and the target's CUDA libraries.
B=\$(cd "\$(dirname "\${BASH_SOURCE[0]}")" && pwd)
cuda_dirs=\${CUDA_LIB_DIRS:-}
if [ -z "\$cuda_dirs" ]; then
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-*/lib64 \\
      \$(python3 -c 'import glob, sys; print(" ".join(p for s in sys.path for p in glob.glob(s + "/nvidia/*/lib")))' 2>/dev/null); do
    if [ -e "\$d/libcublas.so.13" ] || [ -e "\$d/libcublas.so.12" ] || [ -e "\$d/libnccl.so.2" ]; then
      cuda_dirs=\${cuda_dirs:+\$cuda_dirs:}\$d
    fi
  done
fi
export OPAL_PREFIX="\$B/mpi" PMIX_INSTALL_PREFIX="\$B/pmix"
export PATH="\$B/mpi/$bindir_rel:\$B/bin:\$PATH"
export LD_LIBRARY_PATH="\$B/lib/deps\${cuda_dirs:+:\$cuda_dirs}\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export PLANNER_MPIRUN="\$B/mpi/$bindir_rel/orterun"
export OMPI_MCA_mca_base_component_show_load_errors=0 PMIX_MCA_pcompress_base_silence_warning=1
ENV
cp "$SRC/scripts/gpu-checks.sh" "$BUNDLE/gpu-checks-impl.sh"
cat >"$BUNDLE/gpu-checks.sh" <<'RUN'
#!/usr/bin/env bash
# The GPU checks on this bundle's binaries: gpu-checks.sh [OUT_DIR] (default ./gpu-checks-<date>).
set -euo pipefail
B=$(cd "$(dirname "$0")" && pwd)
source "$B/env.sh"
OUT_DIR=${1:-${OUT_DIR:-gpu-checks-$(date -u +%Y%m%dT%H%M%SZ)}} exec "$B/gpu-checks-impl.sh" "$B/bin"
RUN
chmod +x "$BUNDLE/gpu-checks.sh" "$BUNDLE/gpu-checks-impl.sh"
commit=$(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "planner $commit, built $(date -u +%Y-%m-%d) on $(uname -m) with $(ldd --version 2>&1 | sed -n 1p)" >"$BUNDLE/BUILD"
echo "gpu-bundle: $BUNDLE ($(du -sh "$BUNDLE" | cut -f1)); on the GPU machine: $BUNDLE/gpu-checks.sh [OUT_DIR]"

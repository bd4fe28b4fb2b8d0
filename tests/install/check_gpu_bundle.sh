#!/usr/bin/env bash
# scripts/gpu-bundle.sh packs the GPU checks so that they run where the build's libraries are not
# installed: every library the bundled programs load, other than the C runtime, libstdc++ and
# CUDA's, resolves inside the bundle; and the bundle's gpu-checks.sh runs (on a machine without a
# GPU every check skips and it exits 0) with this machine's Open MPI, PMIx, SQLite, OpenBLAS and
# Google Benchmark hidden (a private mount namespace; without the privilege for one, not hidden).
# On a machine with a GPU only the libraries and `planner --version` are checked (the checks
# themselves take minutes there: scripts/gpu-bench.sh).
# Usage: check_gpu_bundle.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
BUILD_DIR=$build NO_BUILD=1 "$src/scripts/gpu-bundle.sh" "$tmp/bundle" >"$tmp/bundle.log"
b=$tmp/bundle

provided='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libutil\.|libresolv\.|libstdc\+\+\.|libgcc_s\.|libcuda\.|libnvidia|libcublas|libcublasLt|libnccl|libcudart)'
(
  source "$b/env.sh"
  for f in "$b"/bin/* "$b"/lib/planner/*.so "$b"/mpi/bin/orterun "$b"/mpi/bin/orted; do
    while read -r name arrow path _; do
      [ "$arrow" = "=>" ] || continue
      [[ "$name" =~ $provided ]] && continue
      case "$path" in
        "$b"/*) ;;
        *) echo "FAIL: $f loads $name from $path, outside the bundle" >&2; exit 1 ;;
      esac
    done < <(ldd "$f")
  done
  "$b/bin/planner" --version >/dev/null
)

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "a GPU is present: the bundle's libraries checked, its checks not run (scripts/gpu-bench.sh)"
  exit 0
fi

# Hide what the bundle brings from this machine, then run its checks.
cat >"$tmp/hidden.sh" <<'HIDE'
set -eu
b=$1 out=$2
for name in $(ls "$b/lib/deps"); do
  for path in $(ldconfig -p | awk -v n="$name" '$1 == n {print $NF}'); do
    real=$(readlink -f "$path")
    [ -f "$real" ] && mount --bind /dev/null "$real"
  done
done
for d in $(ompi_info --path pkglibdir --parsable | cut -d: -f3) \
    $(ompi_info --path pkgdatadir --parsable | cut -d: -f3); do
  mount -t tmpfs none "$d"
done
for p in orterun orted; do
  [ -e "$(command -v $p)" ] && mount --bind /dev/null "$(readlink -f "$(command -v $p)")"
done
"$b/gpu-checks.sh" "$out"
HIDE
if unshare --mount true 2>/dev/null && command -v ompi_info >/dev/null; then
  unshare --mount bash "$tmp/hidden.sh" "$b" "$tmp/out" >"$tmp/checks.log" 2>&1 ||
    { cat "$tmp/checks.log"; echo "FAIL: the bundle's checks failed with this machine's libraries hidden" >&2; exit 1; }
  echo "bundle checks ran with the system's libraries hidden"
else
  "$b/gpu-checks.sh" "$tmp/out" >"$tmp/checks.log" 2>&1 ||
    { cat "$tmp/checks.log"; echo "FAIL: the bundle's checks failed" >&2; exit 1; }
  echo "bundle checks ran (no private mount namespace here: the system's libraries not hidden)"
fi
grep -q "gpu tests passed: 0 passed, 0 failed, [1-9][0-9]* skipped" "$tmp/checks.log" ||
  { cat "$tmp/checks.log"; echo "FAIL: the gpu tests did not all skip" >&2; exit 1; }
grep -q "exited 1: error: the cuda backend needs an NVIDIA GPU" "$tmp/checks.log" ||
  { cat "$tmp/checks.log"; echo "FAIL: planner exec did not refuse the cuda backend" >&2; exit 1; }
test -f "$tmp/out/kernels_cuda_gpu_test.xml"
test -f "$tmp/out/exec_cuda_gpu_1_test.rank-0.xml"
echo "gpu bundle check passed"

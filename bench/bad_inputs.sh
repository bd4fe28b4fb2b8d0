#!/usr/bin/env bash
# Every file of the bad-input corpora (tests/data/bad*/) through the command that reads it, as a user
# runs it: `planner validate FILE` for documents, topologies and sweep documents, `planner model import
# FILE` for Hugging Face configs. Prints a table per corpus (files, exit code 2, slowest wall time,
# largest peak RSS) and fails when a file exits with anything but 2 or takes more than LIMIT_S
# seconds (default 1) or LIMIT_MB MB of memory (default 200): the hardening bound for bad input.
#
#   bench/bad_inputs.sh [PLANNER]      default build/bin/planner
set -euo pipefail
cd "$(dirname "$0")/.."
P=${1:-build/bin/planner}
LIMIT_S=${LIMIT_S:-1}
LIMIT_MB=${LIMIT_MB:-200}
command -v /usr/bin/time >/dev/null || { echo "bad_inputs.sh: needs /usr/bin/time (apt-get install time)" >&2; exit 2; }
[ -x "$P" ] || { echo "bad_inputs.sh: $P: not an executable planner" >&2; exit 2; }
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
failures=0
printf '%-14s %6s %8s %10s %12s  %s\n' CORPUS FILES "EXIT 2" "MAX WALL" "MAX RSS" "SLOWEST"
for corpus in bad bad-topology bad-sweep bad-hf; do
  cmd=(validate)
  [ "$corpus" = bad-hf ] && cmd=(model import)
  files=0 twos=0 max_s=0 max_kb=0 slowest=-
  for f in tests/data/"$corpus"/*; do
    case "$f" in *.expected) continue ;; esac
    files=$((files + 1))
    rc=0
    /usr/bin/time -f '%e %M' -o "$tmp" "$P" "${cmd[@]}" "$f" >/dev/null 2>&1 || rc=$?
    read -r s kb < <(tail -n 1 "$tmp")
    if [ "$rc" = 2 ]; then twos=$((twos + 1)); else echo "  $f: exit $rc, expected 2"; failures=$((failures + 1)); fi
    if awk -v a="$s" -v b="$max_s" 'BEGIN{exit !(a>b)}'; then max_s=$s; slowest=$(basename "$f"); fi
    ((kb > max_kb)) && max_kb=$kb
    if awk -v a="$s" -v l="$LIMIT_S" 'BEGIN{exit !(a>l)}' || ((kb > LIMIT_MB * 1024)); then
      echo "  $f: ${s} s, $((kb / 1024)) MB: over the ${LIMIT_S} s / ${LIMIT_MB} MB bound"
      failures=$((failures + 1))
    fi
  done
  printf '%-14s %6d %8d %9ss %9d MB  %s\n' "$corpus" "$files" "$twos" "$max_s" $((max_kb / 1024)) "$slowest"
done
if ((failures > 0)); then
  echo "bad_inputs.sh: $failures failure(s)"
  exit 1
fi
echo "every bad input exits 2 within ${LIMIT_S} s and ${LIMIT_MB} MB"

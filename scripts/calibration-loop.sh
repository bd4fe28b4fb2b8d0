#!/usr/bin/env bash
# The calibration loop on this machine (issue 9): calibrate the cpu backend from microbenchmarks
# only, then for six plans of gpt-tiny (scripts/calibration-plans/*.json) predict the step time
# with the calibrated profile and execute the plan, and compare the prediction with the measured
# median step time. The executed runs are not used for the fit: a true prediction.
#
#   scripts/calibration-loop.sh [--planner PATH] [--db PATH] [--steps N] [--warmup N]
#                               [--tolerance PERCENT] [--ranks N] [--rounds N] [--runs N]
#
# The loop runs --rounds rounds (default 4): each calibrates, then predicts and executes every plan
# --runs times (default 2, the plans in turn). It compares the machine undisturbed on both sides:
# the predictions of the fastest calibration (the round whose predictions of the six plans sum
# lowest; a calibration keeps each kernel's fastest sweep as well) against each plan's fastest run
# (a run's measurement is its median step time over --steps steps). On this VM the other tenants
# slow a rank's GEMMs by 1.5-2x for seconds at a time, invisibly to the guest (no steal time):
# in noisy hours about one run in three is hit, and now and then a whole calibration. A run lasts
# a second or two, so it is hit or not: the median of a few runs is often hit, the fastest of
# eight only when all eight are. About 2.5 minutes.
# Prints each round's table, the table over the rounds (plan, predicted, fastest measured run,
# error, and the median run with its error, for information) and, for a plan that misses, the
# per-op-kind join of predicted and measured time (planner report) to show which op kind is
# mispredicted. Exits 1 when any plan misses the tolerance (default 10 %), 2 on bad usage.
# Timing-sensitive: run it on a quiet machine (it prints the load average before and after).
# The calibration starts twice as many ranks as the host has cores (--ranks to change it), so that
# it also measures what sharing the cores costs (two plans run 4 ranks on a 2-core host).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
planner="${PLANNER:-$here/../build/bin/planner}"
db=""
steps=10
warmup=2
tolerance=10
ranks="$(( 2 * $(nproc) ))"
rounds=4
runs=2
while [[ $# -gt 0 ]]; do
  case "$1" in
    --planner) planner="$2"; shift 2 ;;
    --db) db="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --tolerance) tolerance="$2"; shift 2 ;;
    --ranks) ranks="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "calibration-loop.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [[ ! -x "$planner" ]]; then
  echo "calibration-loop.sh: no planner binary at $planner (build it, or give --planner)" >&2
  exit 2
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
[[ -n "$db" ]] || db="$work/calibration.db"
plans=(dp2 tp2 pp2-1f1b pp2-interleaved tp2-pp2 dp4-zero1)

# Open MPI's shared memory without cross-memory attach (containers without ptrace refuse it), as
# the mpi tests run; calibration and runs see the same transport either way.
export OMPI_MCA_btl_vader_single_copy_mechanism="${OMPI_MCA_btl_vader_single_copy_mechanism:-none}"

for count in "--rounds:$rounds" "--runs:$runs"; do
  if ! [[ "${count#*:}" =~ ^[1-9][0-9]*$ ]]; then
    echo "calibration-loop.sh: ${count%%:*} takes a positive integer, not \"${count#*:}\"" >&2
    exit 2
  fi
done
ms() { awk -v v="$1" 'BEGIN { printf "%.2f", v * 1e3 }'; }
# The median of the numbers given (the lower middle one of an even count).
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "load before: $(uptime)"
declare -A predicted measured runs_of round_predicted
totals=()  # per round, the sum of its predictions
for round in $(seq 1 "$rounds"); do
  profile="calibration-loop-$round"
  echo
  echo "== round $round of $rounds: calibrating the cpu backend from microbenchmarks (profile $profile in $db)"
  "$planner" calibrate --backend cpu -n "$ranks" --name "$profile" --db "$db"
  echo "== round $round: predicting and executing ${#plans[@]} plans, $runs runs each ($steps measured steps after $warmup warm-up)"
  declare -A round_measured=()
  for rep in $(seq 1 "$runs"); do
    for name in "${plans[@]}"; do
      plan="$here/calibration-plans/$name.json"
      "$planner" exec "$plan" --steps $((steps + warmup)) --warmup "$warmup" --profile "$profile" \
        --db "$db" --json > "$work/$name.json" 2> "$work/$name.log" || {
        cat "$work/$name.log" >&2
        echo "calibration-loop.sh: planner exec $name failed" >&2
        exit 1
      }
      # The prediction planner exec stored before running (the simulator on every rank with the
      # calibrated profile), and the median of the measured steps, joined by planner report.
      run=$(jq -r '.run' "$work/$name.json")
      "$planner" report "$run" --db "$db" --json > "$work/$name.report.json"
      m=$(jq -r '.measured_step_time_s' "$work/$name.report.json")
      if [[ $rep == 1 ]]; then
        p=$(jq -r '.predicted_step_time_s' "$work/$name.report.json")
        predicted[$name]+="$p "
        round_predicted[$name]=$p
      fi
      measured[$name]+="$m "
      round_measured[$name]+=" $(ms "$m")"
      runs_of[$name]+="$m:$run "
    done
  done
  printf '%-16s %12s  %s\n' "plan" "predicted ms" "measured ms (each run)"
  total=0
  for name in "${plans[@]}"; do
    p=${round_predicted[$name]}
    total=$(awk -v t="$total" -v p="$p" 'BEGIN { print t + p }')
    printf '%-16s %12s %s\n' "$name" "$(ms "$p")" "${round_measured[$name]}"
  done
  totals+=("$total")
done

# The fastest calibration: the round whose predictions sum lowest (the first of equals).
best=1
for round in $(seq 2 "$rounds"); do
  if awk -v a="${totals[$((round - 1))]}" -v b="${totals[$((best - 1))]}" 'BEGIN { exit !(a < b) }'; then
    best=$round
  fi
done
echo
echo "== over $rounds rounds: the fastest calibration's predictions (round $best) against each plan's fastest run (and its median run)"
printf '%-16s %12s %14s %9s %14s %9s\n' "plan" "predicted ms" "measured ms" "error" "median run ms" "error"
missed=()
for name in "${plans[@]}"; do
  # shellcheck disable=SC2086  # the lists are space-separated numbers
  p=$(printf '%s\n' ${predicted[$name]} | sed -n "${best}p")
  # shellcheck disable=SC2086
  m=$(printf '%s\n' ${measured[$name]} | sort -g | head -n 1)
  # shellcheck disable=SC2086
  mm=$(median ${measured[$name]})
  # The run whose measurement is the fastest, for the per-op report.
  run=""
  for pair in ${runs_of[$name]}; do
    [[ -z "$run" && "${pair%%:*}" == "$m" ]] && run="${pair##*:}"
  done
  error=$(awk -v p="$p" -v m="$m" 'BEGIN { printf "%.1f", (p - m) / m * 100 }')
  error_median=$(awk -v p="$p" -v m="$mm" 'BEGIN { printf "%.1f", (p - m) / m * 100 }')
  miss=$(awk -v e="$error" -v t="$tolerance" 'BEGIN { print (e < -t || e > t) ? 1 : 0 }')
  printf '%-16s %12s %14s %7s %% %14s %7s %%  %s\n' "$name" "$(ms "$p")" "$(ms "$m")" "$error" \
    "$(ms "$mm")" "$error_median" \
    "$([[ $miss == 1 ]] && echo "MISS (run $run)" || echo "ok (run $run)")"
  [[ $miss == 1 ]] && missed+=("$name:$run")
done
echo
echo "load after: $(uptime)"
if [[ ${#missed[@]} -gt 0 ]]; then
  for m in "${missed[@]}"; do
    echo
    echo "== ${m%%:*} missed by more than $tolerance %: predicted vs measured by op kind (fastest run)"
    "$planner" report "${m##*:}" --db "$db" || true
  done
  echo "calibration-loop.sh: ${#missed[@]} of ${#plans[@]} plans missed $tolerance %" >&2
  exit 1
fi
echo "all ${#plans[@]} plans within $tolerance %"

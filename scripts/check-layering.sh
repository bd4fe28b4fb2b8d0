#!/usr/bin/env bash
# Checks the dependency rules of the architecture on the sources (the CMake targets enforce what
# links; this checks what each folder includes and calls). Prints every violation; exits 1 on any.
#
#   core/        the standard library and nlohmann/json only: no Qt, MPI, CUDA, NCCL, SQLite, Boost
#   store        the only code that includes sqlite3.h
#   topologies/  the only code that includes Boost.Graph
#   simulator/   never reads files, sockets or the clock; never includes MPI or CUDA
#   cli/, gui/   front-ends: no sweep sequencing, profile resolution, default scenario or database
#                recording (planner::app does those), and no MPI/CUDA (the CLI reaches them through
#                the executor's headers)
set -uo pipefail
cd "$(dirname "$0")/.."
status=0

# violation DESCRIPTION PATTERN PATH...: every match of PATTERN (extended regex) under PATH is one.
violation() {
  local what=$1 pattern=$2
  shift 2
  local found
  found=$(grep -rnE --include='*.cpp' --include='*.hpp' --include='*.cu' --include='*.h' \
    "$pattern" "$@" 2>/dev/null | grep -vE '^[^:]+:[0-9]+:\s*//' || true)
  if [ -n "$found" ]; then
    echo "layering: $what:"
    echo "$found" | sed 's/^/  /'
    status=1
  fi
}

sources_except() {  # the top-level source folders other than the ones named
  local f
  for f in core app simulator topologies executor kernels cli gui bench; do
    case " $* " in *" $f "*) ;; *) [ -d "$f" ] && echo "$f" ;; esac
  done
}

violation "core includes a dependency other than the standard library and nlohmann/json" \
  '#include [<"](Q[A-Za-z]+|mpi\.h|cuda|nccl|sqlite3|boost/|CLI/)' core/include core/src
# shellcheck disable=SC2046
violation "only core/store includes sqlite3.h" '#include [<"]sqlite3\.h' $(sources_except core) \
  core/include core/src
# shellcheck disable=SC2046
violation "only topologies includes Boost.Graph" '#include [<"]boost/graph' \
  $(sources_except topologies) core
violation "the simulator reads no files, sockets or clock and includes no MPI or CUDA" \
  '#include [<"](fstream|chrono|filesystem|sys/socket\.h|ctime|mpi\.h|cuda[a-z_]*\.h|nccl\.h)|std::(chrono|ifstream|ofstream|time\()' \
  simulator
violation "only executor and kernels include MPI, CUDA or NCCL" \
  '#include [<"](mpi\.h|cuda_runtime[a-z_]*\.h|cublas[a-z_]*\.h|nccl\.h)' core app simulator topologies cli gui
violation "front-ends leave database recording to planner::app" \
  'store::(create_run|put_plan|put_plan_text|put_metrics|add_sweep_results|add_predicted_ops|put_profile|finish_run|fail_run|link_plan)\(' \
  cli gui
violation "front-ends leave sweep sequencing to planner::app" \
  '(SweepSetup::prepare|run_analytic|simulate_candidates|simulation_candidates|search::finish|search::run_sweep)\(' \
  cli gui
violation "front-ends leave profile resolution to planner::app" \
  '(builtin_profile_for|derive_profile|default_profile_for|sim::parse_profile)\(' cli gui
violation "front-ends take the default scenario from planner::app" \
  '(kDefaultModel|kDefaultGpu|kDefaultGpus|kDefaultBatchTokens|"llama3-8b")' cli gui
exit $status

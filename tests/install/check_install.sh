#!/usr/bin/env bash
# Installs a planner build into a temporary prefix, then builds and runs a consumer project against it.
# Usage: check_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
test -x "$tmp/prefix/bin/planner"
if [ -x "$build/bin/planner-gui" ]; then test -x "$tmp/prefix/bin/planner-gui"; fi
test -f "$tmp/prefix/share/planner/presets/gpus/h100-sxm5-80gb.json"
cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
"$tmp/consumer/consumer"
"$tmp/prefix/bin/planner" model show llama3-8b >/dev/null
echo "install check passed"

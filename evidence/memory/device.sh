#!/usr/bin/env bash
# evidence/memory/run.sh for two builds, one after the other, every command pinned to
# two cores (taskset -c 0,1) of an otherwise idle host: the 2-core VM's goals checked
# where nothing else runs beside the measurement. Appends to results.jsonl here and
# copies it to OUT.
#
# usage: evidence/memory/device.sh OUT BEFORE_BIN BEFORE_REV AFTER_BIN AFTER_REV [SIZES...]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: device.sh OUT BEFORE_BIN BEFORE_REV AFTER_BIN AFTER_REV [SIZES...]}
before=$2 before_rev=$3 after=$4 after_rev=$5
shift 5
[ $# -gt 0 ] && sizes=("$@") || sizes=(1000000)
mkdir -p "$out"
for build in "before $before $before_rev" "after $after $after_rev"; do
    read -r label bin rev <<< "$build"
    REV="$rev" taskset -c 0,1 bash "$here/run.sh" "2 cores of an idle host, $label" "$bin" "${sizes[@]}"
done
cp "$here/results.jsonl" "$out/results.jsonl"

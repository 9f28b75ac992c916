#!/usr/bin/env bash
# One GPU-host call for the native prover: its GPU-vs-CPU checks, then experiments (only
# when every check passed).
#   bash .bundle/device-cuda.sh EXPERIMENT ...
# Writes $OUT/cuda_check.txt and cuda_check.json beside device-run.sh's files.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$here/bundle-bin.sh"
out="${OUT:-$PWD/device-out}"
mkdir -p "$out"
timeout 150 "$here/gapscope" cuda-check --log2-sizes 10,16 --json "$out/cuda_check.json" \
    >"$out/cuda_check.txt" 2>&1
rc=$?
echo "cuda-check exited with $rc" >>"$out/cuda_check.txt"
# GPU results that differ from the CPU's make every proof fail: skip the experiments.
if [ "$rc" -ne 0 ]; then
    cat "$out/cuda_check.txt"
    echo "cuda-check failed (exit $rc): experiments skipped" >&2
    exit "$rc"
fi
exec bash "$here/device-run.sh" "$@"

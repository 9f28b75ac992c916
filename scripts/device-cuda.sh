#!/usr/bin/env bash
# One GPU-host call for the native prover: its GPU-vs-CPU checks, then experiments.
#   bash .bundle/device-cuda.sh EXPERIMENT ...
# Writes $OUT/cuda_check.txt and cuda_check.json beside device-run.sh's files.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${OUT:-$PWD/device-out}"
mkdir -p "$out"
timeout 240 "$here/gapscope" cuda-check --log2 10,16 --json "$out/cuda_check.json" \
    >"$out/cuda_check.txt" 2>&1
echo "cuda-check exited with $?" >>"$out/cuda_check.txt"
exec bash "$here/device-run.sh" "$@"

#!/usr/bin/env bash
# The GPU activity of an external program, end to end, on a GPU host with CUDA 13
# (nvcc, libcupti) and no Rust: compiles cuda/demos/gaps_demo.cu, runs gaps_demo.toml
# (nvtx = true, cupti = true, gaps = { wrapper = "step", inner = ["compute"] }), writes
# the diff and the report, and copies everything under $OUT.
#
# Build on a machine with Rust (no CUDA needed), then copy both files to the GPU host:
#
#   cargo build --release -p gapscope -p gapscope-cupti-inject
#   # target/release/gapscope and target/release/libgapscope_cupti_inject.so
#
# Usage: GAPSCOPE=/path/gapscope OUT=/path/out evidence/external_gpu/run_on_h200.sh [LIBDIR]
#   LIBDIR: the folder holding libgapscope_cupti_inject.so (default: beside $GAPSCOPE)
#   CUDA_HOME (default /usr/local/cuda), NVCC_ARCH (default sm_90, the H100/H200)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
: "${GAPSCOPE:?set GAPSCOPE to the gapscope binary}"
: "${OUT:?set OUT to the folder for the results}"
cuda="${CUDA_HOME:-/usr/local/cuda}"
libdir="${1:-$(dirname "$GAPSCOPE")}"
lib="$libdir/libgapscope_cupti_inject.so"
if [ ! -f "$lib" ]; then
    echo "no $lib: build it with 'cargo build --release -p gapscope-cupti-inject' and copy" \
         "target/release/libgapscope_cupti_inject.so beside gapscope (or pass its folder)" >&2
    exit 2
fi
export GAPSCOPE_CUPTI_LIBRARY="$lib"
export CUDA_PATH="${CUDA_PATH:-$cuda}"

work="$OUT/work"
mkdir -p "$work"
cp "$repo/cuda/demos/gaps_demo.cu" "$here/gaps_demo.toml" "$work/"
{
    echo "host: $(hostname)"
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
    "$cuda/bin/nvcc" --version | tail -1
    "$GAPSCOPE" --version || true
} | tee "$OUT/machine.txt"

"$cuda/bin/nvcc" -O2 -arch="${NVCC_ARCH:-sm_90}" -o "$work/gaps_demo" "$work/gaps_demo.cu" -ldl
"$work/gaps_demo" 50   # once on its own: the program works without gapscope

cd "$work"
# (A run with failed reps exits non-zero; its folder is still reported.)
"$GAPSCOPE" run gaps_demo.toml --results-dir "$OUT/results" 2>&1 | tee "$OUT/run.txt" ||
    echo "gapscope run exited with a failure status; reporting its folder anyway"
run="$(tail -1 "$OUT/run.txt")"
"$GAPSCOPE" diff "$run" > "$OUT/diff.txt" || true
"$GAPSCOPE" report "$run" --out "$OUT/report" 2>&1 | tee "$OUT/report.txt" || true

# What the evidence page reads: where the GPU rows came from, how many there are, and
# the gaps chart's lines of report.md.
{
    echo "run: $run"
    grep -o '"gpu_activity": *"[^"]*"' "$run/meta.json" || echo "no gpu_activity in meta.json"
    if [ -f "$run/gpu_activity.csv" ]; then
        echo "gpu_activity.csv rows by kind:"
        tail -n +2 "$run/gpu_activity.csv" | cut -d, -f3 | sort | uniq -c
    fi
    ls "$OUT/report"
    grep -n -i -A6 "wrapper vs" "$OUT/report/report.md" || true
} | tee "$OUT/check.txt"

#!/usr/bin/env bash
# Measures what one span costs a program on the NVTX and log-line capture paths
# (capture_cost.c) and writes results.jsonl beside this script: ROUNDS rounds, each
# running every case once, in turn, with SPANS spans.
#
# usage: evidence/capture_cost/run.sh [SPANS] [ROUNDS]   (defaults 200000, 7)
# needs: cc; NVTX_INCLUDE (a folder holding nvtx3/) or pip to fetch nvidia-nvtx; a
#        gapscope build (debug or release) for libgapscope_nvtx.so
# On a host without the tree (the GPU host): CAPTURE_COST_BIN (a built probe),
# NVTX_LIB (libgapscope_nvtx.so), REVISION and RESULTS (the output file) say what the
# tree would.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
spans=${1:-200000}
rounds=${2:-7}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
inc=${NVTX_INCLUDE:-}
if [ -n "${CAPTURE_COST_BIN:-}" ]; then
    inc=unused
fi
if [ -z "$inc" ]; then
    python3 -m pip download --no-deps -q -d "$work/wheel" nvidia-nvtx
    python3 -c "import glob,zipfile,sys; zipfile.ZipFile(glob.glob(sys.argv[1]+'/*.whl')[0]).extractall(sys.argv[1])" "$work/wheel"
    inc="$work/wheel/nvidia/cu13/include"
fi
lib=${NVTX_LIB:-$(ls -t "$root"/target/{release,debug}/build/gapscope-*/out/libgapscope_nvtx.so 2>/dev/null | head -1)}
[ -n "$lib" ] || { echo "error: no libgapscope_nvtx.so: build gapscope first (cargo build)" >&2; exit 1; }
if [ -n "${CAPTURE_COST_BIN:-}" ]; then
    cp "$CAPTURE_COST_BIN" "$work/capture_cost"
else
    cc -O2 -I "$inc" -o "$work/capture_cost" "$here/capture_cost.c" -ldl
fi
out=${RESULTS:-$here/results.jsonl}
: > "$out"
if [ -n "${REVISION:-}" ]; then
    rev=$REVISION
else
    rev=$(git -C "$root" rev-parse --short=12 HEAD)
    git -C "$root" diff --quiet HEAD -- cuda/nvtx_inject.c evidence/capture_cost || rev="$rev-dirty"
fi
echo "{\"revision\": \"$rev\", \"host\": \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores\", \"load\": \"$(cut -d' ' -f1-3 /proc/loadavg)\", \"spans\": $spans, \"rounds\": $rounds}" >> "$out"
for r in $(seq "$rounds"); do
    # Each case's JSON goes to stderr; its span lines (nvtx) or log lines (log) go to
    # a pipe drained by another process.
    "$work/capture_cost" none "$spans" 2>&1 >/dev/null | sed "s/^{/{\"round\": $r, \"case\": \"loop\", /" >> "$out"
    "$work/capture_cost" nvtx "$spans" 2>&1 >/dev/null | sed "s/^{/{\"round\": $r, \"case\": \"nvtx_no_tool\", /" >> "$out"
    { GAPSCOPE_SPAN_FD=3 NVTX_INJECTION64_PATH="$lib" "$work/capture_cost" nvtx "$spans" 3>&1 1>/dev/null 2>&4 | cat > /dev/null; } 4>&1 \
        | sed "s/^{/{\"round\": $r, \"case\": \"nvtx_gapscope\", /" >> "$out"
    { GAPSCOPE_NVTX_CPU=exact GAPSCOPE_SPAN_FD=3 NVTX_INJECTION64_PATH="$lib" "$work/capture_cost" nvtx "$spans" 3>&1 1>/dev/null 2>&4 | cat > /dev/null; } 4>&1 \
        | sed "s/^{/{\"round\": $r, \"case\": \"nvtx_gapscope_exact_cpu\", /" >> "$out"
    { "$work/capture_cost" log "$spans" 2>&4 | cat > /dev/null; } 4>&1 \
        | sed "s/^{/{\"round\": $r, \"case\": \"log_lines\", /" >> "$out"
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
head, rows = rows[0], rows[1:]
print(json.dumps(head))
for case in ("loop", "nvtx_no_tool", "nvtx_gapscope", "nvtx_gapscope_exact_cpu", "log_lines"):
    c = [r["cpu_ns_per_span"] for r in rows if r["case"] == case]
    w = [r["wall_ns_per_span"] for r in rows if r["case"] == case]
    print(f"{case:24s} CPU per span median {statistics.median(c):8.1f} ns (min {min(c):8.1f}), wall median {statistics.median(w):8.1f} ns")
PY

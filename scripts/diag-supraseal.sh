#!/usr/bin/env bash
# Diagnoses the upstream supraseal prover on the GPU host. Each case runs, under a time
# limit, either bellperson's own wrapper (`ref`: gapscope upstream-reference) or our
# supraseal backend alone (`run`: gapscope run, one rep; `san`: the same under
# compute-sanitizer's memcheck), on one circuit and size; a case
# still running at its limit gets a probe of what the process and the GPU are doing
# (threads, GPU load, cuda-gdb's host backtraces and running kernels), then is killed.
#
# Usage (on the GPU host, repository root, .bundle/ beside it):
#   bash .bundle/diag-supraseal.sh [MODE:CIRCUIT:LOG2:LIMIT_S ...]
# default: ref:chain:16:90 run:chain:16:60
# Writes into $OUT (default ./device-out): diag-<mode>-<circuit>-<log2>.log per case (its
# output; spans logged as they open and close) with the probe appended when it hit its
# limit; diag-summary.txt, a line per case; diag-results.tar.gz, the `run` folders.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$here/bundle-bin.sh"
out="${OUT:-$PWD/device-out}"
work="$PWD/tmp/diag"
export GAPSCOPE_PARAMS_DIR="${GAPSCOPE_PARAMS_DIR:-$PWD/params}"
export GAPSCOPE_LOG_SPANS=1
mkdir -p "$out" "$work" "$GAPSCOPE_PARAMS_DIR"
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(ref:chain:16:90 run:chain:16:60)

probe() {
    local pid="$1"
    echo "== probe of pid $pid at $(date -u +%H:%M:%S)"
    nvidia-smi --query-gpu=utilization.gpu,memory.used,power.draw,clocks.sm --format=csv
    echo "-- threads (tid name state utime stime)"
    for t in /proc/"$pid"/task/*; do
        awk '{print $1, $2, $3, $14, $15}' "$t/stat" 2>/dev/null
    done
    if command -v cuda-gdb >/dev/null; then
        echo "-- cuda-gdb"
        timeout 45 cuda-gdb -q -p "$pid" -batch \
            -ex "info cuda kernels" \
            -ex "info cuda blocks" \
            -ex "info threads" \
            -ex "thread apply all bt 12" 2>&1 | head -n 400
    else
        echo "no cuda-gdb"
    fi
}

for c in "${cases[@]}"; do
    IFS=: read -r mode circuit log2 limit <<<"$c"
    name="diag_${mode}_${circuit}_2e${log2}"
    toml="$work/$name.toml"
    cat >"$toml" <<EOF
name = "$name"
description = "supraseal backend alone, $circuit circuit, 2^$log2 constraints, batch 1"
[workload]
circuit = "$circuit"
log2_constraints = $log2
batch = 1
backend = "supraseal"
[run]
reps = 1
warmups = 0
process = "shared"
[[variant]]
name = "supraseal"
telemetry = false
EOF
    log="$out/diag-$mode-$circuit-$log2.log"
    start=$(date +%s)
    pre=()
    case "$mode" in
        ref) cmd=(upstream-reference --circuit "$circuit" --log2-constraints "$log2" --calls 2) ;;
        run) cmd=(run -q "$toml" --results-dir "$work/results") ;;
        san) pre=(compute-sanitizer --tool memcheck --print-limit 20)
             cmd=(run -q "$toml" --results-dir "$work/results") ;;
        *) echo "unknown mode $mode (ref, run or san)" | tee -a "$out/diag-summary.txt"; continue ;;
    esac
    setsid "${pre[@]}" "$bin" "${cmd[@]}" >"$log" 2>&1 &
    pid=$!
    while kill -0 "$pid" 2>/dev/null && [ $(($(date +%s) - start)) -lt "$limit" ]; do
        sleep 1
    done
    if kill -0 "$pid" 2>/dev/null; then
        probe "$pid" >>"$log" 2>&1
        kill -KILL -- -"$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        verdict="still running at ${limit} s (probe in $(basename "$log")); last span: $(grep -o '] > [a-z_0-9]*' "$log" | tail -n 1 | cut -c5-)"
    else
        wait "$pid"
        rc=$?
        verdict="exit $rc after $(($(date +%s) - start)) s"
    fi
    echo "$name: $verdict" | tee -a "$out/diag-summary.txt"
done
tar -czf "$out/diag-results.tar.gz" -C "$work" results 2>/dev/null

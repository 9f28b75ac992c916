#!/usr/bin/env bash
# Runs the span-cost evidence from a bundle (evidence/span_cost/bundle.sh) on a host
# without Rust, writing everything under OUT:
#   run_on_host.sh bench BUNDLE OUT
#       span_overhead (criterion; its estimates in OUT/criterion), the recorder's
#       self-description (OUT/recorder.json) and OUT/summary.json (bench -> ns,
#       revision, host) from summarize.py.
#   run_on_host.sh clock BUNDLE OUT [SECONDS]
#       clock_check --seconds SECONDS (default 600): the span clock against
#       CLOCK_MONOTONIC, and CUPTI's kernel timestamps where a GPU is present
#       (OUT/clock_check.json; OUT/gpu-selftest/ holds the self-test's run folders).
# Both write OUT/host.txt (CPU, cores, clock source, TSC flags, GPU).
set -euo pipefail
mode=${1:?usage: run_on_host.sh bench|clock BUNDLE OUT [SECONDS]}
bundle=$(cd "${2:?bundle folder}" && pwd)
out=${3:?output folder}
mkdir -p "$out"
out=$(cd "$out" && pwd)
rev=$(cat "$bundle/REVISION")
host=$(hostname)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
cs=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown)
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(constant_tsc|nonstop_tsc|tsc_reliable|tsc_known_freq)$' | tr '\n' ' ')
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
machine="${cpu}, $(nproc) cores, clocksource ${cs}${gpu:+, ${gpu}}"
{
    echo "host: $host"
    echo "machine: $machine"
    echo "tsc flags: $flags"
    echo "revision: $rev"
    echo "kernel: $(uname -r)"
    echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/host.txt"
cat "$out/host.txt"
case "$mode" in
bench)
    CRITERION_HOME="$out/criterion" GAPSCOPE_BENCH_META="$out/recorder.json" \
        "$bundle/span_overhead" --bench 2>&1 | tee "$out/bench.log"
    python3 "$bundle/summarize.py" --criterion "$out/criterion" --recorder "$out/recorder.json" \
        --revision "$rev" --host "$host" --machine "$machine" \
        --command "run_on_host.sh bench (span_overhead --bench)" --out "$out/summary.json"
    ;;
clock)
    secs=${4:-600}
    "$bundle/clock_check" --seconds "$secs" --out "$out" 2>&1 | tee "$out/clock_check.log"
    ;;
*)
    echo "error: mode is bench or clock, not $mode" >&2
    exit 2
    ;;
esac

#!/usr/bin/env bash
# Runs experiments on the GPU host with the binary that scripts/device-bundle.sh built,
# and packs what came out into $OUT (at most 8 files, flat):
#
#   env.txt           the machine: GPU and driver (nvidia-smi), CPU, OS, the bundle's build
#   device-run.log    everything this script and gapscope printed
#   results.tar.gz    results/<experiment>/<run>/ for every run made here (kept between calls)
#   summary.txt       gapscope's phase table of each run
#
# Usage (from the repository root, .bundle/ beside it):
#   bash .bundle/device-run.sh [--resume] [EXPERIMENT ...]
# EXPERIMENT is a name in .bundle/experiments/ (supraseal_vs_cpu_2e16) or a path; the
# default is supraseal_vs_cpu_2e16. Params are generated on first use (2^20: about 70 s on
# 16 cores) and cached in ./params, which stays between calls while the machine does.
# --resume continues the latest run of each experiment instead of starting a new one (for
# a run cut short by the time budget).
#
# Environment: OUT (default ./device-out), GAPSCOPE_PARAMS_DIR (default ./params),
# GAPSCOPE_DEVICE_BUDGET_S (default 540): gapscope is stopped after that many seconds in
# all, so that results are packed before an outer time limit kills this script; finished
# reps are kept (results are written rep by rep) and --resume picks up from there.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$here/bundle-bin.sh"
out="${OUT:-$PWD/device-out}"
params="${GAPSCOPE_PARAMS_DIR:-$PWD/params}"
budget="${GAPSCOPE_DEVICE_BUDGET_S:-540}"
results="$PWD/tmp/device/results"
start="$(date +%s)"

resume=0
exps=()
for a in "$@"; do
    case "$a" in
        --resume) resume=1 ;;
        -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
        *) exps+=("$a") ;;
    esac
done
[ ${#exps[@]} -gt 0 ] || exps=(supraseal_vs_cpu_2e16)

mkdir -p "$out" "$params" "$results"
log="$out/device-run.log"
exec > >(tee -a "$log") 2>&1

{
    echo "== bundle"; cat "$here/BUNDLE.txt" 2>/dev/null || echo "(no BUNDLE.txt)"
    echo "== host"; uname -a; nproc; free -g | head -n 2
    grep -m1 'model name' /proc/cpuinfo
    (. /etc/os-release && echo "$PRETTY_NAME"); ldd --version 2>&1 | head -n 1
    echo "== gpu"
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi
        nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,pcie.link.gen.current,pcie.link.width.current,clocks.max.sm --format=csv
    else
        echo "nvidia-smi not found: no NVIDIA driver on this machine"
    fi
    cat /usr/local/cuda/version.json 2>/dev/null | head -n 5
} >"$out/env.txt" 2>&1

if ! "$bin" --version; then
    echo "error: $bin does not start here; its libraries:" >&2
    ldd "$bin" >&2
    exit 1
fi

status=0
for e in "${exps[@]}"; do
    file="$e"
    [ -f "$file" ] || file="$here/experiments/$e.toml"
    if [ ! -f "$file" ]; then
        echo "error: no experiment $e (looked for $e and $file)" >&2
        status=1
        continue
    fi
    left=$((budget - ($(date +%s) - start)))
    if [ "$left" -le 10 ]; then
        echo "time budget spent; not starting $e (run again with --resume or a larger GAPSCOPE_DEVICE_BUDGET_S)" >&2
        status=1
        break
    fi
    # Run folders are named after the experiment's `name` (the first one in the file).
    name="$(sed -n 's/^name *= *"\([^"]*\)".*/\1/p' "$file" | head -n 1)"
    args=(run "$file")
    if [ "$resume" = 1 ]; then
        last="$(ls -1d "$results/$name"/*/ 2>/dev/null | sort | tail -n 1)"
        if [ -n "$last" ]; then
            args=(run --resume "${last%/}")
        fi
    fi
    echo "== ${args[*]} (budget ${left}s)"
    # timeout signals gapscope's whole process group, per-rep workers included.
    timeout --signal=INT --kill-after=15 "$left" \
        "$bin" "${args[@]}" --results-dir "$results" --params-dir "$params"
    rc=$?
    case "$rc" in
        0) ;;
        124|137) echo "$e: stopped by the time budget; finished reps are kept (rerun with --resume)"; status=1 ;;
        *) echo "$e: gapscope exited with $rc"; status=1 ;;
    esac
done

for d in "$results"/*/*/; do
    [ -f "$d/meta.json" ] || continue
    echo "== ${d#"$results"/}"
    "$bin" summary "$d" 2>&1
    # The cause of each failed rep (runs.csv's last column).
    grep ',failed,' "$d/runs.csv" | cut -c1-600
done >"$out/summary.txt"
if [ -n "$(ls -A "$results")" ]; then
    tar -czf "$out/results.tar.gz" -C "$(dirname "$results")" results
fi
echo "packed into $out: $(ls "$out" | tr '\n' ' ')"
exit "$status"

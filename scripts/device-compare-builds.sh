#!/usr/bin/env bash
# Runs the same experiments with two builds of gapscope on the GPU host, alternating
# A, B, A, B, … so that both see the same host over the same minutes, and packs the runs
# into $OUT. For a change to gapscope itself (how it collects, not what it proves),
# whose effect lasts across reps and so cannot be a variant of one run.
#
#   compare.tar.gz   compare/<label>/<experiment>/<run>/ for every run made here
#   compare.log      what was run, in order, and everything gapscope printed
#
# Usage (from the repository root, on the GPU host):
#   bash scripts/device-compare-builds.sh [--fresh-params] LABEL_A:DIR_A LABEL_B:DIR_B ROUNDS EXPERIMENT...
# DIR is a bundle folder (scripts/device-bundle.sh) holding the `gapscope` binary to run;
# EXPERIMENT is a path. Each round runs every experiment with A, then with B; params are
# generated once into ./params and shared, or with --fresh-params generated anew by every
# run (each run then starts as a first run on a machine without a params cache does).
#
# Environment: OUT (default ./device-out), GAPSCOPE_PARAMS_DIR (default ./params).
set -uo pipefail

fresh=0
if [ "${1:-}" = "--fresh-params" ]; then
    fresh=1
    shift
fi
if [ $# -lt 4 ]; then
    sed -n '2,18p' "$0"
    exit 2
fi
a="$1" b="$2" rounds="$3"
shift 3
out="${OUT:-$PWD/device-out}"
params="${GAPSCOPE_PARAMS_DIR:-$PWD/params}"
root="$PWD/tmp/device/compare"
mkdir -p "$out" "$params" "$root"
exec > >(tee -a "$out/compare.log") 2>&1

for side in "$a" "$b"; do
    bin="${side#*:}/gapscope"
    if ! "$bin" --version >/dev/null; then
        echo "error: $bin does not run here" >&2
        exit 1
    fi
    echo "${side%%:*}: $bin, $(head -n 1 "${side#*:}/BUNDLE.txt" 2>/dev/null)"
done

status=0
for round in $(seq 1 "$rounds"); do
    for side in "$a" "$b"; do
        label="${side%%:*}"
        for e in "$@"; do
            echo "== round $round, $label: $e ($(date -u +%H:%M:%S))"
            if [ "$fresh" = 1 ]; then
                rm -rf "$params"
                mkdir -p "$params"
            fi
            "${side#*:}/gapscope" run "$e" --results-dir "$root/$label" --params-dir "$params" ||
                { echo "$label: gapscope exited with $?"; status=1; }
        done
    done
done
tar -czf "$out/compare.tar.gz" -C "$(dirname "$root")" compare
echo "packed into $out: $(ls "$out" | tr '\n' ' ')"
exit "$status"

#!/usr/bin/env bash
# Peak memory of gapscope's commands against the spans of a run: for each N, a `run` of
# 1 rep x N spans (one variant) and one of 4 reps x N (2 variants x 2 reps), then
# `summary`, `diff` and `report` of the 4-rep folder, each timed (wall and CPU seconds,
# peak RSS) with /usr/bin/time. The spans are evidence/scaling/emit.py's `flat` shape: N
# sibling spans named from a set of 16. Appends to results.jsonl here, under a line that
# names the revision, the machine and the load, and LABEL (what the build holds).
#
# usage: evidence/memory/run.sh LABEL [GAPSCOPE] [SIZES...]   (default target/release/gapscope, 100000 250000)
# REV=... names the build's revision where it is not the checkout's (a copied binary).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
emit="$root/evidence/scaling/emit.py"
label=${1:?usage: run.sh LABEL [GAPSCOPE] [SIZES...]}
gs=$(cd "$root" && realpath "${2:-target/release/gapscope}")
shift 2 2>/dev/null || shift $#
[ $# -gt 0 ] && sizes=("$@") || sizes=(100000 250000)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out="$here/results.jsonl"
rev=$(git -C "$root" rev-parse --short=12 HEAD)
git -C "$root" diff --quiet HEAD -- src crates Cargo.toml || rev="$rev-dirty"
rev=${REV:-$rev}
echo "{\"revision\": \"$rev\", \"label\": \"$label\", \"host\": \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores\", \"load\": \"$(cut -d' ' -f1-3 /proc/loadavg)\"}" >> "$out"
timed() { # N REPS STEP CMD...: one timed command, a JSON line
    local n=$1 reps=$2 step=$3
    shift 3
    /usr/bin/time -f '%e %U %S %M' -o "$work/t" "$@" > "$work/o" 2>&1
    local rc=$?
    read -r el us sy rss < <(tail -1 "$work/t")
    echo "{\"revision\": \"$rev\", \"spans\": $n, \"reps\": $reps, \"step\": \"$step\", \"exit\": $rc, \"wall_s\": $el, \"cpu_s\": $(awk -v u="$us" -v s="$sy" 'BEGIN {printf "%.2f", u + s}'), \"peak_rss_kib\": $rss, \"load\": \"$(cut -d' ' -f1 /proc/loadavg)\"}" | tee -a "$out"
    [ $rc = 0 ] || tail -5 "$work/o" >&2
}
experiment() { # N VARIANTS REPS: an experiment file on stdout
    echo "name = \"memory_$1\""
    echo "[workload]"
    echo "command = [\"python3\", \"$emit\", \"flat\", \"$1\"]"
    echo "[run]"
    echo "reps = $3"
    echo "warmups = 0"
    echo "rep_timeout_s = 1200"
    for v in $(seq 1 "$2"); do
        echo "[[variant]]"
        echo "name = \"v$v\""
    done
}
for n in "${sizes[@]}"; do
    for reps in 1 4; do
        d="$work/$n-$reps"
        mkdir -p "$d"
        if [ "$reps" = 1 ]; then experiment "$n" 1 1; else experiment "$n" 2 2; fi > "$d/exp.toml"
        (cd "$d" && timed "$n" "$reps" run "$gs" run exp.toml)
    done
    run=$(ls -d "$work/$n-4"/results/*/*/ 2>/dev/null | head -1)
    [ -n "$run" ] || { echo "no run folder for $n" >&2; continue; }
    timed "$n" 4 summary "$gs" summary "$run"
    timed "$n" 4 diff "$gs" diff "$run"
    timed "$n" 4 report "$gs" report "$run" --out "$work/report-$n"
    rm -rf "$work/$n-1" "$work/$n-4" "$work/report-$n"
done

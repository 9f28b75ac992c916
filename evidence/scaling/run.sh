#!/usr/bin/env bash
# How gapscope's commands scale with the size of a rep: for each shape (deep nesting,
# distinct names, log-line spans nested by `parent =`) and N = 10^3, 10^4, 10^5 spans a
# rep, one run of 2 variants x 2 reps, then summary, diff and report of it, each timed
# (wall and CPU seconds, peak RSS) with /usr/bin/time. Writes results.jsonl here.
#
# usage: evidence/scaling/run.sh [GAPSCOPE] [SIZES...]   (default target/release/gapscope, 1000 10000 100000)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
gs=$(cd "$root" && realpath "${1:-target/release/gapscope}")
shift || true
sizes=("${@:-1000 10000 100000}")
[ $# -gt 0 ] && sizes=("$@") || sizes=(1000 10000 100000)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out="$here/results.jsonl"
rev=$(git -C "$root" rev-parse --short=12 HEAD)
git -C "$root" diff --quiet HEAD -- src crates Cargo.toml || rev="$rev-dirty"
echo "{\"revision\": \"$rev\", \"host\": \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores\", \"load\": \"$(cut -d' ' -f1-3 /proc/loadavg)\"}" > "$out"
timed() { # SHAPE N STEP CMD...: one timed command, a JSON line
    local shape=$1 n=$2 step=$3
    shift 3
    /usr/bin/time -f '%e %U %S %M' -o "$work/t" "$@" > "$work/o" 2>&1
    local rc=$?
    read -r el us sy rss < <(tail -1 "$work/t")
    echo "{\"shape\": \"$shape\", \"spans\": $n, \"step\": \"$step\", \"exit\": $rc, \"wall_s\": $el, \"cpu_s\": $(printf "%.2f" "$(echo "$us + $sy" | bc)"), \"peak_rss_kib\": $rss}" | tee -a "$out"
    [ $rc = 0 ] || tail -5 "$work/o" >&2
}
for shape in deep names log; do
    for n in "${sizes[@]}"; do
        d="$work/$shape-$n"
        mkdir -p "$d"
        {
            echo "name = \"scale_${shape}_$n\""
            echo "[workload]"
            echo "command = [\"python3\", \"$here/emit.py\", \"$shape\", \"$n\"]"
            if [ "$shape" = log ]; then
                echo "[workload.log_spans]"
                # Even stages nest under odd ones and odd under even: one chain N deep.
                echo "even = { begin = 'stage [0-9]*[02468] begin', end = 'stage [0-9]*[02468] end', parent = \"odd\" }"
                echo "odd = { begin = 'stage [0-9]*[13579] begin', end = 'stage [0-9]*[13579] end', parent = \"even\" }"
            fi
            echo "[run]"
            echo "reps = 2"
            echo "warmups = 0"
            echo "rep_timeout_s = 600"
            echo "[[variant]]"
            echo "name = \"a\""
            echo "[[variant]]"
            echo "name = \"b\""
        } > "$d/exp.toml"
        (cd "$d" && timed "$shape" "$n" run "$gs" run exp.toml)
        run=$(ls -d "$d"/results/*/*/ 2>/dev/null | head -1)
        [ -n "$run" ] || { echo "no run folder for $shape $n" >&2; continue; }
        timed "$shape" "$n" summary "$gs" summary "$run"
        timed "$shape" "$n" diff "$gs" diff "$run"
        timed "$shape" "$n" report "$gs" report "$run" --out "$d/report"
    done
done

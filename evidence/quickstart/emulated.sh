#!/bin/sh
# The quickstart (experiments/quickstart.toml) RUNS times, each in a fresh results
# folder, with BUSY busy loops beside it (a load of about 2 + BUSY on a 2-core machine),
# then its A/A twin (aa_emulated.toml here) AA times. One line per run on stdout and in
# OUT/results.txt: the wall seconds, the load average at its end, the run's exit status
# and its headline's "Significant changes" line. Params are cached in OUT/params (the
# first run makes them).
#   evidence/quickstart/emulated.sh OUT [RUNS] [AA] [BUSY]
set -eu
out=$(mkdir -p "$1" && cd "$1" && pwd)
runs=${2:-5}
aa=${3:-20}
busy=${4:-2}
here=$(cd "$(dirname "$0")/../.." && pwd)
gs=${GAPSCOPE:-$here/target/release/gapscope}
pids=""
for _ in $(seq 1 "$busy"); do
    sh -c 'while :; do :; done' &
    pids="$pids $!"
done
trap 'kill $pids 2>/dev/null || true' EXIT
one() { # NAME FILE N
    rm -rf "$out/results"
    s=$(date +%s%N)
    rc=0
    "$gs" run "$2" --results-dir "$out/results" --params-dir "$out/params" >"$out/$1-$3.txt" 2>"$out/$1-$3.err" || rc=$?
    e=$(date +%s%N)
    line=$(grep '^Significant changes' "$out/$1-$3.txt" || echo "no headline")
    echo "$1 $3 seconds $(echo "$s $e" | awk '{printf "%.1f", ($2 - $1) / 1e9}') load $(cut -d' ' -f1 /proc/loadavg) exit $rc: $line" | tee -a "$out/results.txt"
}
for i in $(seq 1 "$runs"); do one quickstart "$here/experiments/quickstart.toml" "$i"; done
for i in $(seq 1 "$aa"); do one aa "$here/evidence/quickstart/aa_emulated.toml" "$i"; done

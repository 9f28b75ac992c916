#!/bin/sh
# Times and peak RSS of recording, summarising, exporting and reporting one rep of
# a million external spans (evidence/hostile/README.md has the results).
#
#   evidence/hostile/bench.sh [GAPSCOPE] [SHAPE] [BATCHES] [STEPS]
#
# GAPSCOPE: the binary (default target/debug/gapscope); SHAPE: `tree` (BATCHES batches
# of 999 items: 1,000,000 spans for the default 1000 batches, 150 names) or `flat`
# (BATCHES x 1000 spans with a name each, all under the root); STEPS: which commands
# to time after the run (default "summary export report"). Writes its run folder,
# report and logs under target/hostile-bench/. Needs cc and GNU time (/usr/bin/time -v).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${1:-$root/target/debug/gapscope}
shape=${2:-tree}
batches=${3:-1000}
steps=${4:-summary export report}
work=$root/target/hostile-bench/$shape-$batches
rm -rf "$work"
mkdir -p "$work"
cc -O2 -o "$work/spans" "$here/spans.c"
if [ "$shape" = flat ]; then args="\"$batches\", \"1000\", \"flat\""; else args="\"$batches\", \"999\""; fi
cat > "$work/bench.toml" <<TOML
name = "spans_$shape"
[workload]
command = ["$work/spans", $args]
[run]
reps = 1
warmups = 0
[[variant]]
name = "a"
TOML
measure() {
    label=$1
    shift
    /usr/bin/time -v "$@" > "$work/$label.out" 2> "$work/$label.err" || {
        echo "$label failed:"
        tail -5 "$work/$label.err"
        exit 1
    }
    wall=$(grep 'Elapsed (wall clock)' "$work/$label.err" | awk '{print $NF}')
    rss=$(grep 'Maximum resident set size' "$work/$label.err" | awk '{print $NF}')
    echo "$label: wall $wall, max RSS $((rss / 1024)) MiB"
}
cd "$work"
measure run "$bin" run bench.toml --results-dir "$work/results" --quiet
dir=$(tail -1 "$work/run.out")
spans=$(($(wc -l < "$dir/spans.csv") - 1))
echo "spans.csv: $spans rows, $(($(wc -c < "$dir/spans.csv") / 1048576)) MiB"
for step in $steps; do
    case $step in
    summary) measure summary "$bin" summary "$dir" ;;
    export) measure export "$bin" export "$dir" --out-file "$work/trace.json" ;;
    report) measure report "$bin" report "$dir" --out "$work/report" ;;
    esac
done

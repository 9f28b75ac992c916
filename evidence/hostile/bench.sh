#!/bin/sh
# Times and peak RSS of recording, summarising, exporting and reporting one rep of
# a million external spans (evidence/hostile/README.md has the results).
#
#   evidence/hostile/bench.sh [GAPSCOPE] [SHAPE]
#
# GAPSCOPE: the binary (default target/debug/gapscope); SHAPE: `tree` (1000 batches of
# 999 items: 1,000,000 spans, 150 names, default) or `flat` (1,000,000 spans with a name
# each, all under the root). Writes its run folder, report and logs under
# target/hostile-bench/. Needs cc and GNU time (/usr/bin/time -v).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${1:-$root/target/debug/gapscope}
shape=${2:-tree}
work=$root/target/hostile-bench/$shape
rm -rf "$work"
mkdir -p "$work"
cc -O2 -o "$work/spans" "$here/spans.c"
if [ "$shape" = flat ]; then args='"1000", "1000", "flat"'; else args='"1000", "999"'; fi
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
measure summary "$bin" summary "$dir"
measure export "$bin" export "$dir" --out "$work/trace.json"
measure report "$bin" report "$dir" --out "$work/report"

#!/usr/bin/env bash
# Builds the two release binaries of the span-cost evidence (span_overhead, clock_check)
# and puts them, stripped, with the scripts that run them and the revision they were
# built from, into one folder to copy to a host without Rust.
#
# usage: evidence/span_cost/bundle.sh [DIR]   (default: target/span_cost_bundle)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
dir=${1:-target/span_cost_bundle}
rev=$(git rev-parse --short=12 HEAD)
if ! git diff --quiet HEAD -- src benches crates Cargo.toml Cargo.lock build.rs; then
    rev="$rev-dirty"
fi
exes=$(cargo bench -p gapscope-trace --bench span_overhead -p gapscope --bench clock_check --no-run --message-format=json \
    | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] in ("span_overhead", "clock_check"):
        print(m["target"]["name"], m["executable"])
')
mkdir -p "$dir"
while read -r name exe; do
    strip -o "$dir/$name" "$exe"
done <<< "$exes"
for f in span_overhead clock_check; do
    [ -x "$dir/$f" ] || { echo "error: $f was not built (cargo bench --no-run output: $exes)" >&2; exit 1; }
done
cp evidence/span_cost/run_on_host.sh evidence/span_cost/summarize.py "$dir/"
echo "$rev" > "$dir/REVISION"
echo "bundle of $rev in $dir:"
ls -la "$dir"

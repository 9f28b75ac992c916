#!/usr/bin/env bash
# Each run of h200_runs.tgz diffed against the next (19 across-run A/A diffs), with the
# between-runs spread at its default and turned off: how many end-to-end verdicts and
# named rows each gives.
#   evidence/verdicts/between_runs/rediff.sh [GAPSCOPE]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-target/release/gapscope}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
tar xzf "$here/h200_runs.tgz" -C "$tmp"
mapfile -t runs < <(ls -d "$tmp"/results/cmd/*/ | sed 's:/$::')
echo "between_runs,diffs,end_to_end_named,diffs_naming_any_row"
for spread in default 0; do
  e2e=0; any=0
  for i in $(seq 0 $((${#runs[@]} - 2))); do
    args=(diff "${runs[$i]}" "${runs[$((i + 1))]}" --format json)
    [ "$spread" = 0 ] && args+=(--between-runs 0)
    "$bin" "${args[@]}" >"$tmp/d.json"
    read -r a b < <(python3 -c '
import json, sys
h = json.load(open(sys.argv[1]))["headline"]
e = h["end_to_end"]["verdict"] in ("regressed", "improved")
print(int(e), int(e or bool(h["changes"])))' "$tmp/d.json")
    e2e=$((e2e + a)); any=$((any + b))
  done
  echo "$spread,$(( ${#runs[@]} - 1 )),$e2e,$any"
done

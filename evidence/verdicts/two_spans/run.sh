#!/usr/bin/env bash
# The external two-span program of the verdicts issue: `setup` (100 ms) then `work`,
# 10 ms in the baseline and 40 ms in the candidate, 6 counterbalanced pairs per run;
# and its A/A twin (10 ms on both sides). One CSV row per run: the end-to-end verdict,
# the verdict of `work` (total) and what the headline named.
#   evidence/verdicts/two_spans/run.sh RUNS_AB RUNS_AA OUT_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${GAPSCOPE:-target/release/gapscope}
ab=${1:?runs of 10 vs 40 ms}; aa=${2:?A/A runs}; out=${3:?output folder}
mkdir -p "$out"
csv="$out/two_spans.csv"
echo "kind,run_dir,end_to_end,work_total,work_change,headline_changes,comparisons,uncorrected,load_avg_1m" >"$csv"
row() {
  python3 - "$1" "$2" "$3" <<'PY' >>"$csv"
import csv, json, sys
kind, run_dir, path = sys.argv[1:]
d = json.load(open(path))
h = d["headline"]
work = next((c for c in d["metrics"] if c["span"] == "work" and c["measure"] == "total"), None)
meta = json.load(open(f"{run_dir}/meta.json"))
load = (meta.get("drift") or {}).get("start", {}).get("load_avg", [""])[0]
named = [f'{c["span"]} ({c["measure"]}) {c["verdict"]}' for c in h["changes"]]
if h["end_to_end"]["verdict"] in ("regressed", "improved"):
    named.insert(0, f'{h["end_to_end"]["span"]} (total) {h["end_to_end"]["verdict"]}')
rel = work.get("relative") if work else None
csv.writer(sys.stdout).writerow([
    kind, run_dir, h["end_to_end"]["verdict"], work["verdict"] if work else "",
    f"{rel * 100:+.1f}%" if rel is not None else "", "; ".join(named),
    h["family"]["comparisons"], h["family"]["uncorrected"], load,
])
PY
}
run() {
  local kind=$1 a=$2 b=$3
  local dir
  dir=$("$bin" run --cmd "python3 $here/work.py $a" --cmd "python3 $here/work.py $b" \
      --reps 6 --results-dir "$out/results" --quiet 2>/dev/null | tail -1)
  "$bin" diff "$dir" --format json >"$out/diff.json"
  row "$kind" "$dir" "$out/diff.json"
}
for _ in $(seq "$ab"); do run ab 0.01 0.04; done
for _ in $(seq "$aa"); do run aa 0.01 0.010; done
rm -f "$out/diff.json"
cat "$csv"

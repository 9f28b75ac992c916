#!/usr/bin/env bash
# Across-run A/A: the same program and command run N times as single-variant runs, each
# under a different background load (0 to 3 busy processes beside it, in turn), and each
# run diffed against the next (`gapscope diff RUN_A RUN_B`). No diff may name a change:
# the two runs' machines differed, which no interval covers.
#   evidence/verdicts/across_runs.sh N OUT_DIR
#   evidence/verdicts/across_runs.sh rediff OUT_DIR    (diff the runs already in OUT_DIR)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${GAPSCOPE:-target/release/gapscope}
n=${1:?runs}; out=${2:?output folder}
mkdir -p "$out"
csv="$out/across_runs.csv"
echo "run_a,run_b,load_a,load_b,end_to_end,why,headline_changes" >"$csv"
runs=()
if [ "$n" = rediff ]; then
  mapfile -t runs < <(ls -d "$out"/results/cmd/*/ | sed 's:/$::')
  n=${#runs[@]}
fi
for i in $(seq "$n"); do
  [ "${#runs[@]}" -ge "$n" ] && break
  busy=$(( (i - 1) % 4 ))
  pids=()
  for _ in $(seq "$busy"); do (while :; do :; done) & pids+=($!); done
  sleep 5   # let the load average see the busy processes
  dir=$("$bin" run --cmd "python3 $here/two_spans/work.py 0.02" --reps 8 \
      --results-dir "$out/results" --quiet 2>/dev/null | tail -1)
  for p in "${pids[@]}"; do kill "$p"; done
  wait 2>/dev/null || true
  runs+=("$dir")
done
for i in $(seq 0 $((n - 2))); do
  a=${runs[$i]}; b=${runs[$((i + 1))]}
  "$bin" diff "$a" "$b" --format json >"$out/diff.json"
  python3 - "$a" "$b" "$out/diff.json" <<'PY' >>"$csv"
import csv, json, sys
a, b, path = sys.argv[1:]
d = json.load(open(path))
h = d["headline"]
load = lambda r: (json.load(open(f"{r}/meta.json")).get("drift") or {}).get("start", {}).get("load_avg", [""])[0]
named = [f'{c["span"]} ({c["measure"]}) {c["verdict"]}' for c in h["changes"]]
e = h["end_to_end"]
if e["verdict"] in ("regressed", "improved"):
    named.insert(0, f'{e["span"]} (total) {e["verdict"]}')
csv.writer(sys.stdout).writerow([a, b, load(a), load(b), e["verdict"], e.get("why") or "", "; ".join(named)])
PY
done
rm -f "$out/diff.json"
cat "$csv"

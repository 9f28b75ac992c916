#!/usr/bin/env bash
# Runs an experiment N times and diffs each run with the default statistics, writing one
# line per run to a CSV: whether the headline named any change (end to end regressed or
# improved, or any significant change), and what.
#
#   evidence/verdicts/run_aa.sh EXPERIMENT N OUT_CSV [RESULTS_DIR]
#
# e.g. evidence/verdicts/run_aa.sh evidence/verdicts/aa_quickstart.toml 20 \
#        evidence/verdicts/aa_quickstart.csv
# Uses target/release/gapscope (GAPSCOPE overrides it). Run folders go to RESULTS_DIR
# (default results/verdicts); rediff.sh diffs them again with another binary.
set -euo pipefail
exp=${1:?experiment file}
n=${2:?number of runs}
out=${3:?output CSV}
results=${4:-results/verdicts}
bin=${GAPSCOPE:-target/release/gapscope}
name=$(sed -n 's/^name = "\(.*\)"/\1/p' "$exp" | head -1)
here=$(dirname "$0")
[ -f "$out" ] || echo "run_dir,wall_s,end_to_end_verdict,headline_changes,comparisons,survivors,uncorrected,changes" >"$out"
for i in $(seq 1 "$n"); do
  t0=$(date +%s.%N)
  "$bin" run "$exp" --results-dir "$results" --quiet >/dev/null
  t1=$(date +%s.%N)
  dir=$(ls -d "$results/$name"/*/ | sort | tail -1)
  dir=${dir%/}
  wall=$(python3 -c "print(f'{$t1-$t0:.1f}')")
  "$bin" diff "$dir" --format json >"$dir/diff.json"
  python3 "$here/headline_row.py" "$dir" "$wall" >>"$out"
  tail -1 "$out"
done

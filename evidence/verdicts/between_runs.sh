#!/usr/bin/env bash
# Between-run spread: the same program and command run N times as single-variant runs,
# one after the other on an otherwise idle machine, so that what differs between runs
# is what differs between any two runs (placement, frequency, caches), not a load added
# on purpose. Writes the run folders and, per run, the geometric mean and the spread of
# each span's log time within it (between_runs.csv); between_runs.py estimates the
# spread of a run's level beyond what its reps' spread explains.
#   evidence/verdicts/between_runs.sh N REPS OUT_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${GAPSCOPE:-target/release/gapscope}
n=${1:?runs}; reps=${2:?reps a run}; out=${3:?output folder}
mkdir -p "$out"
for i in $(seq "$n"); do
  "$bin" run --cmd "python3 $here/two_spans/work.py 0.02" --reps "$reps" \
      --results-dir "$out/results" --quiet >/dev/null 2>&1
done
python3 "$here/between_runs.py" "$out/results" >"$out/between_runs.csv"
cat "$out/between_runs.csv"

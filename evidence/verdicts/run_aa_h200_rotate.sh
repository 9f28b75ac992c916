#!/usr/bin/env bash
# On the H200 host (no Rust), from the repository root, with a gapscope built with
# `--features cuda` on a build machine and carried: .bundle/gapscope (or .bundle/gapscope.gz;
# GAPSCOPE=path overrides), else the c0 worker of the prepared upstream bundle
# (.bundle/upstream-drop, `bash scripts/device-upstream-drop.sh prepare`):
#   bash evidence/verdicts/run_aa_h200_rotate.sh [MAX_RUNS] [EXPERIMENT.toml ...]
# runs each experiment (default aa_h200_rotate.toml) in turn, again and again, until each
# ran MAX_RUNS times (default 20) or the time budget is spent (GAPSCOPE_DEVICE_BUDGET_S,
# default 540 s; no run started with less than GAPSCOPE_RUN_MIN_S left, default 75 s),
# diffs each run (run_aa.sh) and packs into $OUT: <name>.csv per experiment (one headline
# row per run), device-run.log, env.txt and results.tar.gz (run folders with their
# diff.json).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"
max="${1:-20}"
shift || true
exps=("$@")
[ "${#exps[@]}" -gt 0 ] || exps=("$here/aa_h200_rotate.toml")
min_left="${GAPSCOPE_RUN_MIN_S:-75}"
out="${OUT:-$PWD/device-out}"
budget="${GAPSCOPE_DEVICE_BUDGET_S:-540}"
start="$(date +%s)"
mkdir -p "$out" tmp/device
exec > >(tee -a "$out/device-run.log") 2>&1
bin="$PWD/tmp/device/gapscope"
if [ -n "${GAPSCOPE:-}" ]; then
  bin="$GAPSCOPE"
elif [ -x .bundle/gapscope ]; then
  bin="$PWD/.bundle/gapscope"
elif [ -f .bundle/gapscope.gz ]; then
  [ -x "$bin" ] || { gunzip -c .bundle/gapscope.gz >"$bin.tmp" && chmod +x "$bin.tmp" && mv "$bin.tmp" "$bin"; }
else
  c0="$(grep -l '"rev": "c0"' .bundle/upstream-drop/cache/patched/*/*/entry.json 2>/dev/null | head -n 1)"
  [ -n "$c0" ] || { echo "error: no gapscope built with --features cuda: carry .bundle/gapscope(.gz), or the upstream bundle (\`bash scripts/device-upstream-drop.sh prepare\` on a build machine)" >&2; exit 1; }
  [ -x "$bin" ] || { gunzip -c "$(dirname "$c0")/gapscope.gz" >"$bin.tmp" && chmod +x "$bin.tmp" && mv "$bin.tmp" "$bin"; }
fi
{ nvidia-smi; uname -a; nproc; grep -m1 'model name' /proc/cpuinfo; "$bin" --version; } >"$out/env.txt" 2>&1
export GAPSCOPE_PARAMS_DIR="${GAPSCOPE_PARAMS_DIR:-$PWD/params}"
results="$PWD/tmp/device/aa-results"
spent=0
for i in $(seq 1 "$max"); do
  for exp in "${exps[@]}"; do
    left=$((budget - ($(date +%s) - start)))
    [ "$left" -ge "$min_left" ] || { spent=1; break; }
    name="$(sed -n 's/^name = "\(.*\)"/\1/p' "$exp" | head -n 1)"
    echo "== A/A run $i of $name ($(date -u +%H:%M:%S), ${left}s left)"
    GAPSCOPE="$bin" timeout --signal=INT --kill-after=15 "$left" \
      "$here/run_aa.sh" "$exp" 1 "$out/$name.csv" "$results" || echo "run $i of $name cut short"
  done
  [ "$spent" = 0 ] || { echo "time budget spent in round $i"; break; }
done
cat "$out"/*.csv
tar -czf "$out/results.tar.gz" -C "$(dirname "$results")" "$(basename "$results")"
ls -la "$out"

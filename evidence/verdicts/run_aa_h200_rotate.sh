#!/usr/bin/env bash
# On the H200 host (no Rust), from the repository root, with the prepared upstream bundle
# carried (.bundle/upstream-drop, `bash scripts/device-upstream-drop.sh prepare` on a
# build machine; its c0 worker is a gapscope built with features cuda,supraseal):
#   bash evidence/verdicts/run_aa_h200_rotate.sh [MAX_RUNS]
# runs aa_h200_rotate.toml again and again until MAX_RUNS (default 20) or the time budget
# (GAPSCOPE_DEVICE_BUDGET_S, default 540 s, no run started with less than 75 s left),
# diffs each run (run_aa.sh) and packs into $OUT: aa_h200_rotate.csv (one headline row per
# run), device-run.log, env.txt and results.tar.gz (run folders with their diff.json).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"
max="${1:-20}"
out="${OUT:-$PWD/device-out}"
budget="${GAPSCOPE_DEVICE_BUDGET_S:-540}"
start="$(date +%s)"
mkdir -p "$out" tmp/device
exec > >(tee -a "$out/device-run.log") 2>&1
c0="$(grep -l '"rev": "c0"' .bundle/upstream-drop/cache/patched/*/*/entry.json | head -n 1)"
[ -n "$c0" ] || { echo "error: no prepared c0 worker in .bundle/upstream-drop: run \`bash scripts/device-upstream-drop.sh prepare\` on a build machine and carry .bundle" >&2; exit 1; }
bin="$PWD/tmp/device/gapscope"
[ -x "$bin" ] || { gunzip -c "$(dirname "$c0")/gapscope.gz" >"$bin.tmp" && chmod +x "$bin.tmp" && mv "$bin.tmp" "$bin"; }
{ nvidia-smi; uname -a; nproc; grep -m1 'model name' /proc/cpuinfo; "$bin" --version; } >"$out/env.txt" 2>&1
export GAPSCOPE_PARAMS_DIR="${GAPSCOPE_PARAMS_DIR:-$PWD/params}"
results="$PWD/tmp/device/aa-results"
csv="$out/aa_h200_rotate.csv"
for i in $(seq 1 "$max"); do
  left=$((budget - ($(date +%s) - start)))
  [ "$left" -ge 75 ] || { echo "time budget spent after $((i - 1)) runs"; break; }
  echo "== A/A run $i ($(date -u +%H:%M:%S), ${left}s left)"
  GAPSCOPE="$bin" timeout --signal=INT --kill-after=15 "$left" \
    "$here/run_aa.sh" "$here/aa_h200_rotate.toml" 1 "$csv" "$results" || echo "run $i cut short"
done
cat "$csv"
tar -czf "$out/results.tar.gz" -C "$(dirname "$results")" "$(basename "$results")"
ls -la "$out"

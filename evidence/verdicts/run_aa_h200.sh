#!/usr/bin/env bash
# On the H200 host, from the repository root, after
#   cargo build --release --features cuda
# runs the GPU A/A three times (aa_h200.toml), writes one headline row per run to
# evidence/verdicts/aa_h200.csv, and copies the first run's folder (without telemetry)
# to tests/fixtures/aa-gpu-h200/, which tests/it/headline.rs then checks.
set -euo pipefail
here=$(dirname "$0")
GAPSCOPE=${GAPSCOPE:-target/release/gapscope} \
  "$here/run_aa.sh" "$here/aa_h200.toml" 3 "$here/aa_h200.csv" results/verdicts
first=$(ls -d results/verdicts/aa_h200/*/ | sort | head -1)
mkdir -p tests/fixtures/aa-gpu-h200
for f in experiment.toml meta.json runs.csv spans.csv gpu_activity.csv; do
  cp "$first/$f" tests/fixtures/aa-gpu-h200/ 2>/dev/null || true
done
cat "$here/aa_h200.csv"

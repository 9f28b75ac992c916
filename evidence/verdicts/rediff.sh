#!/usr/bin/env bash
# Diffs run folders already recorded again, with this checkout's binary, into a CSV of
# headline rows (as run_aa.sh writes):  evidence/verdicts/rediff.sh OUT_CSV RUN_DIR...
# DIFF_ARGS adds options to each diff (e.g. the rules before false-discovery control).
set -euo pipefail
out=${1:?output CSV}; shift
bin=${GAPSCOPE:-target/release/gapscope}
here=$(dirname "$0")
echo "run_dir,wall_s,end_to_end_verdict,headline_changes,comparisons,survivors,uncorrected,changes" >"$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for dir in "$@"; do
  dir=${dir%/}
  # The diff goes to a scratch file: committed run folders are left as they were.
  "$bin" diff "$dir" --format json ${DIFF_ARGS:-} >"$tmp/diff.json"
  python3 "$here/headline_row.py" "$dir" "" "$tmp/diff.json" >>"$out"
done
cat "$out"

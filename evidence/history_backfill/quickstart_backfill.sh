#!/bin/bash
# Runs each commit's own experiments/quickstart.toml with that commit's gapscope: a release
# build of the commit in the revision cache's worktree (prebuild.sh made them; one shared
# target dir), then the run from the worktree. Run from the repository root:
#   sh evidence/history_backfill/quickstart_backfill.sh COMMIT...  (GAPSCOPE_REV_CACHE, QS_OUT)
set -u
cache=${GAPSCOPE_REV_CACHE:-/tmp/gs-revs}
out=${QS_OUT:-/tmp/qs-bf}
mkdir -p $out
for c in "$@"; do
  full=$(git rev-parse "$c^{commit}")
  tree=$cache/$full/tree
  [ -d "$tree" ] || { echo "$c: no worktree"; continue; }
  t0=$(date +%s)
  if [ ! -x "$tree/gapscope.bin" ]; then
    # One target dir for every worktree: cargo would take another commit's artefacts for
    # fresh where this worktree's files look older (revisions::touch_worktree).
    git -C "$tree" ls-files -z | (cd "$tree" && xargs -0 touch -c)
    (cd "$tree" && CARGO_TARGET_DIR=$cache/target CARGO_BUILD_JOBS=2 cargo build --release --bin gapscope >"$cache/$full/qs-build.log" 2>&1 && cp $cache/target/release/gapscope gapscope.bin) || { echo "$c: build FAILED ($cache/$full/qs-build.log)"; continue; }
  fi
  t1=$(date +%s)
  (cd "$tree" && ./gapscope.bin run experiments/quickstart.toml --results-dir $out/$c --quiet >"$out/$c.log" 2>&1) && r=ok || r="FAILED rc=$?"
  echo "$c: built in $((t1-t0)) s, run $r in $(( $(date +%s) - t1 )) s: $(ls -d $out/$c/quickstart/*/ 2>/dev/null | tail -1)"
done

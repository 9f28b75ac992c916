#!/bin/sh
# Builds the span probe of each commit given, in the rev cache's layout (worktree at
# <cache>/<commit>/tree, one CARGO_TARGET_DIR), so that `gapscope run
# span_cost_history.toml` later finds every build fresh. Run from the repository root:
#   nice -n 15 sh evidence/history_backfill/prebuild.sh results/.revs COMMIT...
set -u
cache=$(realpath -m "$1"); shift
mkdir -p "$cache/target"
here=$(pwd)
for c in "$@"; do
  full=$(git rev-parse "$c^{commit}") || continue
  tree="$cache/$full/tree"
  mkdir -p "$cache/$full"
  if [ "$(git -C "$tree" rev-parse HEAD 2>/dev/null)" != "$full" ]; then
    rm -rf "$tree"; git worktree prune
    git worktree add --force --detach "$tree" "$full" >/dev/null 2>&1 || { echo "$c: worktree failed"; continue; }
  fi
  t0=$(date +%s)
  # One target dir for every worktree: cargo would take another commit's artefacts for
  # fresh where this worktree's files look older (revisions::touch_worktree).
  git -C "$tree" ls-files -z | (cd "$tree" && xargs -0 touch -c)
  if (cd "$tree" && CARGO_TARGET_DIR="$cache/target" CARGO_BUILD_JOBS=1 sh "$here/evidence/history_backfill/build_probe.sh") >"$cache/$full/prebuild.log" 2>&1; then
    echo "$c: built in $(( $(date +%s) - t0 )) s"
  else
    echo "$c: FAILED after $(( $(date +%s) - t0 )) s (log $cache/$full/prebuild.log)"
  fi
done

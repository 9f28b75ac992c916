#!/usr/bin/env bash
# Builds the supraseal-c2 fixture repository from the published 0.1.2 source (cargo's
# registry copy; nothing of upstream is committed here) with three commits:
#
#   0  supraseal-c2 0.1.2 as published
#   1  spans inside generate_groth16_proofs_c (evidence/upstream_async_drop/patches/
#      1-spans.patch, and a copy of cuda/gapscope_trace.h so the fork builds anywhere)
#   2  the destructors of split vectors, tail bases and results on a detached thread
#      (2-async-drop.patch)
#
# tagged c0, c1 and c2 (what evidence/upstream_async_drop/*.toml name). Commits have a
# fixed author and date, so their ids are the same on every host.
# Usage: scripts/supraseal-fixture.sh [DEST]     (default: tmp/supraseal-c2-fixture)
# Prints the three commit ids, oldest first.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-$root/tmp/supraseal-c2-fixture}"
patches="$root/evidence/upstream_async_drop/patches"
src="$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/supraseal-c2-0.1.2 2>/dev/null | head -n 1 || true)"
if [ -z "$src" ]; then
    echo "fetching supraseal-c2 0.1.2 into cargo's registry (cargo fetch) ..." >&2
    (cd "$root" && cargo fetch --locked >&2)
    src="$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/supraseal-c2-0.1.2 | head -n 1)"
fi
if [ -e "$dest" ]; then
    echo "$dest exists: remove it first, or give another DEST" >&2
    exit 1
fi
mkdir -p "$dest"
cp -r "$src"/. "$dest"/
rm -f "$dest/.cargo-ok"
cd "$dest"
export GIT_AUTHOR_NAME=gapscope GIT_AUTHOR_EMAIL=gapscope@localhost \
    GIT_COMMITTER_NAME=gapscope GIT_COMMITTER_EMAIL=gapscope@localhost \
    GIT_AUTHOR_DATE="2026-12-01T00:00:00Z" GIT_COMMITTER_DATE="2026-12-01T00:00:00Z"
git init -q -b main
git add -A
git commit -q -m "supraseal-c2 0.1.2 as published"
git tag c0
mkdir -p cuda/gapscope
cp "$root/cuda/gapscope_trace.h" cuda/gapscope/
git apply "$patches/1-spans.patch"
git add -A
git commit -q -m "spans inside generate_groth16_proofs_c"
git tag c1
git apply "$patches/2-async-drop.patch"
git add -A
git commit -q -m "destructors of split vectors, tail bases and results on a detached thread"
git tag c2
git log --reverse --format=%H

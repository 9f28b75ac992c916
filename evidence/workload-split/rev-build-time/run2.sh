#!/bin/sh
# The second pair (dde70a0), the whole gapscope first; as run.sh.
#   run2.sh WORK
set -u
work=$1
cd "$work/w"
export GAPSCOPE_REV_CACHE="$work/cache"
for f in whole-planted2 cheap-planted2; do
  s=$(date +%s.%N)
  "$GAPSCOPE" build-workers $f.toml --results-dir "$work/results" > $f.out 2>&1
  e=$(date +%s.%N)
  echo "$f: $(echo "$e - $s" | bc) s wall, load $(cut -d' ' -f1-3 /proc/loadavg)"
done

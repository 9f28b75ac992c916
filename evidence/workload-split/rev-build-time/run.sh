#!/bin/sh
# build-time of one rev variant: the prover's own binary vs a whole gapscope
set -u
cd /tmp/bt/w
export GAPSCOPE_REV_CACHE=/tmp/bt/cache
for f in cheap-parent cheap-planted whole-planted; do
  s=$(date +%s.%N)
  /work/main/target/debug/gapscope build-workers $f.toml --results-dir /tmp/bt/results > $f.out 2>&1
  e=$(date +%s.%N)
  echo "$f: $(echo "$e - $s" | bc) s wall, load $(cut -d' ' -f1-3 /proc/loadavg)"
done

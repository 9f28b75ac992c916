#!/bin/sh
# Build time of one rev variant of the prover: the prover's own binary against a whole
# gapscope (a variant with profile = true needs gapscope's own worker). WORK holds the
# repository (the clone with the planted commits), the revision cache (its target folder
# seeded with built dependencies) and the experiments (*.toml here, with $WORK written
# out); GAPSCOPE is the gapscope that builds them.
#   run.sh WORK         the warm-up, then 1855ed3: the binary, then a whole gapscope
set -u
work=$1
cd "$work/w"
export GAPSCOPE_REV_CACHE="$work/cache"
for f in cheap-parent cheap-planted whole-planted; do
  s=$(date +%s.%N)
  "$GAPSCOPE" build-workers $f.toml --results-dir "$work/results" > $f.out 2>&1
  e=$(date +%s.%N)
  echo "$f: $(echo "$e - $s" | bc) s wall, load $(cut -d' ' -f1-3 /proc/loadavg)"
done

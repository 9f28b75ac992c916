#!/bin/bash
# wall time of N alternating runs of each mode, span lines to a pipe drained by cat
for i in $(seq 1 20); do
  for m in registry gapscope; do
    s=$(date +%s%N); GAPSCOPE_SPAN_FD=9 $TMPDIR/mr-target/release/mini-redis-spans $m 9> >(cat > /dev/null); e=$(date +%s%N)
    echo "$m $(( (e-s)/1000 ))"
  done
done

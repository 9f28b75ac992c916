#!/bin/sh
# One step of `git bisect run`, as a user writes it with hyperfine --runs 5: build the
# demo program, time 5 runs, and call the commit bad when their mean wall time is past
# $THRESHOLD_NS (the midpoint of the ends' means, measured the same way beforehand).
#   step.sh            the step: exit 0 good, 1 bad, 125 does not build
#   step.sh mean       print the mean of 5 runs in ns (for the ends)
cc -O1 -o prog prog.c 2>/dev/null || exit 125
total=0
for i in 1 2 3 4 5; do
    s=$(date +%s%N)
    ./prog >/dev/null 2>&1
    e=$(date +%s%N)
    total=$((total + e - s))
done
mean=$((total / 5))
if [ "${1:-}" = mean ]; then
    echo "$mean"
    exit 0
fi
[ "$mean" -lt "$THRESHOLD_NS" ]

#!/bin/sh
# One step of `git bisect run` on QuickJS-ng, as a user writes it with hyperfine --runs 5:
# build qjs (make -j2 with qjs.mk; exit 125 when it does not build), time 5 runs of
# deep-throw.js, and call the commit bad when their mean wall time is past $THRESHOLD_NS
# (the midpoint of the ends' means, measured the same way beforehand).
#   step.sh            the step: exit 0 good, 1 bad, 125 does not build
#   step.sh mean       print the mean of 5 runs in ns (for the ends)
here=$(cd "$(dirname "$0")" && pwd)
make -f "$here/qjs.mk" -j2 >/dev/null 2>&1 || exit 125
total=0
for i in 1 2 3 4 5; do
    s=$(date +%s%N)
    ./qjs "$here/deep-throw.js" >/dev/null 2>&1
    e=$(date +%s%N)
    total=$((total + e - s))
done
mean=$((total / 5))
if [ "${1:-}" = mean ]; then
    echo "$mean"
    exit 0
fi
echo "mean $mean ns, threshold $THRESHOLD_NS ns" >&2
[ "$mean" -lt "$THRESHOLD_NS" ]

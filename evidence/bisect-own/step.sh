#!/bin/sh
# One step of `git bisect run` on gapscope's own history, as a user writes it with
# hyperfine --warmup $WARMUP --runs 5 (WARMUP: 1 by default; 0 in the first trial):
# build gapscope (exit 125 when it does not build), run `gapscope run` of the experiment
# (one rep each) WARMUP times untimed, then time 5 runs, and call the commit bad when their mean
# wall time is past $THRESHOLD_NS (the midpoint of the ends' means, measured the same way).
#   step.sh EXPERIMENT            the step: exit 0 good, 1 bad, 125 does not build
#   step.sh EXPERIMENT mean       print the mean of 5 runs in ns (for the ends)
exp=$1
cargo build --release --bin gapscope >/dev/null 2>&1 || exit 125
for i in $(seq 1 "${WARMUP:-1}"); do
    target/release/gapscope run "$exp" --reps 1 --results-dir "$TMPDIR/step-results" >/dev/null 2>&1
done
total=0
for i in 1 2 3 4 5; do
    s=$(date +%s%N)
    target/release/gapscope run "$exp" --reps 1 --results-dir "$TMPDIR/step-results" >/dev/null 2>&1
    e=$(date +%s%N)
    total=$((total + e - s))
done
mean=$((total / 5))
if [ "${2:-}" = mean ]; then
    echo "$mean"
    exit 0
fi
echo "mean $mean ns, threshold $THRESHOLD_NS ns" >&2
[ "$mean" -lt "$THRESHOLD_NS" ]

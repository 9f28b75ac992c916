#!/bin/sh
# Build time of one `patch` variant of the prover: blstrs (the prover's BLS12-381 crate,
# which bellperson builds on too) patched with a local copy, built as the prover's own
# binary and as a whole gapscope (a variant with profile = true needs gapscope's own
# worker), twice each in alternating order, the copy changed before each build so that
# cargo rebuilds blstrs and everything above it.
#   evidence/workload-split/patch-build-time/run.sh WORK WARM
# WORK: a scratch folder; WARM: a release target folder with the dependencies built.
set -eu
work=$1
warm=$2
here=$(cd "$(dirname "$0")" && pwd)
gs=${GAPSCOPE:-$here/../../../target/release/gapscope}
rm -rf "$work" && mkdir -p "$work/cache/target"
cp -a "$warm" "$work/cache/target/release"
cp -r "$(ls -d "$HOME"/.cargo/registry/src/*/blstrs-0.7.1 | head -n 1)" "$work/blstrs"
export GAPSCOPE_REV_CACHE="$work/cache"
for kind in binary whole; do
    {
        echo "name = \"pb\""
        echo "[workload]"
        echo "circuit = \"chain\""
        echo "log2_constraints = 4"
        echo "[[variant]]"
        echo "name = \"fork\""
        [ "$kind" = whole ] && echo "profile = true"
        echo "patch = { blstrs = { path = \"$work/blstrs\" } }"
    } > "$work/$kind.toml"
done
n=0
for kind in binary whole whole binary; do
    n=$((n + 1))
    echo "// change $n" >> "$work/blstrs/src/lib.rs"
    s=$(date +%s.%N)
    "$gs" build-workers "$work/$kind.toml" --results-dir "$work/results" > "$work/$kind-$n.out" 2>&1
    e=$(date +%s.%N)
    log=$(ls -t "$work"/cache/patched/*/*/build.log | head -n 1)
    echo "$n $kind: $(echo "$e - $s" | bc) s wall, load $(cut -d' ' -f1-3 /proc/loadavg), $(grep -o 'Finished.*' "$log"), compiled: $(grep -o 'Compiling [a-z0-9_-]*' "$log" | cut -d' ' -f2 | tr '\n' ' ')"
done

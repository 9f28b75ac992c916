#!/bin/sh
# gapscope bisect with its defaults against `git bisect run` with a hyperfine-like step
# (step.sh), one after the other on the same machine, on a wrapper regression planted in
# gapscope's own history (plant.sh). Both start with the release dependencies built (a
# copy of WARM, a release target folder), as a bisect's later steps find them.
#   evidence/bisect-own/compare.sh OUT BASE WARM [TRIALS]
set -eu
out=$(mkdir -p "$1" && cd "$1" && pwd)
base=$2
warm=$3
trials=${4:-1}
here=$(cd "$(dirname "$0")" && pwd)
gs=${GAPSCOPE:-$here/../../target/release/gapscope}
secs() { echo "$1 $2" | awk '{printf "%.2f", ($2 - $1) / 1e9}'; }
export TMPDIR=${TMPDIR:-/tmp}
for t in $(seq 1 "$trials"); do
    d="$out/trial-$t"
    rm -rf "$d"
    mkdir -p "$d"
    want=$(sh "$here/plant.sh" "$d/repo" "$base")
    mkdir -p "$d/cache/target" "$d/repo/target"
    cp -a "$warm" "$d/cache/target/release"
    cp -a "$warm" "$d/repo/target/release"
    export GAPSCOPE_PARAMS_DIR="$d/params"
    load=$(cut -d' ' -f1 /proc/loadavg)
    s=$(date +%s%N)
    (cd "$d" && GAPSCOPE_REV_CACHE="$d/cache" "$gs" bisect --repo repo --good planted~5 \
        --bad planted --experiment "$here/wrapper.toml" --metric gpu_prove.total \
        > gapscope.txt 2> gapscope.err) || true
    e=$(date +%s%N)
    got=$(sed -n 's/^first bad commit: //p' "$d/gapscope.txt")
    echo "trial $t gapscope seconds $(secs "$s" "$e") load $load-$(cut -d' ' -f1 /proc/loadavg) named ${got:-none} right $([ "$got" = "$want" ] && echo yes || echo no)" >> "$out/results.txt"
    load=$(cut -d' ' -f1 /proc/loadavg)
    s=$(date +%s%N)
    (
        cd "$d/repo"
        git checkout -q planted~5 && g=$(sh "$here/step.sh" "$here/wrapper.toml" mean)
        git checkout -q planted && b=$(sh "$here/step.sh" "$here/wrapper.toml" mean)
        export THRESHOLD_NS=$(((g + b) / 2))
        git bisect start --first-parent planted planted~5 >/dev/null
        git bisect run sh "$here/step.sh" "$here/wrapper.toml" > ../git-bisect.txt 2>&1 || true
        git bisect reset >/dev/null 2>&1
        echo "ends: good $g ns, bad $b ns, threshold $THRESHOLD_NS ns" >> ../git-bisect.txt
    )
    e=$(date +%s%N)
    got=$(sed -n 's/^\([0-9a-f]\{40\}\) is the first bad commit$/\1/p' "$d/git-bisect.txt")
    echo "trial $t git-bisect-run seconds $(secs "$s" "$e") load $load-$(cut -d' ' -f1 /proc/loadavg) named ${got:-none} right $([ "$got" = "$want" ] && echo yes || echo no)" >> "$out/results.txt"
done
cat "$out/results.txt"

#!/bin/sh
# gapscope bisect with its defaults against `git bisect run` with a hyperfine-like step
# (step.sh: build, then 5 timed runs per commit, its threshold the midpoint of the ends'
# means, which it measures first), one after the other on the same machine, on a real
# regression: QuickJS-ng (https://github.com/quickjs-ng/quickjs), 40 first-parent
# commits from 7021858 (good) to 882f885 (bad); 4c32c53 made deep-throw.js ~50x slower.
# QJS_REPO is a clone of that repository (any clone holding those commits). Each trial
# clones it afresh (no build outputs), runs gapscope in a fresh results folder, then
# git bisect run in the same clone. Appends one line per tool and trial to
# OUT/results.txt and keeps each trial's output in OUT/trial-N/.
#   evidence/bisect-real/compare.sh OUT QJS_REPO [TRIALS]
set -eu
out=$(mkdir -p "$1" && cd "$1" && pwd)
src=$(cd "$2" && pwd)
trials=${3:-3}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
gs=${GAPSCOPE:-$root/target/release/gapscope}
good=702185888e64ec07cb90f6249aff00ed560fa271
bad=882f885014d36498b7380288f18207884e3e1f9d
want=4c32c53a3bffa2a8c0029f5149ba5c6f4081726d
secs() { echo "$1 $2" | awk '{printf "%.2f", ($2 - $1) / 1e9}'; }
load() { cut -d' ' -f1 /proc/loadavg; }
for t in $(seq 1 "$trials"); do
    d="$out/trial-$t"
    rm -rf "$d"
    mkdir -p "$d"
    git clone -q "$src" "$d/repo"
    cat > "$d/qjs.toml" <<T
name = "qjs-deep-throw"
[workload]
command = ["./qjs", "$here/deep-throw.js"]
build = ["make", "-f", "$here/qjs.mk", "-j2"]
[[variant]]
name = "qjs"
T
    # gapscope: its defaults, a fresh results folder.
    l0=$(load)
    s=$(date +%s%N)
    (cd "$d" && "$gs" bisect --repo repo --good "$good" --bad "$bad" --experiment qjs.toml \
        --metric program.total > gapscope.txt 2> gapscope.err) || true
    e=$(date +%s%N)
    got=$(sed -n 's/^first bad commit: //p' "$d/gapscope.txt")
    echo "trial $t gapscope seconds $(secs "$s" "$e") load $l0-$(load) named ${got:-none} right $([ "$got" = "$want" ] && echo yes || echo no)" >> "$out/results.txt"
    # git bisect run: the ends timed first for the threshold, then the search.
    l0=$(load)
    s=$(date +%s%N)
    (
        cd "$d/repo"
        git checkout -q "$good" && g=$(sh "$here/step.sh" mean)
        git checkout -q "$bad" && b=$(sh "$here/step.sh" mean)
        export THRESHOLD_NS=$(((g + b) / 2))
        git bisect start --first-parent "$bad" "$good" >/dev/null
        git bisect run sh "$here/step.sh" > ../git-bisect.txt 2>&1 || true
        git bisect reset >/dev/null 2>&1
        echo "ends: good $g ns, bad $b ns, threshold $THRESHOLD_NS ns" >> ../git-bisect.txt
    )
    e=$(date +%s%N)
    got=$(sed -n 's/^\([0-9a-f]\{40\}\) is the first bad commit$/\1/p' "$d/git-bisect.txt")
    echo "trial $t git-bisect-run seconds $(secs "$s" "$e") load $l0-$(load) named ${got:-none} right $([ "$got" = "$want" ] && echo yes || echo no)" >> "$out/results.txt"
done
cat "$out/results.txt"

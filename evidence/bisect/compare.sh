#!/bin/sh
# gapscope bisect with its defaults against `git bisect run` with a hyperfine-like step
# (step.sh: 5 timed runs per commit, its threshold the midpoint of the ends' means, which
# it measures first), one after the other on the same machine, on the bisect demo
# (scripts/bisect-demo.sh DIR PERCENT). Appends one line per tool and trial to
# OUT/results.txt and keeps each trial's output in OUT/trial-N/.
#   evidence/bisect/compare.sh OUT [PERCENT] [TRIALS]
set -eu
out=$(mkdir -p "$1" && cd "$1" && pwd)
pct=${2:-108}
trials=${3:-3}
here=$(cd "$(dirname "$0")/../.." && pwd)
gs=${GAPSCOPE:-$here/target/debug/gapscope}
step="$here/evidence/bisect/step.sh"
secs() { echo "$1 $2" | awk '{printf "%.2f", ($2 - $1) / 1e9}'; }
for t in $(seq 1 "$trials"); do
    d="$out/trial-$t"
    rm -rf "$d"
    "$here/scripts/bisect-demo.sh" "$d" "$pct" >/dev/null
    want=$(git -C "$d/repo" rev-list --reverse main | sed -n 6p)
    load=$(cut -d' ' -f1 /proc/loadavg)
    # gapscope: its defaults, a fresh results folder.
    s=$(date +%s%N)
    (cd "$d" && "$gs" bisect --repo repo --good main~6 --bad main --experiment demo.toml \
        --metric work.process_cpu > gapscope.txt 2> gapscope.err) || true
    e=$(date +%s%N)
    got=$(sed -n 's/^first bad commit: //p' "$d/gapscope.txt")
    echo "trial $t percent $pct gapscope seconds $(secs "$s" "$e") load $load named ${got:-none} right $([ "$got" = "$want" ] && echo yes || echo no)" >> "$out/results.txt"
    # git bisect run: the ends timed first for the threshold, then the search.
    load=$(cut -d' ' -f1 /proc/loadavg)
    s=$(date +%s%N)
    (
        cd "$d/repo"
        git checkout -q main~6 && g=$(sh "$step" mean)
        git checkout -q main && b=$(sh "$step" mean)
        export THRESHOLD_NS=$(((g + b) / 2))
        git bisect start --first-parent main main~6 >/dev/null
        git bisect run sh "$step" > ../git-bisect.txt 2>&1 || true
        git bisect reset >/dev/null 2>&1
        echo "ends: good $g ns, bad $b ns, threshold $THRESHOLD_NS ns" >> ../git-bisect.txt
    )
    e=$(date +%s%N)
    got=$(sed -n 's/^\([0-9a-f]\{40\}\) is the first bad commit$/\1/p' "$d/git-bisect.txt")
    echo "trial $t percent $pct git-bisect-run seconds $(secs "$s" "$e") load $load named ${got:-none} right $([ "$got" = "$want" ] && echo yes || echo no)" >> "$out/results.txt"
done
cat "$out/results.txt"

#!/usr/bin/env bash
# Collection at sweep scale: 1,000 run folders (copies of the committed CPU quickstart
# fixture, each with its own run id, spread over 4 host names of one machine type) under
# one results root, imported into a fresh history database by `gapscope history import`,
# then imported again (idempotent: nothing new stored). Times with /usr/bin/time -v.
#
# Usage: evidence/sweep-collect/bench.sh GAPSCOPE_BINARY [N]   (from the repository root)
set -euo pipefail
bin="$(realpath "${1:?gapscope binary}")"
n="${2:-1000}"
fixture="$(realpath tests/fixtures/quickstart-cpu)"
work="$(mktemp -d $TMPDIR/gapscope-collect.XXXXXX)"
trap 'rm -rf "$work"' EXIT
root="$work/root"
for i in $(seq 0 $((n - 1))); do
    id=$(printf '20261201T000000Z-%06d' "$i")
    d="$root/cell-$(printf %04d "$i")/quickstart/$id"
    mkdir -p "$d"
    cp "$fixture"/* "$d/"
    python3 - "$d/meta.json" "$id" "host-$((i % 4))" <<'PY'
import json, sys
p, run_id, host = sys.argv[1:]
m = json.load(open(p))
m["run_id"] = run_id
m["host"]["hostname"] = host
json.dump(m, open(p, "w"), indent=1)
PY
done
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "folders: $n ($(du -sh "$root" | cut -f1))"
for pass in first again; do
    /usr/bin/time -v "$bin" history import "$root" --db "$work/history.sqlite" \
        >"$work/$pass.out" 2>"$work/$pass.err" || { cat "$work/$pass.err"; exit 1; }
    wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$work/$pass.err")
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/$pass.err")
    echo "import ($pass): wall $wall, max RSS ${rss} KiB; $(tail -n 1 "$work/$pass.out")"
done

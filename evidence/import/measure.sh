#!/usr/bin/env bash
# Streaming import of a large generated Chrome trace: wall time, events per second and
# peak RSS, with /usr/bin/time -v. Usage: evidence/import/measure.sh GAPSCOPE STEPS [REPEATS]
# (STEPS = 5000 makes about 1 million events and 200 MB). Writes the generated file and the
# run folders under $TMPDIR (default /tmp), prints one line per repeat. CORES=N runs every
# timed command on the first N cores only (taskset), so that a larger host measures what
# an N-core machine would; REUSE=1 keeps the file an earlier call generated; REFS=0 leaves
# out the references (for calls interleaved with another build's on the same file).
# Each timed import starts after a sync, with no other writes pending.
set -euo pipefail
bin=${1:?gapscope binary}
steps=${2:?steps}
repeats=${3:-3}
here=$(cd "$(dirname "$0")" && pwd)
tmp=${TMPDIR:-/tmp}/gapscope-import-scale
pin=()
[ -n "${CORES:-}" ] && pin=(taskset -c "0-$((CORES - 1))")
mkdir -p "$tmp" && rm -rf "$tmp"/results-*
if [ -z "${REUSE:-}" ] || [ ! -s "$tmp/gen.txt" ]; then
  python3 "$here/gen_big_chrome.py" "$tmp/big.json" --steps "$steps" > "$tmp/gen.txt"
fi
events=$(awk '{print $2}' "$tmp/gen.txt")
bytes=$(stat -c %s "$tmp/big.json")
echo "file: $bytes bytes, $events events ($(nproc) cores, ${CORES:-all} used, load $(cut -d' ' -f1-3 /proc/loadavg))"
for i in $(seq 1 "$repeats"); do
  # What earlier commands wrote reaches the disk first: the kernel's writing of another
  # import's rows would take these cores during this one.
  sync
  "${pin[@]}" /usr/bin/time -v "$bin" import --name scale --variant a "$tmp/big.json" \
    --results-dir "$tmp/results-$i" > /dev/null 2> "$tmp/time-$i.txt"
  wall=$(grep 'Elapsed (wall clock)' "$tmp/time-$i.txt" | awk '{print $NF}')
  rss=$(grep 'Maximum resident set size' "$tmp/time-$i.txt" | awk '{print $NF}')
  user=$(grep 'User time' "$tmp/time-$i.txt" | awk '{print $NF}')
  secs=$(python3 -c "p='$wall'.split(':'); print(sum(float(x) * 60 ** i for i, x in enumerate(reversed(p))))")
  rate=$(python3 -c "print(round($events / $secs))")
  rows=$(($(wc -l < "$(ls -d "$tmp"/results-$i/scale/*)/spans.csv") - 1))
  echo "repeat $i: wall ${secs} s, user ${user} s, ${rate} events/s, peak RSS $((rss / 1024)) MiB, span rows $rows, load $(cut -d' ' -f1 /proc/loadavg)"
done
# References on the same file and machine, in the same run: hashing it, and Python's
# json.load (which builds a tree and nothing else).
[ "${REFS:-1}" = 0 ] && exit 0
"${pin[@]}" /usr/bin/time -f "reference: sha256sum %e s wall" sha256sum "$tmp/big.json" 2>&1 >/dev/null
"${pin[@]}" /usr/bin/time -f "reference: python3 json.load %e s wall, peak RSS %M KB" \
  python3 -c "import json, sys; json.load(open(sys.argv[1]))" "$tmp/big.json" 2>&1
# Perfetto's trace processor loading the same file and counting its slices, where one is
# here: TP=path, else trace_processor_shell on PATH, else the one PyPI's `perfetto`
# downloads on first use (it needs commondatastorage.googleapis.com).
tp=${TP:-$(command -v trace_processor_shell || true)}
cached=$(ls "$HOME"/.local/share/perfetto/prebuilts/trace_processor_shell* 2>/dev/null | grep -v '\.tmp$' | head -1 || true)
[ -z "$tp" ] && tp=$cached
if [ -n "$tp" ]; then
  echo "select count(*) from slice;" > "$tmp/count.sql"
  "${pin[@]}" /usr/bin/time -f "reference: trace_processor_shell %e s wall, peak RSS %M KB" \
    "$tp" -q "$tmp/count.sql" "$tmp/big.json" 2>&1 >/dev/null | tail -1 ||
    echo "reference: trace_processor_shell ($tp) failed on the file"
else
  echo "reference: trace_processor_shell: none here (TP=path, PATH, or PyPI perfetto's download): not timed"
fi

#!/usr/bin/env bash
# The import's scale measurement on the GPU host (its CPUs only): the same file imported
# by two builds (BEFORE and AFTER, each a gzipped release binary), on 2 cores and on all
# of them, 3 repeats each. usage: evidence/import/device.sh BEFORE.gz AFTER.gz OUTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${3:?out dir}
bins=${TMPDIR:-/tmp}/gs-bin
mkdir -p "$out" "$bins"
for b in before after; do
  src=$1; [ $b = after ] && src=$2
  gunzip -c "$src" > "$bins/$b" && chmod +x "$bins/$b"
done
{
  echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
  for cores in 2 ""; do
    for b in before after; do
      echo "== $b build, cores: ${cores:-all}"
      CORES=$cores REUSE=1 "$here/measure.sh" "$bins/$b" 5000 3
    done
  done
} 2>&1 | tee "$out/scale-h200-host.txt"

#!/usr/bin/env bash
# Times Groth16 parameter generation on the GPU host, generator against generator, with
# the bundle's binary (`gapscope __params --time-only`: nothing is written to a cache).
#
# Usage, from the repository root with .bundle/ carried along:
#   bash .bundle/device-paramgen.sh [-g "auto bellperson"] [-s SEED] [-t LIMIT_S] porep:22 chain:24 ...
#
#   -g  generators to time, in order (auto | cpu | cuda | bellperson; default "auto cpu")
#   -s  fixed (insecure) toxic waste: every generator then makes the same params, and
#       each line carries their SHA-256 (params_sha256), which must agree within a size
#   -t  time limit per generation in seconds (default 600); a generation past it is
#       killed and recorded as timed out
#
# Writes into $OUT (default ./device-out): paramgen.jsonl (one JSON line per generation:
# key, generator, elapsed_ms, report with the stage timings, or the failure) and
# paramgen.log (each generation's stage table as the binary prints it).
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$here/bundle-bin.sh"
gens="auto cpu"
seed=""
limit=600
while getopts "g:s:t:" o; do
    case "$o" in
        g) gens="$OPTARG" ;;
        s) seed="$OPTARG" ;;
        t) limit="$OPTARG" ;;
        *) echo "usage: $0 [-g GENERATORS] [-s SEED] [-t LIMIT_S] CIRCUIT:LOG2..." >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { echo "name at least one CIRCUIT:LOG2, e.g. porep:22" >&2; exit 2; }
out="${OUT:-./device-out}"
mkdir -p "$out"
jsonl="$out/paramgen.jsonl"
log="$out/paramgen.log"
extra=()
[ -n "$seed" ] && extra=(--toxic-seed "$seed" --digest)
{ echo "host: $(hostname) cpus: $(nproc)"; nvidia-smi -L 2>/dev/null || echo "no nvidia-smi"; } >>"$log"

for spec in "$@"; do
    circuit="${spec%%:*}"
    log2="${spec##*:}"
    for g in $gens; do
        echo "== $circuit 2^$log2, generator $g" | tee -a "$log" >&2
        start=$(date +%s%N)
        line="$(timeout "$limit" "$bin" __params --circuit "$circuit" --log2-constraints "$log2" \
            --gadget lc --generator "$g" --time-only "${extra[@]}" 2> >(tee -a "$log" >&2))"
        rc=$?
        wall_ms=$(( ($(date +%s%N) - start) / 1000000 ))
        if [ $rc -eq 0 ] && [ -n "$line" ]; then
            echo "$line" >>"$jsonl"
        else
            why="exit status $rc"
            [ $rc -eq 124 ] && why="timed out after ${limit} s"
            printf '{"circuit":"%s","log2_constraints":%s,"generator":"%s","failed":"%s","wall_ms":%s}\n' \
                "$circuit" "$log2" "$g" "$why" "$wall_ms" >>"$jsonl"
        fi
        echo "   wall ${wall_ms} ms (rc $rc)" | tee -a "$log" >&2
    done
done
echo "results: $jsonl" >&2

#!/usr/bin/env bash
# The async-drop fix on upstream's own code (evidence/upstream_async_drop/): supraseal-c2
# 0.1.2 as published (c0), with our spans (c1), with its destructors on a detached thread
# (c2), each a `patch` variant whose worker is built here and run on the GPU host.
#
# On a build machine (cargo, no GPU), from the repository root:
#   bash scripts/device-upstream-drop.sh prepare
#     makes the fixture repository (scripts/supraseal-fixture.sh, tmp/supraseal-c2-fixture),
#     builds the three workers with the CUDA toolkit (features supraseal) through
#     `gapscope build-workers` into tmp/upstream-drop/cache, and packs them, stripped and
#     gzipped, with the experiments into .bundle/upstream-drop/ (ignored by git; carry
#     `.bundle`). Slow: three release builds of gapscope with supraseal-c2.
# On the GPU host (no cargo, no Rust), from the repository root:
#   bash scripts/device-upstream-drop.sh run [--resume] [porep|chain ...]
#     runs evidence/upstream_async_drop/experiment.toml (porep 2^22 x 4) and chain.toml
#     (chain 2^20 x 4) with the prebuilt workers (the c0 worker is the gapscope that runs
#     them: the same commit), then writes into $OUT (at most 7 files): device-run.log,
#     env.txt, results.tar.gz (the run folders), diff-<run>.txt (c0 vs c1, c1 vs c2) and
#     report-<run>.tar.gz (report.md with the gaps chart) per run. --resume continues
#     the latest run of each experiment (one cut short by the time budget).
# Environment: OUT (default ./device-out), GAPSCOPE_PARAMS_DIR (default ./params),
# GAPSCOPE_DEVICE_BUDGET_S (default 540; finished reps are kept).
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
pack="$root/.bundle/upstream-drop"
mode="${1:-}"
shift || true

prepare() {
    set -e
    [ -d tmp/supraseal-c2-fixture ] || scripts/supraseal-fixture.sh tmp/supraseal-c2-fixture
    cuda_env="$(scripts/cuda-toolkit.sh)"
    eval "$cuda_env"
    export GAPSCOPE_REV_CACHE="$root/tmp/upstream-drop/cache"
    export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"
    cargo build --locked --bin gapscope
    nice target/debug/gapscope build-workers evidence/upstream_async_drop/experiment.toml \
        --features "${GAPSCOPE_FEATURES:-cuda,supraseal}" --results-dir tmp/upstream-drop/results
    rm -rf "$pack"
    mkdir -p "$pack/experiments"
    cp evidence/upstream_async_drop/*.toml "$pack/experiments/"
    for entry in "$GAPSCOPE_REV_CACHE"/patched/*/*/entry.json; do
        dir="$(dirname "$entry")"
        rel="${dir#"$GAPSCOPE_REV_CACHE"/}"
        mkdir -p "$pack/cache/$rel"
        cp "$entry" "$pack/cache/$rel/"
        tail -n 40 "$dir/build.log" >"$pack/cache/$rel/build.log"
        objcopy --strip-debug "$dir/gapscope" "$pack/cache/$rel/gapscope"
        gzip -9 "$pack/cache/$rel/gapscope"
    done
    du -sh "$pack"
    echo "carry .bundle; on the GPU host: bash scripts/device-upstream-drop.sh run"
}

run() {
    local out="${OUT:-$PWD/device-out}" params="${GAPSCOPE_PARAMS_DIR:-$PWD/params}"
    local budget="${GAPSCOPE_DEVICE_BUDGET_S:-540}" start results bin
    start="$(date +%s)"
    results="$PWD/tmp/device/results"
    mkdir -p "$out" "$params" "$results"
    exec > >(tee -a "$out/device-run.log") 2>&1
    export GAPSCOPE_REV_CACHE="$pack/cache"
    # The c0 worker runs the experiment: the same gapscope commit as the other two.
    local c0
    c0="$(grep -l '"rev": "c0"' "$pack"/cache/patched/*/*/entry.json | head -n 1)"
    if [ -z "$c0" ]; then
        echo "error: no prepared workers in $pack: run \`bash scripts/device-upstream-drop.sh prepare\` on a build machine and carry .bundle" >&2
        exit 1
    fi
    bin="$PWD/tmp/device/gapscope"
    gunzip -c "$(dirname "$c0")/gapscope.gz" >"$bin.tmp" && chmod +x "$bin.tmp" && mv "$bin.tmp" "$bin"
    { nvidia-smi; uname -a; nproc; grep -m1 'model name' /proc/cpuinfo; } >"$out/env.txt" 2>&1
    local exps=() status=0 resume=0
    for a in "$@"; do
        case "$a" in --resume) resume=1 ;; *) exps+=("$a") ;; esac
    done
    [ ${#exps[@]} -gt 0 ] || exps=(porep chain)
    for e in "${exps[@]}"; do
        local file name last left
        case "$e" in
            porep) file="$pack/experiments/experiment.toml" ;;
            chain) file="$pack/experiments/chain.toml" ;;
            *) file="$e" ;;
        esac
        name="$(sed -n 's/^name *= *"\([^"]*\)".*/\1/p' "$file" | head -n 1)"
        left=$((budget - ($(date +%s) - start)))
        [ "$left" -gt 10 ] || { echo "time budget spent; not starting $e"; status=1; break; }
        local args=(run "$file")
        if [ "$resume" = 1 ]; then
            last="$(ls -1d "$results/$name"/*/ 2>/dev/null | sort | tail -n 1)"
            [ -z "$last" ] || args=(run --resume "${last%/}")
        fi
        echo "== ${args[*]} (budget ${left}s)"
        timeout --signal=INT --kill-after=15 "$left" \
            "$bin" "${args[@]}" --results-dir "$results" --params-dir "$params" || status=1
    done
    for d in "$results"/*/*/; do
        [ -f "$d/meta.json" ] || continue
        local id
        id="$(basename "$(dirname "$d")")-$(basename "$d")"
        {
            echo "== c0 (as published) vs c1 (our spans)"
            "$bin" diff "$d" --baseline c0 --candidate c1 2>&1
            echo "== c1 (spans) vs c2 (destructors on a detached thread)"
            "$bin" diff "$d" --baseline c1 --candidate c2 2>&1
        } >"$out/diff-$id.txt"
        "$bin" report "$d" --out "$PWD/tmp/device/report-$id" >/dev/null 2>&1 \
            && tar -czf "$out/report-$id.tar.gz" -C "$PWD/tmp/device" "report-$id"
    done
    tar -czf "$out/results.tar.gz" -C "$(dirname "$results")" results
    echo "packed into $out: $(ls "$out" | tr '\n' ' ')"
    exit "$status"
}

case "$mode" in
    prepare) prepare ;;
    run) run "$@" ;;
    *) sed -n '2,22p' "$0"; exit 2 ;;
esac

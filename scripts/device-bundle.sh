#!/usr/bin/env bash
# Builds the release binary with the GPU features here (a build machine: no GPU needed)
# and lays out in .bundle/ (ignored by git) everything the GPU host needs, which has no
# Rust and no network:
#
#   .bundle/gapscope.gz       the binary (debug info stripped, gzipped: the bundle and the
#                             repository travel together under a size limit); the scripts
#                             below unpack it on first use
#   .bundle/gapscope-groth16-worker.gz  the prover's own binary, the same way
#   .bundle/experiments/      every experiments/*.toml and evidence/*/*.toml (flat)
#   .bundle/device-run.sh     runs experiments there and packs the results into $OUT
#   .bundle/diag-supraseal.sh probes the upstream prover (ours and bellperson's hand-off)
#   .bundle/device-paramgen.sh times params generation, generator against generator
#   .bundle/BUNDLE.txt        what was built: revision, features, toolchains, checksum
#
# Usage: scripts/device-bundle.sh            (features: supraseal; GAPSCOPE_GPU_FEATURES
#                                             overrides, comma-separated)
# Then, on the GPU host, from the repository root with .bundle/ carried along:
#   bash .bundle/device-run.sh supraseal_vs_cpu_2e16
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
features="${GAPSCOPE_GPU_FEATURES:-supraseal}"

# (assigned first: `eval "$(…)"` would hide a failed install from set -e)
cuda_env="$(scripts/cuda-toolkit.sh)"
eval "$cuda_env"

# meta.json records the revision; the GPU host may have no git checkout to ask.
rev="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
if ! git diff --quiet HEAD 2>/dev/null; then rev="$rev-dirty"; fi
export GAPSCOPE_GIT_REV="$rev"

echo "building gapscope (release, features: $features) ..." >&2
cargo build --release --locked --features "$features"

target="${CARGO_TARGET_DIR:-$root/target}"
bin="$target/release/gapscope"
out="$root/.bundle"
rm -rf "$out"
mkdir -p "$out/experiments"
# Symbols stay (backtraces name functions); line tables go.
objcopy --strip-debug "$bin" "$out/gapscope"
# The CUPTI injection library of `cupti = true` command workloads is found beside the
# binary (src/capture/cupti_lib.rs).
inject="$target/release/libgapscope_cupti_inject.so"
if [ -f "$inject" ]; then
    objcopy --strip-debug "$inject" "$out/libgapscope_cupti_inject.so"
else
    echo "warning: $inject was not built: cupti = true workloads will not run from this bundle" >&2
fi
# The prover's own binary (`[workload] worker`), built with the same features.
prover_bin="$target/release/gapscope-groth16-worker"
if [ -f "$prover_bin" ]; then
    objcopy --strip-debug "$prover_bin" "$out/gapscope-groth16-worker"
else
    echo "warning: $prover_bin was not built: worker = [\".bundle/gapscope-groth16-worker\"] will not run from this bundle" >&2
fi
sha="$(sha256sum "$out/gapscope" | cut -d' ' -f1)"
cp experiments/*.toml evidence/*/*.toml "$out/experiments/"
cp scripts/bundle-bin.sh scripts/device-run.sh scripts/device-cuda.sh scripts/diag-supraseal.sh scripts/device-paramgen.sh "$out/"
chmod +x "$out/device-cuda.sh" "$out/device-run.sh" "$out/diag-supraseal.sh" "$out/device-paramgen.sh"
{
    echo "revision: $rev"
    echo "features: $features"
    echo "built_utc: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "rustc: $(rustc --version)"
    echo "nvcc: $(nvcc --version | grep -o 'release [0-9.]*, V[0-9.]*')"
    echo "nvcc_append_flags: ${NVCC_APPEND_FLAGS:-(none: upstream has no sm_90 code)}"
    echo "glibc_needed: $(objdump -T "$out/gapscope" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1)"
    echo "sha256: $sha (unpacked)"
} >"$out/BUNDLE.txt"
gzip -9 "$out/gapscope"
[ -f "$out/gapscope-groth16-worker" ] && gzip -9 "$out/gapscope-groth16-worker"

size="$(du -sm "$out" | cut -f1)"
cat "$out/BUNDLE.txt" >&2
echo "bundle: $out (${size} MiB)" >&2
if [ "$size" -ge 60 ]; then
    echo "warning: the bundle is ${size} MiB; a device transfer may be limited to 64 MiB" >&2
fi
echo "on the GPU host, from the repository root: bash .bundle/device-run.sh supraseal_vs_cpu_2e16" >&2

#!/usr/bin/env bash
# Installs the CUDA 13.0 compiler (nvcc, cudart, headers) from PyPI into a project-local
# folder, then prints the environment a GPU build needs, as shell `export` lines:
#
#   eval "$(scripts/cuda-toolkit.sh)"
#   cargo build --release --features supraseal
#
# No GPU is needed to compile. Idempotent: an installed toolkit of the pinned versions is
# reused. Progress goes to stderr, so stdout is only the export lines.
#
# Options:  --dir DIR   install there instead of .toolchain/cuda (or set GAPSCOPE_CUDA_DIR)
#           --check     install nothing; exit 1 if the toolkit is absent or incomplete
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${GAPSCOPE_CUDA_DIR:-$root/.toolchain/cuda}"
check_only=0
while [ $# -gt 0 ]; do
    case "$1" in
        --dir) dir="$2"; shift 2 ;;
        --check) check_only=1; shift ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        *) echo "cuda-toolkit.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
    esac
done

# These versions work together and match the GPU host's driver 580 (PTX ISA 9.0);
# nvidia-cuda-cccl supplies nv/target, which cooperative_groups and sppark include.
packages=(
    nvidia-cuda-nvcc==13.0.88
    nvidia-cuda-runtime==13.0.96
    nvidia-cuda-crt==13.0.88
    nvidia-nvvm==13.0.88
    nvidia-cuda-cccl==13.0.85
)
want="${packages[*]}"
cu="$dir/nvidia/cu13"
stamp="$dir/.installed"

complete() {
    [ -x "$cu/bin/nvcc" ] && [ -f "$cu/include/cuda_runtime.h" ] && [ -f "$cu/include/nv/target" ] \
        && [ -f "$cu/lib/libcudart_static.a" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]
}

if ! complete; then
    if [ "$check_only" = 1 ]; then
        echo "CUDA toolkit missing or incomplete in $dir; install it with scripts/cuda-toolkit.sh" >&2
        exit 1
    fi
    py="$(command -v python3 || command -v python || true)"
    if [ -z "$py" ] || ! "$py" -m pip --version >/dev/null 2>&1; then
        echo "cuda-toolkit.sh: needs python3 with pip to fetch the toolkit from PyPI" >&2
        exit 1
    fi
    echo "installing CUDA 13.0 compiler from PyPI into $dir (about 270 MB on disk) ..." >&2
    rm -rf "$dir"
    mkdir -p "$dir"
    PIP_ROOT_USER_ACTION=ignore "$py" -m pip install --quiet --no-deps --no-compile --target "$dir" "${packages[@]}" >&2
    # The wheels ship versioned libraries only; the linker looks for the plain names.
    lib="$cu/lib"
    for f in "$lib"/libcudart.so.*; do
        [ -e "$f" ] && [ ! -e "$lib/libcudart.so" ] && ln -s "$(basename "$f")" "$lib/libcudart.so"
    done
    # nvcc finds its tools (cicc, ptxas's companions) relative to bin/ and nvvm/.
    chmod +x "$cu"/bin/* "$cu"/nvvm/bin/* 2>/dev/null || true
    echo "$want" >"$stamp"
    if ! complete; then
        echo "cuda-toolkit.sh: installed, but $cu lacks nvcc, headers or libcudart_static.a" >&2
        exit 1
    fi
fi

"$cu/bin/nvcc" --version | tail -n 2 >&2
cat <<ENV
export CUDA_PATH="$cu"
export NVCC="$cu/bin/nvcc"
export PATH="$cu/bin:\$PATH"
export LIBRARY_PATH="$cu/lib\${LIBRARY_PATH:+:\$LIBRARY_PATH}"
ENV

# Sourced by the bundle's scripts on the GPU host: unpacks .bundle/gapscope.gz (written by
# scripts/device-bundle.sh) beside itself on first use, and checks it against BUNDLE.txt;
# and the prover's own binary (gapscope-groth16-worker.gz) where the bundle has it.
# Needs $here (the bundle's folder); sets $bin.
bin="$here/gapscope"
if [ ! -x "$bin" ] && [ -f "$bin.gz" ]; then
    gunzip -c "$bin.gz" >"$bin.tmp" && chmod +x "$bin.tmp" && mv "$bin.tmp" "$bin"
    want="$(sed -n 's/^sha256: \([0-9a-f]*\).*/\1/p' "$here/BUNDLE.txt" 2>/dev/null)"
    if [ -n "$want" ] && [ "$(sha256sum "$bin" | cut -d' ' -f1)" != "$want" ]; then
        echo "bundle: $bin does not match BUNDLE.txt's checksum: rebuild with scripts/device-bundle.sh" >&2
        rm -f "$bin"
    fi
fi
worker_bin="$here/gapscope-groth16-worker"
if [ ! -x "$worker_bin" ] && [ -f "$worker_bin.gz" ]; then
    gunzip -c "$worker_bin.gz" >"$worker_bin.tmp" && chmod +x "$worker_bin.tmp" && mv "$worker_bin.tmp" "$worker_bin"
fi

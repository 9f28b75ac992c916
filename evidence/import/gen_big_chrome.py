#!/usr/bin/env python3
"""A large Chrome trace shaped like PyTorch's profiler (Kineto), for the import's
streaming measurement (README.md here says how it was used).

    gen_big_chrome.py OUT.json --steps N [--seed S]

Per step: ProfilerStep#i on the main thread holding 40 ops (cpu_op, with Kineto's
"External id" / "Sequence number" / "Input Dims" args), each op holding 2 child ops and a
cudaLaunchKernel (cuda_runtime, with its correlation id); each launch's kernel on GPU 0
stream 7 (cat kernel, device/stream/correlation/grid/block args); a data-loader op on a
second thread. 202 events and about 40 KB per step: 5,000 steps make about 1 million
events and 200 MB. Events are written in the order a profiler flushes them (ops as they
end), so nesting cannot rely on file order. Standard library only.
"""

import argparse
import random


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    n = 0
    with open(a.out, "w", buffering=1 << 22) as f:
        f.write('{"schemaVersion": 1, "deviceProperties": [], "traceEvents": [\n')
        f.write('{"ph": "M", "name": "thread_name", "pid": 100, "tid": 1, "args": {"name": "MainThread"}}')
        t = 1_700_000_000_000.0
        corr = 0
        ext = 0
        for step in range(a.steps):
            s0 = t
            out = []
            for op in range(40):
                o0 = t
                for c in range(2):
                    d = 5 + rng.random() * 5
                    ext += 1
                    out.append('{"ph": "X", "cat": "cpu_op", "name": "aten::empty_strided", "pid": 100, "tid": 1, '
                               f'"ts": {t:.3f}, "dur": {d:.3f}, "args": {{"External id": {ext}, "Sequence number": {ext}}}}}')
                    t += d + 0.5
                corr += 1
                d = 4 + rng.random() * 2
                out.append('{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 1, '
                           f'"ts": {t:.3f}, "dur": {d:.3f}, "args": {{"correlation": {corr}, "External id": {ext}}}}}')
                k = 20 + rng.random() * 40
                out.append('{"ph": "X", "cat": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4>", '
                           f'"pid": 0, "tid": 7, "ts": {t + 3:.3f}, "dur": {k:.3f}, "args": {{"device": 0, "stream": 7, '
                           f'"correlation": {corr}, "grid": [1024, 1, 1], "block": [128, 1, 1]}}}}')
                t += d + 1
                ext += 1
                out.append('{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 100, "tid": 1, '
                           f'"ts": {o0:.3f}, "dur": {t - o0:.3f}, "args": {{"External id": {ext}, '
                           f'"Sequence number": {ext}, "Input Dims": [[256, 256], [256, 256]]}}}}')
                t += 1
            out.append('{"ph": "X", "cat": "cpu_op", "name": "load_batch", "pid": 100, "tid": 2, '
                       f'"ts": {s0 + 2:.3f}, "dur": {(t - s0) / 2:.3f}}}')
            out.append('{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d", "pid": 100, "tid": 1, '
                       '"ts": %.3f, "dur": %.3f}' % (step, s0, t - s0 + 1))
            t += 5
            n += len(out)
            f.write(",\n" + ",\n".join(out))
        f.write("\n]}\n")
    print(f"{a.out}: {n + 1} events")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Small traces for `gapscope import`'s tests, written from scratch (standard library only).

    gen_traces.py FORMAT OUT_DIR --files N [--seed S] [--slow SPAN=FACTOR] [--steps K] [--gzip]

FORMAT is one of:
  chrome  Chrome trace event JSON shaped like PyTorch's profiler (Kineto): per step a
          ProfilerStep#i with forward (X) > aten::mm > cudaLaunchKernel, backward (B/E),
          optimizer (X) on the main thread, a data-loader thread, thread and process names
          (M), and per launch a GPU kernel (cat "kernel", device 0, stream 7) with the
          launch's correlation id, a memcpy and a memset.
  otlp    OTLP JSON: per step a "request" span with children db_query and render (parent
          ids), two resources.
  nsys    An Nsight Systems-shaped SQLite export: StringIds, ThreadNames, NVTX_EVENTS
          (push/pop ranges step > compute, a mark), CUPTI_ACTIVITY_KIND_RUNTIME (launches),
          CUPTI_ACTIVITY_KIND_KERNEL / MEMCPY / MEMSET.

Durations are a base per span with +-2% seeded jitter; --slow SPAN=FACTOR multiplies one
span's own work (the time it adds to its parents too). Each file is trace_<i>.<ext>.
"""

import argparse
import gzip
import json
import os
import random
import sqlite3


def jitter(rng, base):
    return base * (1.0 + rng.uniform(-0.02, 0.02))


class Plan:
    """Durations in microseconds of each span, with a factor for the slowed one."""

    def __init__(self, rng, slow):
        self.rng = rng
        self.slow = slow

    def d(self, name, base):
        return jitter(self.rng, base) * self.slow.get(name, 1.0)


def chrome_file(rng, slow, steps, index):
    p = Plan(rng, slow)
    ev = [
        {"ph": "M", "name": "process_name", "pid": 100, "tid": 0, "args": {"name": "python"}},
        {"ph": "M", "name": "thread_name", "pid": 100, "tid": 1, "args": {"name": "MainThread"}},
        {"ph": "M", "name": "thread_name", "pid": 100, "tid": 2, "args": {"name": "loader"}},
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
    ]
    t = 1_000_000.0 + index * 10_000.0
    corr = 1
    for step in range(steps):
        s0 = t
        t += p.d("gap", 50)
        fwd0 = t
        t += p.d("forward_self", 200)
        mm0 = t
        t += p.d("aten::mm", 300)
        launch0 = t
        launch = p.d("cudaLaunchKernel", 10)
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100,
                   "tid": 1, "ts": round(launch0, 3), "dur": round(launch, 3),
                   "args": {"correlation": corr}})
        k = p.d("gemm_kernel", 400)
        ev.append({"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_tn", "pid": 0,
                   "tid": 7, "ts": round(launch0 + 5, 3), "dur": round(k, 3),
                   "args": {"device": 0, "stream": 7, "correlation": corr,
                            "grid": [64, 2, 1], "block": [256, 1, 1]}})
        corr += 1
        t += launch
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 100, "tid": 1,
                   "ts": round(mm0, 3), "dur": round(t - mm0, 3),
                   "args": {"Input Dims": [[64, 64], [64, 64]], "Sequence number": step}})
        t += p.d("forward_tail", 100)
        ev.append({"ph": "X", "cat": "cpu_op", "name": "forward", "pid": 100, "tid": 1,
                   "ts": round(fwd0, 3), "dur": round(t - fwd0, 3)})
        ev.append({"ph": "B", "name": "backward", "pid": 100, "tid": 1, "ts": round(t, 3)})
        copy0 = t + 20
        ev.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)",
                   "pid": 0, "tid": 7, "ts": round(copy0, 3), "dur": 30.0,
                   "args": {"device": 0, "stream": 7, "correlation": 0, "bytes": 1 << 20}})
        ev.append({"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0,
                   "tid": 7, "ts": round(copy0 + 40, 3), "dur": 5.0,
                   "args": {"device": 0, "stream": 7, "bytes": 4096}})
        t += p.d("backward", 500)
        ev.append({"ph": "E", "pid": 100, "tid": 1, "ts": round(t, 3)})
        opt0 = t
        t += p.d("optimizer", 150)
        ev.append({"ph": "X", "cat": "cpu_op", "name": "optimizer", "pid": 100, "tid": 1,
                   "ts": round(opt0, 3), "dur": round(t - opt0, 3)})
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step + 3}",
                   "pid": 100, "tid": 1, "ts": round(s0, 3), "dur": round(t - s0 + 1, 3)})
        ev.append({"ph": "X", "cat": "cpu_op", "name": "load_batch", "pid": 100, "tid": 2,
                   "ts": round(s0 + 10, 3), "dur": round(p.d("load_batch", 300), 3)})
        ev.append({"ph": "i", "name": "marker", "pid": 100, "tid": 1, "ts": round(t, 3), "s": "t"})
        ev.append({"ph": "s", "id": corr, "cat": "ac2g", "name": "ac2g", "pid": 100, "tid": 1,
                   "ts": round(launch0, 3)})
        t += 2
    rng.shuffle(ev)  # producers do not sort: nesting must not depend on the order
    return {"schemaVersion": 1, "traceEvents": ev, "displayTimeUnit": "ms"}


def otlp_file(rng, slow, steps, index):
    p = Plan(rng, slow)
    spans = []
    t = 1_700_000_000_000_000_000 + index * 10_000_000_000
    sid = 1
    for step in range(steps):
        req = sid
        s0 = t
        t += int(p.d("pre", 100_000))
        q0 = t
        t += int(p.d("db_query", 2_000_000))
        spans.append({"traceId": "%032x" % (step + 1), "spanId": "%016x" % (sid + 1),
                      "parentSpanId": "%016x" % req, "name": "db_query",
                      "startTimeUnixNano": str(q0), "endTimeUnixNano": str(t),
                      "attributes": [{"key": "db.system", "value": {"stringValue": "sqlite"}},
                                     {"key": "rows", "value": {"intValue": "42"}}]})
        r0 = t
        t += int(p.d("render", 1_000_000))
        spans.append({"traceId": "%032x" % (step + 1), "spanId": "%016x" % (sid + 2),
                      "parentSpanId": "%016x" % req, "name": "render",
                      "startTimeUnixNano": r0, "endTimeUnixNano": t})
        t += int(p.d("post", 100_000))
        spans.append({"traceId": "%032x" % (step + 1), "spanId": "%016x" % req,
                      "parentSpanId": "", "name": "request", "kind": 2,
                      "startTimeUnixNano": str(s0), "endTimeUnixNano": str(t)})
        sid += 3
        t += 1_000
    rng.shuffle(spans)
    half = len(spans) // 2
    resource = lambda name: {"attributes": [{"key": "service.name", "value": {"stringValue": name}}]}
    return {"resourceSpans": [
        {"resource": resource("web"), "scopeSpans": [{"scope": {"name": "t"}, "spans": spans[:half]}]},
        {"resource": resource("web"), "scopeSpans": [{"scope": {"name": "t"}, "spans": spans[half:]}]},
    ]}


def nsys_file(path, rng, slow, steps, index):
    p = Plan(rng, slow)
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE ThreadNames (nameId INTEGER, priority INTEGER, globalTid INTEGER);
        CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
            rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
            endGlobalTid INTEGER, textId INTEGER, domainId INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
            eventClass INTEGER, globalTid INTEGER, correlationId INTEGER, nameId INTEGER,
            returnValue INTEGER, callchainId INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
            deviceId INTEGER, contextId INTEGER, streamId INTEGER, correlationId INTEGER,
            globalPid INTEGER, demangledName INTEGER, shortName INTEGER, mangledName INTEGER,
            gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER, blockY INTEGER,
            blockZ INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL,
            deviceId INTEGER, contextId INTEGER, streamId INTEGER, correlationId INTEGER,
            globalPid INTEGER, bytes INTEGER, copyKind INTEGER, srcKind INTEGER, dstKind INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL,
            deviceId INTEGER, contextId INTEGER, streamId INTEGER, correlationId INTEGER,
            globalPid INTEGER, value INTEGER, bytes INTEGER);
    """)
    strings = {"compute": 1, "main": 2, "cudaLaunchKernel_v7000": 3, "gemm_kernel(float*)": 4,
               "gemm_kernel": 5, "worker": 6}
    db.executemany("INSERT INTO StringIds VALUES (?, ?)", [(v, k) for k, v in strings.items()])
    pid = 4242
    main_tid = (pid << 24) | 4242
    worker_tid = (pid << 24) | 4243
    db.execute("INSERT INTO ThreadNames VALUES (2, 0, ?)", (main_tid,))
    db.execute("INSERT INTO ThreadNames VALUES (6, 0, ?)", (worker_tid,))
    t = 5_000_000_000 + index * 1_000_000_000
    for step in range(steps):
        s0 = t
        t += int(p.d("pre", 50_000))
        c0 = t
        l0 = t + 1_000
        l1 = l0 + int(p.d("launch", 5_000))
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 1, ?, ?, 3, 0, 0)",
                   (l0, l1, main_tid, step + 1))
        k0 = l1 + 2_000
        k1 = k0 + int(p.d("gemm_kernel", 800_000))
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 1, 7, ?, ?, 4, 5, 0,"
                   " 64, 1, 1, 256, 1, 1)", (k0, k1, step + 1, pid << 24))
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?, ?, 0, 1, 7, 0, ?, 1048576,"
                   " 1, 0, 0)", (k1 + 1_000, k1 + 40_000, pid << 24))
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?, ?, 0, 1, 7, 0, ?, 0, 4096)",
                   (k1 + 50_000, k1 + 52_000, pid << 24))
        t = k1 + 60_000 + int(p.d("compute", 300_000))
        db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, textId, globalTid)"
                   " VALUES (?, ?, 59, 1, ?)", (c0, t, main_tid))
        db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid)"
                   " VALUES (?, NULL, 34, 'mark', ?)", (t, main_tid))
        db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid)"
                   " VALUES (?, ?, 59, 'prefetch', ?)", (s0 + 10, s0 + int(p.d("prefetch", 200_000)), worker_tid))
        t += int(p.d("post", 50_000))
        db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid)"
                   " VALUES (?, ?, 59, 'step', ?)", (s0, t, main_tid))
        t += 10_000
    db.commit()
    db.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("format", choices=["chrome", "otlp", "nsys"])
    ap.add_argument("out")
    ap.add_argument("--files", type=int, default=6)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--slow", action="append", default=[], help="SPAN=FACTOR")
    ap.add_argument("--gzip", action="store_true")
    a = ap.parse_args()
    slow = {}
    for s in a.slow:
        name, factor = s.rsplit("=", 1)
        slow[name] = float(factor)
    os.makedirs(a.out, exist_ok=True)
    for i in range(a.files):
        rng = random.Random(a.seed * 1000 + i)
        if a.format == "nsys":
            path = os.path.join(a.out, f"trace_{i}.sqlite")
            nsys_file(path, rng, slow, a.steps, i)
            if a.gzip:
                with open(path, "rb") as f, gzip.open(path + ".gz", "wb") as g:
                    g.write(f.read())
                os.remove(path)
            continue
        doc = chrome_file(rng, slow, a.steps, i) if a.format == "chrome" else otlp_file(rng, slow, a.steps, i)
        text = json.dumps(doc).encode()
        path = os.path.join(a.out, f"trace_{i}.json")
        if a.gzip:
            with gzip.open(path + ".gz", "wb") as g:
                g.write(text)
        else:
            with open(path, "wb") as f:
                f.write(text)


if __name__ == "__main__":
    main()

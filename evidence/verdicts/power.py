#!/usr/bin/env python3
"""Power of the diff's verdicts, measured through gapscope's own statistics.

Writes synthetic run folders (meta.json, runs.csv, spans.csv in the store's format) of
20 counterbalanced pairs: a root `prove` whose children are `synthesis`, `gpu_prove`
and 40 leaf spans with no effect (so that a diff holds a family of about as many
comparisons as the quickstart's), each rep's durations drawn lognormal with the spread
the quickstart's A/A runs show. The candidate's `synthesis` is longer by SHIFT. Each
folder is diffed by the gapscope binary twice: with the rules before false-discovery
control and absolute floors (--no-fdr --time-floor-ns 0 --time-floor-share 0
--count-floor 0) and with the defaults. A shift is resolved when `synthesis (total)` is
regressed in at least 8 of 10 seeds.

usage: power.py GAPSCOPE_BIN OUT_CSV
"""
import csv
import json
import math
import os
import random
import subprocess
import sys
import tempfile

BIN, OUT = sys.argv[1], sys.argv[2]
PAIRS = 20
SEEDS = 10
# Spread of the quickstart's spans in A/A reps on the 2-core VM: synthesis ~13 ms with
# a CV near 3%, the backend call ~70 ms at ~2%.
SPANS = [("synthesis", 13e6, 0.03), ("gpu_prove", 70e6, 0.02)] + [
    (f"k{i}", 20e3 + 1e3 * i, 0.05) for i in range(40)
]

META = {
    "schema_version": 1, "gapscope_version": "power", "experiment": "power",
    "run_id": "p", "created_utc": "2026-12-01T00:00:00Z", "command": [],
    "host": {"hostname": "synthetic", "os": "", "kernel": "", "cpu_model": "",
             "cpu_cores": 2, "memory_bytes": 0},
    "git": {}, "counters": {}, "gpu": {"available": False},
    "workload": {"circuit": "porep", "log2_constraints": 12, "batch": 2, "backend": "cpu"},
    "variants": [{"name": n, "backend": "cpu", "knobs": {}} for n in ("baseline", "candidate")],
    "reps": PAIRS, "warmups": 0, "order": "counterbalanced", "process": "shared",
    "params": [], "setup_ns": {}, "completed_utc": "2026-12-01T00:01:00Z",
}


def write_run(d, shift, seed):
    rng = random.Random(seed)
    with open(f"{d}/meta.json", "w") as f:
        json.dump(META, f)
    runs = open(f"{d}/runs.csv", "w", newline="")
    spans = open(f"{d}/spans.csv", "w", newline="")
    rw, sw = csv.writer(runs), csv.writer(spans)
    rw.writerow("rep,variant,iteration,warmup,status,verified,proofs,start_ns,wall_ns,started_utc,pid,rss_end_bytes,gpu_mem_used_end_bytes,error".split(","))
    sw.writerow("rep,variant,span_id,parent_id,name,thread_id,thread_name,start_ns,end_ns,duration_ns,self_ns,instructions,branches,cycles,task_clock_ns,page_faults,context_switches,attrs".split(","))
    rep, t = 0, 1_000_000_000
    for it in range(PAIRS):
        order = ["baseline", "candidate"] if it % 2 == 0 else ["candidate", "baseline"]
        # Slow drift of the machine, shared by both reps of an iteration.
        drift = 1.0 + 0.01 * math.sin(it / 3.0)
        for v in order:
            start = t
            cur = start + 1000
            rows = []
            for sid, (name, med, cv) in enumerate(SPANS, start=2):
                dur = med * drift * math.exp(rng.gauss(0.0, cv))
                if v == "candidate" and name == "synthesis":
                    dur *= 1.0 + shift
                dur = int(dur)
                rows.append((sid, name, cur, cur + dur))
                cur += dur
            end = cur + 1000
            wall = end - start
            rw.writerow([rep, v, it, "false", "ok", "true", 2, start, wall, "2026-12-01T00:00:00Z", 1, "", "", ""])
            sw.writerow([rep, v, 1, "", "prove", 1, "main", start, end, wall, wall - sum(e - s for _, _, s, e in rows), "", "", "", "", "", "", "{}"])
            for sid, name, s, e in rows:
                sw.writerow([rep, v, sid, 1, name, 1, "main", s, e, e - s, e - s, "", "", "", "", "", "", "{}"])
            rep += 1
            t = end + 5_000_000
    runs.close()
    spans.close()


def verdict(d, extra):
    out = subprocess.run([BIN, "diff", d, "--format", "json"] + extra, check=True,
                         capture_output=True, text=True).stdout
    j = json.loads(out)
    for c in j["metrics"]:
        if c["span"] == "synthesis" and c["measure"] == "total":
            return c["verdict"]
    raise SystemExit("no synthesis total in the diff")


BEFORE = ["--no-fdr", "--time-floor-ns", "0", "--time-floor-share", "0", "--count-floor", "0"]
rows = []
with tempfile.TemporaryDirectory() as tmp:
    for shift in [0.0, 0.02, 0.03, 0.05, 0.08]:
        hits = {"before": 0, "after": 0}
        for seed in range(SEEDS):
            d = f"{tmp}/s{shift}-{seed}"
            os.makedirs(d)
            write_run(d, shift, seed)
            for rule, extra in (("before", BEFORE), ("after", [])):
                if verdict(d, extra) == "regressed":
                    hits[rule] += 1
        row = [shift, SEEDS, hits["before"], hits["after"]]
        print(*row, flush=True)
        rows.append(row)
with open(OUT, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["synthesis_shift", "seeds", "regressed_before", "regressed_after"])
    w.writerows(rows)

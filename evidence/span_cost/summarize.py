#!/usr/bin/env python3
"""One span_overhead run as a small JSON summary (bench name -> ns, revision, host),
for the evidence README and for importing into the benchmark's history.

usage: summarize.py --criterion DIR --recorder FILE --revision REV --host NAME
                    --machine TEXT --out FILE

DIR is criterion's output folder (CRITERION_HOME); each benchmark's figure is the
point estimate of its median time per iteration (one span, or one clock-read pair),
from DIR/span_enter_exit/<bench>/new/estimates.json. FILE is the recorder's
self-description the bench wrote (GAPSCOPE_BENCH_META)."""
import argparse
import json
import os
import sys

GROUP = "span_enter_exit"


def main():
    ap = argparse.ArgumentParser()
    for a in ("--criterion", "--recorder", "--revision", "--host", "--machine", "--out"):
        ap.add_argument(a, required=True)
    ap.add_argument("--command", default="")
    o = ap.parse_args()
    group = os.path.join(o.criterion, GROUP)
    if not os.path.isdir(group):
        sys.exit(f"error: no {GROUP} folder under {o.criterion}: did the bench run with CRITERION_HOME={o.criterion}?")
    results = {}
    for bench in sorted(os.listdir(group)):
        est = os.path.join(group, bench, "new", "estimates.json")
        if not os.path.isfile(est):
            continue
        with open(est) as f:
            e = json.load(f)
        results[bench] = {
            "median_ns": round(e["median"]["point_estimate"], 2),
            "median_ci_ns": [round(e["median"]["confidence_interval"]["lower_bound"], 2),
                             round(e["median"]["confidence_interval"]["upper_bound"], 2)],
            "mean_ns": round(e["mean"]["point_estimate"], 2),
        }
    if not results:
        sys.exit(f"error: no estimates.json under {group}")
    with open(o.recorder) as f:
        recorder = json.load(f)
    out = {
        "benchmark": "span_overhead",
        "revision": o.revision,
        "host": o.host,
        "machine": o.machine,
        "command": o.command,
        "ns": {k: v["median_ns"] for k, v in results.items()},
        "detail": results,
        "recorder": recorder,
    }
    with open(o.out, "w") as f:
        json.dump(out, f, indent=2, sort_keys=True)
        f.write("\n")
    print(json.dumps(out["ns"], indent=2))


if __name__ == "__main__":
    main()

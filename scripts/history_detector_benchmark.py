#!/usr/bin/env python3
"""Accuracy of gapscope's change-point detector against asv's step detection, on one
committed set of synthetic series.

    python3 scripts/history_detector_benchmark.py generate   # series.json from the seed
    python3 scripts/history_detector_benchmark.py score [GAPSCOPE]

`generate` writes evidence/history_detector/series.json.gz (seed and parameters below).
`score` runs `GAPSCOPE history detect <the series, unzipped> --format json` (default
target/debug/gapscope) and asv.step_detect.detect_steps (pip install asv) on the same
points, and writes results.json and results.md beside it.

A series is a first-parent history of 80-240 commits; each commit has 3 reps. Its point
is the median of the reps. Noise is set per series as the CV of that point, 2-10%,
split between a part shared by the reps of one commit (between runs) and the reps' own.
Kinds of noise: normal; bimodal (each commit sits on one of two levels); spikes (2% of
commits 20-60% high, alone); slow drift (up to 2 sigma over the series). Half the
series have 1-3 planted steps of 2-20% (either sign), at least 25 commits apart and 15
from either end. A detected step matches a planted one within 2 commits; any other
detected step is a false step.

asv is given each point's median and, as its weight, 1/(the spread of its reps), as asv
weights by each point's interval; its steps are the boundaries of the segments
detect_steps returns.
"""
import gzip
import json
import math
import os
import random
import subprocess
import sys

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "evidence", "history_detector")
SEED = 20261201
N_SERIES = 240
REPS = 3
TOLERANCE = 2


def gen_series(rng, idx):
    n = rng.randint(80, 240)
    cv = rng.uniform(0.02, 0.10)
    between_share = rng.uniform(0.3, 1.0)
    kind = rng.choice(["normal", "normal", "bimodal", "spikes", "drift"])
    level = 100.0
    steps = []
    if idx % 2 == 1:
        k = rng.randint(1, 3)
        tries = 0
        while len(steps) < k and tries < 1000:
            tries += 1
            at = rng.randint(15, n - 15)
            if all(abs(at - s["index"]) >= 25 for s in steps):
                size = rng.uniform(0.02, 0.20) * rng.choice([-1, 1])
                steps.append({"index": at, "change": size})
        steps.sort(key=lambda s: s["index"])
    sd_between = cv * math.sqrt(between_share)
    # The median of 3 reps has ~1.35x the variance of their mean: per-rep sd so that the
    # reps' share of the point's variance is (1 - between_share) cv^2.
    sd_rep = cv * math.sqrt(1 - between_share) * math.sqrt(REPS) / 1.16
    drift_total = rng.uniform(-2, 2) * cv if kind == "drift" else 0.0
    points = []
    for i in range(n):
        l = level
        for s in steps:
            if i >= s["index"]:
                l *= 1 + s["change"]
        l *= 1 + drift_total * i / n
        if kind == "bimodal":
            shared = (1 if rng.random() < 0.5 else -1) * sd_between + rng.gauss(0, sd_between * 0.2)
        else:
            shared = rng.gauss(0, sd_between)
        spike = rng.uniform(0.2, 0.6) if kind == "spikes" and rng.random() < 0.02 else 0.0
        reps = [l * (1 + shared + spike + rng.gauss(0, sd_rep)) for _ in range(REPS)]
        points.append([round(v, 6) for v in reps])
    return {
        "id": idx,
        "kind": kind,
        "cv": cv,
        "between_share": between_share,
        "planted": steps,
        "points": points,
    }


def generate():
    rng = random.Random(SEED)
    series = [gen_series(rng, i) for i in range(N_SERIES)]
    os.makedirs(HERE, exist_ok=True)
    with gzip.open(os.path.join(HERE, "series.json.gz"), "wt") as f:
        json.dump({"seed": SEED, "reps": REPS, "series": series}, f, separators=(",", ":"))
    print(f"{len(series)} series, {sum(len(s['points']) for s in series)} points, "
          f"{sum(len(s['planted']) for s in series)} planted steps")


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def asv_steps(points):
    from asv import step_detect
    y = [median(p) for p in points]
    w = []
    for p in points:
        spread = max(p) - min(p)
        w.append(1.0 / spread if spread > 0 else None)
    segs = step_detect.detect_steps(y, w)
    return [s[0] for s in segs[1:]]


def ours(gapscope, path):
    out = subprocess.run([gapscope, "history", "detect", path, "--format", "json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def score_one(found, planted, cv):
    matched = set()
    false = 0
    for f in found:
        hit = [j for j, p in enumerate(planted) if abs(p["index"] - f) <= TOLERANCE and j not in matched]
        if hit:
            matched.add(hit[0])
        else:
            false += 1
    rec = []
    for j, p in enumerate(planted):
        # Step size over the noise of a point (both relative).
        rec.append({"big": abs(p["change"]) >= 3 * cv, "found": j in matched})
    return false, rec


def score(gapscope):
    import tempfile
    with gzip.open(os.path.join(HERE, "series.json.gz"), "rt") as f:
        text = f.read()
    data = json.loads(text)
    with tempfile.NamedTemporaryFile("w", suffix=".json") as tmp:
        tmp.write(text)
        tmp.flush()
        det = ours(gapscope, tmp.name)
    totals = {}
    for name in ["gapscope", "asv"]:
        totals[name] = {"false_steps": 0, "big": 0, "big_found": 0, "all": 0, "all_found": 0,
                        "detected": 0, "true_detected": 0, "by_kind": {}}
    points = sum(len(s["points"]) for s in data["series"])
    for s, d in zip(data["series"], det):
        found_ours = [st["index"] for st in d["steps"] if st["verdict"] != "suspected"]
        found_asv = asv_steps(s["points"])
        for name, found in [("gapscope", found_ours), ("asv", found_asv)]:
            t = totals[name]
            false, rec = score_one(found, s["planted"], s["cv"])
            t["false_steps"] += false
            t["detected"] += len(found)
            t["true_detected"] += len(found) - false
            k = t["by_kind"].setdefault(s["kind"], {"series": 0, "points": 0, "false_steps": 0})
            k["series"] += 1
            k["points"] += len(s["points"])
            k["false_steps"] += false
            for r in rec:
                t["all"] += 1
                t["all_found"] += r["found"]
                t["big"] += r["big"]
                t["big_found"] += r["big"] and r["found"]
    for t in totals.values():
        t["recall_big"] = t["big_found"] / t["big"] if t["big"] else None
        t["recall_all"] = t["all_found"] / t["all"] if t["all"] else None
        t["precision"] = t["true_detected"] / t["detected"] if t["detected"] else None
        t["false_per_1000_points"] = 1000 * t["false_steps"] / points
    res = {"seed": data["seed"], "series": len(data["series"]), "points": points,
           "tolerance_commits": TOLERANCE, "results": totals}
    with open(os.path.join(HERE, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    lines = ["| detector | recall, steps >= 3x noise | recall, all steps | precision | false steps / 1000 points |",
             "|---|---|---|---|---|"]
    for name, t in totals.items():
        lines.append(f"| {name} | {t['recall_big']:.3f} ({t['big_found']}/{t['big']}) | "
                     f"{t['recall_all']:.3f} ({t['all_found']}/{t['all']}) | {t['precision']:.3f} | "
                     f"{t['false_per_1000_points']:.2f} ({t['false_steps']}) |")
    lines.append("")
    lines.append("| noise kind | series | points | gapscope false steps | asv false steps |")
    lines.append("|---|---|---|---|---|")
    for kind in sorted(totals["gapscope"]["by_kind"]):
        g = totals["gapscope"]["by_kind"][kind]
        a = totals["asv"]["by_kind"][kind]
        lines.append(f"| {kind} | {g['series']} | {g['points']} | {g['false_steps']} | {a['false_steps']} |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(HERE, "results.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in ("generate", "score"):
        sys.exit(__doc__)
    if sys.argv[1] == "generate":
        generate()
    else:
        score(sys.argv[2] if len(sys.argv) > 2 else "target/debug/gapscope")

"""Between-run spread of span times from run folders of one program and command.

For each run folder under the given results folder (each a single-variant run), and for
each span name with a time in every measured rep, the mean and standard deviation of the
log of its duration over the run's reps (the log of gapscope's change statistic: ratios
of geometric means). Then, per span, a one-way random-effects split of the variance of
log time into within a run and between runs (method of moments):
between = var(run means) - mean(within variance) / reps, floored at 0. Its square root
is the spread of a run's level that no rep count averages away: two runs' geometric
means differ by sqrt(2) times it beyond what their reps show.

    python3 between_runs.py RESULTS_DIR
prints CSV: span, runs, reps, within_sd, between_sd, run_means (the runs' geometric means, ns).
"""
import csv, glob, json, math, os, statistics, sys

root = sys.argv[1]
runs = sorted(os.path.dirname(p) for p in glob.glob(f"{root}/**/meta.json", recursive=True))
per_span = {}
for r in runs:
    ok = set()
    with open(f"{r}/runs.csv") as f:
        for row in csv.DictReader(f):
            if row["status"] == "ok" and row["warmup"] == "false":
                ok.add(row["rep"])
    logs = {}
    with open(f"{r}/spans.csv") as f:
        for row in csv.DictReader(f):
            if row["rep"] in ok and row["duration_ns"]:
                logs.setdefault(row["name"], []).append(math.log(float(row["duration_ns"]) + 1000.0))
    for name, v in logs.items():
        if len(v) == len(ok) and len(v) >= 2:
            per_span.setdefault(name, []).append((statistics.fmean(v), statistics.variance(v), len(v)))
w = csv.writer(sys.stdout)
w.writerow(["span", "runs", "reps", "within_sd", "between_sd", "run_means_ns"])
for name, rs in sorted(per_span.items()):
    if len(rs) < 3:
        continue
    means = [m for m, _, _ in rs]
    within = statistics.fmean(v for _, v, _ in rs)
    reps = statistics.fmean(n for _, _, n in rs)
    between = max(0.0, statistics.variance(means) - within / reps)
    w.writerow([name, len(rs), round(reps, 1), f"{math.sqrt(within):.4f}", f"{math.sqrt(between):.4f}",
                " ".join(f"{math.exp(m) - 1000:.0f}" for m in means)])

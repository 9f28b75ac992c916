#!/usr/bin/env python3
"""Interpolated against exact process CPU per span, on one run folder recorded with
`[run] process_cpu = "exact"` (each span then holds the exact value in process_cpu_ns
and the interpolated one in the attribute process_cpu_interpolated_ns).

usage: cpu_agreement.py RUN_DIR OUT.json

Every span of >= 10 ms must agree within 1 ms + 2% of the exact value; exits 1 if one
does not (and says which)."""
import csv
import json
import sys

MIN_SPAN_NS = 10_000_000


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    run, out = sys.argv[1], sys.argv[2]
    rows = []
    with open(f"{run}/spans.csv", newline="") as f:
        for r in csv.DictReader(f):
            if r["rep"].startswith("#"):
                continue
            attrs = json.loads(r["attrs"] or "{}")
            if attrs.get("process_cpu") != "exact" or "process_cpu_interpolated_ns" not in attrs:
                continue
            dur = int(r["duration_ns"])
            if dur < MIN_SPAN_NS or not r["process_cpu_ns"]:
                continue
            exact = int(r["process_cpu_ns"])
            interp = int(attrs["process_cpu_interpolated_ns"])
            allowed = 1_000_000 + 0.02 * exact
            rows.append({
                "rep": int(r["rep"]), "variant": r["variant"], "name": r["name"],
                "duration_ns": dur, "exact_ns": exact, "interpolated_ns": interp,
                "diff_ns": interp - exact, "allowed_ns": round(allowed),
                "within": abs(interp - exact) <= allowed,
            })
    if not rows:
        sys.exit(f"error: no span of >= 10 ms with both values in {run}/spans.csv: record the run with [run] process_cpu = \"exact\"")
    with open(f"{run}/meta.json") as f:
        meta = json.load(f)
    worst = max(rows, key=lambda r: abs(r["diff_ns"]) / r["allowed_ns"])
    summary = {
        "run": run,
        "revision": (meta.get("git", {}).get("revision") or "") + ("-dirty" if meta.get("git", {}).get("dirty") else ""),
        "host": meta.get("host", {}).get("hostname", ""),
        "spans_checked": len(rows),
        "within": sum(r["within"] for r in rows),
        "max_abs_diff_ns": max(abs(r["diff_ns"]) for r in rows),
        "worst": worst,
        "recorder": meta.get("recorder"),
        "spans": rows,
    }
    with open(out, "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    print(f"{summary['within']}/{len(rows)} spans of >= 10 ms within 1 ms + 2%; largest difference {summary['max_abs_diff_ns']} ns; worst {worst['name']} rep {worst['rep']}: {worst['diff_ns']} ns of {worst['exact_ns']} ns (allowed {worst['allowed_ns']})")
    if summary["within"] != len(rows):
        sys.exit(1)


if __name__ == "__main__":
    main()

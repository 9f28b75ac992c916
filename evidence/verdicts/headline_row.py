#!/usr/bin/env python3
"""One CSV line of a diff's headline: RUN_DIR/diff.json (gapscope diff --format json).

usage: headline_row.py RUN_DIR WALL_S [DIFF_JSON]   (DIFF_JSON defaults to RUN_DIR/diff.json)
"""
import csv
import json
import sys

run_dir, wall = sys.argv[1], sys.argv[2]
d = json.load(open(sys.argv[3] if len(sys.argv) > 3 else f"{run_dir}/diff.json"))
h = d["headline"]
e2e = h["end_to_end"]["verdict"]
e2e = e2e if isinstance(e2e, str) else next(iter(e2e))
changes = [f'{c["span"]} ({c["measure"]}) {c["verdict"]}' for c in h["changes"]]
fam = h.get("family", {})
# Moves named for their structure alone (on the critical path in every rep of one side,
# none of the other's) are headline changes too.
moves = [f'{m["span"]} ({m["kind"]} the critical path)' for m in h.get("critical_path", []) if m.get("structural")]
changes += moves
named = len(changes) + h.get("more_changes", 0) + (1 if e2e in ("regressed", "improved") else 0)
w = csv.writer(sys.stdout)
w.writerow([
    run_dir, wall, e2e, named,
    fam.get("comparisons", ""), fam.get("survivors", ""), fam.get("uncorrected", ""),
    "; ".join(changes),
])

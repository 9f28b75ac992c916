#!/usr/bin/env python3
"""Checks the gapscope variant's spans in a run folder of mini_redis.toml: every rep has
all of mini-redis's spans, each `get::apply` / `set::apply` nests under the connection's
`server::run` (by the layer's ids, also when the two ran on different tokio worker
threads), and threads carry their names. Prints counts; exits 1 on a failed check.

    python3 check.py RUN_FOLDER
"""
import csv
import collections
import sys

REQUESTS = 2000


def main(run):
    reps = collections.defaultdict(list)
    with open(f"{run}/spans.csv", newline="") as f:
        for row in csv.DictReader(f):
            if row["variant"] == "gapscope":
                reps[row["rep"]].append(row)
    ok = True
    cross, total_apply, threads = 0, 0, collections.Counter()
    for rep, rows in reps.items():
        by_id = {r["span_id"]: r for r in rows}
        names = collections.Counter(r["name"] for r in rows)
        want = {"client::get": REQUESTS, "client::set": REQUESTS,
                "get::apply": REQUESTS, "set::apply": REQUESTS, "server::run": 1}
        for n, k in want.items():
            if names[n] != k:
                print(f"rep {rep}: {names[n]} {n}, expected {k}")
                ok = False
        for r in rows:
            threads[r["thread_name"]] += 1
            if r["name"] in ("get::apply", "set::apply"):
                total_apply += 1
                p = by_id.get(r["parent_id"])
                if p is None or p["name"] != "server::run":
                    print(f"rep {rep}: {r['name']} {r['span_id']} under {p and p['name']}")
                    ok = False
                elif p["thread_id"] != r["thread_id"]:
                    cross += 1
    print(f"reps of the gapscope variant: {len(reps)}")
    print(f"apply spans: {total_apply}, nested under server::run: all" if ok else "FAILED")
    print(f"apply spans made on another worker thread than their server::run: {cross}")
    print("spans per thread name: " + ", ".join(f"{n} {c}" for n, c in threads.most_common()))
    if any(n.startswith("thread ") for n in threads):
        print("a thread without its name")
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

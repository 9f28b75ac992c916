#!/usr/bin/env python3
"""One rep's worth of spans of a given shape, printed as gapscope protocol lines (or as
log lines for [workload.log_spans]), for evidence/scaling/run.sh and
evidence/memory/run.sh.

usage: emit.py SHAPE N
  deep   N spans nested one inside the other (B lines 1..N, then E lines N..1)
  names  N sibling spans under one parent, each with its own name
  flat   N sibling spans under one parent, named from a set of 16 (the cheapest shape
         to print and to read, for evidence/memory/run.sh)
  log    N pairs of log lines "stage K begin" / "stage K end", each stage nested under
         the one before it by the experiment's `parent =` (one chain N deep)
"""
import os
import sys
import time

shape, n = sys.argv[1], int(sys.argv[2])
tid = os.getpid()
out = sys.stdout
t = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
w = []
if shape == "deep":
    for k in range(n):
        w.append(f"@gapscope1 B {tid} {t + k} d{k % 7}\n")
    for k in range(n):
        # The innermost (n-1-k) closes first: span j lasts from t+j to t+2n-1-j.
        w.append(f"@gapscope1 E {tid} {t + n + k} d{(n - 1 - k) % 7}\n")
elif shape == "names":
    w.append(f"@gapscope1 B {tid} {t} parent\n")
    for k in range(n):
        w.append(f"@gapscope1 X {tid} {t + 1 + 2 * k} 1 name_{k}\n")
    w.append(f"@gapscope1 E {tid} {t + 2 * n + 2} parent\n")
elif shape == "flat":
    w.append(f"@gapscope1 B {tid} {t} parent\n")
    for k in range(n):
        w.append(f"@gapscope1 X {tid} {t + 1 + 2 * k} 1 s{k % 16}\n")
    w.append(f"@gapscope1 E {tid} {t + 2 * n + 2} parent\n")
elif shape == "log":
    for k in range(n):
        w.append(f"stage {k} begin\n")
    for k in range(n):
        w.append(f"stage {n - 1 - k} end\n")
else:
    sys.exit(f"unknown shape {shape}")
out.write("".join(w))
out.flush()

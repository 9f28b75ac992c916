#!/usr/bin/env python3
"""Welch's t test against Student's pooled t test at equal reps a side, on normal
values (the logs of reps whose noise multiplies them): how often each rejects at the
small p-values a family of ~150 comparisons needs, with no change (the level, as a
multiple of the nominal p) and with a change of 4.5 and 5 standard deviations (power).
At equal sizes the two statistics are the same number; only the degrees of freedom
differ (Welch-Satterthwaite's estimate against n_a + n_b - 2).

    pip install numpy scipy && python3 evidence/verdicts/pooled_t.py > evidence/verdicts/pooled_t.txt
"""
import numpy as np
from scipy import stats

rng = np.random.default_rng(37)
N = 400_000
print("level: rejections / nominal p, no change, variance ratio r between the sides")
print("n  r   p      pooled  welch")
for n in (5, 8):
    for r in (1, 2, 4):
        x = rng.normal(0, 1, (N, n))
        y = rng.normal(0, np.sqrt(r), (N, n))
        s = stats.ttest_ind(y, x, axis=1, equal_var=True).pvalue
        w = stats.ttest_ind(y, x, axis=1, equal_var=False).pvalue
        for th in (0.05, 0.01, 0.001):
            print(f"{n}  {r}  {th:<6} {(s < th).mean() / th:6.2f}  {(w < th).mean() / th:5.2f}")
print()
print("power: share rejected, change of d standard deviations, equal variances")
print("n  d    p       pooled  welch")
N = 100_000
for n in (5,):
    for d in (4.0, 4.5, 5.0):
        x = rng.normal(0, 1, (N, n))
        y = rng.normal(d, 1, (N, n))
        s = stats.ttest_ind(y, x, axis=1, equal_var=True).pvalue
        w = stats.ttest_ind(y, x, axis=1, equal_var=False).pvalue
        for th in (0.0005, 0.001, 0.002):
            print(f"{n}  {d}  {th:<7} {(s < th).mean():6.3f}  {(w < th).mean():5.3f}")

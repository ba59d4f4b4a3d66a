#!/usr/bin/env python3
"""The pair bound of `judgecal-study rank --hanna` (crates/judgecal-study/src/rank/labels.rs, `pair_bound`) at other splits
of HANNA's stories between anchors and runs: what per-system label counts could save over one
count on every system, knowing every human score, if the runs had more stories each.

    python3 docs/studies/hanna_split_bound.py [../shared/data/hanna/hanna_long.csv]

A stand-in for the service's fit, in the standard library only: each cell's corrector is a
least-squares line on its anchors plus each system's mean anchor residual (the bayes version
with systems as groups, without its shrinkage). At the service's split (even stories anchor)
it gives 13.6% against `judgecal-study rank --hanna`'s 13%, so it tracks the real fit.
"""
import csv
import math
import statistics
import sys
from collections import defaultdict
from statistics import NormalDist

MIN_GAP = 0.1
LOOKS = 4


def pair_bound(corrected, references):
    """(per-system total, one count on every system), as `pair_bound` in crates/judgecal-study/src/rank/labels.rs."""
    k = len(corrected)
    pairs = k * (k - 1) / 2
    crit = lambda family: NormalDist().inv_cdf(1 - (1 - family) / (2 * pairs))
    c_plan, c_uniform = crit(1 - 0.05 / LOOKS), crit(0.975)
    residual = [[y - f for y, f in zip(ys, fs)] for fs, ys in zip(corrected, references)]
    truth = [statistics.mean(ys) for ys in references]
    n = len(references[0])
    per_run, most = [0] * k, 0
    for a in range(k):
        for b in range(a + 1, k):
            gap = abs(truth[a] - truth[b])
            if gap <= MIN_GAP:
                continue
            noise = statistics.variance([x - y for x, y in zip(residual[a], residual[b])])

            def fewest(c):
                return next(
                    (m for m in range(2, n + 1) if c * math.sqrt(noise * (1 / m - 1 / n)) <= gap),
                    n,
                )

            m = fewest(c_plan)
            per_run[a], per_run[b] = max(per_run[a], m), max(per_run[b], m)
            most = max(most, fewest(c_uniform))
    return sum(per_run), k * most


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "../shared/data/hanna/hanna_long.csv"
    cells = defaultdict(list)
    for r in csv.DictReader(open(path)):
        if r["prompt_variant"] == "1" and r["judge_score"]:
            cells[(r["judge"], r["rubric"])].append(
                (r["system"], int(r["story_idx"]), float(r["judge_score"]), float(r["human_mean"]))
            )
    print("anchors | stories a run | per-system | one count | saving")
    for every in (2, 3, 4, 6):
        per_system = one_count = 0
        for records in cells.values():
            anchors = [r for r in records if r[1] % every == 0]
            held = {(r[0], r[1]): r for r in records if r[1] % every != 0}
            xs, ys = [r[2] for r in anchors], [r[3] for r in anchors]
            mx, my = statistics.mean(xs), statistics.mean(ys)
            slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
            line = lambda j: my + slope * (j - mx)
            systems = sorted({s for s, _ in held})
            stories = sorted({t for _, t in held if all((s, t) in held for s in systems)})
            shift = {
                s: statistics.mean([r[3] - line(r[2]) for r in anchors if r[0] == s] or [0.0])
                for s in systems
            }
            corrected = [[line(held[(s, t)][2]) + shift[s] for t in stories] for s in systems]
            references = [[held[(s, t)][3] for t in stories] for s in systems]
            p, u = pair_bound(corrected, references)
            per_system, one_count = per_system + p, one_count + u
        print(f"1 in {every} | {len(stories)} | {per_system} | {one_count} | {1 - per_system / one_count:.1%}")


if __name__ == "__main__":
    main()

"""A pairwise judge through the client: comparisons people labelled, the cell trained (`auto`)
with its judge's biases, then a run of the judge's verdicts rated by the people's preference. The world is seeded and known: four systems with
true ratings (log-odds against `base`), a judge that favours the answer shown first and the
system `mine` (its own family) by 1.5 log-odds.

    python examples/pairwise_ratings.py http://localhost:8080
"""

from __future__ import annotations

import math
import random
import sys

from judgecal import Client
from judgecal.frames import biases_frame, ratings_frame

TRUTH = {"base": 0.0, "mine": -0.5, "strong": 1.0, "weak": -1.5}


def comparisons(n: int, start: int, labelled: bool, rng: random.Random) -> list[dict]:
    rows = []
    for i in range(n):
        a, b = rng.sample(sorted(TRUTH), 2)
        u = rng.random()
        gap = TRUTH[a] - TRUTH[b] + math.log(u / (1 - u))
        seen = gap + rng.gauss(0, 0.7) + 1.5 * ((a == "mine") - (b == "mine"))
        row = {"item_id": f"prompt-{start + i}", "a": a, "b": b,
               "verdict": "a" if seen + 1.0 > 0 else "b",          # a shown first
               "verdict_swapped": "a" if seen - 1.0 > 0 else "b"}  # b shown first
        if labelled:
            row["preference"] = "a" if gap > 0 else "b"
        rows.append(row)
    return rows


def main(url: str) -> None:
    rng = random.Random(0)
    with Client(url) as jc:
        # 1. 500 comparisons people labelled, stored as the cell's anchors.
        print(jc.upload_comparisons("gpt-pairwise", "overall", comparisons(500, 0, True, rng)))
        # 2. The cell trained: what auto chose, and the judge's biases beside the people's.
        jc.train("gpt-pairwise", progress=False)
        print(biases_frame(jc.preferences("gpt-pairwise", "overall")).round(2).to_string(index=False))
        # 3. A run of 5,000 verdicts, rated by the people's preference.
        answer = jc.ratings("gpt-pairwise", "overall", comparisons(5_000, 10_000, False, rng),
                            baseline="base")
        frame = ratings_frame(answer)
        frame["truth"] = frame["system"].map(TRUTH)
        print(frame[["system", "rating", "lo", "hi", "best", "worst", "truth"]].round(2).to_string(index=False))
        print("chosen:", answer.calibration.chosen, "| version:", answer.calibration.version,
              "| prediction weight:", round(answer.prediction_weight, 2))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "http://localhost:8080")

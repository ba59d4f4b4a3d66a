"""A judge change walked through end to end on HANNA (../shared/data/hanna): Mistral-7B and
ChatGPT, prompt variant 1, are treated as two versions of one judge `story-judge` on the
Coherence rubric. Half of the 1,056 stories are anchors (human mean as the reference, the
story's system as its group); the other half are held out to measure what each step is worth.

    python examples/judge_change_hanna.py URL KEY PATH/TO/hanna_long.csv

Prints each step's figures (docs/judge-versions.md shows a run).
"""

from __future__ import annotations

import csv
import random
import re
import sys

from judgecal import Client

OLD, NEW = "mistral-7b@p1", "chatgpt@p1"
JUDGES = {OLD: ("Mistral-7B", "1"), NEW: ("ChatGPT", "1")}
RUBRIC = "Coherence"


def load(path: str) -> tuple[dict, dict, dict]:
    """(judge score by (version, story), human mean by story, system by story)."""
    scores, human, system = {}, {}, {}
    # Prompt variant 2 of ChatGPT: the same model with an edited prompt, for the silent change.
    wanted = {**{v: k for k, v in JUDGES.items()}, ("ChatGPT", "2"): "edited"}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["rubric"] != RUBRIC:
                continue
            key = (row["judge"], row["prompt_variant"])
            story = f"{row['system']}:{row['story_idx']}"
            human[story] = float(row["human_mean"])
            system[story] = re.sub(r"[^A-Za-z0-9._:-]", "-", row["system"]).strip("-")
            if key in wanted:
                scores[(wanted[key], story)] = float(row["judge_score"])
    return scores, human, system


def mae(pred: list[float], truth: list[float]) -> float:
    return sum(abs(p - t) for p, t in zip(pred, truth)) / len(truth)


def main(url: str, key: str, path: str) -> None:
    scores, human, system = load(path)
    stories = sorted(human)
    random.Random(37).shuffle(stories)
    anchors, held = stories[: len(stories) // 2], stories[len(stories) // 2 :]
    jc = Client(url, key)
    judge = "story-judge"

    # 1. The old version's anchors, and its calibration.
    rows = [
        {"item_id": s, "judge_score": scores[(OLD, s)], "reference_score": human[s], "group": system[s]}
        for s in anchors
    ]
    jc.upload_anchors(judge, RUBRIC, rows, judge_version=OLD)
    jc.train(judge, "isotonic", progress=False, timeout=300)
    print(f"1. {len(rows)} anchors of {OLD}; version 1 trained on judge_version "
          f"{jc.versions(judge, RUBRIC).versions[0].judge_version}")

    truth = [human[s] for s in held]

    def held_out(version: str) -> tuple[float, float]:
        """Held-out MAE of `version`'s scores as served, and the estimate's error of the
        held-out mean."""
        c = jc.correct(judge, RUBRIC, [scores[(version, s)] for s in held], judge_version=version)
        e = jc.estimate(judge, RUBRIC, [scores[(version, s)] for s in held], judge_version=version)
        mean = sum(truth) / len(truth)
        return mae([r.corrected for r in c.results], truth), e.estimate - mean, [w.message for w in c.warnings]

    m_old, bias_old, _ = held_out(OLD)
    print(f"   held out ({len(held)} stories): MAE {m_old:.3f}, error of the run mean {bias_old:+.3f}")

    # 2. The platform switches the judge: its scores name the new version.
    m_stale, bias_stale, warnings = held_out(NEW)
    print(f"2. {NEW} scores through the old calibration: MAE {m_stale:.3f}, error of the run mean "
          f"{bias_stale:+.3f}; raw MAE {mae([scores[(NEW, s)] for s in held], truth):.3f}")
    print(f"   warning: {warnings[0]}")

    # 3. What to re-score, then the new version's scores of the anchor items, no labels.
    plan = jc.rescore(judge, RUBRIC, NEW)
    print(f"3. re-score {plan.remaining} anchor items; the bridge needs about {plan.bridge_items} "
          f"(tolerance {plan.tolerance})")
    for size in (50, 100, 200, len(anchors)):
        part = anchors[:size]
        jc.upload_anchors(
            judge, RUBRIC, [{"item_id": s, "judge_score": scores[(NEW, s)]} for s in part],
            judge_version=NEW,
        )
        b = jc.bridge(judge, RUBRIC, NEW, from_version=OLD)
        bands = ", ".join(f"{x.group} {x.shift.mean:+.3f}" for x in b.bands)
        moved = [g.group for g in b.groups if g.moved]
        print(f"   bridge on {b.items} items: raw shift {b.raw.mean:+.3f} (slope {b.raw.slope:.2f}, "
              f"rank correlation {b.raw.rank_correlation:.2f}); corrected shift {b.corrected.mean:+.3f} "
              f"[{b.corrected.lo:+.3f}, {b.corrected.hi:+.3f}]; bands {bands}; groups moved {moved or 'none'}"
              f" -> {b.verdict.value}")

    # 4. The refit on the re-scored anchors (the newest version, by default).
    jc.train(judge, "isotonic", progress=False, timeout=300)
    m_new, bias_new, warnings = held_out(NEW)
    print(f"4. version 2 on {NEW}: MAE {m_new:.3f}, error of the run mean {bias_new:+.3f}, "
          f"warnings {warnings or 'none'}")

    # 5. A silent change: the provider edits the prompt behind the same label.
    sample = anchors[:200]
    same = jc.check(judge, RUBRIC, [{"item_id": s, "judge_score": scores[(NEW, s)]} for s in sample],
                    judge_version=NEW)
    edited = jc.check(judge, RUBRIC, [{"item_id": s, "judge_score": scores[("edited", s)]} for s in sample],
                      judge_version=NEW)
    print(f"5. silent-change check on {len(sample)} items: unchanged -> {same.verdict.value} "
          f"(changed {same.changed}); the edited prompt under the same label -> corrected shift "
          f"{edited.corrected.mean:+.3f} -> {edited.verdict.value} (changed {edited.changed})")


if __name__ == "__main__":
    main(*sys.argv[1:4])

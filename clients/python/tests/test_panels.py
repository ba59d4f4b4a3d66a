"""Panels through the client: three judges scoring the same items defined as one panel,
trained, corrected from each item's members' scores (also with one member missing) and
estimated, then deleted. Known answers: judge `noise` carries nothing about the reference,
so its canary fires; an item missing judge `b` is corrected from `a` and `noise` with a wider
band (residual sd about 0.32) than one missing `noise` (about 0.27)."""

from __future__ import annotations

import random

import pytest

from judgecal import Client, InvalidInput, NotFound


def items(n: int, seed: int) -> list[tuple[dict[str, float], float]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        q = rng.gauss(0, 0.6)
        scores = {
            "a": 3 + q + rng.gauss(0, 0.3),
            "b": 2 + 0.5 * q + rng.gauss(0, 0.15),
            "noise": 3 + rng.gauss(0, 0.6),
        }
        out.append((scores, min(5.0, max(1.0, 3 + q + rng.gauss(0, 0.18)))))
    return out


def test_a_panel_through_the_client(server):
    with Client(server.url, server.key) as jc:
        anchors = items(120, 3)
        for judge in ("a", "b", "noise"):
            rows = [
                {"item_id": f"p{i}", "judge_score": s[judge], "reference_score": y}
                for i, (s, y) in enumerate(anchors)
            ]
            jc.upload_anchors(judge, "coherence", rows)
        panel = jc.create_panel("jury", ["a", "b", "noise"])
        assert panel.judges == ["a", "b", "noise"]
        assert [p.name for p in jc.panels().panels] == ["jury"]
        jc.train("jury", "bayes", options={"warmup": 300, "draws": 400}, progress=False, timeout=180)
        fusion = jc.versions("jury", "coherence").versions[0].panel
        assert [w.canary for w in fusion.weights] == [False, False, True]
        fresh = items(50, 4)
        whole = jc.correct("jury", "coherence", items=[{"scores": s} for s, _ in fresh])
        assert whole.results[0].members is None

        def without(judge):
            return jc.correct(
                "jury",
                "coherence",
                items=[{"scores": {k: v for k, v in s.items() if k != judge}} for s, _ in fresh],
            ).results

        def width(results):
            return sum(r.predictive[1] - r.predictive[0] for r in results)

        # Without b the band widens; without the noise judge it hardly moves.
        no_b, no_noise = without("b"), without("noise")
        assert no_b[0].members == ["a", "noise"] and no_noise[0].members == ["a", "b"]
        assert width(no_b) > 1.1 * width(no_noise)
        run = jc.estimate("jury", "coherence", [{"scores": s} for s, _ in fresh])
        assert run.interval[0] < run.estimate < run.interval[1]
        # Judge a missing where it would score low (a judge failing on hard items): refused,
        # naming a, unless the caller takes the scores as missing at random.
        low = [{"scores": {k: v for k, v in s.items() if k != "a" or v >= 3}} for s, _ in items(200, 5)]
        with pytest.raises(InvalidInput) as refused:
            jc.estimate("jury", "coherence", low)
        assert refused.value.status_code == 422 and "a's scores look missing" in str(refused.value.body)
        assumed = jc.estimate("jury", "coherence", low, assume_missing_at_random=True)
        assert any("missing at random" in w.message and w.code.value == "members_missing" for w in assumed.warnings)
        plan = jc.plan_panel("jury", "coherence", 1000, 0.03, label_cost=50, costs={"noise": 1})
        assert plan.cheapest.judges == ["a", "b"] and plan.labels_saved > 0
        jc.delete_panel("jury")
        with pytest.raises(NotFound):
            jc.panel("jury")

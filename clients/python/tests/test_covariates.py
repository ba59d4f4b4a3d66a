"""Covariates through the client: anchors that carry each answer's length, a version trained
with it, corrections read at each item's length and a length-controlled estimate. Known
answers: the judge adds 0.3 per sd of log length on a quality of sd 0.6 with noise 0.3, so at
a fixed judge score the reference falls 0.24 per sd of log length; an answer four times as
long (2.77 sd) is worth about 0.67 less."""

from __future__ import annotations

import math
import random

from judgecal import Client, InvalidInput

import pytest


def items(n: int, seed: int, shift: float = 0.0) -> list[tuple[float, float, float]]:
    """(judge score, length, reference) of `n` items, log length `shift` sd from 400 tokens."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        q = 3 + rng.gauss(0, 0.6)
        u = rng.gauss(shift, 1.0 if shift == 0 else 0.3)
        judge = q + 0.3 * u + rng.gauss(0, 0.3)
        out.append((judge, round(400 * math.exp(0.5 * u)), min(5.0, max(1.0, q + rng.gauss(0, 0.15)))))
    return out


def test_a_length_biased_judge_through_the_client(server):
    with Client(server.url, server.key) as jc:
        rows = [
            {"item_id": f"c{i}", "judge_score": j, "reference_score": y, "covariates": {"length": n}}
            for i, (j, n, y) in enumerate(items(400, 5))
        ]
        jc.upload_anchors("lengthy", "coherence", rows)
        assert jc.upload_anchors("lengthy", "coherence", rows).unchanged == 400
        jc.train("lengthy", "bayes", options={"warmup": 300, "draws": 400},
                 covariates=["length"], progress=False, timeout=180)
        layer = jc.versions("lengthy", "coherence").versions[0].covariates
        assert layer.inputs[0].name == "length" and layer.inputs[0].transform == "log"
        assert layer.coefficients[0].per_sd_hi < 0
        at = [{"score": 3.5, "covariates": {"length": n}} for n in (200, 800)]
        short, long = jc.correct("lengthy", "coherence", items=at).results
        assert -0.9 < long.corrected - short.corrected < -0.4
        with pytest.raises(InvalidInput) as bad:
            jc.correct("lengthy", "coherence", items=[at[0], {"score": 3.5}])
        assert (bad.value.details[0].row, bad.value.details[0].field) == (2, "covariates.length")
        run = items(200, 6, shift=1.5)
        answer = jc.estimate(
            "lengthy", "coherence", [{"score": j, "covariates": {"length": n}} for j, n, _ in run]
        )
        assert answer.covariates == "as_given"
        held = jc.estimate("lengthy", "coherence", [j for j, _, _ in run], hold={"length": 400})
        assert held.covariates == "held"
        # At its own (long) lengths the run is discounted below the length-controlled answer.
        assert answer.estimate < held.estimate
        # A frame's covariate.<name> columns travel with its scores, as they do on upload.
        pd = pytest.importorskip("pandas")
        from judgecal.frames import correct_frame

        frame = pd.DataFrame({"judge_score": [3.5, 3.5], "covariate.length": [200, 800]})
        scored = correct_frame(jc, frame, "lengthy", "coherence")
        assert scored["corrected"].tolist() == pytest.approx([short.corrected, long.corrected])
        assert scored["layer_score"].notna().all()


def test_a_frames_covariate_columns_are_uploaded(server):
    pd = pytest.importorskip("pandas")
    from judgecal.frames import upload_frame

    frame = pd.DataFrame(
        {"item_id": ["f1", "f2"], "judge_score": [3.0, 4.0], "reference_score": [3.5, 4.5],
         "covariate.length": [120, None]}
    )
    with Client(server.url, server.key) as jc:
        totals = upload_frame(jc, frame, judge="framed", rubric="coherence", progress=False)
        assert totals["inserted"] == 2
        rows = {a.item_id: a for a in jc.anchors("framed", "coherence").anchors}
        assert {k: v.root for k, v in rows["f1"].covariates.items()} == {"length": 120.0}
        assert not rows["f2"].covariates

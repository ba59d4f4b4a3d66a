"""Pairwise comparisons through the client: a batch stored whole, a retry unchanged, a bad row
named by row and field, a changed verdict a `Conflict` until replaced, and CSV."""

from __future__ import annotations

import pytest

from judgecal import Client, Conflict, InvalidInput


def test_comparisons_are_stored_whole_and_named_when_refused(server):
    rows = [
        {"item_id": f"p{i}", "a": "model-x", "b": "model-y", "verdict": ["a", "b", "tie"][i % 3],
         "verdict_swapped": 0.5, "preference": "a" if i % 2 else None}
        for i in range(30)
    ]
    with Client(server.url, server.key) as jc:
        first = jc.upload_comparisons("pairwise-judge", "helpfulness", rows)
        assert (first.inserted, first.cells[0].comparison_count) == (30, 30)
        assert jc.upload_comparisons("pairwise-judge", "helpfulness", rows).unchanged == 30
        cell = next(c for c in jc.cells().cells if c.judge == "pairwise-judge")
        assert (cell.anchor_count, cell.comparison_count) == (0, 30)
        with pytest.raises(InvalidInput) as bad:
            jc.upload_comparisons("pairwise-judge", "helpfulness",
                                  [{"item_id": "q1", "a": "x", "b": "x", "verdict": "a"}])
        assert (bad.value.details[0].row, bad.value.details[0].field) == (1, "b")
        changed = [dict(rows[0], verdict=0.9)]
        with pytest.raises(Conflict):
            jc.upload_comparisons("pairwise-judge", "helpfulness", changed)
        assert jc.upload_comparisons("pairwise-judge", "helpfulness", changed, replace=True).replaced == 1
        csv = "judge,rubric,item_id,a,b,verdict,preference\npairwise-judge,harmless,p1,x,y,b,tie\n"
        assert jc.upload_comparisons_csv(csv).inserted == 1
        # The unlabelled verdicts sent back with the people's preference are labelled.
        unlabelled = [r for r in rows[1:] if r["preference"] is None]
        back = [dict(r, preference="b") for r in unlabelled]
        answer = jc.upload_comparisons("pairwise-judge", "helpfulness", back)
        assert (answer.labelled, answer.inserted, answer.unchanged) == (len(back), 0, 0)


def test_ratings_rate_a_run_and_come_back_as_a_frame(server):
    import random

    from judgecal.frames import ratings_frame

    rng = random.Random(4)
    truth = {"x": 0.0, "y": 1.5, "z": -1.0}
    names = sorted(truth)

    def rows(n: int, start: int, labelled: bool) -> list[dict]:
        out = []
        for i in range(n):
            a, b = rng.sample(names, 2)
            u = rng.random()
            z = truth[a] - truth[b] + __import__("math").log(u / (1 - u))
            seen = z + rng.gauss(0, 0.7)
            row = {"item_id": f"r{start + i}", "a": a, "b": b,
                   "verdict": "a" if seen + 0.8 > 0 else "b",
                   "verdict_swapped": "a" if seen - 0.8 > 0 else "b"}
            if labelled:
                row["preference"] = "a" if z > 0 else "b"
            out.append(row)
        return out

    with Client(server.url, server.key) as jc:
        jc.upload_comparisons("rated-judge", "overall", rows(400, 0, True))
        answer = jc.ratings("rated-judge", "overall", rows(2000, 10_000, False), baseline="x")
        frame = ratings_frame(answer)
        assert list(frame["system"]) == ["y", "x", "z"]
        for _, r in frame.iterrows():
            assert r["lo"] <= truth[r["system"]] <= r["hi"], frame
        assert frame.loc[frame["system"] == "x", "rating"].item() == 0.0
        # The baseline has no win rate against itself; every system has one over the field.
        assert frame.loc[frame["system"] == "x", "win_rate"].isna().all()
        assert frame["field_win_rate"].between(0, 1).all()
        with pytest.raises(InvalidInput) as bad:
            jc.ratings("rated-judge", "overall", rows(10, 20_000, False), level=2.0)
        assert bad.value.details[0].field == "level"
        # A label plan: which of the run's comparisons to label for a narrower answer.
        run = rows(2000, 30_000, False)
        widest = max((r["hi"] - r["lo"]) / 2 for _, r in frame.iterrows())
        planned = jc.ratings("rated-judge", "overall", run, baseline="x", target_half_width=widest * 0.8)
        assert planned.plan.outcome == "more_labelled"
        assert len(planned.plan.label) == planned.plan.needed
        assert set(planned.plan.label) <= {r["item_id"] for r in run}


def test_a_pairwise_judge_version_is_checked_for_a_silent_change(server):
    import random

    rng = random.Random(9)
    rows = []
    for i in range(300):
        a, b = rng.sample(["x", "y", "z"], 2)
        z = rng.gauss(0, 1.5) + (1.0 if a == "y" else 0.0) - (1.0 if b == "y" else 0.0)
        seen = z + rng.gauss(0, 0.8)
        rows.append({"item_id": f"c{i}", "a": a, "b": b,
                     "verdict": "a" if seen + 0.5 > 0 else "b",
                     "verdict_swapped": "a" if seen - 0.5 > 0 else "b",
                     "preference": "a" if z > 0 else "b"})
    with Client(server.url, server.key) as jc:
        jc.upload_comparisons("checked-judge", "overall", rows, judge_version="v1")
        jc.train("checked-judge", "auto", progress=False, timeout=120)
        versions = jc.judge_versions("checked-judge", "overall").judge_versions
        assert [(v.judge_version, v.anchor_count, v.calibrated_by) for v in versions] == [("v1", 300, 1)]
        same = [{"item_id": r["item_id"], "verdict": r["verdict"], "verdict_swapped": r["verdict_swapped"]}
                for r in rows[:100]]
        unchanged = jc.check("checked-judge", "overall", same, judge_version="v1")
        assert (unchanged.changed, unchanged.verdict.value) == (False, "carry_over")
        always_a = [dict(r, verdict="a", verdict_swapped="a") for r in same]
        assert jc.check("checked-judge", "overall", always_a, judge_version="v1").changed
        with pytest.raises(InvalidInput) as bad:
            jc.check("checked-judge", "overall", [{"item_id": "c1", "judge_score": 3.0}], judge_version="v1")
        assert (bad.value.details[0].row, bad.value.details[0].field) == (1, "judge_score")


def test_a_panel_of_pairwise_judges_trains_and_rates_a_run_from_every_members_verdicts(server):
    import math
    import random

    from judgecal.frames import ratings_frame

    rng = random.Random(9)
    truth = {"x": 0.0, "y": 1.5, "z": -1.0}
    names = sorted(truth)
    members = ["pp-a", "pp-b"]

    def rows(n: int, start: int, labelled: bool) -> list[dict]:
        out = []
        for i in range(n):
            a, b = rng.sample(names, 2)
            u = rng.random()
            z = truth[a] - truth[b] + math.log(u / (1 - u))
            row = {"item_id": f"pp{start + i}", "a": a, "b": b,
                   "verdicts": {m: "a" if z + rng.gauss(0, 1.2) > 0 else "b" for m in members}}
            if labelled:
                row["preference"] = "a" if z > 0 else "b"
            out.append(row)
        return out

    anchors = rows(400, 0, True)
    with Client(server.url, server.key) as jc:
        for m in members:
            own = [{k: v for k, v in r.items() if k != "verdicts"} | {"verdict": r["verdicts"][m]}
                   for r in anchors]
            jc.upload_comparisons(m, "overall", own)
        jc.create_panel("pp-jury", members)
        jc.train("pp-jury", "auto", progress=False, timeout=120)
        version = jc.preferences("pp-jury", "overall").versions[0]
        assert [m.judge for m in version.panel] == members
        frame = ratings_frame(jc.ratings("pp-jury", "overall", rows(2000, 10_000, False), baseline="x"))
        for _, r in frame.iterrows():
            assert r["lo"] <= truth[r["system"]] <= r["hi"], frame
        run = rows(3, 20_000, False)
        del run[1]["verdicts"]["pp-b"]
        with pytest.raises(InvalidInput) as bad:
            jc.ratings("pp-jury", "overall", run)
        assert (bad.value.details[0].row, bad.value.details[0].field) == (2, "verdicts.pp-b")

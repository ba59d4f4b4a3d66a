"""Judge versions through the client: a cell trained on version v1, scores of v2 warned at the
door, v2's re-scores uploaded without references, the bridge and its verdict, the refit, runs
of both versions compared, and a silent-change check. Known answers: v2 scores every item 0.6
higher, so the corrected mean moves about 0.8 · 0.6 ≈ 0.5, far past the 0.1 tolerance."""

from __future__ import annotations

import random

from judgecal import Client
from judgecal.records import Record, from_mapping, judge_version


def rows(n: int, shift: float = 0.0, references: bool = True) -> list[dict]:
    rng = random.Random(7)
    out = []
    for i in range(n):
        j = rng.uniform(1, 4)
        y = min(5.0, max(1.0, 0.5 + 0.8 * j + rng.gauss(0, 0.3)))
        row = {"item_id": f"v{i}", "judge_score": round(j + shift, 3)}
        if references:
            row["reference_score"] = round(y, 3)
        out.append(row)
    return out


def test_a_judge_change_through_the_client(server):
    with Client(server.url, server.key) as jc:
        jc.upload_anchors("jv", "coherence", rows(150), judge_version="v1")
        jc.train("jv", "isotonic", progress=False, timeout=120)
        assert jc.versions("jv", "coherence").versions[0].judge_version == "v1"
        stale = jc.correct("jv", "coherence", [3.0], judge_version="v2")
        assert stale.warnings and "v2" in stale.warnings[0].message
        assert stale.warnings[0].code.value == "judge_version_mismatch"
        plan = jc.rescore("jv", "coherence", "v2")
        assert plan.remaining == 150 and plan.from_ == "v1"
        ack = jc.upload_anchors("jv", "coherence", rows(150, 0.6, references=False), judge_version="v2")
        assert ack.inserted == 150
        bridge = jc.bridge("jv", "coherence", "v2", from_version="v1")
        assert bridge.verdict.value == "refit" and bridge.items == 150
        versions = jc.train("jv", "isotonic", progress=False, timeout=120)
        assert versions[0].version == 2
        assert jc.correct("jv", "coherence", [3.0], judge_version="v2").warnings == []
        both = jc.compare(
            "jv", "coherence", [2.0, 3.0, 3.5] * 10, [2.6, 3.6, 4.1] * 10,
            judge_version_a="v1", judge_version_b="v2",
        )
        assert (both.a.calibrator, both.b.calibrator) == (1, 2)
        same = [{"item_id": r["item_id"], "judge_score": r["judge_score"]} for r in rows(150, 0.6, False)]
        check = jc.check("jv", "coherence", same, judge_version="v2")
        assert check.changed is False and check.verdict.value == "carry_over"
        assert jc.judge_versions("jv", "coherence").judge_versions[1].calibrated_by == 2
        jc.set_judge_settings("jv", on_version_mismatch="refuse")
        assert jc.judge_settings("jv").on_version_mismatch.value == "refuse"


def test_records_carry_their_judge_version():
    record = from_mapping({"item_id": "a", "judge": "j", "rubric": "r", "score": 3, "judge_version": "v2"}, 1)
    assert record.judge_version == "v2" and record.anchor()["judge_version"] == "v2"
    assert Record("a", "j", "r", 3.0).anchor().get("judge_version") is None
    # The label changes with the template, and only with what makes the judge.
    one = judge_version("gpt-4o-2024-08-06", "Rate {answer} from 1 to 5")
    assert one.startswith("gpt-4o-2024-08-06#")
    assert one == judge_version("gpt-4o-2024-08-06", "Rate {answer} from 1 to 5")
    assert one != judge_version("gpt-4o-2024-08-06", "Rate {answer} from 1 to 10")
    assert one != judge_version("gpt-4o-2024-11-20", "Rate {answer} from 1 to 5")
    assert one != judge_version("gpt-4o-2024-08-06", "Rate {answer} from 1 to 5", temperature=0.7)


def test_a_ranking_session_through_the_client(server):
    """Two looks of a session: the second is round 2 of 2, a third is refused (409)."""
    from judgecal.errors import JudgecalError

    with Client(server.url, server.key) as jc:
        jc.upload_anchors("rs", "coherence", rows(120))
        jc.train("rs", "identity", progress=False, timeout=120)
        session = jc.open_rank_session("rs", "coherence", 2, seed=4)
        assert (session.looks, session.looks_left) == (0, 2)
        runs = {
            "a": [{"id": f"p{i}", "score": 2.0 + (i % 10) / 5} for i in range(100)],
            "b": [{"id": f"p{i}", "score": 2.5 + (i % 10) / 5} for i in range(100)],
        }
        first = jc.rank_look(session.id, runs)
        assert first.round == 1 and first.rounds == 2 and first.session.looks == 1
        second = jc.rank_look(session.id, runs)
        assert second.round == 2 and second.session.looks_left == 0
        try:
            jc.rank_look(session.id, runs)
        except JudgecalError as e:
            assert e.status == 409 and "planned 2 looks" in str(e)
        else:
            raise AssertionError("a third look was answered")
        assert jc.rank_session(session.id).looks == 2

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

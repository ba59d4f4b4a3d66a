"""The pandas helpers against a real server: a DataFrame uploaded in chunks with every row
acknowledged, a refused chunk's rows numbered as the frame's, corrections as columns, and
run-level answers as tidy rows."""

from __future__ import annotations

import pandas as pd
import pytest

from judgecal import Client, InvalidInput
from judgecal.frames import correct_frame, tidy, upload_frame

from test_client import anchors, line


def frame(n: int, seed: int, prefix: str) -> pd.DataFrame:
    f = pd.DataFrame(anchors(n, seed, prefix))
    f["group"] = [f"sys{i % 4}" for i in range(n)]
    return f


def test_a_frame_is_uploaded_in_chunks_and_every_row_acknowledged(server, client):
    f = frame(1000, 5, "f")
    sent: list[int] = []
    original = client.upload_csv

    def counting(csv, **kw):
        sent.append(csv.count("\n") - 1)
        return original(csv, **kw)

    client.upload_csv = counting  # the real call, counted
    totals = upload_frame(client, f, judge="frames", rubric="coherence", chunk=300, progress=False)
    assert totals == {"rows": 1000, "inserted": 1000, "unchanged": 0, "replaced": 0}
    assert sent == [300, 300, 300, 100]
    page = client.anchors("frames", "coherence", limit=5)
    assert page.anchors[0].group is not None


def test_a_refused_chunk_names_the_frames_row(server, client):
    f = frame(100, 6, "g")
    f.loc[75, "reference_score"] = 7.5
    with pytest.raises(InvalidInput) as e:
        upload_frame(client, f, judge="frames2", rubric="coherence", chunk=50, progress=False)
    # The second chunk (rows 51-100, 1-based) is refused; its 26th row is the frame's 76th.
    assert [(p.row, p.field) for p in e.value.details] == [(76, "reference_score")]


def test_corrections_come_back_as_columns_and_answers_as_rows(server, client):
    upload_frame(client, frame(300, 8, "h"), judge="frames3", rubric="coherence", progress=False)
    client.train("frames3", "bayes", progress=False, timeout=300)
    run = pd.DataFrame({"judge_score": [2.0, 3.0, 4.0]}, index=["x", "y", "z"])
    out = correct_frame(client, run, "frames3", "coherence")
    assert list(out.index) == ["x", "y", "z"]
    assert (out["corrected"] - run["judge_score"].map(line)).abs().max() < 0.15
    assert (out["predictive_lo"] < out["corrected"]).all() and "sigma" not in out
    rows = tidy(client.compare("frames3", "coherence", [3.0, 4.0, 4.5], [2.0, 2.5, 3.0]))
    assert list(rows["row"]) == ["a", "b", "a - b"]
    assert rows.loc[2, "estimate"] == pytest.approx(rows.loc[0, "estimate"] - rows.loc[1, "estimate"], abs=1e-9)

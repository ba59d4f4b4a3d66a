"""`judgecal-py sync phoenix` against a real Phoenix server (from PyPI, on loopback, started
once for the session) and a real judgecal: 300 judged spans with a system attribute, 120 of
them with a person's annotation, and three that must be skipped. The import stores 120 anchors
with group and rater, once; the write-back leaves exactly one `coherence/corrected` annotation
per judged span with its interval and version, and a second identical run changes nothing."""

from __future__ import annotations

import datetime
import os
import random
import time
import uuid

import httpx
import pytest

from judgecal import Client
from judgecal.cli import main

RUBRIC, JUDGE = "coherence", "phoenix-judge"


@pytest.fixture(scope="module")
def project(phoenix: str, server):
    """A project of its own for each judgecal (backend): 300 judged spans (the first 120 also
    by a person), then three to skip; returns its name and span ids in order."""
    name = f"judgecal-sync-{uuid.uuid4().hex[:8]}"
    now = datetime.datetime.now(datetime.timezone.utc).isoformat()
    rng = random.Random(11)
    spans, notes = [], []
    for i in range(303):
        sid = uuid.uuid4().hex[:16]
        spans.append({"name": "answer", "context": {"trace_id": uuid.uuid4().hex, "span_id": sid}, "span_kind": "LLM", "start_time": now, "end_time": now, "status_code": "OK", "attributes": {"system": f"model-{i % 4}"}})
        j = rng.choice([x / 4 for x in range(4, 21)])
        judge = {"span_id": sid, "name": RUBRIC, "annotator_kind": "LLM", "identifier": JUDGE, "metadata": {"judge_version": "3"}, "result": {"score": j}}
        if i == 300:
            notes += [dict(judge, identifier="other-judge"), dict(judge, identifier="third-judge")]
        elif i == 301:
            notes.append(dict(judge, result={"score": 9.0}))
        elif i == 302:
            notes.append(dict(judge, result={"label": "good"}))
        else:
            notes.append(judge)
        if i < 120:
            y = min(5.0, max(1.0, 0.5 + 0.8 * j + rng.gauss(0, 0.3)))
            notes.append({"span_id": sid, "name": RUBRIC, "annotator_kind": "HUMAN", "identifier": f"rater-{i % 5}", "result": {"score": y}})
    with httpx.Client(base_url=phoenix, timeout=60) as px:
        assert px.post(f"/v1/projects/{name}/spans", json={"data": spans}).status_code == 202
        for _ in range(300):  # spans are inserted asynchronously
            got = px.get(f"/v1/projects/{name}/spans", params={"limit": 1000})
            if got.status_code == 200 and len(got.json()["data"]) == 303:
                break
            time.sleep(0.1)
        for start in range(0, len(notes), 200):
            res = px.post("/v1/span_annotations", params={"sync": True}, json={"data": notes[start : start + 200]})
            assert res.status_code == 200, res.text
    return name, [s["context"]["span_id"] for s in spans]


def corrected(phoenix: str, project: str, span_ids: list[str]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {s: [] for s in span_ids}
    with httpx.Client(base_url=phoenix, timeout=60) as px:
        for start in range(0, len(span_ids), 100):
            params = {"span_ids": span_ids[start : start + 100], "limit": 1000, "include_annotation_names": [f"{RUBRIC}/corrected"]}
            for a in px.get(f"/v1/projects/{project}/span_annotations", params=params).json()["data"]:
                out[a["span_id"]].append(a)
    return out


def sync(server, phoenix: str, project: str, capsys, *extra: str) -> str:
    os.environ["JUDGECAL_API_KEY"] = server.key
    main(["--url", server.url, "sync", "phoenix", "--endpoint", phoenix, "--project", project, "--rubric", RUBRIC, "--judge", JUDGE, "--group-attribute", "system", *extra])
    return capsys.readouterr().out


def test_spans_in_as_anchors_and_corrected_scores_back(server, phoenix, project, capsys):
    name, made = project
    out = sync(server, phoenix, name, capsys)
    assert "303 spans read: 300 judged, 120 of them with a reference" in out, out
    assert "anchors: 120 inserted, 0 unchanged, 0 replaced" in out, out
    assert "skipped 1: two judge scores of coherence (identifiers other-judge, third-judge)" in out, out
    assert "skipped 1: a judge score off the rubric's scale [1, 5]" in out, out
    assert "skipped 1: a judge score that is not a number (NoneType)" in out, out
    with Client(server.url, server.key) as jc:
        anchors = {a.item_id: a for a in jc.anchors(JUDGE, RUBRIC, limit=1000, judge_version="3").anchors}
        assert set(anchors) == set(made[:120])
        assert (anchors[made[0]].group, anchors[made[0]].rater) == ("model-0", "rater-0")
        out = sync(server, phoenix, name, capsys)
        assert "anchors: 0 inserted, 120 unchanged, 0 replaced" in out, out
        assert jc.train(JUDGE, "quantile_map", rubrics=[RUBRIC], progress=False, timeout=120)[0].active

    out = sync(server, phoenix, name, capsys, "--write-back")
    assert "corrected annotations: 300 written, 0 updated, 0 unchanged" in out, out
    after = corrected(phoenix, name, made)
    for i, sid in enumerate(made):
        assert len(after[sid]) == (1 if i < 300 else 0), (i, after[sid])
    for sid in made[:300]:
        (a,) = after[sid]
        meta, score = a["metadata"], a["result"]["score"]
        assert a["annotator_kind"] == "CODE" and a["identifier"] == "judgecal"
        assert 1.0 <= score <= 5.0 and float(meta["judgecal.interval_low"]) <= score <= float(meta["judgecal.interval_high"]), a
        assert (meta["judgecal.calibration_version"], meta["judgecal.method"], meta["judgecal.judge_version"]) == ("1", "quantile_map", "3")

    out = sync(server, phoenix, name, capsys, "--write-back")
    assert "corrected annotations: 0 written, 0 updated, 300 unchanged" in out, out
    again = corrected(phoenix, name, made)
    assert {s: [(a["id"], a["updated_at"]) for a in v] for s, v in again.items()} == {s: [(a["id"], a["updated_at"]) for a in v] for s, v in after.items()}


def test_a_missing_project_is_said_by_name(server, phoenix, capsys):
    os.environ["JUDGECAL_API_KEY"] = server.key
    with pytest.raises(SystemExit) as e:
        main(["--url", server.url, "sync", "phoenix", "--endpoint", phoenix, "--project", "nope", "--rubric", RUBRIC, "--judge", JUDGE])
    assert e.value.code == 2
    assert "has no project 'nope'" in capsys.readouterr().err


def test_the_docs_example_runs_as_printed(phoenix, tmp_path, capsys, monkeypatch):
    """docs/phoenix.md's Python block, then its three commands and the last once more, against
    this session's Phoenix and a judgecal of its own (the example's project name is fixed)."""
    from conftest import docs_example, start

    code, commands = docs_example("phoenix.md")
    assert [c[1] for c in commands] == ["sync", "train", "sync"], commands
    jc_server = start("sqlite", tmp_path)
    try:
        monkeypatch.setenv("PHOENIX_URL", phoenix)
        monkeypatch.setenv("JUDGECAL_API_KEY", jc_server.key)
        exec(code, {})
        outs = []
        for c in commands + [commands[-1]]:
            main(["--url", jc_server.url, *[phoenix if a == "http://127.0.0.1:6006" else a for a in c[1:]]])
            outs.append(capsys.readouterr().out)
        assert "300 spans read: 300 judged, 120 of them with a reference" in outs[0], outs[0]
        assert "anchors: 120 inserted" in outs[0], outs[0]
        assert "corrected annotations: 300 written" in outs[2], outs[2]
        assert "0 written, 0 updated, 300 unchanged" in outs[3], outs[3]
    finally:
        jc_server.process.terminate()
        jc_server.process.wait(timeout=10)

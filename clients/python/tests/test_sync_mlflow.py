"""`judgecal-py sync mlflow` against a real MLflow tracking server (from PyPI, on loopback,
started once for the session) and a real judgecal: 300 judged traces with a system tag, 120 of
them with a person's feedback, and three that must be skipped. The import stores 120 anchors
with group and rater, once; the write-back leaves exactly one `coherence/corrected` per judged
trace with its interval and version, and a second identical run changes nothing."""

from __future__ import annotations

import os
import random
import uuid

import pytest

from judgecal import Client
from judgecal.cli import main


RUBRIC, JUDGE = "coherence", "mlflow-judge"


def judged_trace(rng: random.Random, i: int) -> tuple[float, float | None]:
    j = rng.choice([x / 4 for x in range(4, 21)])
    y = min(5.0, max(1.0, 0.5 + 0.8 * j + rng.gauss(0, 0.3))) if i < 120 else None
    return j, y


@pytest.fixture(scope="module")
def experiment(mlflow_uri: str, server):
    """An experiment of its own for each judgecal (backend): 300 judged traces (the first 120
    also by a person), then three to skip."""
    os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"
    import mlflow
    from mlflow.entities import AssessmentSource

    mlflow.set_tracking_uri(mlflow_uri)
    name = f"judgecal-sync-{uuid.uuid4().hex[:8]}"
    mlflow.set_experiment(name)
    judge = AssessmentSource(source_type="LLM_JUDGE", source_id=JUDGE)
    rng = random.Random(7)
    made = []
    for i in range(303):
        with mlflow.start_span(name="answer") as span:
            span.set_inputs({"prompt": f"story {i}"})
            span.set_outputs({"text": "once upon a time"})
            mlflow.update_current_trace(tags={"system": f"model-{i % 4}"})
            tid = span.trace_id
        j, y = judged_trace(rng, i)
        if i == 300:
            mlflow.log_feedback(trace_id=tid, name=RUBRIC, value=j, source=AssessmentSource(source_type="LLM_JUDGE", source_id="other-judge"))
            mlflow.log_feedback(trace_id=tid, name=RUBRIC, value=j, source=AssessmentSource(source_type="LLM_JUDGE", source_id="third-judge"))
        elif i == 301:
            mlflow.log_feedback(trace_id=tid, name=RUBRIC, value=9.0, source=judge)
        elif i == 302:
            mlflow.log_feedback(trace_id=tid, name=RUBRIC, value="good", source=judge)
        else:
            mlflow.log_feedback(trace_id=tid, name=RUBRIC, value=j, source=judge, metadata={"mlflow.assessment.scorerVersion": "3"})
        if y is not None:
            mlflow.log_feedback(trace_id=tid, name=RUBRIC, value=y, source=AssessmentSource(source_type="HUMAN", source_id=f"rater-{i % 5}"))
        made.append(tid)
    return mlflow_uri, name, made


def corrected(uri: str, experiment: str) -> dict[str, list]:
    from mlflow import MlflowClient
    from mlflow.entities import Feedback

    ml = MlflowClient(uri)
    exp = ml.get_experiment_by_name(experiment)
    out: dict[str, list] = {}
    token = None
    while True:
        page = ml.search_traces(locations=[exp.experiment_id], max_results=500, page_token=token, include_spans=False)
        for t in page:
            out[t.info.trace_id] = [a for a in t.info.assessments if isinstance(a, Feedback) and a.name == f"{RUBRIC}/corrected"]
        token = page.token
        if not token:
            return out


def sync(server, uri: str, experiment: str, capsys, *extra: str) -> str:
    os.environ["JUDGECAL_API_KEY"] = server.key
    main(["--url", server.url, "sync", "mlflow", "--tracking-uri", uri, "--experiment", experiment, "--rubric", RUBRIC, "--judge", JUDGE, "--group-tag", "system", *extra])
    return capsys.readouterr().out


def test_traces_in_as_anchors_and_corrected_scores_back(server, experiment, capsys):
    uri, name, made = experiment
    out = sync(server, uri, name, capsys)
    assert "303 traces read: 300 judged, 120 of them with a reference" in out, out
    assert "anchors: 120 inserted, 0 unchanged, 0 replaced" in out, out
    assert "skipped 1: two judge scores of coherence (sources other-judge, third-judge)" in out, out
    assert "skipped 1: a judge score off the rubric's scale [1, 5]" in out, out
    assert "skipped 1: a judge score that is not a number (str)" in out, out
    with Client(server.url, server.key) as jc:
        page = jc.anchors(JUDGE, RUBRIC, limit=1000, judge_version="3")
        anchors = {a.item_id: a for a in page.anchors}
        assert set(anchors) == set(made[:120])
        first = anchors[made[0]]
        assert (first.group, first.rater, first.judge_version) == ("model-0", "rater-0", "3")
        # Idempotent: the same traces store nothing new.
        out = sync(server, uri, name, capsys)
        assert "anchors: 0 inserted, 120 unchanged, 0 replaced" in out, out
        versions = jc.train(JUDGE, "quantile_map", rubrics=[RUBRIC], progress=False, timeout=120)
        assert versions[0].active

    out = sync(server, uri, name, capsys, "--write-back")
    assert "corrected feedback: 300 written, 0 updated, 0 unchanged" in out, out
    # The three skipped traces get no corrected score.
    after = corrected(uri, name)
    for i, tid in enumerate(made):
        assert len(after[tid]) == (1 if i < 300 else 0), (i, after[tid])
    for tid in made[:300]:
        (a,) = after[tid]
        meta = a.metadata
        assert 1.0 <= a.value <= 5.0, a
        assert a.source.source_type == "CODE" and a.source.source_id == "judgecal"
        low, high = float(meta["judgecal.interval_low"]), float(meta["judgecal.interval_high"])
        assert low <= a.value <= high, meta
        assert (meta["judgecal.calibration_version"], meta["judgecal.method"], meta["judgecal.judge_version"]) == ("1", "quantile_map", "3")
        assert meta["judgecal.warnings"].startswith("[")

    # A second identical run changes nothing: no write, the same assessments.
    out = sync(server, uri, name, capsys, "--write-back")
    assert "corrected feedback: 0 written, 0 updated, 300 unchanged" in out, out
    again = corrected(uri, name)
    assert {t: [(a.assessment_id, a.last_update_time_ms) for a in v] for t, v in again.items()} == {
        t: [(a.assessment_id, a.last_update_time_ms) for a in v] for t, v in after.items()
    }


def test_a_missing_experiment_is_said_by_name(server, experiment, capsys):
    uri, _, _ = experiment
    os.environ["JUDGECAL_API_KEY"] = server.key
    with pytest.raises(SystemExit) as e:
        main(["--url", server.url, "sync", "mlflow", "--tracking-uri", uri, "--experiment", "nope", "--rubric", RUBRIC, "--judge", JUDGE])
    assert e.value.code == 2
    assert "has no experiment 'nope'" in capsys.readouterr().err



def test_the_docs_example_runs_as_printed(mlflow_uri, tmp_path, capsys, monkeypatch):
    """docs/mlflow.md's Python block, then its three commands, against this session's MLflow
    and a judgecal of its own (the example's experiment name is fixed, so it runs once)."""
    from conftest import docs_example, start

    code, commands = docs_example("mlflow.md")
    assert [c[1] for c in commands] == ["sync", "train", "sync"], commands
    jc_server = start("sqlite", tmp_path)
    try:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_uri)
        monkeypatch.setenv("JUDGECAL_API_KEY", jc_server.key)
        exec(code, {})
        outs = []
        for c in commands + [commands[-1]]:
            args = [mlflow_uri if a == "http://127.0.0.1:5000" else a for a in c[1:]]
            main(["--url", jc_server.url, *args])
            outs.append(capsys.readouterr().out)
        assert "300 traces read: 300 judged, 120 of them with a reference" in outs[0], outs[0]
        assert "anchors: 120 inserted" in outs[0], outs[0]
        assert "corrected feedback: 300 written" in outs[2], outs[2]
        assert "0 written, 0 updated, 300 unchanged" in outs[3], outs[3]
        from mlflow import MlflowClient

        ml = MlflowClient(mlflow_uri)
        exp = ml.get_experiment_by_name("story-app")
        shifts = []
        for t in ml.search_traces(locations=[exp.experiment_id], max_results=500, include_spans=False):
            by_name = {a.name: a.value for a in t.info.assessments if a.source.source_type != "HUMAN"}
            shifts.append(by_name["coherence/corrected"] - by_name["coherence"])
        assert len(shifts) == 300 and 0.3 < sum(shifts) / 300 < 0.9, sum(shifts) / len(shifts)
    finally:
        jc_server.process.terminate()
        jc_server.process.wait(timeout=10)

"""The client against a real judgecal: upload, train, correct, estimate, compare, errors with
row and field, retries on 429, the async client, the environment, the pandas helpers and the
CLI. Known answers: the anchors follow y = 0.5 + 0.8·j (+ noise), so a Bayesian version must
correct 2 to about 2.1, and a run whose references are known must be covered."""

from __future__ import annotations

import json
import random
import socket
import threading
import time

import pytest

from judgecal import AsyncClient, Client, Conflict, InvalidInput, NotFound, Unauthorized
from judgecal.errors import Unavailable


def line(j: float) -> float:
    return 0.5 + 0.8 * j


def anchors(n: int, seed: int, prefix: str = "a") -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        j = rng.uniform(1, 5)
        y = min(5.0, max(1.0, line(j) + rng.gauss(0, 0.3)))
        out.append({"item_id": f"{prefix}{i}", "judge_score": round(j, 3), "reference_score": round(y, 3)})
    return out


@pytest.fixture(scope="module")
def trained(server):
    """A cell (j1, coherence) of 400 anchors with a Bayesian version."""
    with Client(server.url, server.key) as jc:
        ack = jc.upload_anchors("j1", "coherence", anchors(400, 1))
        assert ack.inserted == 400
        versions = jc.train("j1", "bayes", progress=False, timeout=300)
        assert [v.rubric for v in versions] == ["coherence"] and versions[0].active
    return server


def test_upload_train_correct(trained, client):
    answer = client.correct("j1", "coherence", [2.0, 4.0])
    assert answer.method == "bayes"
    got = [r.corrected for r in answer.results]
    assert abs(got[0] - line(2.0)) < 0.1 and abs(got[1] - line(4.0)) < 0.1, got
    lo, hi = answer.results[0].predictive
    assert lo < got[0] < hi
    # A retried batch is acknowledged as unchanged, not stored twice.
    again = client.upload_anchors("j1", "coherence", anchors(400, 1))
    assert (again.inserted, again.unchanged) == (0, 400)
    # ids come back with items.
    items = client.correct("j1", "coherence", items=[{"id": "x", "score": 3.0}])
    assert items.results[0].id == "x"


def test_estimate_covers_a_known_mean_and_compare_finds_a_known_difference(trained, client):
    rng = random.Random(7)
    js = [rng.uniform(1, 5) for _ in range(2000)]
    truth = sum(line(j) for j in js) / len(js)
    e = client.estimate("j1", "coherence", js)
    assert e.interval[0] < truth < e.interval[1], (e.interval, truth)
    assert e.path == "plain"
    # B's scores are A's plus 1 on the judge's scale: 0.8 on the reference's.
    a = [{"id": f"p{i}", "score": j} for i, j in enumerate(js) if j < 4]
    b = [{"id": f"p{i}", "score": j + 1} for i, j in enumerate(js) if j < 4]
    c = client.compare("j1", "coherence", b, a)
    assert c.paired and c.pairs == len(a)
    assert c.interval[0] < 0.8 < c.interval[1] and c.p_value < 0.001, c


def test_rank_orders_runs_with_known_gaps_and_plans_labels_for_the_tie(trained, client):
    # Three runs on the same prompts: "top" is 0.8 above "mid" on the reference's scale (1 on
    # the judge's), "twin" is mid again. Top is resolved above both; the twins stay tied, and
    # the label plan goes to them alone, on the same ids.
    rng = random.Random(11)
    js = [rng.uniform(1, 3.5) for _ in range(600)]
    run = lambda shift: [{"id": f"p{i}", "score": j + shift} for i, j in enumerate(js)]  # noqa: E731
    session = client.open_rank_session("j1", "coherence", 2, seed=1)
    r = client.rank_look(
        session.id,
        {"mid": run(0.0), "top": run(1.0), "twin": run(0.0)},
        labels={"min_gap": 0.02},
    )
    assert r.order[0] == "top" and r.top == ["top"], r.order
    ranks = {x.name: x.rank for x in r.runs}
    assert ranks["top"] == [1, 1] and ranks["mid"] == [2, 3] and ranks["twin"] == [2, 3], ranks
    gap = next(p for p in r.pairs if {p.a, p.b} == {"mid", "top"})
    truth = -0.8 if gap.a == "mid" else 0.8
    assert gap.higher == "top" and gap.interval[0] < truth < gap.interval[1], gap
    planned = {x.name: x.items for x in r.labels.runs}
    assert set(planned) == {"mid", "twin"} and planned["mid"] == planned["twin"], {k: len(v) for k, v in planned.items()}
    with pytest.raises(InvalidInput) as e:
        client.rank("j1", "coherence", {"only": [3.0]})
    assert e.value.details[0].field == "runs"


def test_a_bad_batch_is_refused_whole_with_row_and_field(trained, client):
    before = client.cells().cells
    batch = anchors(5, 2, "bad")
    batch[2]["reference_score"] = 9.0  # off the 1-5 scale
    batch[4]["item_id"] = ""
    with pytest.raises(InvalidInput) as e:
        client.upload_anchors("j1", "coherence", batch)
    err = e.value
    assert err.status == 422 and err.code == "invalid_input"
    where = {(p.row, p.field) for p in err.details}
    assert (3, "reference_score") in where and (5, "item_id") in where, err.details
    assert "row 3, reference_score" in str(err)
    assert client.cells().cells == before  # nothing stored


def test_a_nan_is_refused_before_sending_naming_its_index(trained, client):
    with pytest.raises(InvalidInput) as e:
        client.correct("j1", "coherence", [3.0, float("nan"), 2.0, float("inf")])
    err = e.value
    assert err.code == "invalid_input" and err.status is None
    assert [(p.row, p.field) for p in err.details] == [(2, "scores"), (4, "scores")], err.details
    assert "row 2, scores" in str(err)


def test_conflict_not_found_and_unauthorized(trained, client, server):
    changed = anchors(1, 1)
    changed[0]["reference_score"] += 0.5
    with pytest.raises(Conflict) as e:
        client.upload_anchors("j1", "coherence", changed)
    assert e.value.status == 409
    assert client.upload_anchors("j1", "coherence", changed, replace=True).replaced == 1
    with pytest.raises(NotFound):
        client.estimate("nobody", "coherence", [3.0])
    with Client(server.url, "not-a-key", retries=0) as wrong, pytest.raises(Unauthorized) as e:
        wrong.cells()
    assert e.value.status == 401


def test_environment_gives_url_and_key(trained, monkeypatch, server):
    monkeypatch.setenv("JUDGECAL_URL", server.url)
    monkeypatch.setenv("JUDGECAL_API_KEY", server.key)
    with Client() as jc:
        assert any(c.judge == "j1" for c in jc.cells().cells)


def test_no_server_raises_unavailable_after_the_retries():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    with Client(f"http://127.0.0.1:{port}", retries=2, backoff=0.05) as jc, pytest.raises(Unavailable):
        jc.cells()
    assert time.monotonic() - started < 5


async def test_the_async_client_gives_the_same_answers(trained, client, server):
    sync = client.estimate("j1", "coherence", [2.0, 3.0, 4.0])
    async with AsyncClient(server.url, server.key) as jc:
        got = await jc.estimate("j1", "coherence", [2.0, 3.0, 4.0])
        assert got.interval == sync.interval
        versions = await jc.versions("j1", "coherence")
        assert versions.versions[0].method == "bayes"


def test_a_429_is_retried_after_retry_after(tmp_path):
    """A server that takes one /v1 request at a time: one held open (its body never
    finishes), the client's call gets 429 with Retry-After: 1, waits, and succeeds once the
    slot frees."""
    from conftest import start

    s = start("sqlite", tmp_path, server__max_concurrent_requests="1")
    try:
        host, port = s.url.removeprefix("http://").split(":")
        hold = socket.create_connection((host, int(port)))
        hold.sendall(
            b"POST /v1/anchors HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            + f"authorization: Bearer {s.key}\r\n".encode()
            + b"content-length: 100\r\n\r\n{"
        )
        time.sleep(0.3)
        threading.Timer(0.5, hold.close).start()
        with Client(s.url, s.key, retries=3) as jc:
            started = time.monotonic()
            assert jc.cells().cells == []
            waited = time.monotonic() - started
        assert waited >= 0.9, waited  # it waited the Retry-After second at least once
        with Client(s.url, s.key) as jc:
            assert 'status="429"' in jc.metrics()
    finally:
        s.process.terminate()
        s.process.wait(timeout=10)


def test_cli_uploads_and_estimates(trained, server, tmp_path, capsys, monkeypatch):
    from judgecal.cli import main

    monkeypatch.setenv("JUDGECAL_API_KEY", server.key)
    path = tmp_path / "records.jsonl"
    rows = [dict(a, judge="j1", rubric="cli", reference=a.pop("reference_score")) for a in anchors(50, 3, "c")]
    rows += [{"item_id": f"r{i}", "judge": "j1", "rubric": "cli", "judge_score": 2.5} for i in range(20)]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    main(["--url", server.url, "upload", str(path)])
    assert "j1/cli: 50 inserted" in capsys.readouterr().out
    main(["--url", server.url, "train", "j1", "--method", "quantile_map", "--rubric", "cli"])
    assert "cli: version 1 (active" in capsys.readouterr().out
    main(["--url", server.url, "estimate", str(path), "--judge", "j1", "--rubric", "cli"])
    out = json.loads(capsys.readouterr().out)
    assert out["n"] == 70 and len(out["interval"]) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"item_id": "x", "judge": "j1", "rubric": "cli", "judge_score": "high"}))
    with pytest.raises(SystemExit) as e:
        main(["--url", server.url, "upload", str(bad)])
    assert e.value.code == 2 and "judge_score must be a number" in capsys.readouterr().err

"""OpenTelemetry evaluation events, received by a real OTLP receiver: Phoenix, from PyPI. A
judgecal started with `otel.endpoint` pointing at it sends one `gen_ai.evaluation.result`
event per corrected item, with the corrected score, the interval, the judge, the calibration
version and the warnings as attributes; a judgecal without it sends nothing."""

from __future__ import annotations

import time

import httpx

from conftest import start
from judgecal import Client

from test_client import anchors


def events(phoenix: str, judge: str) -> list[dict]:
    """Every evaluation event Phoenix holds of `judge`'s spans."""
    out, cursor = [], None
    while True:
        params = {"limit": 1000, **({"cursor": cursor} if cursor else {})}
        page = httpx.get(f"{phoenix}/v1/projects/default/spans", params=params).json()
        for span in page["data"]:
            if span["attributes"].get("judgecal.judge") == judge:
                out += [e for e in span["events"] if e["name"] == "gen_ai.evaluation.result"]
        cursor = page.get("next_cursor")
        if not cursor:
            return out


def test_one_event_per_corrected_item(phoenix, tmp_path):
    server = start("sqlite", tmp_path, otel__endpoint=f"{phoenix}/v1/traces", otel__delay_millis="100")
    try:
        with Client(server.url, server.key) as jc:
            jc.upload_anchors("otel-judge", "coherence", anchors(200, 3, "o"))
            jc.train("otel-judge", "bayes", options={"warmup": 300, "draws": 500}, progress=False, timeout=120)
            items = [{"id": f"item-{i}", "score": 1 + (i % 17) / 4} for i in range(250)]
            answer = jc.correct("otel-judge", "coherence", items=items)
            bare = jc.correct("otel-judge", "coherence", [2.0, 3.0, 5.5])
        for _ in range(300):
            got = events(phoenix, "otel-judge")
            if len(got) >= 253:
                break
            time.sleep(0.1)
        assert len(got) == 253, len(got)
        by_id = {e["attributes"].get("judgecal.item.id"): e["attributes"] for e in got}
        for r in answer.results:
            a = by_id[r.id]
            assert a["gen_ai.evaluation.name"] == "coherence"
            assert a["gen_ai.evaluation.score.value"] == r.corrected
            assert (a["judgecal.interval.low"], a["judgecal.interval.high"]) == tuple(r.predictive)
            assert (a["judgecal.judge"], a["judgecal.calibration.version"]) == ("otel-judge", answer.version)
            # Scores at the ends of 1–5 may lie past the anchors' judge scores: those items,
            # and only those, carry the answer's warning.
            assert a.get("judgecal.outside_anchors", False) is bool(r.outside_anchors)
            assert a.get("judgecal.warnings", []) == (["outside_anchors"] if r.outside_anchors else []), (r, a)
        # The items without ids; the one past the anchors' judge scores carries the answer's
        # warning about it.
        unnamed = [e["attributes"] for e in got if "judgecal.item.id" not in e["attributes"]]
        assert sorted(a["gen_ai.evaluation.score.value"] for a in unnamed) == sorted(r.corrected for r in bare.results)
        codes = {w.code.value if hasattr(w.code, "value") else w.code for w in bare.warnings}
        (outside,) = [a for a in unnamed if a.get("judgecal.outside_anchors")]
        assert outside["judgecal.warnings"] and set(outside["judgecal.warnings"]) <= codes, (codes, outside)
        # The span carries what its events share, and the level of their intervals.
        spans = httpx.get(f"{phoenix}/v1/projects/default/spans", params={"limit": 1000}).json()["data"]
        ours = [s for s in spans if s["attributes"].get("judgecal.judge") == "otel-judge"]
        assert sorted(s["attributes"]["judgecal.items"] for s in ours) == [3, 122, 128]
        assert all(s["name"] == "judgecal.correct" and s["attributes"]["judgecal.interval.level"] == 0.95 for s in ours)
        assert {s["attributes"]["judgecal.calibration.method"] for s in ours} == {"bayes"}
    finally:
        server.process.terminate()
        server.process.wait(timeout=10)


def test_no_endpoint_no_events(phoenix, tmp_path):
    server = start("sqlite", tmp_path)
    try:
        with Client(server.url, server.key) as jc:
            jc.upload_anchors("quiet-judge", "coherence", anchors(50, 3, "q"))
            jc.train("quiet-judge", "quantile_map", progress=False, timeout=60)
            jc.correct("quiet-judge", "coherence", [2.0, 3.0])
        time.sleep(1.0)
        assert events(phoenix, "quiet-judge") == []
    finally:
        server.process.terminate()
        server.process.wait(timeout=10)

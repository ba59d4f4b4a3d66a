"""`judgecal-py sync phoenix`: Phoenix span annotations in, corrected scores out.

    judgecal-py sync phoenix --endpoint URL --project NAME --rubric R --judge J
        [--group-attribute ATTR] [--write-back]

Reads every span of the project, a page at a time, and their annotations. A span annotation
named after the rubric with a score is

- the judge's score where its annotator is `LLM` (one whose identifier is `--judge` where the
  span has several judges' scores); its metadata's `judge_version` is the judge version;
- the reference where its annotator is `HUMAN`; its identifier (else its user, else its
  metadata's `rater`) is the rater.

The span attribute `--group-attribute` names the system. Spans with both are uploaded as
anchors (item id: the span id), stored once. With `--write-back`, every judged span gets one
annotation `<rubric>/corrected` (annotator `CODE`, identifier `judgecal`, so Phoenix keeps one)
whose score is the corrected score, whose label is `outside_anchors` where the score lay past
the anchors', and whose metadata holds the 95% interval, the calibration version and method,
and the warnings; a later run rewrites only those whose answer changed.

Phoenix's API key, where it has one, is PHOENIX_API_KEY. Phoenix has no pairwise annotations
yet: pairwise judgements come in through `judgecal-py`'s pairwise files.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Iterator

import httpx

from ._bridge import Reading, Report, corrections, scale_of, upload, valued
from .client import Client

CORRECTED = "judgecal"
PAGE = 500
IDS_PER_QUERY = 100


def phoenix(endpoint: str) -> httpx.Client:
    key = os.environ.get("PHOENIX_API_KEY")
    return httpx.Client(base_url=endpoint.rstrip("/"), headers={"authorization": f"Bearer {key}"} if key else {}, timeout=60)


def spans(px: httpx.Client, project: str, report: Report) -> Iterator[dict]:
    cursor = None
    while True:
        res = px.get(f"/v1/projects/{project}/spans", params={"limit": PAGE, **({"cursor": cursor} if cursor else {})})
        if res.status_code == 404:
            raise ValueError(f"Phoenix at {px.base_url} has no project {project!r}")
        res.raise_for_status()
        page = res.json()
        report.traces += len(page["data"])
        print(f"\rread {report.traces} spans", end="", file=sys.stderr, flush=True)
        yield from page["data"]
        cursor = page.get("next_cursor")
        if not cursor:
            print(file=sys.stderr)
            return


def annotations(px: httpx.Client, project: str, span_ids: list[str], rubric: str) -> dict[str, list[dict]]:
    """The rubric's and its corrected score's annotations of each span, by span id."""
    out: dict[str, list[dict]] = {}
    for start in range(0, len(span_ids), IDS_PER_QUERY):
        cursor = None
        while True:
            params: dict[str, Any] = {"span_ids": span_ids[start : start + IDS_PER_QUERY], "limit": 1000, "include_annotation_names": [rubric, f"{rubric}/corrected"]}
            if cursor:
                params["cursor"] = cursor
            res = px.get(f"/v1/projects/{project}/span_annotations", params=params)
            res.raise_for_status()
            page = res.json()
            for a in page["data"]:
                out.setdefault(a["span_id"], []).append(a)
            cursor = page.get("next_cursor")
            if not cursor:
                break
    return out


def rater(a: dict) -> str | None:
    return a.get("identifier") or a.get("user_id") or (a.get("metadata") or {}).get("rater")


def read(span: dict, notes: list[dict], rubric: str, judge: str, group_attribute: str | None, scale: tuple[float, float], report: Report) -> Reading | None:
    sid = span["context"]["span_id"]
    judged = [a for a in notes if a["name"] == rubric and a["annotator_kind"] == "LLM"]
    human = [a for a in notes if a["name"] == rubric and a["annotator_kind"] == "HUMAN"]
    corrected = [a for a in notes if a["name"] == f"{rubric}/corrected" and a["annotator_kind"] == "CODE" and a.get("identifier") == CORRECTED]
    if not judged:
        return None
    judged = [a for a in judged if a.get("identifier") == judge] or judged
    if len(judged) > 1:
        report.skip(f"two judge scores of {rubric} (identifiers {', '.join(sorted({a.get('identifier') or '-' for a in judged}))})", sid)
        return None
    score = valued(judged[0]["result"].get("score"), None, "judge score", scale, report, sid)
    if score is None:
        return None
    group = (span.get("attributes") or {}).get(group_attribute) if group_attribute else None
    r = Reading(sid, score, judge_version=(judged[0].get("metadata") or {}).get("judge_version"), group=None if group is None else str(group), corrected=corrected)
    if len(human) > 1:
        report.skip(f"two references of {rubric} (raters {', '.join(sorted({rater(a) or '-' for a in human}))}); judged, not an anchor", sid)
    elif human:
        r.reference = valued(human[0]["result"].get("score"), None, "reference", scale, report, sid)
        r.rater = rater(human[0]) if r.reference is not None else None
    return r


def write_back(jc: Client, px: httpx.Client, judge: str, rubric: str, readings: list[Reading], report: Report) -> None:
    answers = corrections(jc, judge, rubric, readings)
    out = []
    for r in readings:
        value, meta = answers[r.trace_id]
        label = "outside_anchors" if "outside_anchors" in json.loads(meta["judgecal.warnings"]) else None
        note = {"span_id": r.trace_id, "name": f"{rubric}/corrected", "annotator_kind": "CODE", "identifier": CORRECTED, "result": {"score": value, "label": label, "explanation": None}, "metadata": meta}
        old = r.corrected[0] if r.corrected else None
        if old is not None and old["result"].get("score") == value and old["result"].get("label") == label and (old.get("metadata") or {}) == meta:
            report.kept += 1
            continue
        report.updated += old is not None
        report.written += old is None
        out.append(note)
    for start in range(0, len(out), 200):
        res = px.post("/v1/span_annotations", params={"sync": True}, json={"data": out[start : start + 200]})
        res.raise_for_status()


def sync(jc: Client, endpoint: str, project: str, rubric: str, judge: str, group_attribute: str | None = None, write: bool = False, replace: bool = False) -> Report:
    """The whole sync (what the command runs); returns its report."""
    report = Report(unit="spans", written_as="corrected annotations")
    scale = scale_of(jc, rubric)
    with phoenix(endpoint) as px:
        listed = list(spans(px, project, report))
        notes = annotations(px, project, [s["context"]["span_id"] for s in listed], rubric)
        readings = [r for s in listed if (r := read(s, notes.get(s["context"]["span_id"], []), rubric, judge, group_attribute, scale, report))]
        report.judged = len(readings)
        upload(jc, judge, rubric, readings, replace, report)
        if write and readings:
            write_back(jc, px, judge, rubric, readings, report)
    return report


def add_parser(platforms: Any) -> None:
    p = platforms.add_parser("phoenix", help="Phoenix span annotations in; corrected scores back", description=__doc__)
    p.add_argument("--endpoint", required=True, help="Phoenix's base URL, e.g. http://127.0.0.1:6006")
    p.add_argument("--project", required=True, help="the project's name")
    p.add_argument("--rubric", required=True, help="the annotation name that holds the scores")
    p.add_argument("--judge", required=True, help="the judge's name in judgecal (and its annotations' identifier where a span has several judges)")
    p.add_argument("--group-attribute", help="the span attribute that names the system")
    p.add_argument("--write-back", action="store_true", help="annotate <rubric>/corrected on every judged span")
    p.add_argument("--replace", action="store_true", help="replace anchors whose scores changed in Phoenix")
    p.set_defaults(func=_run)


def _run(a: Any) -> None:
    with Client(a.url) as jc:
        report = sync(jc, a.endpoint, a.project, a.rubric, a.judge, a.group_attribute, a.write_back, a.replace)
    print("\n".join(report.lines()))

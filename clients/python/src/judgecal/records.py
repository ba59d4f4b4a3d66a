"""Judge records from anywhere: the generic shape `{item_id, judge, rubric, judge_score,
reference?, group?, judge_version?}` (the record shape CJE uses; promptfoo, LangSmith or your own logs export
to it as JSONL or CSV), and lm-evaluation-harness's `--log_samples` JSONL. Records with a
reference become anchors; the rest are a run to estimate."""

from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping


@dataclass(frozen=True)
class Record:
    item_id: str
    judge: str
    rubric: str
    judge_score: float
    reference: float | None = None
    group: str | None = None
    judge_version: str | None = None

    def anchor(self) -> dict[str, Any]:
        a: dict[str, Any] = {
            "item_id": self.item_id,
            "judge_score": self.judge_score,
            "reference_score": self.reference,
        }
        if self.group is not None:
            a["group"] = self.group
        if self.judge_version is not None:
            a["judge_version"] = self.judge_version
        return a

    def item(self) -> dict[str, Any]:
        return {"id": self.item_id, "score": self.judge_score}


def _number(value: Any, what: str, line: int) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"line {line}: {what} must be a number, got {value!r}") from None
    if x != x or x in (float("inf"), float("-inf")):
        raise ValueError(f"line {line}: {what} must be finite, got {value!r}")
    return x


def from_mapping(d: Mapping[str, Any], line: int, judge: str | None = None, rubric: str | None = None) -> Record:
    """One record from a dict with the generic fields (`score` is read as `judge_score`,
    `reference_score` as `reference`); `judge` and `rubric` fill in where absent."""
    missing = [k for k in ("item_id",) if d.get(k) in (None, "")]
    if missing:
        raise ValueError(f"line {line}: no {missing[0]}")
    ref = d.get("reference", d.get("reference_score"))
    j = d.get("judge") or judge
    r = d.get("rubric") or rubric
    if not j or not r:
        raise ValueError(f"line {line}: no judge or rubric (give them in the record or as arguments)")
    return Record(
        item_id=str(d["item_id"]),
        judge=str(j),
        rubric=str(r),
        judge_score=_number(d.get("judge_score", d.get("score")), "judge_score", line),
        reference=None if ref in (None, "") else _number(ref, "reference", line),
        group=(str(d["group"]) if d.get("group") not in (None, "") else None),
        judge_version=(str(d["judge_version"]) if d.get("judge_version") not in (None, "") else None),
    )


def read(path: str | Path, judge: str | None = None, rubric: str | None = None) -> list[Record]:
    """Records from a `.jsonl` or `.csv` file in the generic shape."""
    p = Path(path)
    with p.open(newline="") as f:
        if p.suffix.lower() == ".csv":
            return [from_mapping(row, i + 2, judge, rubric) for i, row in enumerate(csv.DictReader(f))]
        return [from_mapping(json.loads(line), i + 1, judge, rubric) for i, line in enumerate(f) if line.strip()]


def split(records: Iterable[Record]) -> tuple[list[Record], list[Record]]:
    """(anchors: records with a reference, run: the rest)."""
    anchors, run = [], []
    for r in records:
        (anchors if r.reference is not None else run).append(r)
    return anchors, run


def judge_version(model: str | None, template: str | None = None, **settings: Any) -> str:
    """A judge version label from what makes a judge: the grader model (its snapshot), the
    prompt template and any decoding settings. The template and settings enter as a hash, so
    the label stays short and changes whenever any of them does:
    `gpt-4o-2024-08-06#3f2a9c1b7d04`."""
    digest = hashlib.sha256(
        json.dumps({"template": template, **settings}, sort_keys=True, default=str).encode()
    ).hexdigest()[:12]
    return f"{model or 'unknown-model'}#{digest}"[:128]


def lm_eval_version(results: str | Path, metric: str) -> str:
    """The judge version of an lm-evaluation-harness run from its `results_<date>.json`: the
    task configs (which hold the judge's prompt and generation settings) hashed, with the
    judge model named in the config's `metadata.judge_model` where the task records one."""
    data = json.loads(Path(results).read_text())
    configs = data.get("configs", {})
    model = None
    for config in configs.values():
        meta = config.get("metadata") or {}
        model = model or meta.get("judge_model") or meta.get("judge")
    return judge_version(model, json.dumps(configs, sort_keys=True, default=str), metric=metric)


def lm_eval_samples(
    path: str | Path,
    *,
    metric: str,
    judge: str,
    rubric: str,
    references: Mapping[str, float] | None = None,
    group: str | None = None,
    judge_version: str | None = None,
) -> Iterator[Record]:
    """Records from lm-evaluation-harness's `--log_samples` output
    (`samples_<task>_<date>.jsonl`): one per line, `doc_id` as the item id and the sample's
    `metric` (a model-graded score) as the judge score; `references` (by doc id) supplies the
    human scores where there are any, `group` is the evaluated model, and `judge_version` the
    judge's version (`lm_eval_version` reads one from the run's results file)."""
    with Path(path).open() as f:
        for i, line in enumerate(f):
            if not line.strip():
                continue
            sample = json.loads(line)
            if metric not in sample:
                raise ValueError(f"line {i + 1}: no metric {metric!r} (it has {sorted(k for k in sample if not k.startswith(('doc', 'resps', 'filtered', 'target', 'arguments')))})")
            item = str(sample.get("doc_id", i))
            ref = (references or {}).get(item)
            yield Record(item, judge, rubric, _number(sample[metric], metric, i + 1), ref, group, judge_version)


def lm_eval_panel(
    path: str | Path,
    *,
    metrics: Mapping[str, str],
    rubric: str,
    references: Mapping[str, float] | None = None,
    group: str | None = None,
) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    """Several model-graded metrics of one lm-evaluation-harness `--log_samples` file as a
    panel: `metrics` maps each metric to the judge name it is stored under. Returns each
    judge's anchors (the samples with a reference in `references`, by doc id) for
    `POST /v1/anchors`, and the run's panel items (the samples without one) as
    `{"id": doc_id, "scores": {judge: score, ...}}` for the panel's `/v1/estimate`."""
    anchors: dict[str, list[dict[str, Any]]] = {}
    scores: dict[str, dict[str, float]] = {}
    for metric, judge in metrics.items():
        anchors[judge] = []
        for r in lm_eval_samples(path, metric=metric, judge=judge, rubric=rubric, references=references, group=group):
            if r.reference is not None:
                anchors[judge].append(r.anchor())
            else:
                scores.setdefault(r.item_id, {})[judge] = r.judge_score
    run = [{"id": item, "scores": s} for item, s in scores.items()]
    return anchors, run


def read_references(path: str | Path, id_column: str = "item_id", column: str = "reference") -> dict[str, float]:
    """Human scores keyed by item id, from a CSV."""
    with Path(path).open(newline="") as f:
        return {
            row[id_column]: _number(row[column], column, i + 2)
            for i, row in enumerate(csv.DictReader(f))
            if row.get(column) not in (None, "")
        }

"""What the bridges to eval platforms share (`sync_mlflow`, `sync_phoenix`): a trace's or
span's reading for one cell, the sync's report, the anchors' upload and the corrections that
go back."""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from .client import Client


@dataclass
class Reading:
    """What one trace holds for the cell."""

    trace_id: str
    score: float
    judge_version: str | None = None
    group: str | None = None
    reference: float | None = None
    rater: str | None = None
    corrected: list[Any] = field(default_factory=list)


@dataclass
class Report:
    traces: int = 0
    judged: int = 0
    labelled: int = 0
    inserted: int = 0
    unchanged: int = 0
    replaced: int = 0
    written: int = 0
    updated: int = 0
    kept: int = 0
    removed: int = 0
    #: What the platform calls an item, and what judgecal writes back.
    unit: str = "traces"
    written_as: str = "corrected feedback"
    skipped: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def skip(self, reason: str, trace_id: str) -> None:
        self.skipped[reason] += 1
        if len(self.examples[reason]) < 3:
            self.examples[reason].append(trace_id)

    def lines(self) -> list[str]:
        out = [
            f"{self.traces} {self.unit} read: {self.judged} judged, {self.labelled} of them with a reference",
            f"anchors: {self.inserted} inserted, {self.unchanged} unchanged, {self.replaced} replaced",
        ]
        if self.written or self.updated or self.kept:
            out.append(
                f"{self.written_as}: {self.written} written, {self.updated} updated, {self.kept} unchanged"
                + (f", {self.removed} duplicates removed" if self.removed else "")
            )
        for reason, n in sorted(self.skipped.items()):
            out.append(f"skipped {n}: {reason} (e.g. {', '.join(self.examples[reason])})")
        return out


def number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def valued(value: Any, error: Any, what: str, scale: tuple[float, float], report: Report, item: str) -> float | None:
    """`value` as a score on the rubric's scale, or None (counted in `report` as skipped)."""
    if error is not None:
        report.skip(f"a {what} that holds an error, not a value", item)
        return None
    v = number(value)
    if v is None:
        report.skip(f"a {what} that is not a number ({type(value).__name__})", item)
    elif not scale[0] <= v <= scale[1]:
        report.skip(f"a {what} off the rubric's scale [{scale[0]:g}, {scale[1]:g}]", item)
        v = None
    return v


def scale_of(jc: Client, rubric: str) -> tuple[float, float]:
    for r in jc.rubrics().rubrics:
        if r.name == rubric:
            return (r.min, r.max)
    return (1.0, 5.0)  # the scale judgecal gives a rubric first seen without one


def upload(jc: Client, judge: str, rubric: str, readings: list[Reading], replace: bool, report: Report) -> None:
    rows = []
    for r in readings:
        if r.reference is None:
            continue
        row: dict[str, Any] = {"item_id": r.trace_id, "judge_score": r.score, "reference_score": r.reference}
        for key, value in (("rater", r.rater), ("group", r.group), ("judge_version", r.judge_version)):
            if value is not None:
                row[key] = value
        rows.append(row)
    report.labelled = len(rows)
    for start in range(0, len(rows), 10_000):
        ack = jc.upload_anchors(judge, rubric, rows[start : start + 10_000], replace=replace)
        report.inserted += ack.inserted
        report.unchanged += ack.unchanged
        report.replaced += ack.replaced


def corrections(jc: Client, judge: str, rubric: str, readings: list[Reading]) -> dict[str, tuple[float, dict[str, str]]]:
    """Each judged trace's corrected score and the metadata that goes with it, by trace id."""
    by_version: dict[str | None, list[Reading]] = defaultdict(list)
    for r in readings:
        by_version[r.judge_version].append(r)
    out = {}
    for version, group in by_version.items():
        for start in range(0, len(group), 10_000):
            chunk = group[start : start + 10_000]
            answer = jc.correct(judge, rubric, items=[{"id": r.trace_id, "score": r.score} for r in chunk], judge_version=version)
            for r, c in zip(chunk, answer.results):
                interval = c.predictive or c.credible
                codes = sorted({w.code.value if hasattr(w.code, "value") else str(w.code) for w in answer.warnings if not w.items or r.trace_id in w.items})
                meta = {
                    "judgecal.judge": judge,
                    "judgecal.judge_score": repr(r.score),
                    "judgecal.calibration_version": str(answer.version),
                    "judgecal.method": answer.method,
                    "judgecal.level": "0.95",
                    "judgecal.warnings": json.dumps(codes),
                }
                if interval:
                    meta["judgecal.interval_low"] = repr(interval[0])
                    meta["judgecal.interval_high"] = repr(interval[1])
                if answer.judge_version:
                    meta["judgecal.judge_version"] = answer.judge_version
                out[r.trace_id] = (c.corrected, meta)
    return out

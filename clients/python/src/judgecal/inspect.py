"""inspect_ai adapter (`pip install judgecal[inspect]`): an eval log's model-graded scores
as judge scores. Samples that carry a human reference (in their metadata, or in a CSV keyed by
sample id) become anchors; the rest are the run, whose group is the evaluated model. Every
score carries the grader's judge version (`judge_version_of`: its model and a hash of the
scorer's template and options), so a new snapshot or an edited prompt never gets the old
correction silently. Then the
de-biased mean beside inspect's own metrics, and a paired compare of two logs of one task.

    from judgecal import Client
    from judgecal.inspect import calibrate_log, compare_logs

    jc = Client()
    result = calibrate_log(jc, "logs/run-a.eval", judge="gpt-4o-mini", rubric="helpfulness")
    print(result.estimate.estimate, result.estimate.interval)
    print(compare_logs(jc, "logs/run-a.eval", "logs/run-b.eval", judge="gpt-4o-mini", rubric="helpfulness").interval)

Several model-graded scorers of one log serve as a panel (`calibrate_panel_log`): each scorer's
scores are stored under its own judge name, and the panel fuses them per sample.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from .records import Record, judge_version

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client


def group_name(model: str) -> str:
    """An inspect model name (`openai/gpt-4o`) as a judgecal group name (`openai:gpt-4o`):
    groups are named like judges, without slashes."""
    name = re.sub(r"[^A-Za-z0-9._:-]", ":", model).lstrip("._:-")
    return name[:64] or "model"


def _log(log: Any) -> Any:
    if isinstance(log, (str, Path)):
        from inspect_ai.log import read_eval_log

        return read_eval_log(str(log))
    return log


def _scorer(log: Any, scorer: str | None) -> str:
    names = sorted({k for s in log.samples or [] for k in (s.scores or {})})
    if scorer is not None:
        if scorer not in names:
            raise ValueError(f"the log has no scorer {scorer!r}; it has {names}")
        return scorer
    if len(names) != 1:
        raise ValueError(f"name the model-graded scorer to use: the log has {names}")
    return names[0]


def judge_version_of(log: Any, scorer: str | None = None) -> str:
    """The judge version that graded `log` with `scorer`: the grader model (the log's
    `grader` model role, else the scorer's `model` option) and a hash of the scorer's options (its template, instructions, grade pattern...), so that a new
    snapshot or an edited prompt is a new version."""
    log = _log(log)
    name = _scorer(log, scorer)
    options: dict[str, Any] = {}
    for s in log.eval.scorers or []:
        if s.name == name:
            options = dict(s.options or {})
    roles = getattr(log.eval, "model_roles", None) or {}
    grader = roles.get("grader")
    model = getattr(grader, "model", None) or options.get("model")
    if isinstance(model, list):
        model = ",".join(str(m) for m in model)
    return judge_version(str(model) if model else None, json.dumps(options, sort_keys=True, default=str), scorer=name)


def records(
    log: Any,
    *,
    judge: str,
    rubric: str,
    scorer: str | None = None,
    reference_key: str = "reference",
    references: Mapping[str, float] | None = None,
) -> list[Record]:
    """One record per scored sample of `log` (an `EvalLog` or a path): the scorer's value as
    the judge score (through inspect's own `value_to_float`, so `C`/`P`/`I` grades read as
    1/0.5/0), the sample id as the item id, the reference from `references` or the sample's
    metadata, the evaluated model as the group, and the grader's version (`judge_version_of`)
    as the judge version."""
    from inspect_ai.scorer import value_to_float

    log = _log(log)
    name = _scorer(log, scorer)
    to_float = value_to_float()
    group = group_name(log.eval.model)
    version = judge_version_of(log, name)
    out = []
    for s in log.samples or []:
        score = (s.scores or {}).get(name)
        if score is None:
            continue
        item = str(s.id)
        ref = (references or {}).get(item)
        if ref is None:
            ref = (s.metadata or {}).get(reference_key)
        out.append(
            Record(
                item_id=item,
                judge=judge,
                rubric=rubric,
                judge_score=float(to_float(score.value)),
                reference=None if ref is None else float(ref),
                group=group,
                judge_version=version,
            )
        )
    return out


@dataclass
class Calibrated:
    """What `calibrate_log` did: anchors uploaded, the run's estimate, and inspect's own
    metrics of the scorer for comparison."""

    anchors_uploaded: int
    estimate: Any
    inspect_metrics: dict[str, float]

    def summary(self) -> str:
        e = self.estimate
        own = ", ".join(f"{k} {v:.3f}" for k, v in self.inspect_metrics.items())
        return (
            f"de-biased mean {e.estimate:.3f} [{e.interval[0]:.3f}, {e.interval[1]:.3f}] "
            f"({e.path} path, {e.n} items, version {self.estimate.version}); inspect: {own}"
        )


def _inspect_metrics(log: Any, scorer: str) -> dict[str, float]:
    for s in (log.results.scores if log.results else []) or []:
        if s.name == scorer or s.scorer == scorer:
            return {k: float(m.value) for k, m in s.metrics.items()}
    return {}


def calibrate_log(
    client: "Client",
    log: Any,
    *,
    judge: str,
    rubric: str,
    scorer: str | None = None,
    reference_key: str = "reference",
    references: Mapping[str, float] | None = None,
    train: str | None = None,
    level: float | None = None,
) -> Calibrated:
    """Uploads the log's labelled samples as anchors (item ids `<group>:<sample id>`, so the
    logs of several models feed one cell), trains the judge with `train` (a method, e.g.
    `"auto"`; None: use the version the cell already serves), and estimates the mean of the
    unlabelled samples with the evaluated model as the run's group."""
    log = _log(log)
    name = _scorer(log, scorer)
    recs = records(log, judge=judge, rubric=rubric, scorer=name, reference_key=reference_key, references=references)
    # Two models' answers to one sample are two items: anchors are stored as
    # `<group>:<sample id>`, so logs of several models feed one cell.
    anchors = [dict(r.anchor(), item_id=f"{r.group}:{r.item_id}") for r in recs if r.reference is not None]
    run = [r.item() for r in recs if r.reference is None]
    if not run:
        raise ValueError("every sample has a reference: there is no run left to estimate")
    version = judge_version_of(log, name)
    if anchors:
        client.upload_anchors(judge, rubric, anchors)
    if train:
        client.train(judge, train, rubrics=[rubric], judge_version=version, progress=False)
    estimate = client.estimate(
        judge, rubric, run, group=group_name(log.eval.model), level=level, judge_version=version
    )
    return Calibrated(len(anchors), estimate, _inspect_metrics(log, name))


def calibrate_panel_log(
    client: "Client",
    log: Any,
    *,
    panel: str,
    judges: Mapping[str, str],
    rubric: str,
    reference_key: str = "reference",
    references: Mapping[str, float] | None = None,
    train: str | None = None,
    level: float | None = None,
) -> Calibrated:
    """Several model-graded scorers of one log as a panel: `judges` maps each scorer's name to
    the judge name it is stored under. Each scorer's labelled samples are uploaded as that
    judge's anchors (item ids `<group>:<sample id>`, as `calibrate_log` does), the panel is
    defined where it is not yet (`panel`, its members in `judges`' order), trained with
    `train` (None: use the version it serves), and the unlabelled samples are estimated as
    panel items, each with every scorer's score it has."""
    log = _log(log)
    members = list(judges.values())
    per_scorer = {
        name: records(
            log, judge=judge, rubric=rubric, scorer=name, reference_key=reference_key, references=references
        )
        for name, judge in judges.items()
    }
    uploaded = 0
    for recs in per_scorer.values():
        anchors = [dict(r.anchor(), item_id=f"{r.group}:{r.item_id}") for r in recs if r.reference is not None]
        if anchors:
            client.upload_anchors(recs[0].judge, rubric, anchors)
            uploaded = max(uploaded, len(anchors))
    existing = {p.name: p.judges for p in client.panels().panels}
    if panel not in existing:
        client.create_panel(panel, members)
    elif list(existing[panel]) != members:
        raise ValueError(f"panel {panel!r} has members {existing[panel]}, not {members}")
    run_scores: dict[str, dict[str, float]] = {}
    for name, judge in judges.items():
        for r in per_scorer[name]:
            if r.reference is None:
                run_scores.setdefault(r.item_id, {})[judge] = r.judge_score
    if not run_scores:
        raise ValueError("every sample has a reference: there is no run left to estimate")
    if train:
        client.train(panel, train, rubrics=[rubric], progress=False)
    run = [{"id": item, "scores": scores} for item, scores in sorted(run_scores.items())]
    estimate = client.estimate(panel, rubric, run, group=group_name(log.eval.model), level=level)
    first = next(iter(judges))
    return Calibrated(uploaded, estimate, _inspect_metrics(log, first))


def compare_logs(
    client: "Client",
    log_a: Any,
    log_b: Any,
    *,
    judge: str,
    rubric: str,
    scorer: str | None = None,
    level: float | None = None,
    labelled: bool = False,
) -> Any:
    """`/v1/compare` of two logs of one task: samples paired by id where both logs scored
    them, each log's model as its run's group. With `labelled`, samples with a reference
    join as labelled items (they must be a uniform random sample of the run, at least 3)."""
    a_log, b_log = _log(log_a), _log(log_b)
    runs = []
    for log in (a_log, b_log):
        recs = records(log, judge=judge, rubric=rubric, scorer=scorer)
        runs.append({r.item_id: r for r in recs})
    shared = sorted(set(runs[0]) & set(runs[1]))
    if not shared:
        raise ValueError("the two logs share no sample ids: they are not of one task")

    def items(run: dict[str, Record]) -> list[dict[str, Any]]:
        out = []
        for k in shared:
            r = run[k]
            item: dict[str, Any] = {"id": r.item_id, "score": r.judge_score}
            if labelled and r.reference is not None:
                item["reference"] = r.reference
            out.append(item)
        return out

    return client.compare(
        judge,
        rubric,
        items(runs[0]),
        items(runs[1]),
        group_a=group_name(a_log.eval.model),
        group_b=group_name(b_log.eval.model),
        level=level,
        judge_version_a=judge_version_of(a_log, scorer),
        judge_version_b=judge_version_of(b_log, scorer),
    )

"""`judgecal-py sync mlflow`: MLflow traces in, corrected scores out.

    judgecal-py sync mlflow --tracking-uri URI --experiment NAME --rubric R --judge J
        [--group-tag TAG] [--write-back]

Reads every trace of the experiment, a page at a time. On a trace, a valid feedback assessment
named after the rubric is

- the judge's score where its source is `LLM_JUDGE` (one whose `source_id` is `--judge` where
  the trace has several judges' scores); the scorer version MLflow records in its metadata
  (`mlflow.assessment.scorerVersion`) is the judge version;
- the reference where its source is `HUMAN`; its `source_id` is the rater.

The trace tag `--group-tag` names the system. Traces with both are uploaded as anchors (item id:
the trace id), which judgecal stores once: a second run stores nothing new. With
`--write-back`, every judged trace is corrected by the cell's active calibration and gets one
feedback `<rubric>/corrected` (source `CODE`, id `judgecal`) whose value is the corrected score
and whose metadata holds the 95% interval, the calibration version and method, and any
warnings; a later run updates it where the answer changed and leaves it alone where not.

What it skips it counts, by reason, with a few trace ids each: a trace with two judge scores
(or two references), a value that is not a number, one off the rubric's scale, an assessment
that holds an error.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator

from ._bridge import Reading, Report, corrections, scale_of, upload, valued
from .client import Client

CORRECTED_SOURCE = "judgecal"
SCORER_VERSION = "mlflow.assessment.scorerVersion"
PAGE = 200
WRITERS = 8


def read(trace: Any, rubric: str, judge: str, group_tag: str | None, scale: tuple[float, float], report: Report) -> Reading | None:
    """The cell's reading of one trace, or None (counted in `report` where skipped)."""
    from mlflow.entities import Feedback

    tid = trace.info.trace_id
    judged: list[Any] = []
    human: list[Any] = []
    corrected: list[Any] = []
    for a in trace.info.assessments or []:
        if not isinstance(a, Feedback) or not a.valid:
            continue
        kind, source_id = a.source.source_type, a.source.source_id
        if a.name == f"{rubric}/corrected" and kind == "CODE" and source_id == CORRECTED_SOURCE:
            corrected.append(a)
        elif a.name == rubric and kind == "LLM_JUDGE":
            judged.append(a)
        elif a.name == rubric and kind == "HUMAN":
            human.append(a)
    if not judged:
        return None
    named = [a for a in judged if a.source.source_id == judge]
    judged = named or judged
    if len(judged) > 1:
        report.skip(f"two judge scores of {rubric} (sources {', '.join(sorted({a.source.source_id for a in judged}))})", tid)
        return None
    score = valued(judged[0].value, judged[0].error, "judge score", scale, report, tid)
    if score is None:
        return None
    r = Reading(
        tid,
        score,
        judge_version=(judged[0].metadata or {}).get(SCORER_VERSION),
        group=(trace.info.tags or {}).get(group_tag) if group_tag else None,
        corrected=corrected,
    )
    if len(human) > 1:
        report.skip(f"two references of {rubric} (raters {', '.join(sorted({a.source.source_id for a in human}))}); judged, not an anchor", tid)
    elif human:
        r.reference = valued(human[0].value, human[0].error, "reference", scale, report, tid)
        r.rater = human[0].source.source_id if r.reference is not None else None
    return r


def traces(mlflow_client: Any, experiment_id: str, report: Report) -> Iterator[Any]:
    """Every trace of the experiment, a page at a time, with progress on stderr."""
    token = None
    while True:
        page = mlflow_client.search_traces(locations=[experiment_id], max_results=PAGE, page_token=token, include_spans=False)
        report.traces += len(page)
        print(f"\rread {report.traces} traces", end="", file=sys.stderr, flush=True)
        yield from page
        token = page.token
        if not token:
            print(file=sys.stderr)
            return


def write_back(jc: Client, judge: str, rubric: str, readings: list[Reading], report: Report) -> None:
    import mlflow
    from mlflow.entities import AssessmentSource, Feedback

    answers = corrections(jc, judge, rubric, readings)
    source = AssessmentSource(source_type="CODE", source_id=CORRECTED_SOURCE)
    name = f"{rubric}/corrected"

    def one(r: Reading) -> str:
        value, meta = answers[r.trace_id]
        first, extra = (r.corrected[0], r.corrected[1:]) if r.corrected else (None, [])
        for a in extra:
            mlflow.delete_assessment(trace_id=r.trace_id, assessment_id=a.assessment_id)
        if first is None:
            mlflow.log_feedback(trace_id=r.trace_id, name=name, value=value, source=source, metadata=meta)
            outcome = "written"
        elif first.value == value and (first.metadata or {}) == meta:
            outcome = "kept"
        else:
            mlflow.update_assessment(
                trace_id=r.trace_id,
                assessment_id=first.assessment_id,
                assessment=Feedback(name=name, value=value, source=source, metadata=meta),
            )
            outcome = "updated"
        return outcome + ("+removed" * len(extra))

    with ThreadPoolExecutor(WRITERS) as pool:
        for outcome in pool.map(one, readings):
            head, *removed = outcome.split("+")
            setattr(report, head, getattr(report, head) + 1)
            report.removed += len(removed)


def sync(jc: Client, tracking_uri: str, experiment: str, rubric: str, judge: str, group_tag: str | None = None, write: bool = False, replace: bool = False) -> Report:
    """The whole sync (what the command runs); returns its report."""
    import mlflow
    from mlflow import MlflowClient

    mlflow.set_tracking_uri(tracking_uri)
    ml = MlflowClient(tracking_uri)
    exp = ml.get_experiment_by_name(experiment)
    if exp is None:
        raise ValueError(f"MLflow at {tracking_uri} has no experiment {experiment!r}")
    report = Report()
    scale = scale_of(jc, rubric)
    readings = [r for t in traces(ml, exp.experiment_id, report) if (r := read(t, rubric, judge, group_tag, scale, report))]
    report.judged = len(readings)
    upload(jc, judge, rubric, readings, replace, report)
    if write and readings:
        write_back(jc, judge, rubric, readings, report)
    return report


def add_parser(platforms: Any) -> None:
    m = platforms.add_parser("mlflow", help="MLflow traces' judge and human feedback in; corrected scores back", description=__doc__)
    m.add_argument("--tracking-uri", required=True)
    m.add_argument("--experiment", required=True, help="the experiment's name")
    m.add_argument("--rubric", required=True, help="the feedback name that holds the scores")
    m.add_argument("--judge", required=True, help="the judge's name in judgecal (and its source_id where a trace has several judges)")
    m.add_argument("--group-tag", help="the trace tag that names the system")
    m.add_argument("--write-back", action="store_true", help="log <rubric>/corrected on every judged trace")
    m.add_argument("--replace", action="store_true", help="replace anchors whose scores changed in MLflow")
    m.set_defaults(func=_run)


def _run(a: Any) -> None:
    try:
        import mlflow  # noqa: F401
    except ImportError:
        raise SystemExit("judgecal-py sync mlflow needs MLflow's client: pip install 'judgecal[mlflow]'") from None
    with Client(a.url) as jc:
        report = sync(jc, a.tracking_uri, a.experiment, a.rubric, a.judge, a.group_tag, a.write_back, a.replace)
    print("\n".join(report.lines()))

"""pandas helpers (`pip install judgecal[pandas]`): anchors from a DataFrame, uploaded in
chunks that are each one CSV body (the client never holds more than one chunk's text), with
a progress bar; corrected scores back as columns; run-level answers as tidy rows."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

from .errors import JudgecalError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from .client import Client

#: The service's default `limits.max_batch_anchors`; a smaller limit is found from its 413.
CHUNK = 100_000
COLUMNS = ("judge", "rubric", "item_id", "judge_score", "reference_score", "group", "repeats")


def _pandas() -> Any:
    try:
        import pandas
    except ImportError as e:  # pragma: no cover
        raise ImportError("pandas helpers need `pip install judgecal[pandas]`") from e
    return pandas


def _chunks(frame: "pd.DataFrame", size: int) -> Iterator["pd.DataFrame"]:
    for start in range(0, len(frame), size):
        yield frame.iloc[start : start + size]


def _repeats_cell(value: Any) -> str:
    """A `repeats` cell as the CSV upload takes it: scores separated by `;`, empty for none."""
    if isinstance(value, (list, tuple)):
        return ";".join(repr(float(v)) for v in value)
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return str(value)


def anchor_frame(
    frame: "pd.DataFrame",
    *,
    judge: str | None = None,
    rubric: str | None = None,
    item_id: str = "item_id",
    judge_score: str = "judge_score",
    reference_score: str = "reference_score",
    group: str | None = "group",
    repeats: str | None = "repeats",
) -> "pd.DataFrame":
    """The anchor columns the service takes, from `frame`'s columns (renamed by the keyword
    arguments), with `judge` and `rubric` filled in where the frame has no such column, and
    every `covariate.<name>` column kept (an empty cell: not given). A `repeats` column (an
    item's further scores by the same judge version: a list, or scores separated by `;`) is
    kept. Rows without a reference are dropped: they are not anchors."""
    pd = _pandas()
    out = pd.DataFrame(
        {
            "judge": frame["judge"] if "judge" in frame else judge,
            "rubric": frame["rubric"] if "rubric" in frame else rubric,
            "item_id": frame[item_id].astype(str),
            "judge_score": frame[judge_score],
            "reference_score": frame[reference_score],
        },
        index=frame.index,
    )
    if out["judge"].isna().any() or out["rubric"].isna().any():
        raise ValueError("every anchor needs a judge and a rubric: give them as columns or arguments")
    if group and group in frame:
        out["group"] = frame[group]
    if repeats and repeats in frame:
        out["repeats"] = frame[repeats].map(_repeats_cell)
    for column in frame.columns:
        if isinstance(column, str) and column.startswith("covariate."):
            out[column] = frame[column]
    return out[out["reference_score"].notna()]


def upload_frame(
    client: "Client",
    frame: "pd.DataFrame",
    *,
    chunk: int = CHUNK,
    replace: bool = False,
    progress: bool = True,
    **columns: Any,
) -> dict[str, int]:
    """Uploads `frame`'s anchors (see `anchor_frame` for the columns) in chunks of at most
    `chunk` rows, each a CSV body of its own, and returns the totals acknowledged:
    `{"rows", "inserted", "unchanged", "replaced"}`. A chunk the service finds too large
    (413) is split in half and sent again. Each chunk is stored whole or refused whole; a
    refusal raises with the rows renumbered to the frame's."""
    anchors = anchor_frame(frame, **columns)
    totals = {"rows": len(anchors), "inserted": 0, "unchanged": 0, "replaced": 0}
    bar = _progress(len(anchors), progress)
    pending = list(_chunks(anchors, max(1, chunk)))
    offset = 0
    while pending:
        part = pending.pop(0)
        covariates = [c for c in part.columns if isinstance(c, str) and c.startswith("covariate.")]
        body = part.to_csv(index=False, columns=[c for c in COLUMNS if c in part] + covariates)
        try:
            ack = client.upload_csv(body, replace=replace)
        except JudgecalError as e:
            if e.status == 413 and len(part) > 1:
                half = len(part) // 2
                pending[:0] = [part.iloc[:half], part.iloc[half:]]
                continue
            for p in e.details:
                if p.row is not None:
                    p.row += offset
            raise
        offset += len(part)
        for k in ("inserted", "unchanged", "replaced"):
            totals[k] += getattr(ack, k)
        bar(len(part))
    bar(0, done=True)
    return totals


def _progress(total: int, show: bool) -> Any:
    if not show:
        return lambda n, done=False: None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover
        return lambda n, done=False: None
    bar = tqdm(total=total, unit="anchor", unit_scale=True)

    def step(n: int, done: bool = False) -> None:
        bar.update(n)
        if done:
            bar.close()

    return step


def correct_frame(
    client: "Client",
    frame: "pd.DataFrame",
    judge: str,
    rubric: str,
    *,
    score: str = "judge_score",
    chunk: int = CHUNK,
) -> "pd.DataFrame":
    """`frame` with the corrections of its `score` column added: `corrected`,
    `predictive_lo`, `predictive_hi`, and `sigma` and `review` for a flow. Where the frame has
    `covariate.<name>` columns (as `upload_frame` takes them), each row is sent as an item with
    its covariates (an empty cell: not given), and `layer_score` is added for a version trained
    with them."""
    pd = _pandas()
    covariates = [c for c in frame.columns if isinstance(c, str) and c.startswith("covariate.")]
    parts = []
    for part in _chunks(frame, chunk):
        scores = part[score].astype(float).tolist()
        if covariates:
            items = [
                {
                    "score": s,
                    "covariates": {
                        c[len("covariate.") :]: float(v)
                        for c, v in zip(covariates, row)
                        if v is not None and not pd.isna(v)
                    },
                }
                for s, row in zip(scores, part[covariates].itertuples(index=False, name=None))
            ]
            answer = client.correct(judge, rubric, items=items)
        else:
            answer = client.correct(judge, rubric, scores)
        rows = []
        for r in answer.results:
            band = r.predictive or [None, None]
            rows.append(
                {
                    "corrected": r.corrected,
                    "predictive_lo": band[0],
                    "predictive_hi": band[1],
                    "sigma": r.sigma,
                    "review": r.review,
                    "layer_score": r.layer_score,
                }
            )
        parts.append(pd.DataFrame(rows, index=part.index))
    extra = pd.concat(parts) if parts else pd.DataFrame(index=frame.index)
    return frame.join(extra.dropna(axis=1, how="all"))


def tidy(answer: Any) -> "pd.DataFrame":
    """An estimate or a compare as tidy rows: one per run (`estimate`, `lo`, `hi`, `path`,
    ...) and, for a compare, one for the difference."""
    pd = _pandas()

    def run_row(name: str, r: Any) -> dict[str, Any]:
        return {
            "row": name,
            "estimate": r.estimate,
            "lo": r.interval[0],
            "hi": r.interval[1],
            "path": r.path,
            "n": r.n,
            "labelled": r.labelled,
            "corrector_term": r.corrector_term,
        }

    if hasattr(answer, "difference"):
        rows = [run_row("a", answer.a), run_row("b", answer.b)]
        rows.append(
            {
                "row": "a - b",
                "estimate": answer.difference,
                "lo": answer.interval[0],
                "hi": answer.interval[1],
                "path": answer.path,
                "p_value": answer.p_value,
                "corrector_term": answer.corrector_term,
            }
        )
        frame = pd.DataFrame(rows)
    else:
        frame = pd.DataFrame([run_row("run", answer)])
    frame["judge"] = answer.judge
    frame["rubric"] = answer.rubric
    frame["version"] = answer.version
    frame["level"] = answer.level
    return frame


def ratings_frame(answer: Any) -> "pd.DataFrame":
    """A `ratings` answer as one row per system, highest rating first: `system`, `rating`,
    `lo`, `hi`, `best`, `worst` (the joint rank interval), `comparisons`, and the win rates
    against the baseline and over the field (`win_rate`, `field_win_rate`, each with `_lo` and
    `_hi`; empty where the answer gives none)."""
    pd = _pandas()
    frame = pd.DataFrame(
        [
            {
                "system": s.system,
                "rating": s.rating,
                "standard_error": s.standard_error,
                "lo": s.interval[0],
                "hi": s.interval[1],
                "best": s.rank_interval[0],
                "worst": s.rank_interval[1],
                "comparisons": s.comparisons,
                **_win_rate("win_rate", s.win_rate),
                **_win_rate("field_win_rate", s.field_win_rate),
            }
            for s in answer.systems
        ]
    )
    frame["baseline"] = answer.baseline
    frame["level"] = answer.level
    return frame


def _win_rate(name: str, w: Any) -> dict[str, Any]:
    if w is None:
        return {name: None, f"{name}_lo": None, f"{name}_hi": None}
    return {name: w.estimate, f"{name}_lo": w.interval[0], f"{name}_hi": w.interval[1]}


def biases_frame(preferences: Any) -> "pd.DataFrame":
    """A pairwise cell's newest version's bias diagnostics (a `preferences` answer) as one row
    per estimate: `diagnostic` (`agreement`: the judge's winner is the people's,
    `first_position`, `flip`, `longer_answer`, `favouritism`),
    `source` (`judge`, `people`, or the system for favouritism), `estimate`, `lo`, `hi` (95%)
    and `comparisons`. Diagnostics the version could not read (no length covariate, no
    labels) are left out."""
    pd = _pandas()
    b = preferences.versions[0].biases
    rows: list[dict[str, Any]] = []
    for diagnostic, source, share in [
        ("agreement", "judge", b.agreement),
        ("first_position", "judge", b.judge_first),
        ("first_position", "people", b.people_first),
        ("flip", "judge", b.flips),
        ("longer_answer", "judge", b.judge_longer),
        ("longer_answer", "people", b.people_longer),
    ]:
        if share is not None:
            rows.append({"diagnostic": diagnostic, "source": source, "estimate": share.estimate,
                         "lo": share.interval[0], "hi": share.interval[1],
                         "comparisons": share.comparisons})
    for f in b.favouritism:
        rows.append({"diagnostic": "favouritism", "source": f.system, "estimate": f.estimate,
                     "lo": f.interval[0], "hi": f.interval[1], "comparisons": f.comparisons})
    return pd.DataFrame(rows, columns=["diagnostic", "source", "estimate", "lo", "hi", "comparisons"])


def _figure(prefix: str, f: Any) -> dict[str, Any]:
    if f is None:
        return {prefix: None, f"{prefix}_lo": None, f"{prefix}_hi": None}
    lo, hi = f.interval if f.interval is not None else (None, None)
    return {prefix: f.value, f"{prefix}_lo": lo, f"{prefix}_hi": hi}


def agreement_frames(report: Any) -> dict[str, "pd.DataFrame"]:
    """An `agreement` answer as tables, by name:

    - `figures`: one row per (`scores`: `raw` or `corrected`, `figure`: `pearson`,
      `spearman`, `kendall`, `cohen_kappa`, `quadratic_kappa`) with `value`, `lo`, `hi`
      (95%) and `n`;
    - `confusion_raw`, `confusion_corrected`: the κs' confusion matrices (rows: the score's
      level, columns: the reference's), where the reference scale is discrete;
    - `by_level`: `from`, `to`, `n`, `raw`, `raw_lo`, `raw_hi`, `corrected`, ... (bias =
      score − reference);
    - `by_group`: the same per `group`;
    - `disagreements`: the listed items, largest miss first;
    - `repeats` (where the anchors carry repeats): one row per k scores per item, with its
      `residual_ratio` and the judge's within-item variance (`within`, `within_lo`,
      `within_hi`) and its `noise_share` on every row."""
    pd = _pandas()
    figures: list[dict[str, Any]] = []
    confusions: dict[str, "pd.DataFrame"] = {}
    for scores, a in [("raw", report.raw), ("corrected", report.corrected)]:
        named = [("pearson", a.pearson), ("spearman", a.spearman), ("kendall", a.kendall)]
        if a.kappa is not None:
            named += [("cohen_kappa", a.kappa.cohen), ("quadratic_kappa", a.kappa.quadratic)]
            counts = [[int(getattr(c, "root", c)) for c in row] for row in a.kappa.confusion]
            confusions[f"confusion_{scores}"] = pd.DataFrame(
                counts, index=a.kappa.levels, columns=a.kappa.levels
            )
        for name, f in named:
            value = _figure("value", f)
            figures.append({"scores": scores, "figure": name, "value": value["value"],
                            "lo": value["value_lo"], "hi": value["value_hi"], "n": a.n})

    def bias(b: Any) -> dict[str, Any]:
        return {"n": b.n, **_figure("raw", b.raw), **_figure("corrected", b.corrected)}

    repeats: dict[str, "pd.DataFrame"] = {}
    if getattr(report, "repeats", None) is not None:
        r = report.repeats
        within = _figure("within", r.within)
        repeats["repeats"] = pd.DataFrame(
            [{"k": g.k, "residual_ratio": g.residual_ratio, **within, "noise_share": r.noise_share}
             for g in r.by_repeats]
        )
    return {
        "figures": pd.DataFrame(figures, columns=["scores", "figure", "value", "lo", "hi", "n"]),
        **confusions,
        **repeats,
        "by_level": pd.DataFrame([{"from": s.from_, "to": s.to, **bias(s.bias)} for s in report.by_level]),
        "by_group": pd.DataFrame([{"group": s.group, **bias(s.bias)} for s in report.by_group]),
        "disagreements": pd.DataFrame(
            [
                {
                    "item_id": d.item_id,
                    "group": d.group,
                    "judge_score": d.judge_score,
                    "reference_score": d.reference_score,
                    "corrected": d.corrected,
                    "error": d.error,
                    "band_lo": d.band[0] if d.band else None,
                    "band_hi": d.band[1] if d.band else None,
                    "outside": d.outside,
                }
                for d in report.disagreements
            ],
            columns=["item_id", "group", "judge_score", "reference_score", "corrected", "error", "band_lo", "band_hi", "outside"],
        ),
    }

"""`judgecal-py gate`: a CI gate on de-biased judge scores.

    judgecal-py gate run.jsonl --baseline main.jsonl --judge J --rubric R   # better than main?
    judgecal-py gate run.jsonl --threshold 3.5 --judge J --rubric R         # above 3.5?

With `--baseline`, `/v1/compare` reads the difference mean(run) − mean(baseline) and its
interval; with `--threshold`, `/v1/estimate` reads the run's de-biased mean and its interval.
The verdict rests on the interval alone, at `--level` (default the service's, 0.95):

    exit 0  better than the baseline (pass the threshold): the whole interval is on that side
    exit 1  worse (fail): the whole interval is on the other side
    exit 2  undecided: the interval holds 0 (the threshold); more items or labels would say
    exit 3  the gate could not ask (a file, the service, a refusal): nothing was decided

`--lower-is-better` turns the sides round. A summary table is printed (and appended to
`$GITHUB_STEP_SUMMARY` where set), the answer and verdict are written as JSON to `--report`
(default `judgecal-gate.json`), and `verdict=...` goes to `$GITHUB_OUTPUT` where set. The
answer's warnings (an assumption a run departs from) are listed; they do not change the
verdict, so read them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from . import records as rec
from .client import Client
from .errors import JudgecalError

BETTER, WORSE, UNDECIDED, FAILED = 0, 1, 2, 3


def side(interval: tuple[float, float], reference: float, higher_is_better: bool) -> int:
    """The exit code of an interval against `reference`: on the good side, the bad side, or
    holding it (an endpoint on it holds it)."""
    lo, hi = interval
    if lo > reference:
        return BETTER if higher_is_better else WORSE
    if hi < reference:
        return WORSE if higher_is_better else BETTER
    return UNDECIDED


def items(path: str, a: argparse.Namespace) -> list[dict[str, Any]]:
    """A run's items from its records (`--labelled`: with their references)."""
    return [
        {"id": r.item_id, "score": r.judge_score, **({"reference": r.reference} if a.labelled and r.reference is not None else {})}
        for r in rec.read(path, a.judge, a.rubric)
    ]


def _ask(a: argparse.Namespace) -> dict[str, Any]:
    """The service's answer, and what the verdict reads from it."""
    run = items(a.run, a)
    with Client(a.url) as jc:
        if a.baseline is not None:
            base = items(a.baseline, a)
            answer = jc.compare(a.judge, a.rubric, run, base, group_a=a.group, group_b=a.baseline_group, level=a.level)
            return {
                "mode": "compare",
                "reference": 0.0,
                "value": answer.difference,
                "answer": answer.model_dump(mode="json", exclude_none=True),
            }
        answer = jc.estimate(a.judge, a.rubric, run, group=a.group, level=a.level)
        return {
            "mode": "threshold",
            "reference": a.threshold,
            "value": answer.estimate,
            "answer": answer.model_dump(mode="json", exclude_none=True),
        }


def _table(a: argparse.Namespace, asked: dict[str, Any], verdict: str, code: int) -> str:
    answer = asked["answer"]
    lo, hi = answer["interval"]
    level = answer["level"]
    rows = [f"### judgecal gate: {a.rubric} by {a.judge} ({level:.0%} intervals)", "", "| | estimate | interval | items |", "|---|---:|---|---:|"]
    if asked["mode"] == "compare":
        for name, path, part in (("run", a.run, answer["a"]), ("baseline", a.baseline, answer["b"])):
            rows.append(f"| {name} ({path}) | {part['estimate']:.4g} | [{part['interval'][0]:.4g}, {part['interval'][1]:.4g}] | {part['n']} |")
        rows.append(f"| difference | {asked['value']:.4g} | [{lo:.4g}, {hi:.4g}] | p = {answer['p_value']:.3g} |")
    else:
        rows.append(f"| run ({a.run}) | {asked['value']:.4g} | [{lo:.4g}, {hi:.4g}] | {answer['n']} |")
        rows.append(f"| threshold | {a.threshold:.4g} | | |")
    rows += ["", f"**{verdict}** (exit {code}; {'lower' if a.lower_is_better else 'higher'} is better)"]
    for w in answer.get("warnings", []):
        rows.append(f"- warning `{w['code']}`: {w['message']}")
    return "\n".join(rows) + "\n"


def gate(a: argparse.Namespace) -> None:
    if (a.baseline is None) == (a.threshold is None):
        print("judgecal-py gate: give --baseline or --threshold (one of them)", file=sys.stderr)
        raise SystemExit(FAILED)
    try:
        asked = _ask(a)
    except (JudgecalError, OSError, ValueError) as e:
        print(f"judgecal-py gate: {e}", file=sys.stderr)
        raise SystemExit(FAILED) from None
    lo, hi = asked["answer"]["interval"]
    code = side((lo, hi), asked["reference"], not a.lower_is_better)
    names = ("better", "worse", "undecided") if asked["mode"] == "compare" else ("pass", "fail", "undecided")
    verdict = names[code]
    table = _table(a, asked, verdict, code)
    print(table, end="")
    report = {
        "verdict": verdict,
        "exit_code": code,
        "mode": asked["mode"],
        "judge": a.judge,
        "rubric": a.rubric,
        "higher_is_better": not a.lower_is_better,
        "threshold": a.threshold,
        "value": asked["value"],
        "interval": [lo, hi],
        "level": asked["answer"]["level"],
        "warnings": asked["answer"].get("warnings", []),
        "answer": asked["answer"],
    }
    Path(a.report).write_text(json.dumps(report, indent=2) + "\n")
    for env, text in (("GITHUB_STEP_SUMMARY", table), ("GITHUB_OUTPUT", f"verdict={verdict}\nreport={a.report}\n")):
        if os.environ.get(env):
            with open(os.environ[env], "a", encoding="utf-8") as f:
                f.write(text)
    raise SystemExit(code)


def add_parser(sub: Any) -> None:
    q = sub.add_parser("gate", help="exit 0/1/2 as a run is better/worse/undecided against a baseline run or a threshold")
    q.add_argument("run", help="the run's records (JSONL or CSV)")
    q.add_argument("--baseline", help="the baseline run's records: compare the two")
    q.add_argument("--threshold", type=float, help="compare the run's de-biased mean with this")
    q.add_argument("--judge", required=True)
    q.add_argument("--rubric", required=True)
    q.add_argument("--group", help="the run's system (group)")
    q.add_argument("--baseline-group", help="the baseline's system (group)")
    q.add_argument("--level", type=float)
    q.add_argument("--lower-is-better", action="store_true")
    q.add_argument("--labelled", action="store_true", help="send references as labelled items")
    q.add_argument("--report", default="judgecal-gate.json", help="where the JSON report goes")
    q.set_defaults(func=gate)

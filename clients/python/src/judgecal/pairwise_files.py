"""Pairwise judges' files as `upload_comparisons` / `ratings` rows: AlpacaEval annotations
(`annotations.json`), Arena-Hard judgments (`model_judgment/<judge>/<model>.jsonl`) and
MT-Bench pair judgments (`model_judgment/gpt-4_pair.jsonl`), with the people's labels where a
file of them is given (AlpacaEval's human annotations, MT-Bench's human judgments).

Each reader returns `Read(rows, skipped)`: `rows` are comparison rows `{"item_id", "a", "b",
"verdict", "verdict_swapped"?, "preference"?, "covariates"?}` in judgecal's convention (a
verdict says whether a's answer is the better, `"a"`, `"b"`, `"tie"` or a probability, with a
shown first; `verdict_swapped` is the judge's with b shown first, already mapped back), and
`skipped` counts the records left out because the judge gave no usable verdict (an error or
an unparsed judgment), so a reader never drops a row silently."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

Records = str | Path | Iterable[Mapping[str, Any]]


@dataclass
class Read:
    rows: list[dict[str, Any]] = field(default_factory=list)
    skipped: int = 0


def _records(source: Records) -> list[Mapping[str, Any]]:
    """A JSON array file, a JSONL file, a folder of JSONL files, or records already read."""
    if not isinstance(source, (str, Path)):
        return list(source)
    path = Path(source)
    if path.is_dir():
        return [r for f in sorted(path.glob("*.jsonl")) for r in _records(f)]
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        return list(json.loads(text))
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _alpaca_outcome(preference: Any) -> float | None:
    """AlpacaEval's preference (1: output_1 better, 2: output_2, 1.5 a tie, anything between a
    weighted annotator's probability; 0, negative or missing: no verdict) as the probability
    that output_1 is the better."""
    try:
        p = float(preference)
    except (TypeError, ValueError):
        return None
    if p != p or not 1.0 <= p <= 2.0:
        return None
    return 2.0 - p


def alpaca_eval(annotations: Records, *, human: Records | None = None) -> Read:
    """AlpacaEval annotations: one row per (instruction, generator_1, generator_2), a =
    generator_1, b = generator_2, and `covariates.length_diff` the answers' length difference
    in characters (len(output_1) - len(output_2)). AlpacaEval shows the two outputs in a
    random order and records its preference in the file's order: where `is_switched_outputs`
    says output_2 was shown first, the row's a is generator_2, so that `verdict` is always the
    verdict with a shown first. `human` (annotations of the same pairs by people, the same
    schema) sets `preference`: their mean over the people who labelled the pair."""
    people: dict[tuple[str, str, str], list[float]] = {}
    for h in _records(human or []):
        p = _alpaca_outcome(h.get("preference"))
        if p is not None:
            key = (str(h["instruction"]), str(h["generator_1"]), str(h["generator_2"]))
            people.setdefault(key, []).append(p)
    read = Read()
    for r in _records(annotations):
        first = _alpaca_outcome(r.get("preference"))
        if first is None:
            read.skipped += 1
            continue
        g1, g2 = str(r["generator_1"]), str(r["generator_2"])
        key = (str(r["instruction"]), g1, g2)
        labels = people.get(key)
        preference = sum(labels) / len(labels) if labels else None
        length = float(len(str(r.get("output_1", ""))) - len(str(r.get("output_2", ""))))
        switched = bool(r.get("is_switched_outputs"))
        if switched:
            g1, g2 = g2, g1
            first = 1.0 - first
            preference = None if preference is None else 1.0 - preference
            length = -length
        row: dict[str, Any] = {
            "item_id": f"{_digest(key[0])}:{key[1]}:{key[2]}",
            "a": g1,
            "b": g2,
            "verdict": first,
            "covariates": {"length_diff": length},
        }
        if preference is not None:
            row["preference"] = preference
        read.rows.append(row)
    return read


#: Arena-Hard's verdicts, from the judge's A (shown first) against B. "A>>B" and "A>B" both
#: say A won: Arena-Hard counts the strong form three times in its own scores, judgecal reads
#: a verdict as who won.
_ARENA = {"A>>B": "first", "A>B": "first", "A=B": "tie", "B>A": "second", "B>>A": "second"}


def arena_hard(judgments: Records, *, baseline: str = "gpt-4-0314") -> Read:
    """Arena-Hard judgments (a JSONL file per model, or their folder): one row per (question,
    model), a = the baseline, b = the model. Game 1 shows the baseline first (`verdict`), game
    2 the model first (`verdict_swapped`, mapped back). A question whose first game has no
    verdict keeps its second, with a = the model (the answer that game showed first)."""
    read = Read()
    for r in _records(judgments):
        games = list(r.get("games") or [])
        scores = [_ARENA.get(str(g.get("score"))) if g else None for g in games[:2]]
        scores += [None] * (2 - len(scores))
        model = str(r["model"])
        item = f"{r['question_id']}:{model}"

        def said(outcome: str | None, first_is_a: bool) -> str | None:
            if outcome is None:
                return None
            if outcome == "tie":
                return "tie"
            return "a" if (outcome == "first") == first_is_a else "b"

        if scores[0] is not None:
            row = {"item_id": item, "a": baseline, "b": model, "verdict": said(scores[0], True)}
            swapped = said(scores[1], False)
            if swapped is not None:
                row["verdict_swapped"] = swapped
        elif scores[1] is not None:
            row = {"item_id": item, "a": model, "b": baseline, "verdict": said(scores[1], True)}
        else:
            read.skipped += 1
            continue
        read.rows.append(row)
    return read


def _mt_winner(winner: Any, first: str, second: str) -> float | None:
    """MT-Bench's winner (`model_1`/`model_a`, `model_2`/`model_b`, `tie`, `tie (bothbad)`,
    or a model's name) as the probability that `first` is the better; `error` or unknown:
    none."""
    w = str(winner)
    if w in ("model_1", "model_a", first):
        return 1.0
    if w in ("model_2", "model_b", second):
        return 0.0
    if w.startswith("tie"):
        return 0.5
    return None


def mt_bench_pairs(judgments: Records, *, human: Records | None = None, turn: int | None = None) -> Read:
    """MT-Bench pair judgments (FastChat's `gpt-4_pair.jsonl`): one row per (question, turn,
    model_1, model_2), a = model_1. `g1_winner` (model_1 shown first) is the verdict,
    `g2_winner` (model_2 shown first, recorded by model name) the swapped verdict. `human`
    (MT-Bench's human judgments: `question_id`, `model_a`, `model_b`, `winner`, `turn`) sets
    `preference` to the share of people preferring model_1 (a tie half), whichever order they
    list the pair in. `turn` keeps one turn only."""
    people: dict[tuple[str, int, str, str], list[float]] = {}
    for h in _records(human or []):
        a, b = str(h["model_a"]), str(h["model_b"])
        p = _mt_winner(h.get("winner"), a, b)
        if p is None:
            continue
        t = int(h.get("turn", 1))
        people.setdefault((str(h["question_id"]), t, a, b), []).append(p)
        people.setdefault((str(h["question_id"]), t, b, a), []).append(1.0 - p)
    read = Read()
    for r in _records(judgments):
        t = int(r.get("turn", 1))
        if turn is not None and t != turn:
            continue
        m1, m2 = str(r["model_1"]), str(r["model_2"])
        first = _mt_winner(r.get("g1_winner"), m1, m2)
        swapped = _mt_winner(r.get("g2_winner"), m1, m2)
        if first is None and swapped is None:
            read.skipped += 1
            continue
        labels = people.get((str(r["question_id"]), t, m1, m2))
        if first is None:
            # Only the order with model_2 first: model_2 is a.
            row: dict[str, Any] = {"a": m2, "b": m1, "verdict": 1.0 - float(swapped or 0.0)}
            if labels:
                row["preference"] = 1.0 - sum(labels) / len(labels)
        else:
            row = {"a": m1, "b": m2, "verdict": first}
            if swapped is not None:
                row["verdict_swapped"] = swapped
            if labels:
                row["preference"] = sum(labels) / len(labels)
        row["item_id"] = f"{r['question_id']}:t{t}:{m1}:{m2}"
        read.rows.append(row)
    return read


def panel(members: Mapping[str, Iterable[Mapping[str, Any]]]) -> Read:
    """Several pairwise judges' rows of the same comparisons (each as a reader above gives
    them, or as `upload_comparisons` takes them), keyed by judge, joined on `item_id` into a
    pairwise panel's `ratings` rows: `verdicts` and `verdicts_swapped` by judge, with the first
    judge's `a`, `b` and `covariates` and the people's `preference` where any judge's row has
    it. `skipped` counts the items some judge did not judge (a panel's run needs every
    member's verdict). An item whose judges compare other systems, or give other preferences,
    raises ValueError naming it; upload each judge's own rows under its name to train the
    panel."""
    names = list(members)
    if len(names) < 2:
        raise ValueError(f"a panel has 2 or more judges; got {names}")
    by_judge = [{row["item_id"]: row for row in members[n]} for n in names]
    first, rest = by_judge[0], by_judge[1:]
    every = [set(first)] + [set(j) for j in rest]
    kept = sorted(set.intersection(*every))
    skipped = len(set.union(*every)) - len(kept)
    rows: list[dict[str, Any]] = []
    for item in kept:
        judged = [j[item] for j in by_judge]
        head = judged[0]
        pairs = {(r["a"], r["b"]) for r in judged}
        if len(pairs) > 1:
            raise ValueError(f"item {item}: the judges compare other systems: {sorted(pairs)}")
        labels = {r["preference"] for r in judged if r.get("preference") is not None}
        if len(labels) > 1:
            raise ValueError(f"item {item}: the judges' rows give other preferences: {sorted(map(str, labels))}")
        row: dict[str, Any] = {"item_id": item, "a": head["a"], "b": head["b"],
                               "verdicts": {n: r["verdict"] for n, r in zip(names, judged)}}
        swapped = {n: r["verdict_swapped"] for n, r in zip(names, judged) if r.get("verdict_swapped") is not None}
        if swapped:
            row["verdicts_swapped"] = swapped
        if labels:
            row["preference"] = labels.pop()
        if head.get("covariates"):
            row["covariates"] = head["covariates"]
        rows.append(row)
    return Read(rows, skipped)

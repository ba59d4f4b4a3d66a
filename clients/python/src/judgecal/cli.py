"""`judgecal-py`: upload anchors, train, estimate a run and compare two, from files.

    judgecal-py upload anchors.csv                  # CSV or JSONL records, or the service's CSV
    judgecal-py train gpt-4o-mini --method auto
    judgecal-py estimate run.jsonl --judge gpt-4o-mini --rubric coherence --group model-a
    judgecal-py compare a.jsonl b.jsonl --judge gpt-4o-mini --rubric coherence
    judgecal-py inspect logs/run.eval --judge gpt-4o-mini --rubric helpfulness [--train auto]
    judgecal-py gate run.jsonl --baseline main.jsonl --judge gpt-4o-mini --rubric coherence
    judgecal-py sync mlflow --tracking-uri http://127.0.0.1:5000 --experiment evals \
        --rubric coherence --judge gpt-4o-mini --group-tag system --write-back

The service is `--url` or `JUDGECAL_URL`; the key `JUDGECAL_API_KEY`. Records are
`{item_id, judge, rubric, judge_score, reference?, group?}` per line (JSONL) or per row (CSV).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from typing import Any

from . import gate, sync_mlflow, sync_phoenix
from . import records as rec
from .client import Client
from .errors import JudgecalError


def _client(a: argparse.Namespace) -> Client:
    return Client(a.url)


def _print(obj: Any) -> None:
    print(json.dumps(obj.model_dump(mode="json", exclude_none=True) if hasattr(obj, "model_dump") else obj, indent=2))


def upload(a: argparse.Namespace) -> None:
    records = rec.read(a.file, a.judge, a.rubric)
    cells: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r.reference is not None:
            cells[(r.judge, r.rubric)].append(r.anchor())
    if not cells:
        raise SystemExit(f"{a.file}: no record has a reference, so there is nothing to upload")
    with _client(a) as jc:
        for (judge, rubric), anchors in cells.items():
            for start in range(0, len(anchors), a.chunk):
                ack = jc.upload_anchors(judge, rubric, anchors[start : start + a.chunk], replace=a.replace)
                print(f"{judge}/{rubric}: {ack.inserted} inserted, {ack.unchanged} unchanged, {ack.replaced} replaced")


def train(a: argparse.Namespace) -> None:
    options = json.loads(a.options) if a.options else None
    with _client(a) as jc:
        for v in jc.train(a.judge, a.method, options=options, rubrics=a.rubric or None):
            print(f"{v.rubric}: version {v.version} ({'active' if v.active else 'not active'}, {'passed' if v.passed else 'failed its checks'})")


def _run(path: str, a: argparse.Namespace) -> list[dict[str, Any]]:
    return gate.items(path, a)


def estimate(a: argparse.Namespace) -> None:
    with _client(a) as jc:
        _print(jc.estimate(a.judge, a.rubric, _run(a.file, a), group=a.group, level=a.level))


def compare(a: argparse.Namespace) -> None:
    with _client(a) as jc:
        _print(jc.compare(a.judge, a.rubric, _run(a.a, a), _run(a.b, a), group_a=a.group_a, group_b=a.group_b, level=a.level))


def inspect_log(a: argparse.Namespace) -> None:
    from .inspect import calibrate_log, compare_logs

    refs = rec.read_references(a.references) if a.references else None
    with _client(a) as jc:
        result = calibrate_log(jc, a.log, judge=a.judge, rubric=a.rubric, scorer=a.scorer, references=refs, train=a.train)
        print(result.summary())
        if a.compare:
            c = compare_logs(jc, a.log, a.compare, judge=a.judge, rubric=a.rubric, scorer=a.scorer)
            print(f"difference {c.difference:.3f} [{c.interval[0]:.3f}, {c.interval[1]:.3f}], p = {c.p_value:.3g} ({c.pairs} pairs)")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="judgecal-py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", help="the service (default: JUDGECAL_URL, then http://127.0.0.1:8080)")
    sub = p.add_subparsers(required=True)

    def cell(q: argparse.ArgumentParser, required: bool) -> None:
        q.add_argument("--judge", required=required)
        q.add_argument("--rubric", required=required)

    q = sub.add_parser("upload", help="upload the records that have a reference as anchors")
    q.add_argument("file")
    cell(q, False)
    q.add_argument("--replace", action="store_true")
    q.add_argument("--chunk", type=int, default=100_000)
    q.set_defaults(func=upload)

    q = sub.add_parser("train", help="train a judge's cells and wait for the versions")
    q.add_argument("judge")
    q.add_argument("--method", default="auto")
    q.add_argument("--rubric", action="append", help="a rubric to train (repeat; default: all)")
    q.add_argument("--options", help="the method's options as JSON")
    q.set_defaults(func=train)

    for name, func, files in (("estimate", estimate, ["file"]), ("compare", compare, ["a", "b"])):
        q = sub.add_parser(name, help=f"/v1/{name} on records (JSONL or CSV)")
        for f in files:
            q.add_argument(f)
        cell(q, True)
        q.add_argument("--level", type=float)
        q.add_argument("--labelled", action="store_true", help="send references as labelled items")
        if name == "estimate":
            q.add_argument("--group")
        else:
            q.add_argument("--group-a")
            q.add_argument("--group-b")
        q.set_defaults(func=func)

    q = sub.add_parser("inspect", help="an inspect_ai eval log: anchors, the de-biased mean, a compare")
    q.add_argument("log")
    cell(q, True)
    q.add_argument("--scorer")
    q.add_argument("--references", help="a CSV of item_id,reference")
    q.add_argument("--train", help="train the judge with this method after uploading")
    q.add_argument("--compare", metavar="LOG_B", help="also compare with another log of the task")
    q.set_defaults(func=inspect_log)

    gate.add_parser(sub)
    q = sub.add_parser("sync", help="two-way bridges to eval platforms (mlflow, phoenix)")
    platforms = q.add_subparsers(required=True)
    sync_mlflow.add_parser(platforms)
    sync_phoenix.add_parser(platforms)
    return p


def main(argv: list[str] | None = None) -> None:
    a = parser().parse_args(argv)
    try:
        a.func(a)
    except JudgecalError as e:
        print(f"judgecal-py: {e}", file=sys.stderr)
        raise SystemExit(1) from None
    except (OSError, ValueError) as e:
        print(f"judgecal-py: {e}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":  # pragma: no cover
    main()

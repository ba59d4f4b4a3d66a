"""A typed use of the client, checked by `mypy --strict` in the tests (tests/test_types.py):
each call's answer is its response model, sync and async alike, and errors are classes."""

from __future__ import annotations

import asyncio

from judgecal import AsyncClient, Client, InvalidInput, models
from judgecal.errors import APIStatusError, RateLimitError, Unavailable


def run_mean(jc: Client, scores: list[float]) -> tuple[float, float]:
    answer: models.EstimateResponse = jc.estimate("gpt-4o-mini", "coherence", scores, version=3)
    low, high = answer.interval
    return low, high


def compare(jc: Client) -> float:
    diff: models.CompareResponse = jc.compare("gpt-4o-mini", "coherence", [3.0, 4.0], [2.0, 3.5])
    return diff.difference


def corrected(jc: Client) -> list[float]:
    try:
        response: models.CorrectResponse = jc.correct("gpt-4o-mini", "coherence", [2.5], version=1)
    except InvalidInput as e:
        rows = [p.row for p in e.details]
        raise ValueError(f"refused at rows {rows} (request {e.request_id})") from e
    except RateLimitError as e:
        assert isinstance(e, Unavailable) and isinstance(e, APIStatusError)
        raise
    return [r.corrected for r in response.results]


async def ranked(jc: AsyncClient) -> list[str]:
    answer: models.RankResponse = await jc.rank("gpt-4o-mini", "coherence", {"a": [3.0], "b": [4.0]}, version=2)
    return [run.name for run in answer.runs]


async def versions(jc: AsyncClient) -> int:
    listed: models.VersionsResponse = await jc.versions("gpt-4o-mini", "coherence")
    estimate: models.EstimateResponse = await jc.estimate("gpt-4o-mini", "coherence", [3.0])
    return len(listed.versions) + int(estimate.estimate)


if __name__ == "__main__":
    with Client() as client:
        print(run_mean(client, [3.0, 4.0]))
    print(asyncio.run(ranked(AsyncClient())))

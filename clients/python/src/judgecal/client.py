"""`Client` and `AsyncClient`: every endpoint of judgecal's openapi.yaml (see `_core.Endpoints`
for the calls), with retries, exceptions carrying the service's code and per-row details, and
`train`, which starts a job and waits for its versions."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any, Callable, Mapping, Sequence, TypeVar

import httpx

from . import models
from ._core import Endpoints, Request, Settings, finished, outcome, retry_wait, transport_failure
from .errors import JudgecalError

Progress = Callable[[models.JobDto], None]
T = TypeVar("T")


def _bar() -> Progress:
    """A progress callback that prints the job's state and share on one line."""

    def show(job: models.JobDto) -> None:
        print(f"\rjob {job.id}: {job.state} {100 * job.progress:5.1f}%", end="", flush=True)
        if finished(job):
            print()

    return show


class Client(Endpoints):
    """A synchronous judgecal client.

    >>> jc = Client("http://127.0.0.1:8080")          # or JUDGECAL_URL / JUDGECAL_API_KEY
    >>> jc.upload_anchors("gpt-4o-mini", "coherence", [{"item_id": "a", "judge_score": 3, "reference_score": 4}])
    >>> jc.train("gpt-4o-mini")
    >>> jc.estimate("gpt-4o-mini", "coherence", [3.0, 4.5, 2.0]).interval
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 120.0,
        retries: int = 5,
        backoff: float = 0.5,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.settings = Settings.of(base_url, api_key, timeout, retries, backoff)
        self._http = httpx.Client(
            base_url=self.settings.base_url,
            headers=self.settings.headers(),
            timeout=timeout,
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, request: Request[T]) -> T:
        for attempt in itertools.count():
            try:
                response = self._http.send(request.build(self._http))
            except httpx.TransportError as e:
                wait = retry_wait(self.settings, request, attempt, error=e)
                if wait is None:
                    raise transport_failure(e, self.settings) from e
            else:
                wait = retry_wait(self.settings, request, attempt, response=response)
                if wait is None:
                    return request.parse(response)
            time.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    def train(
        self,
        judge: str,
        method: str = "auto",
        *,
        options: Mapping[str, Any] | None = None,
        rubrics: Sequence[str] | None = None,
        judge_version: str | None = None,
        member_versions: Mapping[str, str | None] | None = None,
        covariates: Sequence[str] | None = None,
        progress: bool | Progress = True,
        poll: float = 0.5,
        timeout: float | None = None,
    ) -> list[models.JobVersionDto]:
        """Trains `judge`'s cells with `method` and waits: the versions the job made (raises
        `JobFailed` if it failed or was cancelled, `TimeoutError` after `timeout` seconds, when
        the job is cancelled too). `progress` prints the job's progress, or is called with
        each poll's job."""
        show = _bar() if progress is True else (progress or None)
        job = self.start_training(
            judge,
            method,
            options=options,
            rubrics=rubrics,
            judge_version=judge_version,
            member_versions=member_versions,
            covariates=covariates,
        )
        started = time.monotonic()
        while True:
            if show:
                show(job)
            if finished(job):
                return outcome(job)
            if timeout is not None and time.monotonic() - started > timeout:
                self.cancel(job.id)
                raise TimeoutError(f"job {job.id} still {job.state} after {timeout} s; cancelled")
            time.sleep(poll)
            job = self.job(job.id)


class AsyncClient(Endpoints):
    """The same calls as `Client`, each a coroutine: `await jc.estimate(...)`."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 120.0,
        retries: int = 5,
        backoff: float = 0.5,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.settings = Settings.of(base_url, api_key, timeout, retries, backoff)
        self._http = httpx.AsyncClient(
            base_url=self.settings.base_url,
            headers=self.settings.headers(),
            timeout=timeout,
            transport=transport,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _send(self, request: Request[T]) -> T:  # type: ignore[override]
        for attempt in itertools.count():
            try:
                response = await self._http.send(request.build(self._http))
            except httpx.TransportError as e:
                wait = retry_wait(self.settings, request, attempt, error=e)
                if wait is None:
                    raise transport_failure(e, self.settings) from e
            else:
                wait = retry_wait(self.settings, request, attempt, response=response)
                if wait is None:
                    return request.parse(response)
            await asyncio.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    async def train(
        self,
        judge: str,
        method: str = "auto",
        *,
        options: Mapping[str, Any] | None = None,
        rubrics: Sequence[str] | None = None,
        judge_version: str | None = None,
        member_versions: Mapping[str, str | None] | None = None,
        covariates: Sequence[str] | None = None,
        progress: bool | Progress = False,
        poll: float = 0.5,
        timeout: float | None = None,
    ) -> list[models.JobVersionDto]:
        """As `Client.train`, without blocking the event loop."""
        show = _bar() if progress is True else (progress or None)
        job = await self.start_training(
            judge,
            method,
            options=options,
            rubrics=rubrics,
            judge_version=judge_version,
            member_versions=member_versions,
            covariates=covariates,
        )
        started = time.monotonic()
        while True:
            if show:
                show(job)
            if finished(job):
                return outcome(job)
            if timeout is not None and time.monotonic() - started > timeout:
                await self.cancel(job.id)
                raise TimeoutError(f"job {job.id} still {job.state} after {timeout} s; cancelled")
            await asyncio.sleep(poll)
            job = await self.job(job.id)


__all__ = ["AsyncClient", "Client", "JudgecalError"]

"""What the sync and async clients share: configuration, the requests every endpoint makes,
retries, and turning answers into models or exceptions. Each endpoint is written once, as a
`Request`; `Client` sends it with httpx's sync client, `AsyncClient` with its async one."""

from __future__ import annotations

import email.utils
import math
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Iterable, Mapping, Sequence, TypeVar
from urllib.parse import quote

import httpx

from . import models
from .errors import (
    APIConnectionError,
    APITimeoutError,
    InvalidInput,
    JudgecalError,
    Problem,
    from_response,
)

T = TypeVar("T")

DEFAULT_URL = "http://127.0.0.1:8080"
#: Statuses worth another try on any call: the service shed the request before doing anything
#: (429) or is briefly not ready (503).
RETRY_STATUSES = frozenset({429, 503})
#: Other server errors are retried too, but only on idempotent calls: a 500 after a training
#: job was queued must not queue a second one.
#: The longest wait between tries, whatever `Retry-After` says.
MAX_WAIT = 60.0


@dataclass(frozen=True)
class Settings:
    """Where the service is and how hard to try. `base_url` defaults to `JUDGECAL_URL`, then
    http://127.0.0.1:8080; `api_key` to `JUDGECAL_API_KEY` (none: the service must run with
    auth disabled). `retries` more tries after a 429, a 503 or a failed connection, waiting
    `Retry-After` when the service sends one, else `backoff`·2^try seconds with jitter."""

    base_url: str
    api_key: str | None
    timeout: float
    retries: int
    backoff: float

    @classmethod
    def of(
        cls,
        base_url: str | None,
        api_key: str | None,
        timeout: float,
        retries: int,
        backoff: float,
    ) -> "Settings":
        url = base_url or os.environ.get("JUDGECAL_URL") or DEFAULT_URL
        key = api_key if api_key is not None else os.environ.get("JUDGECAL_API_KEY")
        if retries < 0 or backoff < 0 or timeout <= 0:
            raise ValueError("retries and backoff must be >= 0 and timeout > 0")
        return cls(url.rstrip("/"), key or None, timeout, retries, backoff)

    def headers(self) -> dict[str, str]:
        h = {"user-agent": "judgecal-python/0.1"}
        if self.api_key:
            h["authorization"] = f"Bearer {self.api_key}"
        return h


@dataclass
class Request(Generic[T]):
    """One call: what to send and how to read the answer. `idempotent` requests are retried
    after any transport error; the others (starting a job) only when the connection was never
    made, so a retry cannot start a second job."""

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    json: Any = None
    content: bytes | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    idempotent: bool = True

    def build(self, http: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        problems = non_finite(self.json)
        if problems:
            raise InvalidInput(
                message="the request was not sent: JSON has no NaN or infinity",
                code="invalid_input",
                details=problems,
            )
        return http.build_request(
            self.method,
            self.path,
            json=self.json,
            content=self.content,
            params={k: v for k, v in self.params.items() if v is not None},
            headers=dict(self.headers),
        )


def non_finite(value: Any, path: str = "", row: int | None = None) -> list[Problem]:
    """A `Problem` per NaN or infinity in a JSON body, named as the service names fields:
    `row` the 1-based index in the innermost list, `field` the path without indices."""
    if isinstance(value, float) and not math.isfinite(value):
        return [Problem(row=row, field=path or "body", problem=f"must be a finite number, got {value}")]
    if isinstance(value, Mapping):
        out: list[Problem] = []
        for k, v in value.items():
            out += non_finite(v, f"{path}.{k}" if path else str(k), row)
        return out
    if isinstance(value, (list, tuple)):
        out = []
        for i, v in enumerate(value):
            out += non_finite(v, path, i + 1)
        return out
    return []


def wait_before(attempt: int, response: httpx.Response | None, backoff: float) -> float:
    """Seconds to wait before try `attempt` + 1: the service's `Retry-After` (seconds or an
    HTTP date) where it sent one, else exponential backoff with full jitter."""
    if response is not None:
        after = response.headers.get("retry-after")
        if after:
            try:
                return min(max(float(after), 0.0), MAX_WAIT)
            except ValueError:
                when = email.utils.parsedate_to_datetime(after)
                if when is not None:
                    return min(max(when.timestamp() - time.time(), 0.0), MAX_WAIT)
    return min(backoff * (2**attempt) * random.uniform(0.5, 1.0), MAX_WAIT)


def retryable(error: httpx.TransportError, idempotent: bool) -> bool:
    """Whether a transport error may be retried: always when no connection was made."""
    if isinstance(error, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)):
        return True
    return idempotent


def retry_wait(
    settings: Settings,
    request: "Request[Any]",
    attempt: int,
    response: httpx.Response | None = None,
    error: httpx.TransportError | None = None,
) -> float | None:
    """The one retry policy of both clients: seconds to wait before another try after try
    `attempt` (0-based) answered `response` or failed with `error`; None when the answer
    stands or the error is final."""
    if attempt >= settings.retries:
        return None
    if error is not None:
        return wait_before(attempt, None, settings.backoff) if retryable(error, request.idempotent) else None
    if response is not None and (
        response.status_code in RETRY_STATUSES or (response.status_code >= 500 and request.idempotent)
    ):
        return wait_before(attempt, response, settings.backoff)
    return None


def transport_failure(error: httpx.TransportError, settings: Settings) -> JudgecalError:
    """The exception for a call that got no answer: a timeout, or no connection."""
    message = f"no answer from {settings.base_url}: {error.__class__.__name__}: {error}"
    if isinstance(error, httpx.TimeoutException):
        return APITimeoutError(message=message, code="timeout")
    return APIConnectionError(message=message, code="unreachable")


def check(response: httpx.Response) -> httpx.Response:
    """The response if it is a success; else the service's error as an exception."""
    if response.is_success:
        return response
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text
    raise from_response(response.status_code, body, response.headers.get("x-request-id"))


def model(kind: type[T]) -> Callable[[httpx.Response], T]:
    """Reads a JSON answer into the generated model `kind`."""
    return lambda r: kind.model_validate(check(r).json())  # type: ignore[attr-defined]


def raw_json(r: httpx.Response) -> Any:
    return check(r).json()


def text(r: httpx.Response) -> str:
    return check(r).text


def nothing(r: httpx.Response) -> None:
    """An answer with no body (204)."""
    check(r)


def seg(name: str) -> str:
    """A path segment: judge, rubric and item names are escaped, never trusted."""
    return quote(str(name), safe="")


def run_body(run: Any, group: str | None = None, judge_version: str | None = None) -> dict[str, Any]:
    """A run as `/v1/estimate` and `/v1/compare` take it: a list of numbers is `scores`; a
    list of dicts is `items` (`score`, and `id`, `reference`, `cluster` where known); a dict
    is passed on as it is. `group` names the system the run's outputs came from,
    `judge_version` the judge version that scored it."""
    if isinstance(run, Mapping):
        body = dict(run)
    else:
        seq = list(run)
        if seq and isinstance(seq[0], Mapping):
            body = {"items": [{k: v for k, v in i.items() if v is not None} for i in seq]}
        else:
            body = {"scores": [float(s) for s in seq]}
    if group is not None:
        body["group"] = group
    if judge_version is not None:
        body["judge_version"] = judge_version
    return body


def with_options(body: dict[str, Any], **options: Any) -> dict[str, Any]:
    """`body` with the options the caller set (None: left to the service's default)."""
    return {**body, **{k: v for k, v in options.items() if v is not None}}


def scores_or_items(scores: Sequence[float] | None, items: Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
    if (scores is None) == (items is None):
        raise ValueError("give scores or items, not both")
    if scores is not None:
        return {"scores": [float(s) for s in scores]}
    return {"items": [dict(i) for i in items or []]}


class Endpoints:
    """Every endpoint of openapi.yaml, each written once as a `Request`. `_send` (sync or
    async in the subclass) sends it. The return types are what `Client`'s calls return;
    `AsyncClient`'s return the same types awaited, which `client.pyi` (generated from this
    class by scripts/generate_stubs.py) tells type checkers."""

    def _send(self, request: Request[T]) -> T:  # pragma: no cover - both clients override
        raise NotImplementedError

    # Health and monitoring

    def health(self) -> models.Status:
        """GET /healthz: the process is up."""
        return self._send(Request("GET", "/healthz", model(models.Status)))

    def ready(self) -> models.Status:
        """GET /readyz: the store answers; 503 (raised as `Unavailable`) while it does not."""
        return self._send(Request("GET", "/readyz", model(models.Status)))

    def metrics(self) -> str:
        """GET /metrics: the Prometheus exposition, as text."""
        return self._send(Request("GET", "/metrics", text))

    # Anchors

    def upload_anchors(
        self,
        judge: str,
        rubric: str,
        anchors: Iterable[Mapping[str, Any]],
        *,
        replace: bool = False,
        judge_version: str | None = None,
    ) -> models.IngestResponse:
        """POST /v1/anchors with one cell's anchors (`item_id`, `judge_score`,
        `reference_score`, optional `group`, `rater`, `judge_version` and `covariates`, a
        dict of name -> number such as `{"length": 812}`). The batch is stored whole or
        refused whole (`InvalidInput`, whose `details` name each row and field); a retried
        batch counts as `unchanged`. `judge_version` labels every row that names none; a row
        of an item the cell already holds a reference for may leave `reference_score` out (a
        re-score by a new judge version: no new label)."""
        body = with_options(
            {
                "judge": judge,
                "rubric": rubric,
                "anchors": [{k: v for k, v in a.items() if v is not None} for a in anchors],
            },
            judge_version=judge_version,
        )
        return self._send(
            Request(
                "POST",
                "/v1/anchors",
                model(models.IngestResponse),
                json=body,
                params={"replace": "true" if replace else None},
            )
        )

    def upload_csv(self, csv: bytes | str, *, replace: bool = False) -> models.IngestResponse:
        """POST /v1/anchors as `text/csv`: columns `judge,rubric,item_id,judge_score,
        reference_score` and optionally `group`, `rater`, `judge_version` and one
        `covariate.<name>` column per covariate, any number of cells (an
        empty `reference_score` on a re-scored item takes the stored one)."""
        content = csv.encode() if isinstance(csv, str) else csv
        return self._send(
            Request(
                "POST",
                "/v1/anchors",
                model(models.IngestResponse),
                content=content,
                headers={"content-type": "text/csv"},
                params={"replace": "true" if replace else None},
            )
        )

    def upload_comparisons(
        self,
        judge: str,
        rubric: str,
        comparisons: Iterable[Mapping[str, Any]],
        *,
        replace: bool = False,
        judge_version: str | None = None,
    ) -> models.ComparisonIngestResponse:
        """POST /v1/comparisons with one cell's pairwise verdicts: each row has `item_id`,
        `a` and `b` (the two systems), `verdict` (`"a"`, `"b"`, `"tie"` or the probability
        that a is better), and optionally `verdict_swapped` (with b shown first, mapped back),
        `preference` (the people's), `rater` and `covariates`. Stored whole or refused whole
        (`InvalidInput` naming each row and field); a retry counts as `unchanged`; a row
        stored with other values, another pair or another preference for an item is a
        `Conflict` unless `replace`. A cell holds scores or comparisons, not both. The labelled
        ones calibrate `ratings`."""
        body = with_options(
            {
                "judge": judge,
                "rubric": rubric,
                "comparisons": [
                    {k: v for k, v in c.items() if v is not None} for c in comparisons
                ],
            },
            judge_version=judge_version,
        )
        return self._send(
            Request(
                "POST",
                "/v1/comparisons",
                model(models.ComparisonIngestResponse),
                json=body,
                params={"replace": "true" if replace else None},
            )
        )

    def upload_comparisons_csv(
        self, csv: bytes | str, *, replace: bool = False
    ) -> models.ComparisonIngestResponse:
        """POST /v1/comparisons as `text/csv`: columns `judge,rubric,item_id,a,b,verdict` and
        optionally `verdict_swapped`, `preference`, `rater`, `judge_version` and one
        `covariate.<name>` column per covariate, any number of cells."""
        content = csv.encode() if isinstance(csv, str) else csv
        return self._send(
            Request(
                "POST",
                "/v1/comparisons",
                model(models.ComparisonIngestResponse),
                content=content,
                headers={"content-type": "text/csv"},
                params={"replace": "true" if replace else None},
            )
        )

    def ratings(
        self,
        judge: str,
        rubric: str,
        comparisons: Iterable[Mapping[str, Any]],
        *,
        baseline: str | None = None,
        level: float | None = None,
        control: Sequence[str] | None = None,
        judge_version: str | None = None,
        target_half_width: float | None = None,
    ) -> models.RatingsResponse:
        """POST /v1/ratings: Bradley–Terry ratings (natural log-odds, `baseline` at 0) of the
        run's systems by the people's preference, from the judge's verdicts on the run
        (comparison rows, as `upload_comparisons` takes them) and the cell's labelled
        comparisons. Rows with `preference` enter prediction-powered; `control` names
        covariates the ratings control for (their coefficients come back in `controls`).
        `target_half_width` asks for a label plan: `plan.label` names the run's comparisons to
        send to people for every rating's half-width to reach it. `frames.ratings_frame` makes
        it a table. A pairwise panel's run (`judge` a panel of pairwise judges) gives each
        row's `verdicts` ({member: verdict}) and `verdicts_swapped` in place of `verdict` and
        `verdict_swapped`."""
        body = with_options(
            {
                "judge": judge,
                "rubric": rubric,
                "comparisons": [
                    {k: v for k, v in c.items() if v is not None} for c in comparisons
                ],
            },
            baseline=baseline,
            level=level,
            control=list(control) if control is not None else None,
            judge_version=judge_version,
            target_half_width=target_half_width,
        )
        return self._send(
            Request("POST", "/v1/ratings", model(models.RatingsResponse), json=body)
        )

    def cells(self) -> models.CellsResponse:
        """GET /v1/cells: every (judge, rubric) cell with its anchors and active version."""
        return self._send(Request("GET", "/v1/cells", model(models.CellsResponse)))

    def anchors(
        self,
        judge: str,
        rubric: str,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        judge_version: str | None = None,
    ) -> models.AnchorPageResponse:
        """GET one page of a cell's anchors (of `judge_version` only, when given);
        `next_cursor` fetches the next."""
        return self._send(
            Request(
                "GET",
                f"/v1/cells/{seg(judge)}/{seg(rubric)}/anchors",
                model(models.AnchorPageResponse),
                params={"limit": limit, "cursor": cursor, "judge_version": judge_version},
            )
        )

    def delete_anchor(
        self, judge: str, rubric: str, item_id: str, *, judge_version: str | None = None
    ) -> models.DeleteResponse:
        """DELETE an anchor item's row of `judge_version` (None: its unversioned row); no other
        row is touched."""
        return self._send(
            Request(
                "DELETE",
                f"/v1/cells/{seg(judge)}/{seg(rubric)}/anchors/{seg(item_id)}",
                model(models.DeleteResponse),
                params={"judge_version": judge_version},
            )
        )

    # Judge versions

    def judge_versions(self, judge: str, rubric: str) -> models.JudgeVersionsResponse:
        """GET the judge versions a cell's anchors carry, with the calibration of each."""
        return self._send(
            Request(
                "GET",
                f"/v1/cells/{seg(judge)}/{seg(rubric)}/judge-versions",
                model(models.JudgeVersionsResponse),
            )
        )

    def rescore(
        self,
        judge: str,
        rubric: str,
        judge_version: str,
        *,
        from_version: str | None = None,
        limit: int | None = None,
    ) -> models.RescoreResponse:
        """GET the anchor items `judge_version` has not scored yet (re-score them and upload
        the scores without references), and how many shared items the bridge needs."""
        return self._send(
            Request(
                "GET",
                f"/v1/cells/{seg(judge)}/{seg(rubric)}/rescore",
                model(models.RescoreResponse),
                params={"judge_version": judge_version, "from": from_version, "limit": limit},
            )
        )

    def bridge(
        self,
        judge: str,
        rubric: str,
        to: str,
        *,
        from_version: str | None = None,
        tolerance: float | None = None,
    ) -> models.BridgeResponse:
        """GET the bridge from judge version `from_version` (None: the unversioned anchors)
        to `to` on the items both scored: the raw and corrected shifts and a `verdict`
        (`carry_over`, `refit` or `more_items`)."""
        return self._send(
            Request(
                "GET",
                f"/v1/cells/{seg(judge)}/{seg(rubric)}/bridge",
                model(models.BridgeResponse),
                params={"from": from_version, "to": to, "tolerance": tolerance},
            )
        )

    def check(
        self,
        judge: str,
        rubric: str,
        items: Sequence[Mapping[str, Any]],
        *,
        judge_version: str | None = None,
        tolerance: float | None = None,
    ) -> models.CheckResponse:
        """POST a silent-change check: anchor items (`item_id`, `judge_score`) re-scored under
        the label they were stored with; in a pairwise cell, stored comparisons (`item_id`,
        `verdict`, optionally `verdict_swapped`) re-judged. `changed` says whether the
        corrected mean (the calibrated preference's) moved beyond the tolerance; the anchors
        are never overwritten."""
        body = with_options(
            {"items": [dict(i) for i in items]}, judge_version=judge_version, tolerance=tolerance
        )
        return self._send(
            Request(
                "POST",
                f"/v1/cells/{seg(judge)}/{seg(rubric)}/checks",
                model(models.CheckResponse),
                json=body,
                idempotent=False,
            )
        )

    def get_check(self, judge: str, rubric: str, check_id: str) -> models.CheckResponse:
        """GET a silent-change check by its id, as it was answered."""
        return self._send(
            Request(
                "GET",
                f"/v1/cells/{seg(judge)}/{seg(rubric)}/checks/{seg(check_id)}",
                model(models.CheckResponse),
            )
        )

    def judge_settings(self, judge: str) -> models.JudgeSettings:
        return self._send(Request("GET", f"/v1/judges/{seg(judge)}/settings", model(models.JudgeSettings)))

    def set_judge_settings(self, judge: str, *, on_version_mismatch: str) -> models.JudgeSettings:
        """PUT a judge's settings: `on_version_mismatch` is `warn` (the default) or `refuse`
        (409 for scores of a judge version with no calibration)."""
        return self._send(
            Request(
                "PUT",
                f"/v1/judges/{seg(judge)}/settings",
                model(models.JudgeSettings),
                json={"on_version_mismatch": on_version_mismatch},
            )
        )

    # Rubrics

    def rubrics(self) -> models.RubricsResponse:
        return self._send(Request("GET", "/v1/rubrics", model(models.RubricsResponse)))

    def put_rubric(self, rubric: str, min: float, max: float, description: str | None = None) -> models.RubricDto:
        """PUT a rubric's scale: references must lie in it, corrections are clipped to it."""
        body: dict[str, Any] = {"min": min, "max": max}
        if description is not None:
            body["description"] = description
        return self._send(Request("PUT", f"/v1/rubrics/{seg(rubric)}", model(models.RubricDto), json=body))

    # Webhooks

    def create_webhook(self, url: str, events: Sequence[str] | None = None) -> models.CreatedWebhook:
        """POST a webhook: alarms (`drift`, `fleet_alert`, `beta_canary`, `judge_changed`; all
        where `events` is empty) are posted to `url`, signed with the returned `secret` (shown
        this once)."""
        return self._send(Request("POST", "/v1/webhooks", model(models.CreatedWebhook), json={"url": url, "events": list(events or [])}))

    def webhooks(self) -> models.WebhooksResponse:
        return self._send(Request("GET", "/v1/webhooks", model(models.WebhooksResponse)))

    def delete_webhook(self, id: str) -> None:
        return self._send(Request("DELETE", f"/v1/webhooks/{seg(id)}", nothing))

    def ping_webhook(self, id: str) -> models.PingResponse:
        """Queue a test delivery (`type: ping`) to a webhook."""
        return self._send(Request("POST", f"/v1/webhooks/{seg(id)}/ping", model(models.PingResponse)))

    def webhook_deliveries(self, id: str, *, state: str | None = None, limit: int | None = None) -> models.DeliveriesResponse:
        """A webhook's delivery log, newest first (of one `state` where given)."""
        return self._send(
            Request("GET", f"/v1/webhooks/{seg(id)}/deliveries", model(models.DeliveriesResponse), params={"state": state, "limit": limit})
        )

    # Panels

    def create_panel(self, name: str, judges: Sequence[str]) -> models.PanelDto:
        """POST /v1/panels: several judges whose scores of an item are fused into one
        calibrated score. The panel's name then serves wherever a judge's does: train it with
        `start_training(name)`, and send items as {"scores": {judge: score, ...}}. A panel of
        pairwise judges (each with its verdicts of the same comparisons) trains with `auto`
        and rates runs whose rows carry {"verdicts": {judge: verdict, ...}}."""
        return self._send(
            Request(
                "POST",
                "/v1/panels",
                model(models.PanelDto),
                json={"name": name, "judges": list(judges)},
                idempotent=False,
            )
        )

    def panels(self) -> models.PanelsResponse:
        return self._send(Request("GET", "/v1/panels", model(models.PanelsResponse)))

    def panel(self, name: str) -> models.PanelDto:
        return self._send(Request("GET", f"/v1/panels/{seg(name)}", model(models.PanelDto)))

    def plan_panel(
        self,
        name: str,
        rubric: str,
        run_size: int,
        target_half_width: float,
        *,
        label_cost: float,
        costs: Mapping[str, float] | None = None,
        level: float | None = None,
    ) -> models.PanelPlanDto:
        """POST /v1/panels/{name}/plan: which judges to call. Every sub-panel's labels and cost
        for a run of `run_size` items to reach ±`target_half_width`, the cheapest, and the
        labels it saves against the best single judge (`costs` per member per item; others 1)."""
        body = with_options(
            {
                "rubric": rubric,
                "run_size": run_size,
                "target_half_width": target_half_width,
                "label_cost": label_cost,
            },
            costs=dict(costs) if costs is not None else None,
            level=level,
        )
        return self._send(Request("POST", f"/v1/panels/{seg(name)}/plan", model(models.PanelPlanDto), json=body))

    def delete_panel(self, name: str) -> None:
        """DELETE a panel's definition; its versions stay, serving again only under a panel of
        the same name and members."""
        return self._send(Request("DELETE", f"/v1/panels/{seg(name)}", nothing))

    # Training and versions

    def start_training(
        self,
        judge: str,
        method: str = "auto",
        *,
        options: Mapping[str, Any] | None = None,
        rubrics: Sequence[str] | None = None,
        judge_version: str | None = None,
        member_versions: Mapping[str, str | None] | None = None,
        covariates: Sequence[str] | None = None,
    ) -> models.JobDto:
        """POST /v1/judges/{judge}/calibrations: starts a job (202) and returns it; `train`
        waits for it. `judge_version` fits that version's anchors (default: the newest). A
        panel's `member_versions` names the judge version of a member's anchors to fit (None:
        its unversioned ones; default: the one its untagged requests are served by).
        `covariates` names covariates the anchors carry to fit beside the judge score (each
        kept where it lowers held-out error; the version's `covariates` reports them)."""
        body: dict[str, Any] = {"method": method}
        if options is not None:
            body["options"] = dict(options)
        if rubrics is not None:
            body["rubrics"] = list(rubrics)
        if judge_version is not None:
            body["judge_version"] = judge_version
        if member_versions is not None:
            body["member_versions"] = dict(member_versions)
        if covariates is not None:
            body["covariates"] = list(covariates)
        return self._send(
            Request(
                "POST",
                f"/v1/judges/{seg(judge)}/calibrations",
                model(models.JobDto),
                json=body,
                idempotent=False,
            )
        )

    def job(self, job_id: str) -> models.JobDto:
        return self._send(Request("GET", f"/v1/jobs/{seg(job_id)}", model(models.JobDto)))

    def cancel(self, job_id: str) -> models.JobDto:
        return self._send(Request("POST", f"/v1/jobs/{seg(job_id)}/cancel", model(models.JobDto)))

    def versions(self, judge: str, rubric: str) -> models.VersionsResponse:
        """GET a cell's calibrator versions, newest first, with their held-out figures."""
        return self._send(
            Request(
                "GET",
                f"/v1/cells/{seg(judge)}/{seg(rubric)}/calibrators",
                model(models.VersionsResponse),
            )
        )

    def preferences(self, judge: str, rubric: str) -> models.PreferencesResponse:
        """GET a pairwise cell's trained versions, newest first: the calibrated preference
        `auto` chose with every candidate's held-out figures, and the judge's biases beside
        the people's (first-shown wins, swap flips, longer-answer wins, each system's
        favouritism), each with a 95% interval. `frames.biases_frame` makes them a table."""
        return self._send(
            Request(
                "GET",
                f"/v1/cells/{seg(judge)}/{seg(rubric)}/preferences",
                model(models.PreferencesResponse),
            )
        )

    def activate(self, judge: str, rubric: str, version: int) -> models.VersionDto:
        return self._send(
            Request(
                "POST",
                f"/v1/cells/{seg(judge)}/{seg(rubric)}/calibrators/{int(version)}/activate",
                model(models.VersionDto),
            )
        )

    def agreement(
        self,
        judge: str,
        rubric: str,
        *,
        version: int | None = None,
        judge_version: str | None = None,
        group: str | None = None,
        top: int | None = None,
    ) -> models.AgreementResponse:
        """GET how well the judge agrees with the reference on a version's anchors (the
        active one's, `version`'s, or the newest of `judge_version`'s; one `group` only
        where given): the raw judge and the held-out corrected scores side by side
        (Pearson, Spearman, Kendall, and κs on a discrete scale, each with a 95% interval),
        the bias by judge level and by system, and the `top` largest disagreements.
        `frames.agreement_frames` makes them tables."""
        return self._send(
            Request(
                "GET",
                f"/v1/cells/{seg(judge)}/{seg(rubric)}/agreement",
                model(models.AgreementResponse),
                params={"version": version, "judge_version": judge_version, "group": group, "top": top},
            )
        )

    def report_svg(self, judge: str, rubric: str) -> str:
        return self._send(Request("GET", f"/v1/cells/{seg(judge)}/{seg(rubric)}/report.svg", text))

    # Corrections and run-level answers

    def correct(
        self,
        judge: str,
        rubric: str,
        scores: Sequence[float] | None = None,
        *,
        items: Sequence[Mapping[str, Any]] | None = None,
        version: int | None = None,
        judge_version: str | None = None,
    ) -> models.CorrectResponse:
        """POST /v1/correct: corrected scores with their intervals (`items` to get ids back;
        an item `{"score", "covariates"}` for a version trained with covariates), by the cell's
        active version or `version`. `judge_version` names the judge version
        that gave the scores: its own calibration serves them, else `warnings` says so."""
        body = with_options(
            {"judge": judge, "rubric": rubric, **scores_or_items(scores, items)},
            version=version,
            judge_version=judge_version,
        )
        return self._send(Request("POST", "/v1/correct", model(models.CorrectResponse), json=body))

    def estimate(
        self,
        judge: str,
        rubric: str,
        run: Any,
        *,
        group: str | None = None,
        level: float | None = None,
        version: int | None = None,
        target_half_width: float | None = None,
        judge_version: str | None = None,
        hold: Mapping[str, float] | None = None,
        assume_missing_at_random: bool | None = None,
        costs: Mapping[str, float] | None = None,
    ) -> models.EstimateResponse:
        """POST /v1/estimate: one run's de-biased mean with its interval. `run` is a list of
        judge scores, a list of items (`score`, optional `id`, `reference`, `cluster`,
        `covariates`), or the run's body; `group` the system that produced it; `version` a
        version of the cell instead of the active one; `target_half_width` asks how many labels
        would reach it; `hold` reads every item at these covariates (`{"length": 500}`: a
        length-controlled estimate, for a version trained with them). A panel's run whose
        members score its partial items differently from its complete ones (a judge that fails
        on hard items) is refused naming the member; `assume_missing_at_random=True` answers it
        anyway, for a member whose absence depends only on what the others scored. Items may
        carry `repeats` (further scores by the same judge version); with `target_half_width`,
        `costs={"judge": c, "label": c}` weighs re-asking the judge against labelling
        (`plan.design`)."""
        body = with_options(
            {"judge": judge, "rubric": rubric, **run_body(run, group)},
            level=level,
            version=version,
            target_half_width=target_half_width,
            judge_version=judge_version,
            hold=dict(hold) if hold is not None else None,
            assume_missing_at_random=assume_missing_at_random,
            costs=dict(costs) if costs is not None else None,
        )
        return self._send(Request("POST", "/v1/estimate", model(models.EstimateResponse), json=body))

    def compare(
        self,
        judge: str,
        rubric: str,
        a: Any,
        b: Any,
        *,
        group_a: str | None = None,
        group_b: str | None = None,
        level: float | None = None,
        estimand: str | None = None,
        version: int | None = None,
        target_half_width: float | None = None,
        judge_version_a: str | None = None,
        judge_version_b: str | None = None,
        hold: Mapping[str, float] | None = None,
        assume_missing_at_random: bool | None = None,
    ) -> models.CompareResponse:
        """POST /v1/compare: mean(A) − mean(B), de-biased, with its interval and p-value.
        Items with the same ids in both runs are paired. `version` and `target_half_width` as
        in `estimate`; runs scored by different judge versions (`judge_version_a`,
        `judge_version_b`) are each corrected by their own version's calibration; `hold` and
        `assume_missing_at_random` as in `estimate`, for both runs."""
        body = with_options(
            {
                "judge": judge,
                "rubric": rubric,
                "a": run_body(a, group_a, judge_version_a),
                "b": run_body(b, group_b, judge_version_b),
            },
            level=level,
            estimand=estimand,
            version=version,
            target_half_width=target_half_width,
            hold=dict(hold) if hold is not None else None,
            assume_missing_at_random=assume_missing_at_random,
        )
        return self._send(Request("POST", "/v1/compare", model(models.CompareResponse), json=body))

    def rank(
        self,
        judge: str,
        rubric: str,
        runs: Mapping[str, Any],
        *,
        groups: Mapping[str, str] | None = None,
        level: float | None = None,
        error: str | None = None,
        version: int | None = None,
        judge_versions: Mapping[str, str] | None = None,
        hold: Mapping[str, float] | None = None,
        assume_missing_at_random: bool | None = None,
    ) -> models.RankResponse:
        """POST /v1/rank: 2 to 50 runs (name -> scores, items or a run body) ranked by their
        de-biased means, with intervals for every pair that hold together, rank intervals and
        the runs tied with the top, for this one look. `groups` names each run's system;
        `version` as in `estimate`; `judge_versions` names the judge version that scored each
        run; `hold` and `assume_missing_at_random` as in `estimate`, for every run. To label
        and ask again, open a session (`open_rank_session`): its looks (`rank_look`) plan the
        labels and bind the runs."""
        runs_body = [
            {"name": name, **run_body(run, (groups or {}).get(name), (judge_versions or {}).get(name))}
            for name, run in runs.items()
        ]
        body = with_options(
            {"judge": judge, "rubric": rubric, "runs": runs_body},
            level=level,
            error=error,
            version=version,
            hold=dict(hold) if hold is not None else None,
            assume_missing_at_random=assume_missing_at_random,
        )
        return self._send(Request("POST", "/v1/rank", model(models.RankResponse), json=body))

    def open_rank_session(
        self,
        judge: str,
        rubric: str,
        rounds: int,
        *,
        level: float | None = None,
        error: str | None = None,
        seed: int | None = None,
        version: int | None = None,
    ) -> models.RankSessionDto:
        """POST /v1/rank/sessions: a ranking session of `rounds` looks, fixed now. Each
        look (`rank_look`) is round k of `rounds`, so the claims of every look hold together at
        `level`; the session keeps the label seed, every label seen and the items its plans
        drew, and refuses a look past the plan. The runs its looks see are bound to it: another
        session's look at them is refused (409)."""
        body = with_options(
            {"judge": judge, "rubric": rubric, "rounds": rounds},
            level=level,
            error=error,
            seed=seed,
            version=version,
        )
        return self._send(
            Request("POST", "/v1/rank/sessions", model(models.RankSessionDto), json=body)
        )

    def rank_session(self, session_id: str) -> models.RankSessionDto:
        """GET /v1/rank/sessions/{id}: the session's plan, looks taken and left, labels seen."""
        return self._send(
            Request("GET", f"/v1/rank/sessions/{seg(session_id)}", model(models.RankSessionDto))
        )

    def rank_look(
        self,
        session_id: str,
        runs: Mapping[str, Any],
        *,
        groups: Mapping[str, str] | None = None,
        labels: Mapping[str, Any] | None = None,
        judge_versions: Mapping[str, str] | None = None,
        assume_missing_at_random: bool | None = None,
    ) -> models.RankResponse:
        """POST /v1/rank/sessions/{id}/looks: the session's next look, `rank`'s answer with
        the session's round, level, error rate, label seed and version. Every label an earlier
        look carried must come again unchanged, and every label must be of an item a plan of
        the session drew (409 naming run and item otherwise); `labels` (`budget`, `min_gap`,
        `power`) asks which items to label for the next look; `assume_missing_at_random` as in
        `estimate`."""
        runs_body = [
            {"name": name, **run_body(run, (groups or {}).get(name), (judge_versions or {}).get(name))}
            for name, run in runs.items()
        ]
        body = with_options(
            {"runs": runs_body},
            labels=dict(labels) if labels is not None else None,
            assume_missing_at_random=assume_missing_at_random,
        )
        return self._send(
            Request(
                "POST",
                f"/v1/rank/sessions/{seg(session_id)}/looks",
                model(models.RankResponse),
                json=body,
            )
        )


FINISHED = frozenset({"succeeded", "failed", "cancelled"})


def finished(job: models.JobDto) -> bool:
    return job.state in FINISHED


def outcome(job: models.JobDto) -> list[models.JobVersionDto]:
    """The versions of a finished job, or `JobFailed`."""
    from .errors import JobFailed

    state = job.state
    if state != "succeeded":
        raise JobFailed(message=f"job {job.id} {state}: {job.error or 'no reason given'}", code=state)
    return list(job.versions)

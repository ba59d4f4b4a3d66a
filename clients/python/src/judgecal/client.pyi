# Generated from _core.py and client.py by clients/python/scripts/generate_stubs.py: do not edit.

from typing import Any, Callable, Iterable, Mapping, Sequence

import httpx

from . import models
from ._core import Settings
from .errors import JudgecalError as JudgecalError

Progress = Callable[[models.JobDto], None]


class Client:
    """A synchronous judgecal client.

    >>> jc = Client("http://127.0.0.1:8080")          # or JUDGECAL_URL / JUDGECAL_API_KEY
    >>> jc.upload_anchors("gpt-4o-mini", "coherence", [{"item_id": "a", "judge_score": 3, "reference_score": 4}])
    >>> jc.train("gpt-4o-mini")
    >>> jc.estimate("gpt-4o-mini", "coherence", [3.0, 4.5, 2.0]).interval
    """

    settings: Settings
    def __init__(self, base_url: str | None=None, api_key: str | None=None, *, timeout: float=120.0, retries: int=5, backoff: float=0.5, transport: httpx.BaseTransport | None=None) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> 'Client': ...
    def __exit__(self, *exc: object) -> None: ...
    def train(self, judge: str, method: str='auto', *, options: Mapping[str, Any] | None=None, rubrics: Sequence[str] | None=None, judge_version: str | None=None, member_versions: Mapping[str, str | None] | None=None, covariates: Sequence[str] | None=None, progress: bool | Progress=True, poll: float=0.5, timeout: float | None=None) -> list[models.JobVersionDto]:
        """Trains `judge`'s cells with `method` and waits: the versions the job made (raises
        `JobFailed` if it failed or was cancelled, `TimeoutError` after `timeout` seconds, when
        the job is cancelled too). `progress` prints the job's progress, or is called with
        each poll's job."""
        ...
    def health(self) -> models.Status:
        """GET /healthz: the process is up."""
        ...
    def ready(self) -> models.Status:
        """GET /readyz: the store answers; 503 (raised as `Unavailable`) while it does not."""
        ...
    def metrics(self) -> str:
        """GET /metrics: the Prometheus exposition, as text."""
        ...
    def upload_anchors(self, judge: str, rubric: str, anchors: Iterable[Mapping[str, Any]], *, replace: bool=False, judge_version: str | None=None) -> models.IngestResponse:
        """POST /v1/anchors with one cell's anchors (`item_id`, `judge_score`,
        `reference_score`, optional `group`, `rater`, `judge_version` and `covariates`, a
        dict of name -> number such as `{"length": 812}`). The batch is stored whole or
        refused whole (`InvalidInput`, whose `details` name each row and field); a retried
        batch counts as `unchanged`. `judge_version` labels every row that names none; a row
        of an item the cell already holds a reference for may leave `reference_score` out (a
        re-score by a new judge version: no new label)."""
        ...
    def upload_csv(self, csv: bytes | str, *, replace: bool=False) -> models.IngestResponse:
        """POST /v1/anchors as `text/csv`: columns `judge,rubric,item_id,judge_score,
        reference_score` and optionally `group`, `rater`, `judge_version` and one
        `covariate.<name>` column per covariate, any number of cells (an
        empty `reference_score` on a re-scored item takes the stored one)."""
        ...
    def upload_comparisons(self, judge: str, rubric: str, comparisons: Iterable[Mapping[str, Any]], *, replace: bool=False, judge_version: str | None=None) -> models.ComparisonIngestResponse:
        """POST /v1/comparisons with one cell's pairwise verdicts: each row has `item_id`,
        `a` and `b` (the two systems), `verdict` (`"a"`, `"b"`, `"tie"` or the probability
        that a is better), and optionally `verdict_swapped` (with b shown first, mapped back),
        `preference` (the people's), `rater` and `covariates`. Stored whole or refused whole
        (`InvalidInput` naming each row and field); a retry counts as `unchanged`; a row
        stored with other values, another pair or another preference for an item is a
        `Conflict` unless `replace`. A cell holds scores or comparisons, not both. The labelled
        ones calibrate `ratings`."""
        ...
    def upload_comparisons_csv(self, csv: bytes | str, *, replace: bool=False) -> models.ComparisonIngestResponse:
        """POST /v1/comparisons as `text/csv`: columns `judge,rubric,item_id,a,b,verdict` and
        optionally `verdict_swapped`, `preference`, `rater`, `judge_version` and one
        `covariate.<name>` column per covariate, any number of cells."""
        ...
    def ratings(self, judge: str, rubric: str, comparisons: Iterable[Mapping[str, Any]], *, baseline: str | None=None, level: float | None=None, control: Sequence[str] | None=None, judge_version: str | None=None, target_half_width: float | None=None) -> models.RatingsResponse:
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
        ...
    def cells(self) -> models.CellsResponse:
        """GET /v1/cells: every (judge, rubric) cell with its anchors and active version."""
        ...
    def anchors(self, judge: str, rubric: str, *, limit: int | None=None, cursor: str | None=None, judge_version: str | None=None) -> models.AnchorPageResponse:
        """GET one page of a cell's anchors (of `judge_version` only, when given);
        `next_cursor` fetches the next."""
        ...
    def delete_anchor(self, judge: str, rubric: str, item_id: str, *, judge_version: str | None=None) -> models.DeleteResponse:
        """DELETE an anchor item's row of `judge_version` (None: its unversioned row); no other
        row is touched."""
        ...
    def judge_versions(self, judge: str, rubric: str) -> models.JudgeVersionsResponse:
        """GET the judge versions a cell's anchors carry, with the calibration of each."""
        ...
    def rescore(self, judge: str, rubric: str, judge_version: str, *, from_version: str | None=None, limit: int | None=None) -> models.RescoreResponse:
        """GET the anchor items `judge_version` has not scored yet (re-score them and upload
        the scores without references), and how many shared items the bridge needs."""
        ...
    def bridge(self, judge: str, rubric: str, to: str, *, from_version: str | None=None, tolerance: float | None=None) -> models.BridgeResponse:
        """GET the bridge from judge version `from_version` (None: the unversioned anchors)
        to `to` on the items both scored: the raw and corrected shifts and a `verdict`
        (`carry_over`, `refit` or `more_items`)."""
        ...
    def check(self, judge: str, rubric: str, items: Sequence[Mapping[str, Any]], *, judge_version: str | None=None, tolerance: float | None=None) -> models.CheckResponse:
        """POST a silent-change check: anchor items (`item_id`, `judge_score`) re-scored under
        the label they were stored with; in a pairwise cell, stored comparisons (`item_id`,
        `verdict`, optionally `verdict_swapped`) re-judged. `changed` says whether the
        corrected mean (the calibrated preference's) moved beyond the tolerance; the anchors
        are never overwritten."""
        ...
    def get_check(self, judge: str, rubric: str, check_id: str) -> models.CheckResponse:
        """GET a silent-change check by its id, as it was answered."""
        ...
    def judge_settings(self, judge: str) -> models.JudgeSettings: ...
    def set_judge_settings(self, judge: str, *, on_version_mismatch: str) -> models.JudgeSettings:
        """PUT a judge's settings: `on_version_mismatch` is `warn` (the default) or `refuse`
        (409 for scores of a judge version with no calibration)."""
        ...
    def rubrics(self) -> models.RubricsResponse: ...
    def put_rubric(self, rubric: str, min: float, max: float, description: str | None=None) -> models.RubricDto:
        """PUT a rubric's scale: references must lie in it, corrections are clipped to it."""
        ...
    def create_webhook(self, url: str, events: Sequence[str] | None=None) -> models.CreatedWebhook:
        """POST a webhook: alarms (`drift`, `fleet_alert`, `beta_canary`, `judge_changed`; all
        where `events` is empty) are posted to `url`, signed with the returned `secret` (shown
        this once)."""
        ...
    def webhooks(self) -> models.WebhooksResponse: ...
    def delete_webhook(self, id: str) -> None: ...
    def ping_webhook(self, id: str) -> models.PingResponse:
        """Queue a test delivery (`type: ping`) to a webhook."""
        ...
    def webhook_deliveries(self, id: str, *, state: str | None=None, limit: int | None=None) -> models.DeliveriesResponse:
        """A webhook's delivery log, newest first (of one `state` where given)."""
        ...
    def create_panel(self, name: str, judges: Sequence[str]) -> models.PanelDto:
        """POST /v1/panels: several judges whose scores of an item are fused into one
        calibrated score. The panel's name then serves wherever a judge's does: train it with
        `start_training(name)`, and send items as {"scores": {judge: score, ...}}. A panel of
        pairwise judges (each with its verdicts of the same comparisons) trains with `auto`
        and rates runs whose rows carry {"verdicts": {judge: verdict, ...}}."""
        ...
    def panels(self) -> models.PanelsResponse: ...
    def panel(self, name: str) -> models.PanelDto: ...
    def plan_panel(self, name: str, rubric: str, run_size: int, target_half_width: float, *, label_cost: float, costs: Mapping[str, float] | None=None, level: float | None=None) -> models.PanelPlanDto:
        """POST /v1/panels/{name}/plan: which judges to call. Every sub-panel's labels and cost
        for a run of `run_size` items to reach ±`target_half_width`, the cheapest, and the
        labels it saves against the best single judge (`costs` per member per item; others 1)."""
        ...
    def delete_panel(self, name: str) -> None:
        """DELETE a panel's definition; its versions stay, serving again only under a panel of
        the same name and members."""
        ...
    def start_training(self, judge: str, method: str='auto', *, options: Mapping[str, Any] | None=None, rubrics: Sequence[str] | None=None, judge_version: str | None=None, member_versions: Mapping[str, str | None] | None=None, covariates: Sequence[str] | None=None) -> models.JobDto:
        """POST /v1/judges/{judge}/calibrations: starts a job (202) and returns it; `train`
        waits for it. `judge_version` fits that version's anchors (default: the newest). A
        panel's `member_versions` names the judge version of a member's anchors to fit (None:
        its unversioned ones; default: the one its untagged requests are served by).
        `covariates` names covariates the anchors carry to fit beside the judge score (each
        kept where it lowers held-out error; the version's `covariates` reports them)."""
        ...
    def job(self, job_id: str) -> models.JobDto: ...
    def cancel(self, job_id: str) -> models.JobDto: ...
    def versions(self, judge: str, rubric: str) -> models.VersionsResponse:
        """GET a cell's calibrator versions, newest first, with their held-out figures."""
        ...
    def preferences(self, judge: str, rubric: str) -> models.PreferencesResponse:
        """GET a pairwise cell's trained versions, newest first: the calibrated preference
        `auto` chose with every candidate's held-out figures, and the judge's biases beside
        the people's (first-shown wins, swap flips, longer-answer wins, each system's
        favouritism), each with a 95% interval. `frames.biases_frame` makes them a table."""
        ...
    def activate(self, judge: str, rubric: str, version: int) -> models.VersionDto: ...
    def agreement(self, judge: str, rubric: str, *, version: int | None=None, judge_version: str | None=None, group: str | None=None, top: int | None=None) -> models.AgreementResponse:
        """GET how well the judge agrees with the reference on a version's anchors (the
        active one's, `version`'s, or the newest of `judge_version`'s; one `group` only
        where given): the raw judge and the held-out corrected scores side by side
        (Pearson, Spearman, Kendall, and κs on a discrete scale, each with a 95% interval),
        the bias by judge level and by system, and the `top` largest disagreements.
        `frames.agreement_frames` makes them tables."""
        ...
    def report_svg(self, judge: str, rubric: str) -> str: ...
    def correct(self, judge: str, rubric: str, scores: Sequence[float] | None=None, *, items: Sequence[Mapping[str, Any]] | None=None, version: int | None=None, judge_version: str | None=None) -> models.CorrectResponse:
        """POST /v1/correct: corrected scores with their intervals (`items` to get ids back;
        an item `{"score", "covariates"}` for a version trained with covariates), by the cell's
        active version or `version`. `judge_version` names the judge version
        that gave the scores: its own calibration serves them, else `warnings` says so."""
        ...
    def estimate(self, judge: str, rubric: str, run: Any, *, group: str | None=None, level: float | None=None, version: int | None=None, target_half_width: float | None=None, judge_version: str | None=None, hold: Mapping[str, float] | None=None, assume_missing_at_random: bool | None=None, costs: Mapping[str, float] | None=None) -> models.EstimateResponse:
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
        ...
    def compare(self, judge: str, rubric: str, a: Any, b: Any, *, group_a: str | None=None, group_b: str | None=None, level: float | None=None, estimand: str | None=None, version: int | None=None, target_half_width: float | None=None, judge_version_a: str | None=None, judge_version_b: str | None=None, hold: Mapping[str, float] | None=None, assume_missing_at_random: bool | None=None) -> models.CompareResponse:
        """POST /v1/compare: mean(A) − mean(B), de-biased, with its interval and p-value.
        Items with the same ids in both runs are paired. `version` and `target_half_width` as
        in `estimate`; runs scored by different judge versions (`judge_version_a`,
        `judge_version_b`) are each corrected by their own version's calibration; `hold` and
        `assume_missing_at_random` as in `estimate`, for both runs."""
        ...
    def rank(self, judge: str, rubric: str, runs: Mapping[str, Any], *, groups: Mapping[str, str] | None=None, level: float | None=None, error: str | None=None, version: int | None=None, judge_versions: Mapping[str, str] | None=None, hold: Mapping[str, float] | None=None, assume_missing_at_random: bool | None=None) -> models.RankResponse:
        """POST /v1/rank: 2 to 50 runs (name -> scores, items or a run body) ranked by their
        de-biased means, with intervals for every pair that hold together, rank intervals and
        the runs tied with the top, for this one look. `groups` names each run's system;
        `version` as in `estimate`; `judge_versions` names the judge version that scored each
        run; `hold` and `assume_missing_at_random` as in `estimate`, for every run. To label
        and ask again, open a session (`open_rank_session`): its looks (`rank_look`) plan the
        labels and bind the runs."""
        ...
    def open_rank_session(self, judge: str, rubric: str, rounds: int, *, level: float | None=None, error: str | None=None, seed: int | None=None, version: int | None=None) -> models.RankSessionDto:
        """POST /v1/rank/sessions: a ranking session of `rounds` looks, fixed now. Each
        look (`rank_look`) is round k of `rounds`, so the claims of every look hold together at
        `level`; the session keeps the label seed, every label seen and the items its plans
        drew, and refuses a look past the plan. The runs its looks see are bound to it: another
        session's look at them is refused (409)."""
        ...
    def rank_session(self, session_id: str) -> models.RankSessionDto:
        """GET /v1/rank/sessions/{id}: the session's plan, looks taken and left, labels seen."""
        ...
    def rank_look(self, session_id: str, runs: Mapping[str, Any], *, groups: Mapping[str, str] | None=None, labels: Mapping[str, Any] | None=None, judge_versions: Mapping[str, str] | None=None, assume_missing_at_random: bool | None=None) -> models.RankResponse:
        """POST /v1/rank/sessions/{id}/looks: the session's next look, `rank`'s answer with
        the session's round, level, error rate, label seed and version. Every label an earlier
        look carried must come again unchanged, and every label must be of an item a plan of
        the session drew (409 naming run and item otherwise); `labels` (`budget`, `min_gap`,
        `power`) asks which items to label for the next look; `assume_missing_at_random` as in
        `estimate`."""
        ...


class AsyncClient:
    """The same calls as `Client`, each a coroutine: `await jc.estimate(...)`."""

    settings: Settings
    def __init__(self, base_url: str | None=None, api_key: str | None=None, *, timeout: float=120.0, retries: int=5, backoff: float=0.5, transport: httpx.AsyncBaseTransport | None=None) -> None: ...
    async def aclose(self) -> None: ...
    async def __aenter__(self) -> 'AsyncClient': ...
    async def __aexit__(self, *exc: object) -> None: ...
    async def train(self, judge: str, method: str='auto', *, options: Mapping[str, Any] | None=None, rubrics: Sequence[str] | None=None, judge_version: str | None=None, member_versions: Mapping[str, str | None] | None=None, covariates: Sequence[str] | None=None, progress: bool | Progress=False, poll: float=0.5, timeout: float | None=None) -> list[models.JobVersionDto]:
        """As `Client.train`, without blocking the event loop."""
        ...
    async def health(self) -> models.Status:
        """GET /healthz: the process is up."""
        ...
    async def ready(self) -> models.Status:
        """GET /readyz: the store answers; 503 (raised as `Unavailable`) while it does not."""
        ...
    async def metrics(self) -> str:
        """GET /metrics: the Prometheus exposition, as text."""
        ...
    async def upload_anchors(self, judge: str, rubric: str, anchors: Iterable[Mapping[str, Any]], *, replace: bool=False, judge_version: str | None=None) -> models.IngestResponse:
        """POST /v1/anchors with one cell's anchors (`item_id`, `judge_score`,
        `reference_score`, optional `group`, `rater`, `judge_version` and `covariates`, a
        dict of name -> number such as `{"length": 812}`). The batch is stored whole or
        refused whole (`InvalidInput`, whose `details` name each row and field); a retried
        batch counts as `unchanged`. `judge_version` labels every row that names none; a row
        of an item the cell already holds a reference for may leave `reference_score` out (a
        re-score by a new judge version: no new label)."""
        ...
    async def upload_csv(self, csv: bytes | str, *, replace: bool=False) -> models.IngestResponse:
        """POST /v1/anchors as `text/csv`: columns `judge,rubric,item_id,judge_score,
        reference_score` and optionally `group`, `rater`, `judge_version` and one
        `covariate.<name>` column per covariate, any number of cells (an
        empty `reference_score` on a re-scored item takes the stored one)."""
        ...
    async def upload_comparisons(self, judge: str, rubric: str, comparisons: Iterable[Mapping[str, Any]], *, replace: bool=False, judge_version: str | None=None) -> models.ComparisonIngestResponse:
        """POST /v1/comparisons with one cell's pairwise verdicts: each row has `item_id`,
        `a` and `b` (the two systems), `verdict` (`"a"`, `"b"`, `"tie"` or the probability
        that a is better), and optionally `verdict_swapped` (with b shown first, mapped back),
        `preference` (the people's), `rater` and `covariates`. Stored whole or refused whole
        (`InvalidInput` naming each row and field); a retry counts as `unchanged`; a row
        stored with other values, another pair or another preference for an item is a
        `Conflict` unless `replace`. A cell holds scores or comparisons, not both. The labelled
        ones calibrate `ratings`."""
        ...
    async def upload_comparisons_csv(self, csv: bytes | str, *, replace: bool=False) -> models.ComparisonIngestResponse:
        """POST /v1/comparisons as `text/csv`: columns `judge,rubric,item_id,a,b,verdict` and
        optionally `verdict_swapped`, `preference`, `rater`, `judge_version` and one
        `covariate.<name>` column per covariate, any number of cells."""
        ...
    async def ratings(self, judge: str, rubric: str, comparisons: Iterable[Mapping[str, Any]], *, baseline: str | None=None, level: float | None=None, control: Sequence[str] | None=None, judge_version: str | None=None, target_half_width: float | None=None) -> models.RatingsResponse:
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
        ...
    async def cells(self) -> models.CellsResponse:
        """GET /v1/cells: every (judge, rubric) cell with its anchors and active version."""
        ...
    async def anchors(self, judge: str, rubric: str, *, limit: int | None=None, cursor: str | None=None, judge_version: str | None=None) -> models.AnchorPageResponse:
        """GET one page of a cell's anchors (of `judge_version` only, when given);
        `next_cursor` fetches the next."""
        ...
    async def delete_anchor(self, judge: str, rubric: str, item_id: str, *, judge_version: str | None=None) -> models.DeleteResponse:
        """DELETE an anchor item's row of `judge_version` (None: its unversioned row); no other
        row is touched."""
        ...
    async def judge_versions(self, judge: str, rubric: str) -> models.JudgeVersionsResponse:
        """GET the judge versions a cell's anchors carry, with the calibration of each."""
        ...
    async def rescore(self, judge: str, rubric: str, judge_version: str, *, from_version: str | None=None, limit: int | None=None) -> models.RescoreResponse:
        """GET the anchor items `judge_version` has not scored yet (re-score them and upload
        the scores without references), and how many shared items the bridge needs."""
        ...
    async def bridge(self, judge: str, rubric: str, to: str, *, from_version: str | None=None, tolerance: float | None=None) -> models.BridgeResponse:
        """GET the bridge from judge version `from_version` (None: the unversioned anchors)
        to `to` on the items both scored: the raw and corrected shifts and a `verdict`
        (`carry_over`, `refit` or `more_items`)."""
        ...
    async def check(self, judge: str, rubric: str, items: Sequence[Mapping[str, Any]], *, judge_version: str | None=None, tolerance: float | None=None) -> models.CheckResponse:
        """POST a silent-change check: anchor items (`item_id`, `judge_score`) re-scored under
        the label they were stored with; in a pairwise cell, stored comparisons (`item_id`,
        `verdict`, optionally `verdict_swapped`) re-judged. `changed` says whether the
        corrected mean (the calibrated preference's) moved beyond the tolerance; the anchors
        are never overwritten."""
        ...
    async def get_check(self, judge: str, rubric: str, check_id: str) -> models.CheckResponse:
        """GET a silent-change check by its id, as it was answered."""
        ...
    async def judge_settings(self, judge: str) -> models.JudgeSettings: ...
    async def set_judge_settings(self, judge: str, *, on_version_mismatch: str) -> models.JudgeSettings:
        """PUT a judge's settings: `on_version_mismatch` is `warn` (the default) or `refuse`
        (409 for scores of a judge version with no calibration)."""
        ...
    async def rubrics(self) -> models.RubricsResponse: ...
    async def put_rubric(self, rubric: str, min: float, max: float, description: str | None=None) -> models.RubricDto:
        """PUT a rubric's scale: references must lie in it, corrections are clipped to it."""
        ...
    async def create_webhook(self, url: str, events: Sequence[str] | None=None) -> models.CreatedWebhook:
        """POST a webhook: alarms (`drift`, `fleet_alert`, `beta_canary`, `judge_changed`; all
        where `events` is empty) are posted to `url`, signed with the returned `secret` (shown
        this once)."""
        ...
    async def webhooks(self) -> models.WebhooksResponse: ...
    async def delete_webhook(self, id: str) -> None: ...
    async def ping_webhook(self, id: str) -> models.PingResponse:
        """Queue a test delivery (`type: ping`) to a webhook."""
        ...
    async def webhook_deliveries(self, id: str, *, state: str | None=None, limit: int | None=None) -> models.DeliveriesResponse:
        """A webhook's delivery log, newest first (of one `state` where given)."""
        ...
    async def create_panel(self, name: str, judges: Sequence[str]) -> models.PanelDto:
        """POST /v1/panels: several judges whose scores of an item are fused into one
        calibrated score. The panel's name then serves wherever a judge's does: train it with
        `start_training(name)`, and send items as {"scores": {judge: score, ...}}. A panel of
        pairwise judges (each with its verdicts of the same comparisons) trains with `auto`
        and rates runs whose rows carry {"verdicts": {judge: verdict, ...}}."""
        ...
    async def panels(self) -> models.PanelsResponse: ...
    async def panel(self, name: str) -> models.PanelDto: ...
    async def plan_panel(self, name: str, rubric: str, run_size: int, target_half_width: float, *, label_cost: float, costs: Mapping[str, float] | None=None, level: float | None=None) -> models.PanelPlanDto:
        """POST /v1/panels/{name}/plan: which judges to call. Every sub-panel's labels and cost
        for a run of `run_size` items to reach ±`target_half_width`, the cheapest, and the
        labels it saves against the best single judge (`costs` per member per item; others 1)."""
        ...
    async def delete_panel(self, name: str) -> None:
        """DELETE a panel's definition; its versions stay, serving again only under a panel of
        the same name and members."""
        ...
    async def start_training(self, judge: str, method: str='auto', *, options: Mapping[str, Any] | None=None, rubrics: Sequence[str] | None=None, judge_version: str | None=None, member_versions: Mapping[str, str | None] | None=None, covariates: Sequence[str] | None=None) -> models.JobDto:
        """POST /v1/judges/{judge}/calibrations: starts a job (202) and returns it; `train`
        waits for it. `judge_version` fits that version's anchors (default: the newest). A
        panel's `member_versions` names the judge version of a member's anchors to fit (None:
        its unversioned ones; default: the one its untagged requests are served by).
        `covariates` names covariates the anchors carry to fit beside the judge score (each
        kept where it lowers held-out error; the version's `covariates` reports them)."""
        ...
    async def job(self, job_id: str) -> models.JobDto: ...
    async def cancel(self, job_id: str) -> models.JobDto: ...
    async def versions(self, judge: str, rubric: str) -> models.VersionsResponse:
        """GET a cell's calibrator versions, newest first, with their held-out figures."""
        ...
    async def preferences(self, judge: str, rubric: str) -> models.PreferencesResponse:
        """GET a pairwise cell's trained versions, newest first: the calibrated preference
        `auto` chose with every candidate's held-out figures, and the judge's biases beside
        the people's (first-shown wins, swap flips, longer-answer wins, each system's
        favouritism), each with a 95% interval. `frames.biases_frame` makes them a table."""
        ...
    async def activate(self, judge: str, rubric: str, version: int) -> models.VersionDto: ...
    async def agreement(self, judge: str, rubric: str, *, version: int | None=None, judge_version: str | None=None, group: str | None=None, top: int | None=None) -> models.AgreementResponse:
        """GET how well the judge agrees with the reference on a version's anchors (the
        active one's, `version`'s, or the newest of `judge_version`'s; one `group` only
        where given): the raw judge and the held-out corrected scores side by side
        (Pearson, Spearman, Kendall, and κs on a discrete scale, each with a 95% interval),
        the bias by judge level and by system, and the `top` largest disagreements.
        `frames.agreement_frames` makes them tables."""
        ...
    async def report_svg(self, judge: str, rubric: str) -> str: ...
    async def correct(self, judge: str, rubric: str, scores: Sequence[float] | None=None, *, items: Sequence[Mapping[str, Any]] | None=None, version: int | None=None, judge_version: str | None=None) -> models.CorrectResponse:
        """POST /v1/correct: corrected scores with their intervals (`items` to get ids back;
        an item `{"score", "covariates"}` for a version trained with covariates), by the cell's
        active version or `version`. `judge_version` names the judge version
        that gave the scores: its own calibration serves them, else `warnings` says so."""
        ...
    async def estimate(self, judge: str, rubric: str, run: Any, *, group: str | None=None, level: float | None=None, version: int | None=None, target_half_width: float | None=None, judge_version: str | None=None, hold: Mapping[str, float] | None=None, assume_missing_at_random: bool | None=None, costs: Mapping[str, float] | None=None) -> models.EstimateResponse:
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
        ...
    async def compare(self, judge: str, rubric: str, a: Any, b: Any, *, group_a: str | None=None, group_b: str | None=None, level: float | None=None, estimand: str | None=None, version: int | None=None, target_half_width: float | None=None, judge_version_a: str | None=None, judge_version_b: str | None=None, hold: Mapping[str, float] | None=None, assume_missing_at_random: bool | None=None) -> models.CompareResponse:
        """POST /v1/compare: mean(A) − mean(B), de-biased, with its interval and p-value.
        Items with the same ids in both runs are paired. `version` and `target_half_width` as
        in `estimate`; runs scored by different judge versions (`judge_version_a`,
        `judge_version_b`) are each corrected by their own version's calibration; `hold` and
        `assume_missing_at_random` as in `estimate`, for both runs."""
        ...
    async def rank(self, judge: str, rubric: str, runs: Mapping[str, Any], *, groups: Mapping[str, str] | None=None, level: float | None=None, error: str | None=None, version: int | None=None, judge_versions: Mapping[str, str] | None=None, hold: Mapping[str, float] | None=None, assume_missing_at_random: bool | None=None) -> models.RankResponse:
        """POST /v1/rank: 2 to 50 runs (name -> scores, items or a run body) ranked by their
        de-biased means, with intervals for every pair that hold together, rank intervals and
        the runs tied with the top, for this one look. `groups` names each run's system;
        `version` as in `estimate`; `judge_versions` names the judge version that scored each
        run; `hold` and `assume_missing_at_random` as in `estimate`, for every run. To label
        and ask again, open a session (`open_rank_session`): its looks (`rank_look`) plan the
        labels and bind the runs."""
        ...
    async def open_rank_session(self, judge: str, rubric: str, rounds: int, *, level: float | None=None, error: str | None=None, seed: int | None=None, version: int | None=None) -> models.RankSessionDto:
        """POST /v1/rank/sessions: a ranking session of `rounds` looks, fixed now. Each
        look (`rank_look`) is round k of `rounds`, so the claims of every look hold together at
        `level`; the session keeps the label seed, every label seen and the items its plans
        drew, and refuses a look past the plan. The runs its looks see are bound to it: another
        session's look at them is refused (409)."""
        ...
    async def rank_session(self, session_id: str) -> models.RankSessionDto:
        """GET /v1/rank/sessions/{id}: the session's plan, looks taken and left, labels seen."""
        ...
    async def rank_look(self, session_id: str, runs: Mapping[str, Any], *, groups: Mapping[str, str] | None=None, labels: Mapping[str, Any] | None=None, judge_versions: Mapping[str, str] | None=None, assume_missing_at_random: bool | None=None) -> models.RankResponse:
        """POST /v1/rank/sessions/{id}/looks: the session's next look, `rank`'s answer with
        the session's round, level, error rate, label seed and version. Every label an earlier
        look carried must come again unchanged, and every label must be of an item a plan of
        the session drew (409 naming run and item otherwise); `labels` (`budget`, `min_gap`,
        `power`) asks which items to label for the next look; `assume_missing_at_random` as in
        `estimate`."""
        ...


__all__ = ["AsyncClient", "Client", "JudgecalError"]

# Generated from judgecal's openapi.yaml by clients/python/scripts/generate_models.py: do not edit.

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, RootModel, constr


class AlarmKind(Enum):
    """
    An alarm's type: the `type` of its body and what a hook's `events` list.
    """

    drift = 'drift'
    fleet_alert = 'fleet_alert'
    beta_canary = 'beta_canary'
    judge_changed = 'judge_changed'
    ping = 'ping'


class Covariates(RootModel[float]):
    root: float = Field(..., ge=-1000000000000.0, le=1000000000000.0)


class AnchorDto(BaseModel):
    covariates: (
        dict[
            constr(pattern=r'^[A-Za-z0-9][A-Za-z0-9._:-]*$', min_length=1, max_length=64),
            Covariates,
        ]
        | None
    ) = Field(None, examples=[{'length': 812}], max_length=16)
    """
    Optional numeric inputs beside the judge score, by name (a response's length in tokens, its count of markdown headers). A calibration trained with `covariates` corrects at the judge score and these values; in CSV, one column `covariate.<name>` each (empty: not given).
    """
    group: str | None = Field(
        None,
        examples=['BART'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    """
    Optional: the system (model) whose output was judged, named like judges. Versions then measure how the judge's bias varies between systems, and run-level answers account for it.
    """
    item_id: str = Field(
        ...,
        examples=['story-17'],
        max_length=256,
        min_length=1,
        pattern='^[^\\u0000-\\u001F\\u007F]+$',
    )
    """
    The item's id: 1 to 256 characters, no control characters; one anchor per item, cell and judge version. Stored in Unicode's composed form (NFC); an uploaded id with an invisible character, a compatibility form (full-width letters, a non-breaking space), a dash that looks like '-', or a leading or trailing space is refused (422).
    """
    judge_score: float = Field(..., examples=[3.25])
    """
    The LLM judge's score.
    """
    judge_version: str | None = Field(
        None,
        examples=['gpt-4o-2024-08-06+prompt:9f2c1a'],
        max_length=128,
        min_length=1,
        pattern='^[^\\u0000-\\u001F\\u007F-\\u009F\\s]([^\\u0000-\\u001F\\u007F-\\u009F]*[^\\u0000-\\u001F\\u007F-\\u009F\\s])?$',
    )
    """
    The judge version that gave the scores: the platform's own label (model snapshot, a hash of the prompt template, decoding settings). Leave it out for unversioned scores.
    """
    rater: str | None = Field(
        None,
        examples=['labeller-7'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    """
    Optional: who labelled the reference (the labeller or labelling session), named like judges. The drift alarm treats each rater as one independent unit across batches (a rater's anchors may miss together); rows naming none count their upload batch as one.
    """
    reference_score: float = Field(..., examples=[4.0])
    """
    The trusted score; inside the rubric's scale (1–5 unless set with PUT /v1/rubrics).
    """
    repeats: list[float] | None = None
    """
    Further scores of the item by the same judge version; absent where it has none.
    """


class AnchorPageResponse(BaseModel):
    anchors: list[AnchorDto]
    """
    In (item_id, judge_version) order.
    """
    next_cursor: str | None = None
    """
    Pass as `cursor` for the next page; absent on the last page.
    """


class AnchorRow(BaseModel):
    """
    One uploaded anchor row.
    """

    covariates: (
        dict[
            constr(pattern=r'^[A-Za-z0-9][A-Za-z0-9._:-]*$', min_length=1, max_length=64),
            Covariates,
        ]
        | None
    ) = Field(None, examples=[{'length': 812}], max_length=16)
    """
    Optional numeric inputs beside the judge score, by name (a response's length in tokens, its count of markdown headers). A calibration trained with `covariates` corrects at the judge score and these values; in CSV, one column `covariate.<name>` each (empty: not given).
    """
    group: str | None = Field(
        None,
        examples=['BART'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    """
    Optional: the system (model) whose output was judged, named like judges. Versions then measure how the judge's bias varies between systems, and run-level answers account for it.
    """
    item_id: str = Field(
        ...,
        examples=['story-17'],
        max_length=256,
        min_length=1,
        pattern='^[^\\u0000-\\u001F\\u007F]+$',
    )
    """
    The item's id: 1 to 256 characters, no control characters; one anchor per item, cell and judge version. Stored in Unicode's composed form (NFC); an uploaded id with an invisible character, a compatibility form (full-width letters, a non-breaking space), a dash that looks like '-', or a leading or trailing space is refused (422).
    """
    judge_score: float = Field(..., examples=[3.25], ge=-1000000000.0, le=1000000000.0)
    """
    The LLM judge's score; a finite number within ±1e9.
    """
    judge_version: str | None = Field(
        None,
        examples=['gpt-4o-2024-08-06+prompt:9f2c1a'],
        max_length=128,
        min_length=1,
        pattern='^[^\\u0000-\\u001F\\u007F-\\u009F\\s]([^\\u0000-\\u001F\\u007F-\\u009F]*[^\\u0000-\\u001F\\u007F-\\u009F\\s])?$',
    )
    """
    The judge version that gave the scores: the platform's own label (model snapshot, a hash of the prompt template, decoding settings). Leave it out for unversioned scores.
    """
    rater: str | None = Field(
        None,
        examples=['labeller-7'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    """
    Optional: who labelled the reference (the labeller or labelling session), named like judges. The drift alarm treats each rater as one independent unit across batches (a rater's anchors may miss together); rows naming none count their upload batch as one.
    """
    reference_score: float | None = Field(None, examples=[4.0])
    """
    The trusted score; inside the rubric's scale (1–5 unless set with PUT /v1/rubrics).
    Leave it out (in CSV, empty) on an item the cell already holds a reference for (an
    anchor item re-scored by a new judge version): the stored reference is used, and its
    group when the row names none. An item has one reference whichever version scored it.
    """
    repeats: list[float] | None = Field(None, examples=[[3.0, 3.5]], max_length=100)
    """
    Further scores of the item by the same judge version (the judge asked again), at most
    100; in CSV one column of scores separated by `;`, e.g. `3;4`. They measure the judge's
    repeat (test–retest) noise, shown by the agreement report and used when runs carry
    repeats; `judge_score` alone is what the corrector is fitted on. A row's own: a
    re-scored row does not take its item's.
    """


class BridgeShift(BaseModel):
    """
    A mean shift with its interval.
    """

    hi: float
    lo: float
    """
    The (1 − 2α) interval: both one-sided tests at α.
    """
    mean: float
    se: float


class CalibrationCandidateDto(BaseModel):
    """
    One candidate of the calibrated preference with its held-out figures.
    """

    accuracy: float
    """
    Held-out share whose more likely side people preferred.
    """
    inputs: str
    log_loss: float
    """
    Held-out (5-fold) mean log-loss on the cell's labelled comparisons, in nats.
    """


class CellDto(BaseModel):
    anchor_count: int
    comparison_count: int
    """
    Its pairwise comparisons (`POST /v1/comparisons`); a cell holds these or anchors.
    """
    judge: str
    rubric: str
    updated_at: str
    """
    When an anchor of the cell last changed (RFC 3339).
    """


class CellsResponse(BaseModel):
    cells: list[CellDto]


class Verdict1(Enum):
    """
    In a pairwise cell: the judge's new verdict on the stored comparison, a shown first ("a", "b", "tie" or the probability that a is better).
    """

    a = 'a'
    b = 'b'
    tie = 'tie'


class Verdict2(RootModel[float]):
    root: float = Field(..., examples=['a'], ge=0.0, le=1.0)
    """
    In a pairwise cell: the judge's new verdict on the stored comparison, a shown first ("a", "b", "tie" or the probability that a is better).
    """


class VerdictSwapped(Enum):
    """
    In a pairwise cell, optional: the new verdict with b shown first, already mapped back.
    """

    a = 'a'
    b = 'b'
    tie = 'tie'


class VerdictSwapped1(RootModel[float]):
    root: float = Field(..., examples=['a'], ge=0.0, le=1.0)
    """
    In a pairwise cell, optional: the new verdict with b shown first, already mapped back.
    """


class CheckItem(BaseModel):
    """
    One re-scored anchor item (`judge_score`), or in a pairwise cell one re-judged comparison
    (`verdict`, and `verdict_swapped` where the judge was asked in both orders).
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    item_id: str = Field(
        ...,
        examples=['story-17'],
        max_length=256,
        min_length=1,
        pattern='^[^\\u0000-\\u001F\\u007F]+$',
    )
    """
    The item's id: 1 to 256 characters, no control characters; one anchor per item, cell and judge version. Stored in Unicode's composed form (NFC); an uploaded id with an invisible character, a compatibility form (full-width letters, a non-breaking space), a dash that looks like '-', or a leading or trailing space is refused (422).
    """
    judge_score: float | None = Field(None, examples=[3.0])
    """
    The judge's new score of the anchor item (a cell of judge scores).
    """
    verdict: Verdict1 | Verdict2 | None = Field(None, examples=['a'])
    """
    In a pairwise cell: the judge's new verdict on the stored comparison, a shown first ("a", "b", "tie" or the probability that a is better).
    """
    verdict_swapped: VerdictSwapped | VerdictSwapped1 | None = Field(
        None, examples=['a']
    )
    """
    In a pairwise cell, optional: the new verdict with b shown first, already mapped back.
    """


class CheckRequest(BaseModel):
    model_config = ConfigDict(
        extra='forbid',
    )
    items: list[CheckItem] = Field(..., min_length=1)
    """
    Anchor items of the cell, re-scored now.
    """
    judge_version: str | None = Field(
        None,
        examples=['gpt-4o-2024-08-06+prompt:9f2c1a'],
        max_length=128,
        min_length=1,
        pattern='^[^\\u0000-\\u001F\\u007F-\\u009F\\s]([^\\u0000-\\u001F\\u007F-\\u009F]*[^\\u0000-\\u001F\\u007F-\\u009F\\s])?$',
    )
    """
    The judge version that gave the scores: the platform's own label (model snapshot, a hash of the prompt template, decoding settings). Leave it out for unversioned scores.
    """
    tolerance: float | None = Field(None, ge=0.0, gt=0.0)
    """
    As for the bridge (default: 2.5% of the scale width).
    """


class CoefficientDto(BaseModel):
    input: str
    """
    `length` or `log(length)`.
    """
    per_sd: float
    per_sd_hi: float
    per_sd_lo: float
    per_unit: float


class Hold(RootModel[float]):
    root: float = Field(..., ge=-1000000000000.0, le=1000000000000.0)


class ComparisonCellDto(BaseModel):
    comparison_count: int
    """
    The cell's comparisons after this upload, of every judge version.
    """
    inserted: int = Field(..., ge=0)
    judge: str
    judge_version: str | None = None
    """
    The judge version of these rows; absent for unversioned ones.
    """
    labelled: int = Field(..., ge=0)
    replaced: int = Field(..., ge=0)
    rubric: str
    unchanged: int = Field(..., ge=0)


class ComparisonIngestResponse(BaseModel):
    cells: list[ComparisonCellDto]
    inserted: int = Field(..., ge=0)
    """
    New comparisons stored.
    """
    labelled: int = Field(..., ge=0)
    """
    Comparisons stored before without a preference that this upload labelled: the same
    verdicts sent again with the people's preference.
    """
    replaced: int = Field(..., ge=0)
    """
    Comparisons overwritten (only with `replace=true`).
    """
    unchanged: int = Field(..., ge=0)
    """
    Comparisons already stored with the same values (a retried upload is safe).
    """


class Preference(Enum):
    """
    Optional: the people's preference ("a", "b", "tie", or a share of raters preferring a). A row without it is an unlabelled verdict, stored for later labels; an item has one preference whichever judge version judged it, and a later row's preference labels the item's rows stored without one.
    """

    a = 'a'
    b = 'b'
    tie = 'tie'


class Preference1(RootModel[float]):
    root: float = Field(..., examples=['a'], ge=0.0, le=1.0)
    """
    Optional: the people's preference ("a", "b", "tie", or a share of raters preferring a). A row without it is an unlabelled verdict, stored for later labels; an item has one preference whichever judge version judged it, and a later row's preference labels the item's rows stored without one.
    """


class Verdict3(Enum):
    """
    The judge's verdict, a shown first: "a", "b", "tie", or the probability that a's answer is the better (a judge's log-probabilities). A tie counts one half for each side.
    """

    a = 'a'
    b = 'b'
    tie = 'tie'


class Verdict4(RootModel[float]):
    root: float = Field(..., examples=['a'], ge=0.0, le=1.0)
    """
    The judge's verdict, a shown first: "a", "b", "tie", or the probability that a's answer is the better (a judge's log-probabilities). A tie counts one half for each side.
    """


class VerdictSwapped2(Enum):
    """
    Optional: the judge's verdict with b shown first, already mapped back ("a" still means a). Where the two orders disagree the judge favours a position.
    """

    a = 'a'
    b = 'b'
    tie = 'tie'


class VerdictSwapped3(RootModel[float]):
    root: float = Field(..., examples=['a'], ge=0.0, le=1.0)
    """
    Optional: the judge's verdict with b shown first, already mapped back ("a" still means a). Where the two orders disagree the judge favours a position.
    """


class ComparisonRow(BaseModel):
    """
    One comparison: the judge's verdict on system a's answer against system b's, to one prompt.
    """

    a: str = Field(
        ...,
        examples=['BART'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    """
    A system (model) whose answer was compared, named like judges.
    """
    b: str = Field(
        ...,
        examples=['BART'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    """
    A system (model) whose answer was compared, named like judges.
    """
    covariates: (
        dict[
            constr(pattern=r'^[A-Za-z0-9][A-Za-z0-9._:-]*$', min_length=1, max_length=64),
            Covariates,
        ]
        | None
    ) = Field(None, examples=[{'length': 812}], max_length=16)
    """
    Optional numeric inputs beside the judge score, by name (a response's length in tokens, its count of markdown headers). A calibration trained with `covariates` corrects at the judge score and these values; in CSV, one column `covariate.<name>` each (empty: not given).
    """
    item_id: str = Field(
        ...,
        examples=['story-17'],
        max_length=256,
        min_length=1,
        pattern='^[^\\u0000-\\u001F\\u007F]+$',
    )
    """
    The item's id: 1 to 256 characters, no control characters; one anchor per item, cell and judge version. Stored in Unicode's composed form (NFC); an uploaded id with an invisible character, a compatibility form (full-width letters, a non-breaking space), a dash that looks like '-', or a leading or trailing space is refused (422).
    """
    preference: Preference | Preference1 | None = Field(None, examples=['a'])
    """
    Optional: the people's preference ("a", "b", "tie", or a share of raters preferring a). A row without it is an unlabelled verdict, stored for later labels; an item has one preference whichever judge version judged it, and a later row's preference labels the item's rows stored without one.
    """
    rater: str | None = Field(
        None,
        examples=['labeller-7'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    """
    Optional: who gave the preference, named like judges. Ratings and win rates count raters, not labels, as the independent units (one rater's taste moves all of their labels); a label naming none is a rater of its own.
    """
    verdict: Verdict3 | Verdict4 = Field(..., examples=['a'])
    """
    The judge's verdict, a shown first: "a", "b", "tie", or the probability that a's answer is the better (a judge's log-probabilities). A tie counts one half for each side.
    """
    verdict_swapped: VerdictSwapped2 | VerdictSwapped3 | None = Field(
        None, examples=['a']
    )
    """
    Optional: the judge's verdict with b shown first, already mapped back ("a" still means a). Where the two orders disagree the judge favours a position.
    """


class ConsideredDto(BaseModel):
    inputs: list[str]
    """
    The inputs beside the judge score; empty for the judge alone.
    """
    mae: float
    mse: float


class ControlDto(BaseModel):
    """
    A controlled covariate's coefficient, with its interval at `level`.
    """

    coefficient: float
    """
    Log-odds of people preferring a per unit of a's covariate value.
    """
    covariate: str
    interval: list[float] = Field(..., max_length=2, min_length=2)


class CorrectScores(BaseModel):
    model_config = ConfigDict(
        extra='forbid',
    )
    judge: str = Field(
        ...,
        examples=['gpt-4o-mini'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    judge_version: str | None = Field(
        None,
        examples=['gpt-4o-2024-08-06+prompt:9f2c1a'],
        max_length=128,
        min_length=1,
        pattern='^[^\\u0000-\\u001F\\u007F-\\u009F\\s]([^\\u0000-\\u001F\\u007F-\\u009F]*[^\\u0000-\\u001F\\u007F-\\u009F\\s])?$',
    )
    """
    The judge version that gave the scores: the platform's own label (model snapshot, a hash of the prompt template, decoding settings). Leave it out for unversioned scores.
    """
    rubric: str = Field(
        ...,
        examples=['coherence'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    scores: list[float] = Field(..., examples=[[2.5, 3.0]], min_length=1)
    """
    Raw judge scores.
    """
    version: int | None = Field(None, ge=1)
    """
    A version of the cell to use instead of the active one.
    """


class CorrectedDto(BaseModel):
    """
    One corrected score. Which fields appear depends on the version's `method`: every method
    gives `predictive` (where the version has intervals); `bayes` also gives `credible`;
    `flow` gives `sigma` and `review`.
    """

    corrected: float
    """
    bayes: the posterior mean of alpha + beta·judge_score; flow: the mean over the
    MC-dropout passes; quantile_map: the reference quantile at the judge score's level;
    identity: the judge score.
    """
    credible: list[float] | None = None
    """
    bayes: 95% credible interval of the corrected (mean) score.
    """
    id: str | None = None
    """
    The item's id, when the request gave `items`.
    """
    judge_score: float
    """
    The raw judge score; for a panel, the fused score of the members' scores (what the
    version's corrector read, or the sub-panel's score where members were missing).
    """
    layer_score: float | None = None
    """
    A version trained with covariates: the layer's score of the judge score and the item's
    covariates (the reference expected there, before the corrector), which the corrector read.
    """
    members: list[str] | None = None
    """
    A panel item that some of the served members did not score: the members it was
    corrected from (their sub-panel's fit, with its own wider intervals).
    """
    outside_anchors: bool | None = None
    """
    True where the score lies outside the judge scores the version was trained on (but
    within one range width of them; farther is refused): the correction extrapolates
    (bayes) or holds the end value, and its interval was not measured there.
    """
    predictive: list[float] | None = None
    """
    95% interval for a new item's reference score. bayes: the posterior predictive (adds
    the rubric's noise sigma); every other method: the corrected score plus the band of
    held-out residuals (reference − corrected) in the judge score's bin, which the version
    lists under `intervals` with how often it covered anchors the fit did not see.
    """
    review: bool | None = None
    """
    flow: sigma is above the cell's review threshold; route the item to a person.
    """
    sigma: float | None = None
    """
    flow: sd of the corrected score over the MC-dropout passes (the flow's uncertainty
    about its own map, not the reference's noise).
    """


class Costs(BaseModel):
    """
    What a judge call and a label cost, in any one unit.
    """

    judge: float = Field(..., ge=0.0)
    """
    One more score of one item by the judge.
    """
    label: float = Field(..., ge=0.0)
    """
    One item labelled by people.
    """


class CovariateInputDto(BaseModel):
    centre: float
    knot: float | None = None
    """
    A hinge's knot, in log units (a quantile of the anchors' log values).
    """
    name: str
    range: list[float] | None = Field(None, max_length=2, min_length=2)
    """
    The anchors' smallest and largest raw value: a request's value outside it is corrected
    with the warning `covariate_outside_anchors`, one more than the range's width beyond it
    refused (absent for versions trained before it was kept).
    """
    scale: float
    transform: str
    """
    `identity`, `log`, or `hinge`: how far the log lies past `knot` (0 below it), which
    beside the log and the other knots makes a piecewise-linear term in the log.
    """


class CovariateLayerDto(BaseModel):
    """
    How a version trained with covariates reads an item: the reference's posterior mean at the
    judge score and the covariates it kept (the layer's score), which its corrector then reads.
    Every held-out figure of the version is of that two-step correction.
    """

    coefficients: list[CoefficientDto]
    """
    Each kept covariate's coefficient: the reference's change per sd of its transformed
    value at a fixed judge score, with its 95% credible interval, and per unit of the
    transformed value. A judge that rewards length beyond what people do has a negative
    one: a longer answer of the same judge score is worth less to people.
    """
    considered: list[ConsideredDto]
    """
    The candidates compared per rubric on cross-fitted anchors (5 folds): the judge alone
    and each covariate absent, raw, logged, or logged with hinges at the log's quartiles
    or at five of its quantiles (piecewise linear); of those within 1% of the lowest
    held-out MAE, the one with the fewest inputs is served.
    """
    inputs: list[CovariateInputDto]
    """
    The covariates kept, each with its transform (`identity`, `log`, `hinge`) and the anchors'
    mean and sd of the transformed value, which standardise it. Empty where none lowered
    held-out error: the layer is then a linear map of the judge score alone.
    """
    judge_weight: float
    """
    The judge score's coefficient (reference units per judge-score unit) with its 95%
    credible interval, at fixed covariates.
    """
    judge_weight_hi: float
    judge_weight_lo: float


class CoverageDto(BaseModel):
    checked: int
    """
    Anchors checked (a flow skips judge scores far outside its anchors).
    """
    inside: int
    """
    Of those, inside the interval.
    """
    share: float
    """
    inside / checked.
    """
    version: int
    """
    The active version the anchors were checked against.
    """


class DeleteResponse(BaseModel):
    anchor_count: int
    """
    The cell's anchors after the deletion.
    """


class DeliveryDto(BaseModel):
    attempts: int
    created_at: str
    delivered_at: str | None = None
    event_id: str
    """
    The alarm's id: the `webhook-id` header of every attempt, the receiver's idempotency key.
    """
    id: str
    last_error: str | None = None
    last_status: int | None = None
    """
    The receiver's HTTP status at the last attempt, where it answered.
    """
    next_attempt_at: str | None = None
    """
    When a pending delivery is next sent.
    """
    payload: dict[str, Any]
    """
    The body as sent.
    """
    state: str
    """
    pending (queued, or failed and waiting for its next attempt), delivered, failed (its
    attempts ran out) or cancelled (the webhook was deleted).
    """
    type: str


class Design(BaseModel):
    """
    One way to reach a run's target: every item scored `repeats` times and `labels` of them
    labelled at random.
    """

    cost: float
    """
    What it costs beyond what the run has: (repeats − the run's) judge calls per item, and
    every label.
    """
    labels: int = Field(..., ge=0)
    repeats: int = Field(..., ge=0)


class DesignDto(BaseModel):
    """
    Re-asking the judge against labelling, for a run's target half-width: every item scored
    `repeats` times (the judge asked again) and `labels` of them labelled at random, whose
    labelled-path half-width reaches the target, at the least cost.
    """

    best: Design | None = None
    message: str
    options: list[Design]
    """
    Every design considered, one per number of scores per item from the run's own to 20.
    """


class DiagnosticsDto(BaseModel):
    """
    A sampled fit's convergence as a version reports it; a figure that is not finite (the R̂
    of a constant chain) is null.
    """

    divergences: int = Field(..., ge=0)
    ess_bulk_min: float | None = None
    ess_tail_min: float | None = None
    extensions: int = Field(..., ge=0)
    """
    Rounds the sampler was extended by (longer runs, more chains) because an earlier round
    missed the gate; 0 where the first passed. At most 2.
    """
    rhat_max: float | None = None
    """
    Largest rank-normalised split R-hat (null if undefined).
    """


class Disagreement(BaseModel):
    """
    One anchor the corrected score misses by much.
    """

    band: list[float] | None = None
    """
    The held-out 95% predictive band, and whether the reference lies outside it.
    """
    corrected: float
    """
    The held-out corrected score.
    """
    error: float
    """
    Reference − corrected.
    """
    group: str | None = None
    item_id: str
    judge_score: float
    outside: bool | None = None
    reference_score: float


class EstimateScores(BaseModel):
    model_config = ConfigDict(
        extra='forbid',
    )
    assume_missing_at_random: bool | None = None
    """
    A panel's runs only: take the members' missing scores as missing at random (their
    absence depends on nothing, or only on what the other members scored) without testing
    it. By default a run whose members score its partial items differently from its
    complete ones (a judge that fails on hard items) is refused, naming the member.
    """
    costs: Costs | None = None
    group: str | None = Field(
        None,
        examples=['BART'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    """
    The system whose outputs the run holds, as the anchors name their groups: a known group gets its own shrunk bias correction, a new one (or none) the between-group variance of the bias.
    """
    hold: (
        dict[
            constr(pattern=r'^[A-Za-z0-9][A-Za-z0-9._:-]*$', min_length=1, max_length=64),
            Hold,
        ]
        | None
    ) = Field(None, examples=[{'length': 812}], max_length=16)
    """
    Optional numeric inputs beside the judge score, by name (a response's length in tokens, its count of markdown headers). A calibration trained with `covariates` corrects at the judge score and these values; in CSV, one column `covariate.<name>` each (empty: not given).
    """
    judge: str = Field(
        ...,
        examples=['gpt-4o-mini'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    judge_version: str | None = Field(
        None,
        examples=['gpt-4o-2024-08-06+prompt:9f2c1a'],
        max_length=128,
        min_length=1,
        pattern='^[^\\u0000-\\u001F\\u007F-\\u009F\\s]([^\\u0000-\\u001F\\u007F-\\u009F]*[^\\u0000-\\u001F\\u007F-\\u009F\\s])?$',
    )
    """
    The judge version that gave the scores: the platform's own label (model snapshot, a hash of the prompt template, decoding settings). Leave it out for unversioned scores.
    """
    level: float | None = Field(None, examples=[0.95], ge=0.5, le=0.999)
    """
    Of the interval (default 0.95).
    """
    rubric: str = Field(
        ...,
        examples=['coherence'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    scores: list[float] = Field(..., examples=[[2.5, 3.0, 4.0]], min_length=1)
    """
    Raw judge scores, one per item of the run.
    """
    target_half_width: float | None = Field(None, examples=[0.05], gt=0.0)
    """
    A half-width to plan for: the answer says whether more anchors (or labelled items)
    would reach it, and about how many, or that the run's own size is the limit.
    """
    version: int | None = Field(None, ge=1)
    """
    A version of the cell to use instead of the active one.
    """


class EvaluationDto(BaseModel):
    kl_corrected_reference: float | None = None
    """
    KL(corrected ‖ reference) between KDEs of the two (the paper's KL column); each KDE's
    bandwidth is at least the reference's level spacing. Null for versions trained before
    it was recorded per direction.
    """
    kl_mean: float | None = None
    """
    The mean of the two directions (`auto`'s default tie-break).
    """
    kl_reference_corrected: float | None = None
    """
    KL(reference ‖ corrected), the other direction.
    """
    mae: float
    mean_error: float
    """
    mean(corrected) − mean(reference).
    """
    n: int = Field(..., ge=0)
    """
    Held-out anchors evaluated.
    """
    pearson: float
    w1: float
    """
    Wasserstein-1 between corrected and reference scores.
    """


class Favouritism(BaseModel):
    """
    A system's favouritism: the judge's mean preference for it minus the people's.
    """

    comparisons: int = Field(..., ge=0)
    estimate: float
    interval: list[float]
    system: str


class Figure(BaseModel):
    """
    One figure and its interval (`None` where too few items give one).
    """

    interval: list[float] | None = None
    """
    Lower and upper ends of the 95% interval.
    """
    value: float


class Figures(BaseModel):
    """
    Held-out (or, for the raw verdict, in-sample) figures of one way of reading the verdicts.
    """

    accuracy: float
    inputs: str
    log_loss: float


class FlowPreset(Enum):
    """
    A training recipe: what the flow's unset training options default to.
    """

    fast = 'fast'
    paper = 'paper'


class GroupResidual(BaseModel):
    """
    One group's held-out residuals.
    """

    anchors: int = Field(..., ge=0)
    """
    Held-out anchors of the group.
    """
    group: str
    mean_residual: float
    """
    Mean of reference − corrected over them.
    """
    outlying: bool | None = None
    """
    Its mean lies further from the other groups' than normal biases allow (each group
    against the rest, Student's t, 5% family-wise where none is far): a run of it keeps its
    own mean, unshrunk, and a new group's answer says the biases look non-normal.
    """
    standard_error: float
    """
    Its standard error: the group's residual variance (`variance`) over anchors, rooted.
    """
    variance: float | None = None
    """
    The group's own residual variance, moderated toward the pooled one (weighed as 10 more
    anchors at the pooled variance); 0 in versions trained before it, which pooled every
    group's.
    """


class GroupShift(BaseModel):
    """
    One part's corrected shift: a group's, or a band's of the score.
    """

    group: str
    """
    The group, or the band (`low`, `middle`, `high`: thirds of the items by the rank of
    their mean of their two raw scores).
    """
    items: int = Field(..., ge=0)
    moved: bool | None = None
    """
    Whether its interval (Bonferroni-adjusted over the mean and the tested parts) lies wholly outside
    ±tolerance; `None` for a group with too few items to test.
    """
    shift: BridgeShift


class GroupTermDto(BaseModel):
    """
    How the judge's system-specific bias entered the answer.
    """

    groups: int = Field(..., ge=0)
    """
    Groups behind it.
    """
    rule: str | None = None
    """
    `random_effects` (5 groups or more) or `conservative` (fewer: no shrinkage, and the
    between-group spread taken whole).
    """
    shift: float
    """
    The bias correction applied to the estimate.
    """
    tau: float | None = None
    """
    The between-group standard deviation of the bias the version measured.
    """
    term: str
    """
    `known` (the run's group is among the anchors': its shrunk bias is applied), `new` (a
    new system's bias is a draw from the between-group distribution: its variance is
    added), or `unmeasured` (the anchors carry fewer than two groups, or the labelled path,
    which needs no such term).
    """
    variance: float


class IdentityOptions(BaseModel):
    """
    The identity has nothing to set.
    """

    model_config = ConfigDict(
        extra='forbid',
    )


class IntervalBinDto(BaseModel):
    """
    One bin of the judge score and its interval.
    """

    anchors: int = Field(..., ge=0)
    """
    Held-out anchors in the bin.
    """
    band: list[float] | None = None
    """
    The band of held-out residuals (reference − corrected) added to the corrected score
    (`conformal`), or the factors the method's own half-width is scaled by (`scaled`).
    """
    from_: float | None = Field(None, alias='from')
    """
    Judge scores from `from` (inclusive) to `to` (exclusive); null is open-ended.
    """
    held_out_coverage: float | None = None
    """
    Share of the bin's held-out anchors inside their interval.
    """
    to: float | None = None


class IsotonicOptions(BaseModel):
    """
    Isotonic regression has nothing to set.
    """

    model_config = ConfigDict(
        extra='forbid',
    )


class Scores(RootModel[float]):
    root: float = Field(..., ge=-1000000000.0, le=1000000000.0)


class ItemScore(BaseModel):
    """
    One item: a judge's `score`, or a panel's `scores` (each member's score by name), and an
    optional id echoed back (every item an id, or none).
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    covariates: (
        dict[
            constr(pattern=r'^[A-Za-z0-9][A-Za-z0-9._:-]*$', min_length=1, max_length=64),
            Covariates,
        ]
        | None
    ) = Field(None, examples=[{'length': 812}], max_length=16)
    """
    Optional numeric inputs beside the judge score, by name (a response's length in tokens, its count of markdown headers). A calibration trained with `covariates` corrects at the judge score and these values; in CSV, one column `covariate.<name>` each (empty: not given).
    """
    id: str | None = Field(
        None,
        examples=['story-17'],
        max_length=256,
        min_length=1,
        pattern='^[^\\u0000-\\u001F\\u007F]+$',
    )
    score: float | None = Field(None, examples=[2.5])
    """
    A judge's raw score.
    """
    scores: (
        dict[
            constr(pattern=r'^[A-Za-z0-9][A-Za-z0-9._:-]*$', min_length=1, max_length=64),
            Scores,
        ]
        | None
    ) = Field(None, examples=[{'claude-haiku': 4.0, 'gpt-4o-mini': 3.5}], max_length=12, min_length=1)
    """
    A panel's item: each member's raw score by judge name (members that did not score the item left out); instead of `score`.
    """


class JobOptions(BaseModel):
    """
    What a job of one method takes besides the method's own options: how its versions are
    evaluated on held-out anchors, its seed, and whether to activate them whatever their
    checks say.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    folds: int | None = Field(None, ge=2, le=20)
    """
    k of k-fold cross-validation (default: 5; the flow's default is `holdout` 0.2).
    """
    force: bool | None = False
    """
    Activate the new versions even when they fail their checks (a Bayesian fit's
    diagnostics).
    """
    holdout: float | None = Field(None, gt=0.0, lt=1.0)
    """
    Evaluate on this held-out fraction instead of k folds.
    """
    seed: int | None = Field(0, ge=0)
    """
    Seeds the split and the fit: same anchors + same seed = same versions.
    """


class JobVersionDto(BaseModel):
    active: bool
    """
    The version the cell serves now.
    """
    passed: bool
    """
    Passed its diagnostics.
    """
    rubric: str
    version: int


class JudgeVersionDto(BaseModel):
    anchor_count: int
    calibrated_by: int | None = None
    """
    The newest passed calibrator version trained on it, which serves requests naming it.
    """
    first_anchor_at: str
    """
    When its first anchor arrived (RFC 3339): the newest version is the default a training
    job fits.
    """
    judge_version: str | None = None
    """
    Absent for the anchors uploaded without a version.
    """


class JudgeVersionsResponse(BaseModel):
    judge_versions: list[JudgeVersionDto]
    """
    Oldest first.
    """


class ConfusionItem(RootModel[int]):
    root: int = Field(..., ge=0)


class Kappas(BaseModel):
    """
    Agreement on a discrete scale: the confusion matrix (rows: the judge's level; columns: the
    reference's) and the two κs.
    """

    cohen: Figure
    confusion: list[list[ConfusionItem]]
    """
    counts[i][k]: items the judge put at `levels[i]` and the reference at `levels[k]`.
    """
    levels: list[float]
    """
    Both sides' levels, in order: the rows' and the columns' labels.
    """
    quadratic: Figure


class LabelsBody(BaseModel):
    """
    A label plan to return with the ranking.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    budget: int | None = Field(None, examples=[200], ge=1)
    """
    The most labels in all; left out: as many as settling every open pair takes.
    """
    min_gap: float | None = Field(None, examples=[0.1], gt=0.0)
    """
    Gaps smaller than this (reference units) need not be resolved (default 0.1): a pair
    whose interval lies within ±min_gap is settled as close.
    """
    power: float | None = Field(None, examples=[0.8], ge=0.5, le=0.99)
    """
    The chance of resolving a pair whose true gap is the one planned for (default 0.8).
    """
    seed: int | None = Field(None, ge=0)
    """
    Seeds the random sample of items to label (default 0).
    """


class LookLabelsBody(BaseModel):
    """
    A label plan for the next look (its seed is the session's).
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    budget: int | None = Field(None, examples=[200], ge=1)
    """
    The most labels in all.
    """
    min_gap: float | None = Field(None, examples=[0.1], gt=0.0)
    """
    Gaps smaller than this need not be resolved (default 0.1).
    """
    power: float | None = Field(None, examples=[0.8], ge=0.5, le=0.99)
    """
    The chance of resolving a pair whose true gap is the one planned for (default 0.8).
    """


class MemberWeightDto(BaseModel):
    below_floor: float
    """
    Pr(standardised weight < 0.02 | anchors).
    """
    canary: bool
    """
    The member adds nothing the others do not (below_floor > 0.05).
    """
    judge: str
    standardised: float
    """
    Its coefficient × its scores' sd ÷ the references' sd (posterior mean): comparable
    across members.
    """
    weight: float
    """
    Posterior mean of its coefficient (reference units per judge-score unit) and its 95%
    credible interval.
    """
    weight_hi: float
    weight_lo: float


class NewWebhook(BaseModel):
    model_config = ConfigDict(
        extra='forbid',
    )
    events: list[AlarmKind] | None = None
    """
    The alarm types it receives; absent or empty: all of them.
    """
    url: str = Field(..., examples=['https://hooks.example.com/judgecal'])
    """
    Where alarms are posted: an http:// or https:// URL.
    """


class Objective(Enum):
    """
    A figure a rule compares; lower is better.
    """

    mae = 'mae'
    kl_mean = 'kl_mean'
    w1 = 'w1'
    mean_error = 'mean_error'


class OnMismatch(Enum):
    """
    What a request gets when it names a judge version the served calibration was not trained
    on (and none of the cell's calibrations was).
    """

    warn = 'warn'
    refuse = 'refuse'


class OpenSessionBody(BaseModel):
    """
    The body of POST /v1/rank/sessions.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    error: str | None = Field(
        None, examples=['familywise'], pattern='^(familywise|per_pair)$'
    )
    """
    `familywise` (default) or `per_pair`.
    """
    judge: str = Field(
        ...,
        examples=['gpt-4o-mini'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    level: float | None = Field(None, examples=[0.95], ge=0.5, le=0.999)
    """
    Of the family over all looks (default 0.95).
    """
    rounds: int = Field(..., examples=[4], ge=1, le=10)
    """
    The looks planned in all, fixed now: each is made at family-wise level
    1 − (1 − level)/rounds, so that every look's claims hold together.
    """
    rubric: str = Field(
        ...,
        examples=['coherence'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    seed: int | None = Field(None, ge=0)
    """
    Seeds every look's label plan (default 0).
    """
    version: int | None = Field(None, ge=1)
    """
    Answer every look by this calibrator version (default: the cell's active one at each
    look).
    """


class PairwiseLabelPlanDto(BaseModel):
    """
    The labels that bring every rating's half-width to `target_half_width`.
    """

    expected_half_width: float | None = None
    label: list[str]
    """
    The item ids to send to people: a seeded uniform draw among the run's unlabelled
    comparisons, so that labelled they are drawn as the run is. Upload them with their
    `preference` (or send them in the next request) and rate again.
    """
    needed: int | None = Field(None, ge=0)
    outcome: str
    """
    `reached`; `more_labelled` (label `needed` more of the run's comparisons: those in
    `label`); `out_of_reach` (labelling every unlabelled comparison of the run would not
    do it: the predictions' own noise, or too few comparisons of some system; send a
    larger run).
    """
    widest_half_width: float
    """
    The widest rating half-width now, and the one expected with `needed` more labels
    (the labelled term's variance falls as 1/labels, the prediction weight held).
    """


class PanelDto(BaseModel):
    created_at: str
    """
    RFC 3339.
    """
    judges: list[str]
    name: str


class PanelInputDto(BaseModel):
    judges: list[str]
    mae: float
    mse: float


class PanelMember(BaseModel):
    """
    One member of a pairwise panel's version: the judge version of its comparisons fitted, its
    comparisons in the rubric before the join, and its own calibrated preference (`auto` over
    its verdicts alone) held out on the joined labelled comparisons, beside the panel's.
    """

    alone: Figures
    comparisons: int = Field(..., ge=0)
    judge: str
    judge_version: str | None = None


class PanelPlanRequest(BaseModel):
    model_config = ConfigDict(
        extra='forbid',
    )
    costs: dict[str, float] | None = Field(
        None, examples=[{'claude-haiku': 0.3, 'gpt-4o-mini': 0.2, 'llama-3-8b': 0.05}]
    )
    """
    Each member's cost per item scored (any unit); members left out cost 1.
    """
    label_cost: float = Field(..., examples=[20.0], ge=0.0)
    """
    The cost of one human label, in the same unit.
    """
    level: float | None = Field(None, examples=[0.95], ge=0.5, le=0.999)
    """
    Of the interval; 0.95 unless given.
    """
    rubric: str = Field(
        ...,
        examples=['coherence'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    run_size: int = Field(..., examples=[2000], ge=1, le=100000000)
    """
    Items in the run to be scored.
    """
    target_half_width: float = Field(..., examples=[0.05], gt=0.0)
    """
    The half-width the run's interval must reach, in reference units.
    """


class PanelRequest(BaseModel):
    model_config = ConfigDict(
        extra='forbid',
    )
    judges: list[str] = Field(
        ...,
        examples=[['gpt-4o-mini', 'claude-haiku', 'llama-3-8b']],
        max_length=12,
        min_length=2,
    )
    """
    Its members, 2 to 12 judges, in order. Each member's anchors of an item must carry the
    same reference score.
    """
    name: str = Field(
        ...,
        examples=['gpt-4o-mini'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )


class MemberAnchor(RootModel[int]):
    root: int = Field(..., ge=0)


class PanelVersionDto(BaseModel):
    """
    A panel version's fusion layer in one rubric. `anchor_count` and every held-out figure of
    the version are the panel's: the items every member scored, the corrector fitted on their
    cross-fitted fused scores.
    """

    considered: list[PanelInputDto]
    """
    The inputs compared: the full panel and, with `auto`, each member alone; held-out MAE
    and MSE of their cross-fitted fused scores against the references.
    """
    input: list[str]
    """
    The members whose fused score the corrector reads: every member, or (`auto`) one
    member alone, where its fused score had the lowest held-out MAE.
    """
    member_anchors: list[MemberAnchor] | None = None
    """
    Each member's anchors in the rubric before the join, in member order; the join kept
    `anchor_count` items.
    """
    member_versions: list[str | None] | None = None
    """
    The judge version of each member's anchors fitted, in member order (null: its
    unversioned anchors); absent for versions trained before panels recorded them.
    """
    members: list[str]
    weights: list[MemberWeightDto]
    """
    Each member's weight in the full panel's stacking fit.
    """


class PanelsResponse(BaseModel):
    panels: list[PanelDto]


class PingResponse(BaseModel):
    event_id: str
    """
    The test delivery's event id (its `webhook-id` header).
    """


class PlanDto(BaseModel):
    """
    What would bring the half-width to `target_half_width`.
    """

    design: DesignDto | None = None
    message: str
    needed: int | None = Field(None, ge=0)
    """
    About how many anchors in all (more_anchors), or labelled items in the run
    (more_labelled).
    """
    outcome: str
    """
    `reached`, `more_anchors`, `more_labelled` or `run_size` (the run's own items limit the
    interval; more anchors cannot help).
    """


class PosteriorDto(BaseModel):
    """
    A rubric's β posterior as a version reports it: the line's means, β's interval and the
    canary.
    """

    alpha_mean: float
    beta_collapse_probability: float
    """
    Pr(beta < collapse_beta | anchors).
    """
    beta_interval: list[float]
    """
    95% credible interval of beta.
    """
    beta_mean: float
    canary: bool
    """
    The judge no longer tracks the reference on this rubric.
    """
    sigma_mean: float


class Priors(BaseModel):
    """
    The priors; the defaults are the paper's: α ~ N(0, 2²), β ~ N(1, 2²), σ ~ HalfNormal(1).
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    alpha_mean: float | None = 0.0
    alpha_sd: float | None = Field(2.0, gt=0.0)
    beta_mean: float | None = 1.0
    beta_sd: float | None = Field(2.0, gt=0.0)
    sigma_scale: float | None = Field(1.0, gt=0.0)
    """
    Scale of the HalfNormal prior on each σ_r (which turns away from 0 below a thousandth of
    it, so that references exactly on a line still give a proper posterior).
    """
    tau_scale: float | None = Field(1.0, gt=0.0)
    """
    Scale of the HalfNormal priors on τ_α and τ_β.
    """


class ProblemDto(BaseModel):
    """
    One problem: a row (1-based; absent for the request as a whole), a field, and what is wrong.
    """

    field: str
    problem: str
    row: int | None = Field(None, ge=0)


class QuantileMapOptions(BaseModel):
    """
    The quantile map has nothing to set.
    """

    model_config = ConfigDict(
        extra='forbid',
    )


class RankRunScores(BaseModel):
    model_config = ConfigDict(
        extra='forbid',
    )
    group: str | None = Field(
        None,
        examples=['BART'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    """
    The system whose outputs the run holds, as the anchors name their groups: a known group gets its own shrunk bias correction, a new one (or none) the between-group variance of the bias.
    """
    judge_version: str | None = Field(
        None,
        examples=['gpt-4o-2024-08-06+prompt:9f2c1a'],
        max_length=128,
        min_length=1,
        pattern='^[^\\u0000-\\u001F\\u007F-\\u009F\\s]([^\\u0000-\\u001F\\u007F-\\u009F]*[^\\u0000-\\u001F\\u007F-\\u009F\\s])?$',
    )
    """
    The judge version that gave the scores: the platform's own label (model snapshot, a hash of the prompt template, decoding settings). Leave it out for unversioned scores.
    """
    name: str = Field(..., examples=['model-a'], max_length=256, min_length=1)
    """
    The run's name in the answer (a model, a checkpoint): unique within the request.
    """
    scores: list[float] = Field(..., examples=[[2.5, 3.0, 4.0]], min_length=1)
    """
    Raw judge scores, one per item of the run.
    """


class RankSessionDto(BaseModel):
    """
    A ranking session.
    """

    created_at: str
    error: str
    id: str
    judge: str
    labels_seen: int = Field(..., ge=0)
    """
    Labels seen so far over every look, which every later look must still carry.
    """
    level: float
    looks: int = Field(..., ge=0)
    """
    Looks taken.
    """
    looks_left: int = Field(..., ge=0)
    """
    Looks left: a look past the plan is refused (409).
    """
    rounds: int = Field(..., ge=0)
    rubric: str
    seed: int = Field(..., ge=0)
    updated_at: str
    version: int | None = None


class RankedPairDto(BaseModel):
    """
    One pair of runs, A − B.
    """

    a: str
    b: str
    difference: float
    """
    mean(A) − mean(B), de-biased.
    """
    higher: str | None = None
    """
    The run surely higher, where resolved.
    """
    interval: list[float]
    """
    The simultaneous interval (with `familywise`).
    """
    labelled: int = Field(..., ge=0)
    """
    Items both runs labelled that the pair's own answer rests on (the labelled path on
    the per-item differences, weighed with the plain difference); 0 where the difference
    is of the two runs' answers.
    """
    resolved: bool
    """
    The interval excludes 0.
    """
    standard_error: float


class Preference2(Enum):
    """
    Optional: the people's preference ("a", "b", "tie", or a share of raters preferring a). A row without it is an unlabelled verdict, stored for later labels; an item has one preference whichever judge version judged it, and a later row's preference labels the item's rows stored without one.
    """

    a = 'a'
    b = 'b'
    tie = 'tie'


class Preference3(RootModel[float]):
    root: float = Field(..., examples=['a'], ge=0.0, le=1.0)
    """
    Optional: the people's preference ("a", "b", "tie", or a share of raters preferring a). A row without it is an unlabelled verdict, stored for later labels; an item has one preference whichever judge version judged it, and a later row's preference labels the item's rows stored without one.
    """


class Verdict5(Enum):
    """
    The judge's verdict, a shown first: "a", "b", "tie", or the probability that a's answer is the better (a judge's log-probabilities). A tie counts one half for each side.
    """

    a = 'a'
    b = 'b'
    tie = 'tie'


class Verdict6(RootModel[float]):
    root: float = Field(..., examples=['a'], ge=0.0, le=1.0)
    """
    The judge's verdict, a shown first: "a", "b", "tie", or the probability that a's answer is the better (a judge's log-probabilities). A tie counts one half for each side.
    """


class VerdictSwapped4(Enum):
    """
    Optional: the judge's verdict with b shown first, already mapped back ("a" still means a). Where the two orders disagree the judge favours a position.
    """

    a = 'a'
    b = 'b'
    tie = 'tie'


class VerdictSwapped5(RootModel[float]):
    root: float = Field(..., examples=['a'], ge=0.0, le=1.0)
    """
    Optional: the judge's verdict with b shown first, already mapped back ("a" still means a). Where the two orders disagree the judge favours a position.
    """


class RatedComparison(BaseModel):
    """
    One comparison of the run: a comparison row (`POST /v1/comparisons`) of a judge, with
    `verdict`; of a pairwise panel, with `verdicts` and `verdicts_swapped` in its place.
    """

    a: str = Field(
        ...,
        examples=['BART'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    """
    A system (model) whose answer was compared, named like judges.
    """
    b: str = Field(
        ...,
        examples=['BART'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    """
    A system (model) whose answer was compared, named like judges.
    """
    covariates: (
        dict[
            constr(pattern=r'^[A-Za-z0-9][A-Za-z0-9._:-]*$', min_length=1, max_length=64),
            Covariates,
        ]
        | None
    ) = Field(None, examples=[{'length': 812}], max_length=16)
    """
    Optional numeric inputs beside the judge score, by name (a response's length in tokens, its count of markdown headers). A calibration trained with `covariates` corrects at the judge score and these values; in CSV, one column `covariate.<name>` each (empty: not given).
    """
    item_id: str = Field(
        ...,
        examples=['story-17'],
        max_length=256,
        min_length=1,
        pattern='^[^\\u0000-\\u001F\\u007F]+$',
    )
    """
    The item's id: 1 to 256 characters, no control characters; one anchor per item, cell and judge version. Stored in Unicode's composed form (NFC); an uploaded id with an invisible character, a compatibility form (full-width letters, a non-breaking space), a dash that looks like '-', or a leading or trailing space is refused (422).
    """
    preference: Preference2 | Preference3 | None = Field(None, examples=['a'])
    """
    Optional: the people's preference ("a", "b", "tie", or a share of raters preferring a). A row without it is an unlabelled verdict, stored for later labels; an item has one preference whichever judge version judged it, and a later row's preference labels the item's rows stored without one.
    """
    rater: str | None = Field(
        None,
        examples=['labeller-7'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    """
    Optional: who gave the preference, named like judges. Ratings and win rates count raters, not labels, as the independent units (one rater's taste moves all of their labels); a label naming none is a rater of its own.
    """
    verdict: Verdict5 | Verdict6 | None = Field(None, examples=['a'])
    """
    The judge's verdict, a shown first: "a", "b", "tie", or the probability that a's answer is the better (a judge's log-probabilities). A tie counts one half for each side.
    """
    verdict_swapped: VerdictSwapped4 | VerdictSwapped5 | None = Field(
        None, examples=['a']
    )
    """
    Optional: the judge's verdict with b shown first, already mapped back ("a" still means a). Where the two orders disagree the judge favours a position.
    """
    verdicts: dict[str, Any] | None = Field(
        None, examples=[{'claude': 'b', 'gpt-4o': 'a'}]
    )
    """
    A pairwise panel's run: every member's verdict, by name (`{"gpt-4o": "a", "claude":
    0.3}`), each an outcome as `verdict` is; required there, in place of `verdict`.
    """
    verdicts_swapped: dict[str, Any] | None = None
    """
    A pairwise panel's run: the members' verdicts with b shown first, mapped back, by name
    (any members; each also in `verdicts`).
    """


class RatingsCalibrationDto(BaseModel):
    """
    The calibrated preference the ratings read.
    """

    candidates: list[CalibrationCandidateDto]
    chosen: str
    """
    The calibrated preference: the choice of the cell's newest trained version of the
    run's judge version (`version`), fitted again on the labelled comparisons of now; with
    no such version, the one `auto` chose at this request (lowest held-out log-loss).
    """
    covariates: list[str]
    """
    The covariates it reads: those every comparison carries.
    """
    version: int | None = None
    """
    The trained version whose choice it is; null where chosen at this request.
    """


class RatingsRequestBody(BaseModel):
    """
    A run of comparisons to rate. The rows are comparison rows (`POST /v1/comparisons`);
    those with `preference` are labelled and enter the ratings prediction-powered.
    """

    baseline: str | None = Field(
        None,
        examples=['BART'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    """
    The system whose rating is 0; one of the run's systems.
    """
    comparisons: list[RatedComparison] = Field(..., min_length=1)
    """
    The run (at most 500,000 comparisons).
    """
    control: list[str] | None = Field(None, examples=[['length']])
    """
    Covariates (`covariates.<name>` of every row) the ratings control for, as Arena's
    style control puts the length difference beside the ratings: each gets a coefficient.
    """
    judge: str = Field(
        ...,
        examples=['gpt-4o-mini'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    judge_version: str | None = Field(
        None,
        examples=['gpt-4o-2024-08-06+prompt:9f2c1a'],
        max_length=128,
        min_length=1,
        pattern='^[^\\u0000-\\u001F\\u007F-\\u009F\\s]([^\\u0000-\\u001F\\u007F-\\u009F]*[^\\u0000-\\u001F\\u007F-\\u009F\\s])?$',
    )
    """
    The judge version that gave the scores: the platform's own label (model snapshot, a hash of the prompt template, decoding settings). Leave it out for unversioned scores.
    """
    level: float | None = Field(None, examples=[0.95], ge=0.5, le=0.999)
    """
    Of the intervals (default 0.95).
    """
    rubric: str = Field(
        ...,
        examples=['coherence'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    target_half_width: float | None = Field(None, examples=[0.15], gt=0.0)
    """
    The widest rating half-width wanted (log-odds, at `level`): the answer's `plan` says
    how many of the run's comparisons to label to reach it, and which.
    """


class RawShift(BaseModel):
    """
    How the raw scores moved.
    """

    mean: float
    """
    Mean of new − old.
    """
    rank_correlation: float
    """
    Spearman's rank correlation of new and old.
    """
    sd: float
    """
    Standard deviation of new − old. Under the same version label this is the judge's
    repeat noise times √2.
    """
    slope: float | None = None
    """
    Slope of the new scores on the old (least squares; attenuated by repeat noise).
    """


class Reliability(BaseModel):
    """
    One bin of held-out predictions: their mean and the people's mean preference.
    """

    comparisons: int = Field(..., ge=0)
    observed: float
    predicted: float


class RepeatGain(BaseModel):
    """
    What k scores of an item are worth.
    """

    k: int = Field(..., ge=0)
    residual_ratio: float


class RepeatReport(BaseModel):
    """
    The judge's repeat noise as one cell's anchors measure it.
    """

    by_repeats: list[RepeatGain]
    """
    For an item scored k times: its error variance as a share of a one-score item's.
    """
    items: int = Field(..., ge=0)
    """
    Anchors with at least two scores, and their scores in all.
    """
    noise_share: float
    """
    That variance as a share of the judge scores' variance over the anchors (1 − the
    test–retest reliability).
    """
    removable: float
    """
    The share of a corrected one-score item's error variance that averaging many scores
    of it would remove.
    """
    scores: int = Field(..., ge=0)
    share_of_judge_error: float
    """
    Its share of the judge's own error: the judge scores' variance beyond what the
    reference explains (a straight line's R²).
    """
    within: Figure
    """
    The within-item (test–retest) variance of one score, with its 95% interval.
    """


class RepeatsDto(BaseModel):
    """
    How the items' repeats (further scores of an item by the same judge version) were read.
    Each item is corrected at the one-score equivalent of its scores' mean: the corrector was
    fitted on one score per anchor, and a mean of k scores, less noisy, says more about the
    reference. The run's noise term is scaled to what k scores leave.
    """

    anchor_items: int = Field(..., ge=0)
    """
    Items with repeats it was measured on: among the version's anchors and in this request.
    """
    noise_share: float
    """
    That variance as a share of the judge scores' variance over the anchors (1 − the
    test–retest reliability).
    """
    request_items: int = Field(..., ge=0)
    residual_ratio: float
    """
    The mean over the request's items of their error variance (a reference around its
    corrected score) as a share of a one-score item's: 1 without repeats.
    """
    within: Figure
    """
    The judge's within-item (test–retest) variance of one score, with its 95% interval.
    """


class RescoreResponse(BaseModel):
    bridge_items: int | None = Field(None, ge=0)
    """
    Shared items the bridge needs for a verdict at the default tolerance. Before 10 items
    are shared it is planned, assuming nothing moved and the two versions' corrected scores
    correlate 0.9; after, it is the bridge's own estimate from the shift and spread seen.
    """
    from_: str | None = Field(None, alias='from')
    from_calibrator: int
    """
    The calibrator version the bridge will test (a pairwise cell's: its trained version),
    and its judge version.
    """
    items: list[str]
    """
    Items the cell holds a reference for that `judge_version` has not scored (at most
    `limit`), spread over the cell's systems: each system's in a fixed pseudo-random order,
    the systems in turn, so the first items of the list cover every system. Upload the new version's scores of them with `reference_score` left
    out: each becomes an anchor of the new version with the stored reference. In a pairwise
    cell: the labelled comparisons of `from` that `judge_version` has not judged, spread over
    their systems a; upload its verdicts with `preference` left out (POST /v1/comparisons):
    each takes the item's stored preference.
    """
    remaining: int
    """
    How many such items there are in all.
    """
    shared: int = Field(..., ge=0)
    """
    Items both versions have scored.
    """
    tolerance: float
    """
    The default tolerance (reference units).
    """


class ReviewAuditDto(BaseModel):
    """
    What the MC-dropout σ is worth as a review signal, on held-out anchors. σ is the spread of
    the flow's own map over dropout masks: its uncertainty about E[y | j], not the reference's
    noise around it. Large errors come mostly from that noise, so σ can only catch them where
    the map is uncertain for the same reason the references are noisy.
    """

    held_out: int = Field(..., ge=0)
    """
    Held-out anchors audited.
    """
    large_errors_routed: float
    """
    Share of the largest 10% absolute errors among the routed: `routed` is what routing
    at random would catch.
    """
    large_errors_routed_by_width: float | None = None
    """
    The same share when as many anchors are routed by the widest 95% interval instead
    (conformal, per bin of the judge score; ties shared out evenly).
    """
    routed: float
    """
    Share of them routed to review (σ above the threshold).
    """


class SigmaAboveRule(BaseModel):
    """
    σ above this value (in score units).
    """

    sigma_above: float
    """
    σ above this value (in score units).
    """


class TopPercentRule(BaseModel):
    """
    σ above the (100 − q)-th percentile of σ over the rubric's anchors.
    """

    top_percent: float
    """
    σ above the (100 − q)-th percentile of σ over the rubric's anchors.
    """


class ReviewRule(RootModel[SigmaAboveRule | TopPercentRule]):
    root: SigmaAboveRule | TopPercentRule
    """
    When a corrected score is routed to a person.
    """


class RubricDto(BaseModel):
    description: str
    max: float
    min: float
    name: str
    updated_at: str
    """
    RFC 3339.
    """


class RubricRequest(BaseModel):
    model_config = ConfigDict(
        extra='forbid',
    )
    description: str | None = Field(
        None, examples=['How well the story hangs together']
    )
    max: float = Field(..., examples=[5.0])
    min: float = Field(..., examples=[1.0])


class RubricsResponse(BaseModel):
    rubrics: list[RubricDto]


class RunItemDto(BaseModel):
    """
    One item of a run.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    cluster: str | None = Field(
        None, examples=['prompt-17'], max_length=256, min_length=1
    )
    """
    What the item shares its errors with, such as its prompt: items of one cluster are not
    counted as independent evidence. Give every item a cluster or none.
    """
    covariates: (
        dict[
            constr(pattern=r'^[A-Za-z0-9][A-Za-z0-9._:-]*$', min_length=1, max_length=64),
            Covariates,
        ]
        | None
    ) = Field(None, examples=[{'length': 812}], max_length=16)
    """
    Optional numeric inputs beside the judge score, by name (a response's length in tokens, its count of markdown headers). A calibration trained with `covariates` corrects at the judge score and these values; in CSV, one column `covariate.<name>` each (empty: not given).
    """
    id: str | None = Field(
        None,
        examples=['prompt-17'],
        max_length=256,
        min_length=1,
        pattern='^[^\\u0000-\\u001F\\u007F]+$',
    )
    """
    The item's id: items with the same id in both runs of a comparison are paired. Give
    every item an id or none.
    """
    reference: float | None = None
    """
    The item's reference score, where this item of the run was labelled. The labelled
    items must be a uniform random sample of the run, at least 3.
    """
    repeats: list[float] | None = Field(None, examples=[[3.0, 4.0]], max_length=100)
    """
    A judge's item: its further scores by the same judge version (the judge asked again),
    at most 100. The item is corrected for a judge averaged over its scores (less noisy
    than one score: its mean is read at its one-score equivalent), and the run's interval
    carries the noise left. The judge's within-item variance is measured on the version's
    anchors' repeats and the request's together (`repeats` in the answer).
    """
    score: float | None = Field(None, examples=[3.5])
    """
    The raw judge score.
    """
    scores: (
        dict[
            constr(pattern=r'^[A-Za-z0-9][A-Za-z0-9._:-]*$', min_length=1, max_length=64),
            Scores,
        ]
        | None
    ) = Field(None, examples=[{'claude-haiku': 4.0, 'gpt-4o-mini': 3.5}], max_length=12, min_length=1)
    """
    A panel's item: each member's raw score by judge name (members that did not score the item left out); instead of `score`.
    """


class RunItems(BaseModel):
    model_config = ConfigDict(
        extra='forbid',
    )
    group: str | None = Field(
        None,
        examples=['BART'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    """
    The system whose outputs the run holds, as the anchors name their groups: a known group gets its own shrunk bias correction, a new one (or none) the between-group variance of the bias.
    """
    items: list[RunItemDto] = Field(..., min_length=1)
    """
    The run's items, with ids, reference scores or clusters.
    """
    judge_version: str | None = Field(
        None,
        examples=['gpt-4o-2024-08-06+prompt:9f2c1a'],
        max_length=128,
        min_length=1,
        pattern='^[^\\u0000-\\u001F\\u007F-\\u009F\\s]([^\\u0000-\\u001F\\u007F-\\u009F]*[^\\u0000-\\u001F\\u007F-\\u009F\\s])?$',
    )
    """
    The judge version that gave the scores: the platform's own label (model snapshot, a hash of the prompt template, decoding settings). Leave it out for unversioned scores.
    """


class RunLabelsDto(BaseModel):
    """
    Labels to add to one run.
    """

    add: int = Field(..., ge=0)
    items: list[str]
    """
    The items to label, in order: their ids where the run has ids, else their 1-based
    positions in the run as sent.
    """
    name: str


class RunScores(BaseModel):
    model_config = ConfigDict(
        extra='forbid',
    )
    group: str | None = Field(
        None,
        examples=['BART'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    """
    The system whose outputs the run holds, as the anchors name their groups: a known group gets its own shrunk bias correction, a new one (or none) the between-group variance of the bias.
    """
    judge_version: str | None = Field(
        None,
        examples=['gpt-4o-2024-08-06+prompt:9f2c1a'],
        max_length=128,
        min_length=1,
        pattern='^[^\\u0000-\\u001F\\u007F-\\u009F\\s]([^\\u0000-\\u001F\\u007F-\\u009F]*[^\\u0000-\\u001F\\u007F-\\u009F\\s])?$',
    )
    """
    The judge version that gave the scores: the platform's own label (model snapshot, a hash of the prompt template, decoding settings). Leave it out for unversioned scores.
    """
    scores: list[float] = Field(..., examples=[[2.5, 3.0, 4.0]], min_length=1)
    """
    Raw judge scores, one per item of the run.
    """


class Schedule(Enum):
    """
    How the learning rate moves over training.
    """

    constant = 'constant'
    cosine = 'cosine'


class Share(BaseModel):
    """
    A share with its 95% interval.
    """

    comparisons: int = Field(..., ge=0)
    estimate: float
    interval: list[float]


class Status(BaseModel):
    status: str = Field(..., examples=['ok'])


class SubPanelPlanDto(BaseModel):
    cost_per_item: float
    """
    The sum of its members' costs per item.
    """
    judges: list[str]
    labels: int = Field(..., ge=0)
    """
    Labels a run of `run_size` items needs to reach the target on the labelled path.
    """
    residual_sd: float
    """
    The sd of a reference about this sub-panel's fused score (its posterior E[σ²], rooted).
    """
    total_cost: float
    """
    Judge calls for the run plus those labels.
    """


class SupportDto(BaseModel):
    """
    The run's judge scores against the anchors' range.
    """

    anchor_range: list[float]
    """
    The smallest and largest judge score among the version's anchors.
    """
    extrapolated: bool
    """
    More than 5% outside: the corrector's level there is extrapolated.
    """
    outside_share: float
    """
    Share of the run's judge scores outside that range.
    """
    sparse: bool
    """
    More than 5% where the anchors are thin.
    """
    thin_share: float
    """
    Share of the run's judge scores where the anchors are thin: fewer than 20 anchors
    within ± 1/20 of the anchors' range (or, for versions of under 1,600 anchors, fewer
    than a quarter of their average count there).
    """


class Covariate(RootModel[str]):
    root: str = Field(
        ..., max_length=64, min_length=1, pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$'
    )


class IdentityMethod(Enum):
    identity = 'identity'


class IdentityTrainingOptions(BaseModel):
    model_config = ConfigDict(
        extra='forbid',
    )
    folds: int | None = Field(None, ge=2, le=20)
    """
    k of k-fold cross-validation (default: 5; the flow's default is `holdout` 0.2).
    """
    force: bool | None = False
    """
    Activate the new versions even when they fail their checks (a Bayesian fit's
    diagnostics).
    """
    holdout: float | None = Field(None, gt=0.0, lt=1.0)
    """
    Evaluate on this held-out fraction instead of k folds.
    """
    seed: int | None = Field(0, ge=0)
    """
    Seeds the split and the fit: same anchors + same seed = same versions.
    """


class Rubric(RootModel[str]):
    root: str = Field(
        ..., max_length=64, min_length=1, pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$'
    )


class IdentityTraining(BaseModel):
    """
    identity: raw judge
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    covariates: list[Covariate] | None = Field(None, max_length=4)
    """
    Covariates the anchors carry (their `covariates`) to consider beside the judge score, e.g. ["length"]. Left out, the training considers those every anchor of the judge's fitted cells carries (the first 4 by name); `[]` fits the judge score alone. Each enters raw, logged or piecewise linear in its log, and only where it lowers held-out error in the rubric by more than 1% (the version's `covariates` report lists what was tried, the coefficients and their intervals); the corrector is then trained on the layer's score. Every anchor fitted must carry each one named. Where an unnamed covariate is kept in no rubric the version reads the judge score alone. A version whose layer reads a covariate corrects items that give it ({"score", "covariates"}); items sent without covariates are corrected by the same training's judge-score-only fit, warned `covariates_missing`.
    """
    judge_version: str | None = Field(
        None,
        examples=['gpt-4o-2024-08-06+prompt:9f2c1a'],
        max_length=128,
        min_length=1,
        pattern='^[^\\u0000-\\u001F\\u007F-\\u009F\\s]([^\\u0000-\\u001F\\u007F-\\u009F]*[^\\u0000-\\u001F\\u007F-\\u009F\\s])?$',
    )
    """
    Fit this judge version's anchors only (default: the judge's newest version with anchors, the one whose first anchor arrived last). Anchors of different judge versions are never fitted together.
    """
    member_versions: dict[str, Any] | None = None
    """
    A panel's: the judge version of a member's anchors to fit, by member (null: its anchors uploaded without a version). A member not named fits the anchors its unversioned requests are served by: its unversioned anchors where it has any, else its only judge version, else the one its active calibrations were trained on. The job's request shows every member's, resolved.
    """
    method: IdentityMethod = Field(..., title='IdentityMethod')
    options: IdentityTrainingOptions | None = Field(
        None, title='IdentityTrainingOptions'
    )
    rubrics: list[Rubric] | None = Field(None, min_length=1)
    """
    Rubrics to train (default: every cell of the judge with at least jobs.min_anchors anchors). All rubrics of one job are fitted together and share strength.
    """


class QuantileMapMethod(Enum):
    quantile_map = 'quantile_map'


class QuantileMapTrainingOptions(BaseModel):
    model_config = ConfigDict(
        extra='forbid',
    )
    folds: int | None = Field(None, ge=2, le=20)
    """
    k of k-fold cross-validation (default: 5; the flow's default is `holdout` 0.2).
    """
    force: bool | None = False
    """
    Activate the new versions even when they fail their checks (a Bayesian fit's
    diagnostics).
    """
    holdout: float | None = Field(None, gt=0.0, lt=1.0)
    """
    Evaluate on this held-out fraction instead of k folds.
    """
    seed: int | None = Field(0, ge=0)
    """
    Seeds the split and the fit: same anchors + same seed = same versions.
    """


class QuantileMapTraining(BaseModel):
    """
    quantile_map: quantile map
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    covariates: list[Covariate] | None = Field(None, max_length=4)
    """
    Covariates the anchors carry (their `covariates`) to consider beside the judge score, e.g. ["length"]. Left out, the training considers those every anchor of the judge's fitted cells carries (the first 4 by name); `[]` fits the judge score alone. Each enters raw, logged or piecewise linear in its log, and only where it lowers held-out error in the rubric by more than 1% (the version's `covariates` report lists what was tried, the coefficients and their intervals); the corrector is then trained on the layer's score. Every anchor fitted must carry each one named. Where an unnamed covariate is kept in no rubric the version reads the judge score alone. A version whose layer reads a covariate corrects items that give it ({"score", "covariates"}); items sent without covariates are corrected by the same training's judge-score-only fit, warned `covariates_missing`.
    """
    judge_version: str | None = Field(
        None,
        examples=['gpt-4o-2024-08-06+prompt:9f2c1a'],
        max_length=128,
        min_length=1,
        pattern='^[^\\u0000-\\u001F\\u007F-\\u009F\\s]([^\\u0000-\\u001F\\u007F-\\u009F]*[^\\u0000-\\u001F\\u007F-\\u009F\\s])?$',
    )
    """
    Fit this judge version's anchors only (default: the judge's newest version with anchors, the one whose first anchor arrived last). Anchors of different judge versions are never fitted together.
    """
    member_versions: dict[str, Any] | None = None
    """
    A panel's: the judge version of a member's anchors to fit, by member (null: its anchors uploaded without a version). A member not named fits the anchors its unversioned requests are served by: its unversioned anchors where it has any, else its only judge version, else the one its active calibrations were trained on. The job's request shows every member's, resolved.
    """
    method: QuantileMapMethod = Field(..., title='QuantileMapMethod')
    options: QuantileMapTrainingOptions | None = Field(
        None, title='QuantileMapTrainingOptions'
    )
    rubrics: list[Rubric] | None = Field(None, min_length=1)
    """
    Rubrics to train (default: every cell of the judge with at least jobs.min_anchors anchors). All rubrics of one job are fitted together and share strength.
    """


class BayesMethod(Enum):
    bayes = 'bayes'


class BayesTrainingOptions(BaseModel):
    model_config = ConfigDict(
        extra='forbid',
    )
    chains: int | None = Field(2, ge=1, le=16)
    """
    NUTS chains, each on its own thread.
    """
    collapse_beta: float | None = 0.3
    """
    The canary fires when Pr(β < collapse_beta | anchors) > collapse_probability.
    """
    collapse_probability: float | None = Field(0.05, gt=0.0, lt=1.0)
    draws: int | None = Field(1000, ge=10, le=100000)
    """
    Kept draws per chain.
    """
    folds: int | None = Field(None, ge=2, le=20)
    """
    k of k-fold cross-validation (default: 5; the flow's default is `holdout` 0.2).
    """
    force: bool | None = False
    """
    Activate the new versions even when they fail their checks (a Bayesian fit's
    diagnostics).
    """
    holdout: float | None = Field(None, gt=0.0, lt=1.0)
    """
    Evaluate on this held-out fraction instead of k folds.
    """
    priors: Priors | None = Field(
        {'alpha_mean': 0.0, 'alpha_sd': 2.0, 'beta_mean': 1.0, 'beta_sd': 2.0, 'sigma_scale': 1.0, 'tau_scale': 1.0},
        validate_default=True,
    )
    seed: int | None = Field(0, ge=0)
    """
    Seeds the split and the fit: same anchors + same seed = same versions.
    """
    target_accept: float | None = Field(0.9, gt=0.5, lt=1.0)
    """
    NUTS target acceptance.
    """
    warmup: int | None = Field(500, ge=0, le=100000)
    """
    Warm-up iterations per chain.
    """


class BayesTraining(BaseModel):
    """
    bayes: Bayesian linear
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    covariates: list[Covariate] | None = Field(None, max_length=4)
    """
    Covariates the anchors carry (their `covariates`) to consider beside the judge score, e.g. ["length"]. Left out, the training considers those every anchor of the judge's fitted cells carries (the first 4 by name); `[]` fits the judge score alone. Each enters raw, logged or piecewise linear in its log, and only where it lowers held-out error in the rubric by more than 1% (the version's `covariates` report lists what was tried, the coefficients and their intervals); the corrector is then trained on the layer's score. Every anchor fitted must carry each one named. Where an unnamed covariate is kept in no rubric the version reads the judge score alone. A version whose layer reads a covariate corrects items that give it ({"score", "covariates"}); items sent without covariates are corrected by the same training's judge-score-only fit, warned `covariates_missing`.
    """
    judge_version: str | None = Field(
        None,
        examples=['gpt-4o-2024-08-06+prompt:9f2c1a'],
        max_length=128,
        min_length=1,
        pattern='^[^\\u0000-\\u001F\\u007F-\\u009F\\s]([^\\u0000-\\u001F\\u007F-\\u009F]*[^\\u0000-\\u001F\\u007F-\\u009F\\s])?$',
    )
    """
    Fit this judge version's anchors only (default: the judge's newest version with anchors, the one whose first anchor arrived last). Anchors of different judge versions are never fitted together.
    """
    member_versions: dict[str, Any] | None = None
    """
    A panel's: the judge version of a member's anchors to fit, by member (null: its anchors uploaded without a version). A member not named fits the anchors its unversioned requests are served by: its unversioned anchors where it has any, else its only judge version, else the one its active calibrations were trained on. The job's request shows every member's, resolved.
    """
    method: BayesMethod = Field(..., title='BayesMethod')
    options: BayesTrainingOptions | None = Field(None, title='BayesTrainingOptions')
    rubrics: list[Rubric] | None = Field(None, min_length=1)
    """
    Rubrics to train (default: every cell of the judge with at least jobs.min_anchors anchors). All rubrics of one job are fitted together and share strength.
    """


class FlowMethod(Enum):
    flow = 'flow'


class FlowTrainingOptions(BaseModel):
    model_config = ConfigDict(
        extra='forbid',
    )
    batch_size: int | None = Field(None, ge=0, le=1000000)
    """
    Anchors per optimiser step, reshuffled each epoch; 0 for full-batch steps; default:
    the preset's.
    """
    dropout: float | None = Field(0.1, ge=0.0, lt=0.9)
    """
    Dropout on every hidden layer.
    """
    early_stopping: float | None = Field(None, ge=0.0, lt=0.5)
    """
    Hold out this fraction of the training anchors and stop when its loss has not
    improved for `patience` epochs, keeping the best weights; 0 turns it off; default:
    the preset's.
    """
    embedding_dim: int | None = Field(4, ge=1, le=64)
    """
    Size of the learned rubric embedding.
    """
    epochs: int | None = Field(None, ge=1, le=100000)
    """
    Passes over the training anchors (`paper`: 1,500); given without `steps`, training
    makes this many epochs.
    """
    folds: int | None = Field(None, ge=2, le=20)
    """
    k of k-fold cross-validation (default: 5; the flow's default is `holdout` 0.2).
    """
    force: bool | None = False
    """
    Activate the new versions even when they fail their checks (a Bayesian fit's
    diagnostics).
    """
    hidden: int | None = Field(64, ge=2, le=1024)
    """
    Hidden width of the three-layer tanh MLP.
    """
    holdout: float | None = Field(None, gt=0.0, lt=1.0)
    """
    Evaluate on this held-out fraction instead of k folds.
    """
    learning_rate: float | None = Field(None, gt=0.0, lt=1.0)
    """
    Adam's (starting) learning rate; default: the preset's.
    """
    mc_passes: int | None = Field(40, ge=2, le=1000)
    """
    MC-dropout passes per correction.
    """
    patience: int | None = Field(None, ge=0)
    """
    Default: the preset's.
    """
    preset: FlowPreset | None = 'fast'
    """
    `fast` (the default: minibatches and a cosine schedule) or `paper` (1,500 full-batch
    epochs at 3e-3).
    """
    review: ReviewRule | None = Field({'top_percent': 5.0}, validate_default=True)
    """
    `{"top_percent": 5}` (the 5% highest σ on the cell's anchors) or `{"sigma_above": 0.3}`.
    """
    schedule: Schedule | None = None
    seed: int | None = Field(0, ge=0)
    """
    Seeds the split and the fit: same anchors + same seed = same versions.
    """
    step: float | None = Field(0.1, gt=0.0, le=1.0)
    """
    RK4 step on [0, 1]; must divide 1 (0.1, 0.05, 0.25, ...).
    """
    steps: int | None = Field(None, ge=0, le=1000000)
    """
    Optimiser steps, however many anchors there are, in place of epochs (`fast`: 220;
    0 counts `epochs` instead).
    """


class FlowTraining(BaseModel):
    """
    flow: neural-ODE flow
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    covariates: list[Covariate] | None = Field(None, max_length=4)
    """
    Covariates the anchors carry (their `covariates`) to consider beside the judge score, e.g. ["length"]. Left out, the training considers those every anchor of the judge's fitted cells carries (the first 4 by name); `[]` fits the judge score alone. Each enters raw, logged or piecewise linear in its log, and only where it lowers held-out error in the rubric by more than 1% (the version's `covariates` report lists what was tried, the coefficients and their intervals); the corrector is then trained on the layer's score. Every anchor fitted must carry each one named. Where an unnamed covariate is kept in no rubric the version reads the judge score alone. A version whose layer reads a covariate corrects items that give it ({"score", "covariates"}); items sent without covariates are corrected by the same training's judge-score-only fit, warned `covariates_missing`.
    """
    judge_version: str | None = Field(
        None,
        examples=['gpt-4o-2024-08-06+prompt:9f2c1a'],
        max_length=128,
        min_length=1,
        pattern='^[^\\u0000-\\u001F\\u007F-\\u009F\\s]([^\\u0000-\\u001F\\u007F-\\u009F]*[^\\u0000-\\u001F\\u007F-\\u009F\\s])?$',
    )
    """
    Fit this judge version's anchors only (default: the judge's newest version with anchors, the one whose first anchor arrived last). Anchors of different judge versions are never fitted together.
    """
    member_versions: dict[str, Any] | None = None
    """
    A panel's: the judge version of a member's anchors to fit, by member (null: its anchors uploaded without a version). A member not named fits the anchors its unversioned requests are served by: its unversioned anchors where it has any, else its only judge version, else the one its active calibrations were trained on. The job's request shows every member's, resolved.
    """
    method: FlowMethod = Field(..., title='FlowMethod')
    options: FlowTrainingOptions | None = Field(None, title='FlowTrainingOptions')
    rubrics: list[Rubric] | None = Field(None, min_length=1)
    """
    Rubrics to train (default: every cell of the judge with at least jobs.min_anchors anchors). All rubrics of one job are fitted together and share strength.
    """


class IsotonicMethod(Enum):
    isotonic = 'isotonic'


class IsotonicTrainingOptions(BaseModel):
    model_config = ConfigDict(
        extra='forbid',
    )
    folds: int | None = Field(None, ge=2, le=20)
    """
    k of k-fold cross-validation (default: 5; the flow's default is `holdout` 0.2).
    """
    force: bool | None = False
    """
    Activate the new versions even when they fail their checks (a Bayesian fit's
    diagnostics).
    """
    holdout: float | None = Field(None, gt=0.0, lt=1.0)
    """
    Evaluate on this held-out fraction instead of k folds.
    """
    seed: int | None = Field(0, ge=0)
    """
    Seeds the split and the fit: same anchors + same seed = same versions.
    """


class IsotonicTraining(BaseModel):
    """
    isotonic: isotonic
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    covariates: list[Covariate] | None = Field(None, max_length=4)
    """
    Covariates the anchors carry (their `covariates`) to consider beside the judge score, e.g. ["length"]. Left out, the training considers those every anchor of the judge's fitted cells carries (the first 4 by name); `[]` fits the judge score alone. Each enters raw, logged or piecewise linear in its log, and only where it lowers held-out error in the rubric by more than 1% (the version's `covariates` report lists what was tried, the coefficients and their intervals); the corrector is then trained on the layer's score. Every anchor fitted must carry each one named. Where an unnamed covariate is kept in no rubric the version reads the judge score alone. A version whose layer reads a covariate corrects items that give it ({"score", "covariates"}); items sent without covariates are corrected by the same training's judge-score-only fit, warned `covariates_missing`.
    """
    judge_version: str | None = Field(
        None,
        examples=['gpt-4o-2024-08-06+prompt:9f2c1a'],
        max_length=128,
        min_length=1,
        pattern='^[^\\u0000-\\u001F\\u007F-\\u009F\\s]([^\\u0000-\\u001F\\u007F-\\u009F]*[^\\u0000-\\u001F\\u007F-\\u009F\\s])?$',
    )
    """
    Fit this judge version's anchors only (default: the judge's newest version with anchors, the one whose first anchor arrived last). Anchors of different judge versions are never fitted together.
    """
    member_versions: dict[str, Any] | None = None
    """
    A panel's: the judge version of a member's anchors to fit, by member (null: its anchors uploaded without a version). A member not named fits the anchors its unversioned requests are served by: its unversioned anchors where it has any, else its only judge version, else the one its active calibrations were trained on. The job's request shows every member's, resolved.
    """
    method: IsotonicMethod = Field(..., title='IsotonicMethod')
    options: IsotonicTrainingOptions | None = Field(
        None, title='IsotonicTrainingOptions'
    )
    rubrics: list[Rubric] | None = Field(None, min_length=1)
    """
    Rubrics to train (default: every cell of the judge with at least jobs.min_anchors anchors). All rubrics of one job are fitted together and share strength.
    """


class AutoMethod(Enum):
    auto = 'auto'


class TrainingUnitsDto(BaseModel):
    """
    The training anchors' units, as the drift alarm starts from them.
    """

    anchors: int = Field(..., ge=0)
    misses: int = Field(..., ge=0)
    """
    Training anchors outside their interval.
    """
    rho: float
    """
    The intra-unit correlation of misses the alarm starts betting with (estimated from
    these units, shrunk towards 0.05 and widened by 1.25; a declared
    `calibrators.drift_max_rho` caps it).
    """
    units: int = Field(..., ge=0)


class TransportDto(BaseModel):
    """
    The corrector's bias on this run, from its labelled items.
    """

    bias_interval: list[float]
    """
    Its interval for the corrector's bias on the population the run was drawn from (no
    finite-run correction); excluding 0, the corrector is biased on runs like this one and
    a plain answer would be off by about this much (`warnings` says so).
    """
    interval: list[float]
    """
    Its interval at the request's level for this run's own mean residual (the labelled
    items are a sample of the run: finite-run corrected).
    """
    mean_residual: float
    """
    Mean of reference − corrected on the labelled items.
    """


class VarianceDto(BaseModel):
    """
    The variance of an estimate, in its parts.
    """

    corrector: float
    """
    From the corrector's finite anchors (0 on the labelled path, which does not rely on
    the corrector; 0 where `corrector_term` is `omitted`).
    """
    group: float
    """
    From the system-specific bias of the run's group (plain path, where the anchors carry
    groups): see `group`.
    """
    sampling: float
    """
    From the run's own items: the noise of the reference around the corrected scores
    (plain), or the labelled sample (labelled).
    """
    total: float


class Verdict(Enum):
    """
    What a bridge decides.
    """

    carry_over = 'carry_over'
    refit = 'refit'
    more_items = 'more_items'


class WarningCode(Enum):
    """
    What a warning is about. Stable: a code is never renamed or reused; new ones are added.
    """

    judge_version_mismatch = 'judge_version_mismatch'
    member_version_mismatch = 'member_version_mismatch'
    outside_anchors = 'outside_anchors'
    covariate_outside_anchors = 'covariate_outside_anchors'
    covariates_unused = 'covariates_unused'
    covariates_missing = 'covariates_missing'
    covariate_misfit = 'covariate_misfit'
    covariates_held = 'covariates_held'
    members_missing = 'members_missing'
    new_group = 'new_group'
    extrapolated = 'extrapolated'
    sparse_anchors = 'sparse_anchors'
    repeats_beyond_anchors = 'repeats_beyond_anchors'
    few_system_anchors = 'few_system_anchors'
    corrector_omitted = 'corrector_omitted'
    corrector_biased = 'corrector_biased'
    groups_unmeasured = 'groups_unmeasured'
    groups_conservative = 'groups_conservative'
    groups_outlying = 'groups_outlying'
    label_plan_short = 'label_plan_short'
    single_look = 'single_look'
    tied_judge_scores = 'tied_judge_scores'
    no_raw_kappa = 'no_raw_kappa'
    judge_reversed = 'judge_reversed'
    input_missing = 'input_missing'
    run_unlike_labelled = 'run_unlike_labelled'
    unlabelled_systems = 'unlabelled_systems'
    underlabelled_systems = 'underlabelled_systems'
    unbounded_systems = 'unbounded_systems'
    single_rater = 'single_rater'
    dominant_rater = 'dominant_rater'


class WebhookDto(BaseModel):
    created_at: str
    events: list[str]
    """
    The alarm types it receives; empty: all of them.
    """
    id: str
    source: str
    """
    `configured` for the hook `webhooks.url` sets, `key` for one a key made.
    """
    url: str


class WebhooksResponse(BaseModel):
    webhooks: list[WebhookDto]


class WinRateDto(BaseModel):
    """
    A system's win rate (people's preference) with its interval at `level`.
    """

    comparisons: int = Field(..., ge=0)
    """
    The run's comparisons it is over.
    """
    estimate: float
    interval: list[float] = Field(..., max_length=2, min_length=2)
    labelled: int = Field(..., ge=0)
    """
    The labelled comparisons (the cell's and the run's) correcting the judge's.
    """


class Agreement(BaseModel):
    """
    How one kind of score agrees with the reference.
    """

    kappa: Kappas | None = None
    kendall: Figure | None = None
    n: int = Field(..., ge=0)
    """
    Items compared.
    """
    pearson: Figure | None = None
    spearman: Figure | None = None


class AnchorBatchRequest(BaseModel):
    """
    One cell's anchors as JSON. CSV uploads (`text/csv`) carry the columns
    `judge,rubric,item_id,judge_score,reference_score` (and optionally `group`, `rater`,
    `judge_version` and `covariate.<name>` per covariate) instead, for any number of cells.
    """

    anchors: list[AnchorRow] = Field(..., min_length=1)
    judge: str = Field(
        ...,
        examples=['gpt-4o-mini'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    judge_version: str | None = Field(
        None,
        examples=['gpt-4o-2024-08-06+prompt:9f2c1a'],
        max_length=128,
        min_length=1,
        pattern='^[^\\u0000-\\u001F\\u007F-\\u009F\\s]([^\\u0000-\\u001F\\u007F-\\u009F]*[^\\u0000-\\u001F\\u007F-\\u009F\\s])?$',
    )
    """
    The judge version that gave the scores: the platform's own label (model snapshot, a hash of the prompt template, decoding settings). Leave it out for unversioned scores.
    """
    rubric: str = Field(
        ...,
        examples=['coherence'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )


class AnswerWarning(BaseModel):
    """
    One thing to know about an answer (`AnswerWarning` in the API's schema, so that a client's
    generated type does not shadow a language's own `Warning`).
    """

    code: WarningCode
    field: str | None = None
    """
    The request field it is about (`covariates.length`, `comparisons.verdict_swapped`).
    """
    items: list[str] | None = None
    """
    The items it is about: at most 20 ids (or rows counted from 1 where the request gave
    no ids).
    """
    message: str
    """
    What is off and what to do, in words.
    """
    systems: list[str] | None = None
    """
    The systems (groups, runs of a ranking) it is about.
    """


class AutoSettings(BaseModel):
    """
    The settings of `"method": "auto"` besides each candidate's options (given under the
    candidate's name, e.g. `"bayes": {"draws": 2000}`).
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    flow_min_anchors: int | None = Field(1000, ge=2)
    """
    A cell needs this many anchors for the flow to be a candidate.
    """
    folds: int | None = Field(5, ge=2, le=20)
    """
    k of the k folds every candidate is evaluated on.
    """
    holdout: float | None = Field(None, gt=0.0, lt=1.0)
    """
    Evaluate every candidate on this held-out fraction instead (one flow training instead
    of k).
    """
    objective: Objective | None = 'mae'
    """
    The held-out figure that picks the winner per cell (lower is better; `mean_error` is
    taken absolute). A candidate worse than the raw judge on it never wins.
    """
    seed: int | None = Field(0, ge=0)
    """
    Seeds the split and every fit.
    """
    tie_break: Objective | None = 'kl_mean'
    """
    Breaks ties on the objective.
    """
    tie_tolerance: float | None = Field(0.01, ge=0.0, le=0.5)
    """
    Candidates within this fraction of the best objective are tied.
    """


class BayesOptions(BaseModel):
    """
    Sampler, priors and canary. The defaults are the paper's: 2 chains × (500 warm-up + 1,000
    draws), target acceptance 0.9.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    chains: int | None = Field(2, ge=1, le=16)
    """
    NUTS chains, each on its own thread.
    """
    collapse_beta: float | None = 0.3
    """
    The canary fires when Pr(β < collapse_beta | anchors) > collapse_probability.
    """
    collapse_probability: float | None = Field(0.05, gt=0.0, lt=1.0)
    draws: int | None = Field(1000, ge=10, le=100000)
    """
    Kept draws per chain.
    """
    priors: Priors | None = Field(
        {'alpha_mean': 0.0, 'alpha_sd': 2.0, 'beta_mean': 1.0, 'beta_sd': 2.0, 'sigma_scale': 1.0, 'tau_scale': 1.0},
        validate_default=True,
    )
    target_accept: float | None = Field(0.9, gt=0.5, lt=1.0)
    """
    NUTS target acceptance.
    """
    warmup: int | None = Field(500, ge=0, le=100000)
    """
    Warm-up iterations per chain.
    """


class Bias(BaseModel):
    """
    The mean bias (score − reference) of a slice of anchors, raw and corrected.
    """

    corrected: Figure | None = None
    n: int = Field(..., ge=0)
    """
    Anchors in the slice.
    """
    raw: Figure | None = None


class Biases(BaseModel):
    """
    The judge's biases beside the people's; a share nothing could be read for is `None`.
    """

    agreement: Share | None = None
    favouritism: list[Favouritism]
    flips: Share | None = None
    judge_first: Share | None = None
    judge_longer: Share | None = None
    length_covariate: str | None = None
    """
    The covariate whose sign says which answer is longer (`length_diff` or
    `log_length_ratio`); `None`: no comparison carries one, and no longer-answer rates.
    """
    people_first: Share | None = None
    people_longer: Share | None = None


class Bridge(BaseModel):
    """
    A bridge's answer (a check stores it, and reads it back).
    """

    bands: list[GroupShift]
    """
    Per score band (with at least 30 shared items).
    """
    corrected: BridgeShift | None = None
    groups: list[GroupShift]
    """
    Per group, where the items name two or more.
    """
    items: int = Field(..., ge=0)
    more_items: int | None = Field(None, ge=0)
    """
    With `more_items`: about how many more shared items would decide it (None where the
    shift sits at the tolerance, which no number of items decides).
    """
    raw: RawShift | None = None
    reason: str
    """
    Why, in words.
    """
    reversed: bool | None = None
    """
    The new scores reverse the old order ([`reverses`]): `refit`, whatever the mean did.
    """
    tolerance: float
    verdict: Verdict


class BridgeResponse(Bridge):
    calibrator: int
    """
    The calibrator version (trained on `from`) applied to both versions' scores; in a
    pairwise cell, the newest trained version of `from` (GET .../preferences), whose
    calibrated preference is applied to both versions' verdicts.
    """
    from_: str | None = Field(None, alias='from')
    to: str | None = None
    warnings: list[AnswerWarning]
    """
    What a reader of the verdict must know (`judge_reversed`); empty when nothing.
    """


class CandidateDto(BaseModel):
    evaluation: EvaluationDto | None = None
    excluded: str | None = None
    """
    Why it was not considered for this cell.
    """
    method: str
    """
    identity (the raw judge), quantile_map, bayes or flow.
    """


class CellIngestDto(BaseModel):
    anchor_count: int
    """
    The cell's anchors after this upload.
    """
    coverage: CoverageDto | None = None
    inserted: int = Field(..., ge=0)
    judge: str
    judge_version: str | None = None
    """
    The judge version of these rows; absent for unversioned ones.
    """
    replaced: int = Field(..., ge=0)
    rubric: str
    unchanged: int = Field(..., ge=0)


class CheckResponse(BridgeResponse):
    changed: bool
    """
    The corrected mean moved beyond the tolerance under the same label (verdict `refit`):
    the provider changed the model behind it. Sets `judgecal_judge_changed`.
    """
    id: str


class ComparisonBatchRequest(BaseModel):
    """
    One cell's comparisons as JSON. CSV uploads (`text/csv`) carry the columns
    `judge,rubric,item_id,a,b,verdict` (and optionally `verdict_swapped`, `preference`,
    `rater`, `judge_version` and `covariate.<name>` per covariate) instead, for any number of
    cells.
    """

    comparisons: list[ComparisonRow] = Field(..., min_length=1)
    judge: str = Field(
        ...,
        examples=['gpt-4o-mini'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    judge_version: str | None = Field(
        None,
        examples=['gpt-4o-2024-08-06+prompt:9f2c1a'],
        max_length=128,
        min_length=1,
        pattern='^[^\\u0000-\\u001F\\u007F-\\u009F\\s]([^\\u0000-\\u001F\\u007F-\\u009F]*[^\\u0000-\\u001F\\u007F-\\u009F\\s])?$',
    )
    """
    The judge version that gave the scores: the platform's own label (model snapshot, a hash of the prompt template, decoding settings). Leave it out for unversioned scores.
    """
    rubric: str = Field(
        ...,
        examples=['coherence'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )


class ComparisonDto(BaseModel):
    calibrated: EvaluationDto
    """
    This version's held-out corrections.
    """
    raw: EvaluationDto
    """
    The raw judge scores of the same anchors.
    """
    scheme: str
    """
    `5-fold` or `holdout 0.2`.
    """


class CorrectItems(BaseModel):
    model_config = ConfigDict(
        extra='forbid',
    )
    items: list[ItemScore] = Field(..., min_length=1)
    """
    Raw judge scores with ids echoed back in the results; for a panel, each item's
    members' scores (`scores`).
    """
    judge: str = Field(
        ...,
        examples=['gpt-4o-mini'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    judge_version: str | None = Field(
        None,
        examples=['gpt-4o-2024-08-06+prompt:9f2c1a'],
        max_length=128,
        min_length=1,
        pattern='^[^\\u0000-\\u001F\\u007F-\\u009F\\s]([^\\u0000-\\u001F\\u007F-\\u009F]*[^\\u0000-\\u001F\\u007F-\\u009F\\s])?$',
    )
    """
    The judge version that gave the scores: the platform's own label (model snapshot, a hash of the prompt template, decoding settings). Leave it out for unversioned scores.
    """
    rubric: str = Field(
        ...,
        examples=['coherence'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    version: int | None = Field(None, ge=1)
    """
    A version of the cell to use instead of the active one.
    """


class CorrectRequest(RootModel[CorrectScores | CorrectItems]):
    root: CorrectScores | CorrectItems
    """
    The body of POST /v1/correct: `scores`, or `items` to get ids back (not both).
    """


class CorrectResponse(BaseModel):
    canary: bool | None = None
    """
    The beta canary of that version (a bayes version's, or the Bayesian fit an auto job
    kept beside another winner); when true the judge no longer tracks the reference on
    this rubric and no linear correction can fix it. Absent where there is no such fit.
    """
    judge: str
    judge_version: str | None = None
    """
    The judge version the calibration was trained on; absent for unversioned anchors.
    """
    method: str
    """
    The method of that version: `bayes`, `flow`, `quantile_map` or `identity` (the raw
    judge score, served when an `auto` job found no corrector that beats it).
    """
    results: list[CorrectedDto]
    """
    One per input score, in order.
    """
    review_count: int | None = Field(None, ge=0)
    """
    flow: how many of the results are routed to review.
    """
    rubric: str
    version: int
    """
    The calibrator version that made every number below.
    """
    warnings: list[AnswerWarning]
    """
    What a reader of these numbers must know (a judge version the calibration was not
    trained on, scores or covariates outside the anchors', covariates not used); empty
    when there is nothing to say.
    """


class CreatedWebhook(WebhookDto):
    secret: str
    """
    The signing secret (Standard Webhooks: `whsec_` and base64), shown this once: verify
    each delivery's `webhook-signature` with it.
    """


class DecisionDto(BaseModel):
    """
    What an `auto` job saw and chose for this cell.
    """

    beta: PosteriorDto | None = None
    candidates: list[CandidateDto]
    chosen: str
    nested: EvaluationDto | None = None
    objective: str
    """
    The figure that picked the winner (lower is better), and the tie-break.
    """
    reason: str
    scheme: str
    """
    `5-fold` or `holdout 0.2`: the anchors every candidate was evaluated on.
    """
    tie_break: str
    tie_tolerance: float
    """
    Candidates within this fraction of the best objective were tied.
    """


class DeliveriesResponse(BaseModel):
    deliveries: list[DeliveryDto]


class ErrorDetail(BaseModel):
    code: str
    """
    Stable, machine-readable: `invalid_input`, `conflict`, `not_found`, `unauthorized`,
    `forbidden`, `malformed_json`, `unsupported_media_type`, `payload_too_large`,
    `method_not_allowed`, `too_many_requests`, `timeout`, `store_unavailable` (503 with
    Retry-After: the database cannot be reached; retry), `internal`.
    """
    details: list[ProblemDto]
    """
    One entry per problem; empty when the message says it all.
    """
    message: str
    """
    What to fix, for a person.
    """


class EstimateItems(BaseModel):
    model_config = ConfigDict(
        extra='forbid',
    )
    assume_missing_at_random: bool | None = None
    """
    A panel's runs only: take the members' missing scores as missing at random (their
    absence depends on nothing, or only on what the other members scored) without testing
    it. By default a run whose members score its partial items differently from its
    complete ones (a judge that fails on hard items) is refused, naming the member.
    """
    costs: Costs | None = None
    group: str | None = Field(
        None,
        examples=['BART'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    """
    The system whose outputs the run holds, as the anchors name their groups: a known group gets its own shrunk bias correction, a new one (or none) the between-group variance of the bias.
    """
    hold: (
        dict[
            constr(pattern=r'^[A-Za-z0-9][A-Za-z0-9._:-]*$', min_length=1, max_length=64),
            Hold,
        ]
        | None
    ) = Field(None, examples=[{'length': 812}], max_length=16)
    """
    Optional numeric inputs beside the judge score, by name (a response's length in tokens, its count of markdown headers). A calibration trained with `covariates` corrects at the judge score and these values; in CSV, one column `covariate.<name>` each (empty: not given).
    """
    items: list[RunItemDto] = Field(..., min_length=1)
    """
    The run's items, with ids, reference scores or clusters.
    """
    judge: str = Field(
        ...,
        examples=['gpt-4o-mini'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    judge_version: str | None = Field(
        None,
        examples=['gpt-4o-2024-08-06+prompt:9f2c1a'],
        max_length=128,
        min_length=1,
        pattern='^[^\\u0000-\\u001F\\u007F-\\u009F\\s]([^\\u0000-\\u001F\\u007F-\\u009F]*[^\\u0000-\\u001F\\u007F-\\u009F\\s])?$',
    )
    """
    The judge version that gave the scores: the platform's own label (model snapshot, a hash of the prompt template, decoding settings). Leave it out for unversioned scores.
    """
    level: float | None = Field(None, examples=[0.95], ge=0.5, le=0.999)
    """
    Of the interval (default 0.95).
    """
    rubric: str = Field(
        ...,
        examples=['coherence'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    target_half_width: float | None = Field(None, examples=[0.05], gt=0.0)
    """
    A half-width to plan for: the answer says whether more anchors (or labelled items)
    would reach it, and about how many, or that the run's own size is the limit.
    """
    version: int | None = Field(None, ge=1)
    """
    A version of the cell to use instead of the active one.
    """


class FlowOptions(BaseModel):
    """
    Network, training and inference settings. The training recipe comes from `preset`; each
    training option given overrides the preset's value.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    batch_size: int | None = Field(None, ge=0, le=1000000)
    """
    Anchors per optimiser step, reshuffled each epoch; 0 for full-batch steps; default:
    the preset's.
    """
    dropout: float | None = Field(0.1, ge=0.0, lt=0.9)
    """
    Dropout on every hidden layer.
    """
    early_stopping: float | None = Field(None, ge=0.0, lt=0.5)
    """
    Hold out this fraction of the training anchors and stop when its loss has not
    improved for `patience` epochs, keeping the best weights; 0 turns it off; default:
    the preset's.
    """
    embedding_dim: int | None = Field(4, ge=1, le=64)
    """
    Size of the learned rubric embedding.
    """
    epochs: int | None = Field(None, ge=1, le=100000)
    """
    Passes over the training anchors (`paper`: 1,500); given without `steps`, training
    makes this many epochs.
    """
    hidden: int | None = Field(64, ge=2, le=1024)
    """
    Hidden width of the three-layer tanh MLP.
    """
    learning_rate: float | None = Field(None, gt=0.0, lt=1.0)
    """
    Adam's (starting) learning rate; default: the preset's.
    """
    mc_passes: int | None = Field(40, ge=2, le=1000)
    """
    MC-dropout passes per correction.
    """
    patience: int | None = Field(None, ge=0)
    """
    Default: the preset's.
    """
    preset: FlowPreset | None = 'fast'
    """
    `fast` (the default: minibatches and a cosine schedule) or `paper` (1,500 full-batch
    epochs at 3e-3).
    """
    review: ReviewRule | None = Field({'top_percent': 5.0}, validate_default=True)
    """
    `{"top_percent": 5}` (the 5% highest σ on the cell's anchors) or `{"sigma_above": 0.3}`.
    """
    schedule: Schedule | None = None
    step: float | None = Field(0.1, gt=0.0, le=1.0)
    """
    RK4 step on [0, 1]; must divide 1 (0.1, 0.05, 0.25, ...).
    """
    steps: int | None = Field(None, ge=0, le=1000000)
    """
    Optimiser steps, however many anchors there are, in place of epochs (`fast`: 220;
    0 counts `epochs` instead).
    """


class GroupBias(BaseModel):
    """
    A version's measure of how its bias varies between groups.
    """

    groups: list[GroupResidual]
    """
    Every group with at least one held-out anchor, by name.
    """
    mean: float
    """
    The unweighted mean of the groups' mean residuals (answers centre a new group's bias
    on their precision-weighted mean, under τ's posterior).
    """
    mean_square_error: float
    """
    The mean squared standard error of the group means, s̄².
    """
    rule: str
    """
    `random_effects` (at least 5 groups) or `conservative` (2 to 4: known groups keep
    their own means, a new group's bias is Student's t on G − 1 degrees of freedom).
    """
    spread: float
    """
    The sample variance of the group means, S_b².
    """
    tau: float
    """
    The between-group standard deviation of the bias, τ̂ (Paule–Mandel; 0 where the group
    means vary no more than their standard errors explain).
    """
    ungrouped: int = Field(..., ge=0)
    """
    Held-out anchors without a group (not counted above).
    """
    within: float | None = None
    """
    The pooled within-group residual variance (0 in versions trained before groups kept
    their own).
    """


class IngestResponse(BaseModel):
    cells: list[CellIngestDto]
    inserted: int = Field(..., ge=0)
    """
    New anchors stored.
    """
    replaced: int = Field(..., ge=0)
    """
    Anchors overwritten (only with `replace=true`).
    """
    unchanged: int = Field(..., ge=0)
    """
    Anchors already stored with the same scores (a retried upload is safe).
    """


class IntervalsDto(BaseModel):
    """
    A version's 95% predictive intervals and how often they covered anchors it did not see.
    """

    bins: list[IntervalBinDto]
    held_out: int = Field(..., ge=0)
    """
    Held-out anchors the coverage was measured on (conformal: each checked against bands
    made without its fifth of them).
    """
    held_out_coverage: float | None = None
    level: float
    miss_bound: float
    """
    A bound on the share of new anchors the intervals miss, which holds given this
    version's training anchors except for one version in 1,000: the miss rate the drift
    alarm tests against (the nominal 0.05 for `method`).
    """
    source: str
    """
    `conformal` (the corrected score plus the band of held-out residuals of the judge
    score's bin), `scaled` (the Bayesian posterior predictive, its half-width scaled by the
    band of the bin's held-out residuals in units of it) or `method` (the posterior
    predictive as is: versions trained before bands were conformalised).
    """
    training_units: TrainingUnitsDto | None = None


class JobDto(BaseModel):
    attempts: int
    """
    Times a process has taken the job (more than 1 after a process died running it).
    """
    created_at: str
    detail: dict[str, Any] | None = None
    """
    What the job last reported: for a flow, `{"epoch", "loss"}`; for auto, `{"step"}`; a
    panel's, `{"joined": {rubric: {"items", "member_anchors"}}}` (the items every member
    scored, and each member's anchors before the join) once done.
    """
    error: str | None = None
    """
    Why it failed.
    """
    finished_at: str | None = None
    id: str
    judge: str
    method: str
    progress: float
    """
    0 to 1.
    """
    request: dict[str, Any]
    """
    The request with every default filled in.
    """
    started_at: str | None = None
    state: str
    """
    `queued`, `running`, `succeeded`, `failed` or `cancelled`.
    """
    versions: list[JobVersionDto]


class JudgeSettings(BaseModel):
    model_config = ConfigDict(
        extra='forbid',
    )
    on_version_mismatch: OnMismatch
    """
    What a request gets when it names a judge version that has no calibration of its own:
    `warn` (the default: served by the active calibration, with a warning naming both
    versions) or `refuse` (409). Either way it counts
    `judgecal_judge_version_mismatch_total`.
    """


class LabelPlanDto(BaseModel):
    """
    Where labels would settle the ranking.
    """

    budget: int | None = Field(None, ge=0)
    min_gap: float
    next_round: int = Field(..., ge=0)
    """
    The look to send them with.
    """
    open_pairs: int = Field(..., ge=0)
    """
    Pairs neither resolved nor settled as within ±min_gap.
    """
    paired: bool
    """
    Whether every run has the same ids, so that the labels fall on the same items.
    """
    pilot: bool
    """
    A first sample of `PILOT_LABELS` (20) per run in an open pair, to send back at the
    next look, which plans the rest from what it measures (made before any labels where
    the runs pair by id and two more looks remain).
    """
    power: float
    runs: list[RunLabelsDto]
    seed: int = Field(..., ge=0)
    step: bool
    """
    A step toward the plan: a tenth of each run's labels in the whole plan (at least 10
    where it asks any), to send back at the next look, which plans again on sharper gaps
    (made where the runs pair by id, have labels, and two more looks remain).
    """
    targets_reached: int = Field(..., ge=0)
    """
    Of them, those whose target the plan reaches, as its model predicts (for a `step`,
    the whole plan it is a share of).
    """
    total: int = Field(..., ge=0)
    """
    Labels in all.
    """
    uniform_total: int | None = Field(None, ge=0)
    """
    The labels one count for every run would take to reach the same targets (`null` where
    no count does).
    """


class LevelBias(BaseModel):
    """
    The bias where the judge gave scores from `from` to `to` (one level where they are equal).
    """

    bias: Bias
    from_: float = Field(..., alias='from')
    to: float


class PanelPlanDto(BaseModel):
    best_single: SubPanelPlanDto
    """
    The single judge that needs the fewest labels.
    """
    cheapest: SubPanelPlanDto
    """
    The sub-panel with the lowest total cost.
    """
    effective_judges: float | None = None
    """
    How many independent judges the members are worth: 1ᵀR⁻¹1 for R the correlation of
    their errors (the number of members where the errors are independent, 1 where they
    are one judge's).
    """
    labels_saved: int
    """
    Labels the best single judge needs, less the cheapest sub-panel's: what the panel is
    worth in human labels for this run.
    """
    panel: str
    rubric: str
    sub_panels: list[SubPanelPlanDto]
    """
    Every sub-panel, the full panel last. A panel of more than six members lists each
    member alone, the cheapest sub-panel of each size and the full panel: all 2^M − 1 are
    weighed, the thousands are not listed.
    """
    version: int
    """
    The panel's version the plan is read from (the active one).
    """


class PreferenceVersionDto(BaseModel):
    """
    One trained version of a pairwise cell.
    """

    biases: Biases
    candidates: list[Figures]
    """
    Every candidate's held-out log-loss and accuracy.
    """
    chosen: str
    """
    The candidate `auto` chose: the lowest held-out log-loss (5 folds).
    """
    comparisons: int
    """
    Comparisons read (the judge's shares read all of them), and how many carry the
    people's preference (the map and the people's shares read those).
    """
    covariates: list[str]
    """
    The covariates the map read: those every labelled comparison carries.
    """
    created_at: str
    digest: str
    """
    SHA-256 of the comparisons read, in item order.
    """
    job_id: str | None = None
    judge_version: str | None = None
    """
    The judge version whose comparisons it read (absent: those without one).
    """
    labelled: int
    panel: list[PanelMember] | None = None
    """
    A pairwise panel's version: its members in the order its map reads them, each with the
    judge version fitted, its comparisons before the join, and its own map's held-out
    figures on the panel's labelled comparisons (does the panel beat its best member?).
    """
    raw: Figures
    """
    The raw verdict as the probability that people prefer a (a hard verdict read as 95%
    sure), on the same labelled comparisons, in-sample.
    """
    reliability: list[Reliability]
    """
    The chosen map's held-out predictions in up to ten bins of equal count, against the
    people's mean preference in each.
    """
    systems: list[str]
    version: int


class PreferencesResponse(BaseModel):
    versions: list[PreferenceVersionDto]
    """
    Newest first; the newest is the one the cell's picture and metrics show.
    """


class RankRunItems(BaseModel):
    model_config = ConfigDict(
        extra='forbid',
    )
    group: str | None = Field(
        None,
        examples=['BART'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    """
    The system whose outputs the run holds, as the anchors name their groups: a known group gets its own shrunk bias correction, a new one (or none) the between-group variance of the bias.
    """
    items: list[RunItemDto] = Field(..., min_length=1)
    """
    The run's items, with ids (the same ids in every run pair them), reference scores or
    clusters.
    """
    judge_version: str | None = Field(
        None,
        examples=['gpt-4o-2024-08-06+prompt:9f2c1a'],
        max_length=128,
        min_length=1,
        pattern='^[^\\u0000-\\u001F\\u007F-\\u009F\\s]([^\\u0000-\\u001F\\u007F-\\u009F]*[^\\u0000-\\u001F\\u007F-\\u009F\\s])?$',
    )
    """
    The judge version that gave the scores: the platform's own label (model snapshot, a hash of the prompt template, decoding settings). Leave it out for unversioned scores.
    """
    name: str = Field(..., examples=['model-a'], max_length=256, min_length=1)
    """
    The run's name in the answer (a model, a checkpoint): unique within the request.
    """


class RecipeDto(BaseModel):
    """
    How a flow version was trained.
    """

    batch_size: int | None = Field(None, ge=0)
    """
    Anchors per optimiser step; absent for full-batch steps.
    """
    early_stopping: float | None = None
    """
    The validation fraction, when early stopping was on.
    """
    epochs: int | None = Field(None, ge=0)
    """
    Epochs asked for (`epochs_run` says how many ran); absent when `steps` counted.
    """
    learning_rate: float
    schedule: Schedule
    steps: int | None = Field(None, ge=0)
    """
    Optimiser steps, when they counted in place of epochs.
    """


class RunBody(RootModel[RunScores | RunItems]):
    root: RunScores | RunItems
    """
    A run: bare judge scores, or items (with ids, reference scores or clusters).
    """


class RunEstimateDto(BaseModel):
    """
    One run's de-biased mean.
    """

    calibrator: int | None = None
    """
    Where the runs named different judge versions: the calibrator version that corrected
    this run.
    """
    corrector_term: str
    """
    How the corrector's own uncertainty entered: `posterior` (bayes, closed form),
    `resampled` (refits on resampled anchors), `anchor_offset` (identity: the anchors' mean
    residual and its standard error), `omitted` (flow; `warnings` says why) or
    `not_needed` (labelled path).
    """
    estimate: float
    """
    The estimate of the mean reference score the run's items would get if every one were
    labelled.
    """
    group: GroupTermDto
    interval: list[float]
    judge_version: str | None = None
    """
    And the judge version that version was trained on.
    """
    labelled: int = Field(..., ge=0)
    """
    Items with a reference score.
    """
    lambda_: float | None = Field(None, alias='lambda')
    """
    labelled path: the weight PPI++ gave the corrector (0: ignored, 1: trusted fully).
    """
    n: int = Field(..., ge=0)
    """
    Items in the run.
    """
    path: str
    """
    `plain` (judge scores only) or `labelled` (PPI++ with the run's labelled items); in a
    ranking, a run with labelled items is `combined`: its plain and labelled estimates
    weighted by the inverse of their variances.
    """
    support: SupportDto
    transport: TransportDto | None = None
    variance: VarianceDto


class RunReading(BaseModel):
    """
    What every run-level answer ends with: how the runs' items were read (covariates, repeats)
    and what a reader of the answer must know.
    """

    covariates: str | None = None
    """
    A version trained with covariates: `as_given` (each item read at its own covariates)
    or `held` (at the covariates `hold` names: a length-controlled answer); absent otherwise.
    """
    repeats: RepeatsDto | None = None
    warnings: list[AnswerWarning]
    """
    What a reader of the answer must know, each with a stable code (docs/api.md lists
    them): runs served by another judge version's calibration, then what the statistics
    found (extrapolation, a left-out term, a transport check that found bias, a plan's
    shortfall).
    """


class SystemBias(BaseModel):
    """
    The bias on one system's outputs (the anchors' group).
    """

    bias: Bias
    group: str


class SystemRatingDto(BaseModel):
    """
    One system's rating, its interval and rank interval, and its win rates.
    """

    comparisons: int = Field(..., ge=0)
    """
    The run's comparisons of this system.
    """
    field_win_rate: WinRateDto | None = None
    interval: list[float] = Field(..., max_length=2, min_length=2)
    """
    At `level`; [0, 0] for the baseline.
    """
    rank_interval: list[int] = Field(..., examples=[[1, 3]], max_length=2, min_length=2)
    """
    [best, worst] ranks (1 the highest rating); every system's hold at once at `level`.
    """
    rating: float
    """
    Bradley–Terry rating on the natural log-odds scale: people prefer a over b with
    probability σ(rating_a − rating_b).
    """
    standard_error: float
    system: str
    win_rate: WinRateDto | None = None


class AutoTrainingOptions(BaseModel):
    model_config = ConfigDict(
        extra='forbid',
    )
    bayes: BayesOptions | None = None
    flow: FlowOptions | None = None
    flow_min_anchors: int | None = Field(1000, ge=2)
    """
    A cell needs this many anchors for the flow to be a candidate.
    """
    folds: int | None = Field(5, ge=2, le=20)
    """
    k of the k folds every candidate is evaluated on.
    """
    holdout: float | None = Field(None, gt=0.0, lt=1.0)
    """
    Evaluate every candidate on this held-out fraction instead (one flow training instead
    of k).
    """
    identity: IdentityOptions | None = None
    isotonic: IsotonicOptions | None = None
    objective: Objective | None = 'mae'
    """
    The held-out figure that picks the winner per cell (lower is better; `mean_error` is
    taken absolute). A candidate worse than the raw judge on it never wins.
    """
    quantile_map: QuantileMapOptions | None = None
    seed: int | None = Field(0, ge=0)
    """
    Seeds the split and every fit.
    """
    tie_break: Objective | None = 'kl_mean'
    """
    Breaks ties on the objective.
    """
    tie_tolerance: float | None = Field(0.01, ge=0.0, le=0.5)
    """
    Candidates within this fraction of the best objective are tied.
    """


class AutoTraining(BaseModel):
    """
    auto: every method on the same held-out folds, the winner served per cell
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    covariates: list[Covariate] | None = Field(None, max_length=4)
    """
    Covariates the anchors carry (their `covariates`) to consider beside the judge score, e.g. ["length"]. Left out, the training considers those every anchor of the judge's fitted cells carries (the first 4 by name); `[]` fits the judge score alone. Each enters raw, logged or piecewise linear in its log, and only where it lowers held-out error in the rubric by more than 1% (the version's `covariates` report lists what was tried, the coefficients and their intervals); the corrector is then trained on the layer's score. Every anchor fitted must carry each one named. Where an unnamed covariate is kept in no rubric the version reads the judge score alone. A version whose layer reads a covariate corrects items that give it ({"score", "covariates"}); items sent without covariates are corrected by the same training's judge-score-only fit, warned `covariates_missing`.
    """
    judge_version: str | None = Field(
        None,
        examples=['gpt-4o-2024-08-06+prompt:9f2c1a'],
        max_length=128,
        min_length=1,
        pattern='^[^\\u0000-\\u001F\\u007F-\\u009F\\s]([^\\u0000-\\u001F\\u007F-\\u009F]*[^\\u0000-\\u001F\\u007F-\\u009F\\s])?$',
    )
    """
    Fit this judge version's anchors only (default: the judge's newest version with anchors, the one whose first anchor arrived last). Anchors of different judge versions are never fitted together.
    """
    member_versions: dict[str, Any] | None = None
    """
    A panel's: the judge version of a member's anchors to fit, by member (null: its anchors uploaded without a version). A member not named fits the anchors its unversioned requests are served by: its unversioned anchors where it has any, else its only judge version, else the one its active calibrations were trained on. The job's request shows every member's, resolved.
    """
    method: AutoMethod = Field(..., title='AutoMethod')
    options: AutoTrainingOptions | None = Field(None, title='AutoTrainingOptions')
    rubrics: list[Rubric] | None = Field(None, min_length=1)
    """
    Rubrics to train (default: every cell of the judge with at least jobs.min_anchors anchors). All rubrics of one job are fitted together and share strength.
    """


class TrainingRequestDoc(
    RootModel[
        IdentityTraining
        | QuantileMapTraining
        | BayesTraining
        | FlowTraining
        | IsotonicTraining
        | AutoTraining
    ]
):
    root: IdentityTraining | QuantileMapTraining | BayesTraining | FlowTraining | IsotonicTraining | AutoTraining


class AgreementReport(BaseModel):
    """
    The report.
    """

    bias: Bias
    by_group: list[SystemBias]
    """
    By the anchors' group, where any names one.
    """
    by_level: list[LevelBias]
    """
    By the judge's level where it gives at most [`MAX_LEVELS`] distinct scores, else by
    [`BINS`] bins of about equal size.
    """
    corrected: Agreement
    """
    The held-out corrected scores against the reference, over the held-out anchors.
    """
    disagreements: list[Disagreement]
    """
    The held-out anchors by how far the reference lies from the corrected score, largest
    first.
    """
    held_out: int = Field(..., ge=0)
    """
    Of them, those with a held-out corrected score.
    """
    levels: list[float] | None = None
    """
    The reference's levels where its scale is discrete (what the κs use).
    """
    n: int = Field(..., ge=0)
    """
    Anchors read.
    """
    raw: Agreement
    """
    The raw judge against the reference, over every anchor.
    """
    repeats: RepeatReport | None = None
    warnings: list[AnswerWarning]
    """
    What a reader could take wrongly from the figures.
    """


class AgreementResponse(AgreementReport):
    """
    The agreement report of one calibrator version, over the anchors it was fitted on.
    """

    group: str | None = None
    """
    The group the report is restricted to, where the request named one.
    """
    judge: str
    judge_version: str | None = None
    method: str
    rubric: str
    version: int
    """
    The version read, its method and the judge version it was trained on.
    """


class CompareBody(BaseModel):
    """
    The body of POST /v1/compare: two runs of one cell.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    a: RunBody
    """
    Run A (for example model A's outputs).
    """
    assume_missing_at_random: bool | None = None
    """
    A panel's runs only: take the members' missing scores as missing at random (their
    absence depends on nothing, or only on what the other members scored) without testing
    it. By default a run whose members score its partial items differently from its
    complete ones (a judge that fails on hard items) is refused, naming the member.
    """
    b: RunBody
    """
    Run B. Items with the same ids as A's are paired (the same prompts answered by two
    models); the pairing needs both runs to have the same set of ids.
    """
    estimand: str | None = Field(None, examples=['runs'], pattern='^(runs|population)$')
    """
    What the difference estimates: `runs` (default), the runs' own mean reference
    difference, what these very items would show if all were labelled; or `population`,
    the mean difference over the prompts the paired items were drawn from.
    """
    hold: (
        dict[
            constr(pattern=r'^[A-Za-z0-9][A-Za-z0-9._:-]*$', min_length=1, max_length=64),
            Hold,
        ]
        | None
    ) = Field(None, examples=[{'length': 812}], max_length=16)
    """
    Optional numeric inputs beside the judge score, by name (a response's length in tokens, its count of markdown headers). A calibration trained with `covariates` corrects at the judge score and these values; in CSV, one column `covariate.<name>` each (empty: not given).
    """
    judge: str = Field(
        ...,
        examples=['gpt-4o-mini'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    level: float | None = Field(None, examples=[0.95], ge=0.5, le=0.999)
    rubric: str = Field(
        ...,
        examples=['coherence'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    target_half_width: float | None = Field(None, examples=[0.05], gt=0.0)
    version: int | None = Field(None, ge=1)


class CompareResponse(RunReading):
    a: RunEstimateDto
    """
    Each run's own estimate.
    """
    b: RunEstimateDto
    corrector_term: str
    difference: float
    """
    mean(A) − mean(B), de-biased.
    """
    estimand: str
    """
    `runs` (the runs' own difference) or `population` (over the prompts).
    """
    group: GroupTermDto
    """
    The group term of the difference: cancelled where both runs name one group.
    """
    interval: list[float]
    judge: str
    level: float
    method: str
    p_value: float
    """
    Two-sided, against no difference.
    """
    paired: bool
    """
    Whether the items were paired by id.
    """
    pairs: int = Field(..., ge=0)
    """
    Items paired.
    """
    path: str
    """
    `plain` or `labelled` (either run has labelled items).
    """
    plan: PlanDto | None = None
    prob_a_greater: float | None = None
    """
    The probability that A's mean is the higher, from the interval's own distribution (the
    t or normal centred on `difference` with its standard error): an approximation, not a
    posterior; on every path.
    """
    rubric: str
    variance: VarianceDto
    version: int


class ErrorBody(BaseModel):
    error: ErrorDetail


class EstimateBody(RootModel[EstimateScores | EstimateItems]):
    root: EstimateScores | EstimateItems
    """
    The body of POST /v1/estimate: the cell, the run (`scores` or `items`, not both) and how
    to answer.
    """


class EstimateResponse(RunEstimateDto, RunReading):
    judge: str
    level: float
    method: str
    plan: PlanDto | None = None
    rubric: str
    version: int
    """
    The calibrator version that made every number.
    """


class FlowDto(BaseModel):
    epochs_run: int = Field(..., ge=0)
    mc_passes: int = Field(..., ge=0)
    """
    MC-dropout passes per correction.
    """
    recipe: RecipeDto
    review_audit: ReviewAuditDto | None = None
    review_sigma: float
    """
    σ above this routes a corrected score to review.
    """
    stopped_early: bool
    table: list[float]
    """
    The judge scores the correction table covers; others are evaluated directly.
    """
    train_loss: float
    """
    Mean squared error on the training anchors at the last epoch (score units²).
    """
    trained_on: int = Field(..., ge=0)
    """
    Anchors of the cell the flow was trained on (the rest were held out for evaluation).
    """
    validation_loss: float | None = None


class MethodReport(BaseModel):
    """
    What the version's method reports beyond its corrections: the fields of its own method's report.
    """

    diagnostics: DiagnosticsDto | None = None
    """
    bayes versions: the sampler's convergence.
    """
    flow: FlowDto | None = None
    """
    flow versions: how the flow was trained and how its review threshold performs.
    """
    posterior: PosteriorDto | None = None
    """
    bayes versions: the line's posterior and the canary.
    """


class RankRunBody(RootModel[RankRunScores | RankRunItems]):
    root: RankRunScores | RankRunItems
    """
    One run of a ranking.
    """


class RankedRunDto(RunEstimateDto):
    """
    One run in a ranking.
    """

    name: str
    rank: list[int] = Field(..., examples=[[1, 3]], max_length=2, min_length=2)
    """
    The ranks compatible with the pairs' intervals, 1 the highest mean: [best, worst].
    """
    top: bool
    """
    Whether the run may be the best (its rank interval reaches 1).
    """


class RatingsResponse(BaseModel):
    """
    The ratings of a run's systems by the people's preference, best first.
    """

    anchors: int = Field(..., ge=0)
    """
    The cell's labelled comparisons of both rated systems in the labelled set.
    """
    baseline: str
    calibration: RatingsCalibrationDto
    comparisons: int = Field(..., ge=0)
    controls: list[ControlDto]
    """
    The controls' coefficients (empty without `control`).
    """
    labelled: int = Field(..., ge=0)
    """
    The run's comparisons with a preference.
    """
    level: float
    plan: PairwiseLabelPlanDto | None = None
    prediction_weight: float
    """
    The weight the judge's calibrated verdicts got against the labels (PPI++'s λ: 0 the
    labels alone, 1 full weight).
    """
    systems: list[SystemRatingDto]
    """
    Highest rating first.
    """
    warnings: list[AnswerWarning]
    """
    What the ratings rest on that the request departs from: systems with few or no
    labelled comparisons (`unlabelled_systems`, `underlabelled_systems`), a run unlike the
    labelled set (`run_unlike_labelled`, `input_missing`), systems the judge puts beyond
    every comparison (`unbounded_systems`), one rater (`single_rater`, `dominant_rater`).
    """


class VersionDto(MethodReport):
    active: bool
    """
    The version the cell serves.
    """
    anchor_count: int
    """
    Anchors the fit saw, and the SHA-256 of that snapshot.
    """
    anchor_digest: str
    covariates: CovariateLayerDto | None = None
    created_at: str
    decision: DecisionDto | None = None
    evaluation: ComparisonDto | None = None
    failure: str | None = None
    """
    Why it did not pass.
    """
    groups: GroupBias | None = None
    intervals: IntervalsDto | None = None
    job_id: str | None = None
    judge: str
    judge_version: str | None = None
    """
    The judge version whose anchors it was fitted on; absent for unversioned anchors. It
    serves requests naming that judge version (the newest passed one does).
    """
    method: str
    panel: PanelVersionDto | None = None
    passed: bool
    """
    Passed its diagnostics.
    """
    rubric: str
    version: int


class VersionsResponse(BaseModel):
    versions: list[VersionDto]
    """
    Newest first.
    """


class LookBody(BaseModel):
    """
    The body of a look: the runs as `/v1/rank` takes them, each with every label an earlier
    look of the session carried.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    assume_missing_at_random: bool | None = None
    """
    A panel's runs only: as `/v1/rank`'s, take the members' missing scores as missing at
    random without testing it.
    """
    labels: LookLabelsBody | None = None
    runs: list[RankRunBody] = Field(..., max_length=50, min_length=2)
    """
    2 to 50 runs.
    """


class RankBody(BaseModel):
    """
    The body of POST /v1/rank: K runs of one cell.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    assume_missing_at_random: bool | None = None
    """
    A panel's runs only: take the members' missing scores as missing at random (their
    absence depends on nothing, or only on what the other members scored) without testing
    it. By default a run whose members score its partial items differently from its
    complete ones (a judge that fails on hard items) is refused, naming the member.
    """
    error: str | None = Field(
        None, examples=['familywise'], pattern='^(familywise|per_pair)$'
    )
    """
    `familywise` (default: max-t intervals that hold for all pairs at once) or `per_pair`
    (each pair's interval on its own; rank intervals then hold only pair by pair).
    """
    hold: (
        dict[
            constr(pattern=r'^[A-Za-z0-9][A-Za-z0-9._:-]*$', min_length=1, max_length=64),
            Hold,
        ]
        | None
    ) = Field(None, examples=[{'length': 812}], max_length=16)
    """
    Optional numeric inputs beside the judge score, by name (a response's length in tokens, its count of markdown headers). A calibration trained with `covariates` corrects at the judge score and these values; in CSV, one column `covariate.<name>` each (empty: not given).
    """
    judge: str = Field(
        ...,
        examples=['gpt-4o-mini'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    labels: LabelsBody | None = None
    level: float | None = Field(None, examples=[0.95], ge=0.5, le=0.999)
    """
    Of the intervals (default 0.95): with `familywise`, every pair's interval and every
    rank interval hold together at this level (in a session, over all its looks).
    """
    round: int | None = Field(None, ge=1, le=10)
    """
    Refused: looks are bound only in a ranking session (`POST /v1/rank/sessions`). A plain
    ranking answers one look, at the full level.
    """
    rounds: int | None = Field(None, ge=1, le=10)
    """
    Refused, as `round` is: a session plans its looks.
    """
    rubric: str = Field(
        ...,
        examples=['coherence'],
        max_length=64,
        min_length=1,
        pattern='^[A-Za-z0-9][A-Za-z0-9._:-]*$',
    )
    runs: list[RankRunBody] = Field(..., max_length=50, min_length=2)
    """
    2 to 50 runs.
    """
    version: int | None = Field(None, ge=1)


class RankResponse(RunReading):
    critical: float
    """
    The critical value the pairs' standard errors are multiplied by (max-t), or the
    largest per-pair one.
    """
    error: str
    """
    `familywise` or `per_pair`.
    """
    family_level: float
    """
    The level this look's pair intervals hold at together: 1 − (1 − level)/rounds.
    """
    judge: str
    labels: LabelPlanDto | None = None
    level: float
    method: str
    order: list[str]
    """
    The run names by estimate, highest first.
    """
    pairs: list[RankedPairDto]
    """
    Every pair, A before B as sent.
    """
    resolved: int = Field(..., ge=0)
    round: int = Field(..., ge=0)
    rounds: int = Field(..., ge=0)
    rubric: str
    runs: list[RankedRunDto]
    """
    The runs as sent, each with its rank interval.
    """
    session: RankSessionDto | None = None
    top: list[str]
    """
    The runs that may be the best.
    """
    unresolved: int = Field(..., ge=0)
    version: int

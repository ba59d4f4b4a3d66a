//! Training jobs and calibrator versions: what they are, independent of how they are stored or
//! served.

use std::fmt;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::covariates::Covariates;
use super::{CellKey, JudgeName, JudgeVersion, Problem, RubricName};
use judgecal_stats::agreement::report::HeldOutRow;
use judgecal_stats::conformal::Intervals;
use judgecal_stats::covariates::{InputError, Layer, Reach};
use judgecal_stats::panel::fusion::Fusion;
use judgecal_stats::quality::Comparison;
use judgecal_stats::report::PosteriorReport;
use judgecal_stats::runlevel::groups::GroupBias;
use judgecal_stats::select::Decision;
use judgecal_stats::warning::{Code, Warning};
use judgecal_stats::{Corrected, Method, Model};

macro_rules! id_type {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub Uuid);

        impl $name {
            pub fn new() -> Self {
                Self(Uuid::new_v4())
            }

            pub fn parse(raw: &str) -> Option<Self> {
                Uuid::parse_str(raw).ok().map(Self)
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

id_type!(
    /// A training job.
    JobId
);
id_type!(
    /// One calibrator version of one cell.
    CalibratorId
);

/// What a request gets when it names a judge version the served calibration was not trained
/// on (and none of the cell's calibrations was).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnMismatch {
    /// The answer is served, with a warning naming both versions.
    #[default]
    Warn,
    /// 409, naming both versions.
    Refuse,
}

impl OnMismatch {
    pub fn as_str(self) -> &'static str {
        match self {
            OnMismatch::Warn => "warn",
            OnMismatch::Refuse => "refuse",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "warn" => Some(OnMismatch::Warn),
            "refuse" => Some(OnMismatch::Refuse),
            _ => None,
        }
    }
}

/// What a job trains: one method, or `auto`, which chooses among them per cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobKind {
    Method(Method),
    Auto,
}

impl JobKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            JobKind::Method(m) => m.as_str(),
            JobKind::Auto => "auto",
        }
    }

    pub fn parse(raw: &str) -> Result<Self, String> {
        if raw == "auto" {
            return Ok(JobKind::Auto);
        }
        Method::parse(raw).map(JobKind::Method).map_err(|_| {
            format!(
                "unknown method {raw:?}; this service trains: {}, auto",
                Method::ALL
                    .iter()
                    .map(|m| m.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
    }
}

impl fmt::Display for JobKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Queued,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

impl JobState {
    pub fn as_str(&self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Succeeded => "succeeded",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    pub fn finished(&self) -> bool {
        matches!(
            self,
            JobState::Succeeded | JobState::Failed | JobState::Cancelled
        )
    }

    pub fn parse(raw: &str) -> Option<Self> {
        [
            JobState::Queued,
            JobState::Running,
            JobState::Succeeded,
            JobState::Failed,
            JobState::Cancelled,
        ]
        .into_iter()
        .find(|s| s.as_str() == raw)
    }
}

/// A version as the job that made it reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionRef {
    pub rubric: RubricName,
    pub version: i64,
    pub passed: bool,
    pub active: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub id: JobId,
    pub judge: JudgeName,
    pub kind: JobKind,
    pub request: serde_json::Value,
    pub state: JobState,
    /// 0 to 1.
    pub progress: f64,
    /// What the running job last reported (JSON text; empty before that).
    pub detail: String,
    pub error: Option<String>,
    pub attempts: i64,
    pub created_at_ms: i64,
    pub started_at_ms: Option<i64>,
    pub finished_at_ms: Option<i64>,
    pub versions: Vec<VersionRef>,
}

/// The range of judge scores a version was trained on, and where a new score lies against
/// it: inside, just outside (the corrector extrapolates or holds its end value: flagged), or
/// far outside (more than the range's width beyond it: a score on another scale, or a typo,
/// refused wherever scores are corrected).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JudgeRange {
    pub min: f64,
    pub max: f64,
}

/// Where a judge score lies against a version's [`JudgeRange`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    Inside,
    Outside,
    Far,
}

impl JudgeRange {
    /// The range of `scores`; `None` for none.
    pub fn of(scores: impl IntoIterator<Item = f64>) -> Option<Self> {
        scores.into_iter().fold(None, |r, j| {
            Some(match r {
                None => Self { min: j, max: j },
                Some(Self { min, max }) => Self {
                    min: min.min(j),
                    max: max.max(j),
                },
            })
        })
    }

    /// A range whose width is 0 (every anchor at one judge score) calls nothing far.
    pub fn place(&self, j: f64) -> Placement {
        let width = self.max - self.min;
        if (self.min..=self.max).contains(&j) {
            Placement::Inside
        } else if width > 0.0 && (j < self.min - width || j > self.max + width) {
            Placement::Far
        } else {
            Placement::Outside
        }
    }
}

/// A fitted version about to be stored.
#[derive(Debug, Clone, PartialEq)]
pub struct NewVersion {
    pub rubric: RubricName,
    pub anchor_count: i64,
    pub anchor_digest: String,
    pub model: Model,
    pub evaluation: Option<Comparison>,
    /// An `auto` job's choice for this cell: every candidate's figures and why this won.
    pub decision: Option<Decision>,
    pub intervals: Option<Intervals>,
    /// How its held-out bias varies between the anchors' groups (2 or more groups).
    pub groups: Option<GroupBias>,
    /// A panel version's fusion layer: how members' scores become the score `model` corrects.
    pub fusion: Option<Fusion>,
    /// The judge scores of its anchors (a panel's: its fused scores).
    pub judge_range: Option<JudgeRange>,
    /// A version trained with covariates: how the judge score and the item's covariates
    /// become the score `model` corrects.
    pub covariate_layer: Option<Layer>,
    /// A version whose layer reads covariates: the same training's fit of the judge score
    /// alone, which answers items sent without them.
    pub bare: Option<Box<BareFit>>,
    /// Its anchors with their cross-fitted corrections, what the agreement report reads.
    pub held_out: Option<Vec<HeldOutRow>>,
}

/// The judge-score-only fit of a version trained with covariates: the same anchors, plan and
/// seed with the covariates left out. Items sent without their covariates are corrected by it
/// (warned `covariates_missing`) rather than refused, so a retraining that starts reading a
/// covariate never breaks a caller that sends scores alone.
#[derive(Debug, Clone, PartialEq)]
pub struct BareFit {
    pub model: Model,
    pub evaluation: Option<Comparison>,
    pub intervals: Option<Intervals>,
}

/// A stored [`BareFit`]: the model as its method and parameters.
#[derive(Serialize, Deserialize)]
struct StoredBare {
    method: String,
    params: serde_json::Value,
    evaluation: Option<Comparison>,
    intervals: Option<Intervals>,
}

impl BareFit {
    /// As the store keeps it (JSON).
    pub fn to_stored(&self) -> Result<String, String> {
        serde_json::to_string(&StoredBare {
            method: self.model.method().as_str().to_owned(),
            params: self.model.params()?,
            evaluation: self.evaluation,
            intervals: self.intervals.clone(),
        })
        .map_err(|e| e.to_string())
    }

    /// Read back from the store.
    pub fn from_stored(json: &str) -> Result<Self, String> {
        let s: StoredBare = serde_json::from_str(json).map_err(|e| e.to_string())?;
        let method = Method::parse(&s.method).map_err(|e| e.to_string())?;
        Ok(Self {
            model: Model::from_params(method, s.params).map_err(|e| e.to_string())?,
            evaluation: s.evaluation,
            intervals: s.intervals,
        })
    }
}

/// One immutable calibrator version of a cell.
#[derive(Debug, Clone, PartialEq)]
pub struct CalibratorVersion {
    pub id: CalibratorId,
    pub key: CellKey,
    pub version: i64,
    pub job_id: Option<JobId>,
    pub anchor_count: i64,
    pub anchor_digest: String,
    pub model: Model,
    /// Held-out figures beside the raw judge's; `None` when the cell had too few anchors.
    pub evaluation: Option<Comparison>,
    /// An `auto` job's choice for this cell.
    pub decision: Option<Decision>,
    /// Its 95% predictive intervals and their held-out coverage; `None` where none could be
    /// made (too few held-out anchors, or trained before versions recorded them).
    pub intervals: Option<Intervals>,
    /// How its held-out bias varies between the anchors' groups; `None` where they carry
    /// fewer than two (or the version predates groups).
    pub groups: Option<GroupBias>,
    pub failure: Option<String>,
    pub created_at_ms: i64,
    pub active: bool,
    /// The judge version whose anchors it was fitted on; `None` for unversioned anchors.
    pub judge_version: Option<JudgeVersion>,
    /// A panel version's fusion layer (`None` for a judge's version).
    pub fusion: Option<Fusion>,
    /// The judge scores it was trained on; `None` where its cell had no anchors of its judge
    /// version when the range was first recorded (migration 13).
    pub judge_range: Option<JudgeRange>,
    /// A version trained with covariates: its input layer (`None` otherwise).
    pub covariate_layer: Option<Layer>,
    /// A version whose layer reads covariates: its judge-score-only fit (`None` for versions
    /// trained before it was kept, which refuse items without their covariates).
    pub bare: Option<Box<BareFit>>,
}

impl CalibratorVersion {
    pub fn method(&self) -> Method {
        self.model.method()
    }

    pub fn passed(&self) -> bool {
        self.failure.is_none()
    }

    /// The β posterior the canary reads: its method's report's (bayes), else that of the
    /// Bayesian fit an `auto` job kept beside another winner.
    pub fn beta(&self) -> Option<PosteriorReport> {
        self.model.report().posterior().copied().or_else(|| {
            let decision = self.decision.as_ref()?;
            decision.beta.as_ref().map(PosteriorReport::from)
        })
    }

    /// A problem per score of `scores` far outside the judge scores the version was trained
    /// on ([`JudgeRange::place`]), named by row and `field`: a score on another scale, or a
    /// typo, that no corrector can read.
    pub fn far_scores(&self, scores: &[f64], field: &str) -> Vec<Problem> {
        let Some(range) = self.judge_range else {
            return Vec::new();
        };
        scores
            .iter()
            .enumerate()
            .filter(|(_, j)| range.place(**j) == Placement::Far)
            .map(|(i, j)| {
                Problem::at(
                    Some(i + 1),
                    field,
                    format!(
                        "{j} lies far outside the judge scores version {} of {} was trained on, [{}, {}]: \
                         is it on another scale? A judge that changed its scale is a new judge_version",
                        self.version, self.key, range.min, range.max
                    ),
                )
            })
            .collect()
    }

    /// The items' covariates against the anchors' range of each covariate the version reads:
    /// a problem per value more than the range's width beyond it (a covariate on another
    /// scale, or a typo, that the layer would extrapolate far; named by row and
    /// `{field}.covariates.{name}`), and a warning per covariate with values outside it,
    /// naming the covariate and the first items (`ids`, else rows counted from 1).
    pub fn covariate_reach(
        &self,
        covariates: &[Covariates],
        field: &str,
        ids: Option<&[String]>,
    ) -> Result<Vec<Warning>, Vec<Problem>> {
        let Some(layer) = &self.covariate_layer else {
            return Ok(Vec::new());
        };
        let at = |name: &str| {
            let f = super::covariates::field_of(name);
            if field.is_empty() {
                f
            } else {
                format!("{field}.{f}")
            }
        };
        let (mut problems, mut warnings) = (Vec::new(), Vec::new());
        // A covariate entering as several inputs (a log and its hinges) is checked once.
        let mut seen: Vec<&str> = Vec::new();
        for input in &layer.inputs {
            if seen.contains(&input.name.as_str()) {
                continue;
            }
            seen.push(&input.name);
            let Some([lo, hi]) = input.range else {
                continue;
            };
            let mut outside = Vec::new();
            for (i, c) in covariates.iter().enumerate() {
                let Some(&x) = c
                    .iter()
                    .find(|(k, _)| k.as_str() == input.name)
                    .map(|(_, v)| v)
                else {
                    continue;
                };
                match input.reach(x) {
                    Reach::Inside => {}
                    Reach::Outside => outside.push(i),
                    Reach::Far => problems.push(Problem::at(
                        Some(i + 1),
                        &at(&input.name),
                        format!(
                            "{x} lies far outside the {} values version {} of {} was trained on, [{lo}, {hi}] \
                             (more than the range's width beyond it): is it in another unit?",
                            input.name, self.version, self.key
                        ),
                    )),
                }
            }
            if !outside.is_empty() {
                let named = outside.iter().map(|&i| match ids {
                    Some(ids) => ids.get(i).cloned().unwrap_or_else(|| (i + 1).to_string()),
                    None => (i + 1).to_string(),
                });
                warnings.push(
                    Warning::new(
                        Code::CovariateOutsideAnchors,
                        format!(
                            "{} of {} items carry a {} outside the values version {} was trained on, [{lo}, {hi}]: \
                             their corrections extrapolate the covariate's coefficient; upload anchors covering them",
                            outside.len(),
                            covariates.len(),
                            input.name,
                            self.version
                        ),
                    )
                    .at(at(&input.name))
                    .items(named),
                );
            }
        }
        if problems.is_empty() {
            Ok(warnings)
        } else {
            Err(problems)
        }
    }

    /// The problems of a run's judge scores and their repeats (further scores of one item by
    /// the judge) far outside the judge scores the version was trained on: one door for
    /// both, so that a repeat of 99 is refused as a score of 99 is. Scores at `field`, repeats
    /// at `{prefix}repeats`, by row.
    pub fn far_inputs(
        &self,
        scores: &[f64],
        repeats: Option<&[Vec<f64>]>,
        field: &str,
        prefix: &str,
    ) -> Vec<Problem> {
        let mut out = self.far_scores(scores, field);
        let Some(range) = self.judge_range else {
            return out;
        };
        for (i, item) in repeats.unwrap_or_default().iter().enumerate() {
            if let Some((k, x)) = item
                .iter()
                .enumerate()
                .find(|(_, x)| range.place(**x) == Placement::Far)
            {
                out.push(Problem::at(
                    Some(i + 1),
                    &format!("{prefix}repeats"),
                    format!(
                        "score {} is {x}: far outside the judge scores version {} of {} was trained on, [{}, {}], \
                         as a judge score there would be; a repeat is another score of the item by the same judge",
                        k + 1,
                        self.version,
                        self.key,
                        range.min,
                        range.max
                    ),
                ));
            }
        }
        out
    }

    /// The rows of `scores` (0-based) outside the judge scores the version was trained on.
    pub fn outside_scores(&self, scores: &[f64]) -> Vec<usize> {
        let Some(range) = self.judge_range else {
            return Vec::new();
        };
        scores
            .iter()
            .enumerate()
            .filter(|(_, j)| range.place(**j) != Placement::Inside)
            .map(|(i, _)| i)
            .collect()
    }

    /// The scores its corrector reads: `None` where it reads the judge scores themselves;
    /// with a covariate layer, each item's layer score at its judge score and covariates. An
    /// item missing a covariate the layer serves (or with a value its transform cannot take)
    /// is a problem at its row and `{field}.covariates.{name}` (`covariates.{name}` where
    /// `field` is empty).
    pub fn layer_scores(
        &self,
        scores: &[f64],
        covariates: &[Covariates],
        field: &str,
    ) -> Result<Option<Vec<f64>>, Vec<Problem>> {
        if self.covariate_layer.is_none() {
            return Ok(None);
        }
        let mut problems = Vec::new();
        let empty = Covariates::new();
        let fused: Vec<f64> = scores
            .iter()
            .enumerate()
            .map(|(i, &j)| {
                let given = covariates.get(i).unwrap_or(&empty);
                self.layer_score(j, given).unwrap_or_else(|e| {
                    let at = super::covariates::field_of(&e.covariate);
                    let at = if field.is_empty() {
                        at
                    } else {
                        format!("{field}.{at}")
                    };
                    problems.push(Problem::at(Some(i + 1), &at, e.problem));
                    f64::NAN
                })
            })
            .collect();
        if problems.is_empty() {
            Ok(Some(fused))
        } else {
            Err(problems)
        }
    }

    /// One item's layer score (the judge score itself without a layer).
    pub fn layer_score(&self, j: f64, covariates: &Covariates) -> Result<f64, InputError> {
        let Some(layer) = &self.covariate_layer else {
            return Ok(j);
        };
        let value = |name: &str| {
            covariates
                .iter()
                .find(|(k, _)| k.as_str() == name)
                .map(|(_, v)| *v)
        };
        layer.fuse(j, &value)
    }

    /// Corrected scores of `scores`, each with the version's predictive interval.
    pub fn correct(&self, scores: &[f64]) -> Result<Vec<Corrected>, String> {
        let mut out = self.model.correct(scores)?;
        if let Some(intervals) = &self.intervals {
            intervals.apply(scores, &mut out);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inside is inclusive; "far" starts one width beyond either end; a range of one point
    /// calls nothing far.
    #[test]
    fn judge_scores_are_placed_against_the_trained_range() {
        let r = JudgeRange::of([2.0, 1.0, 5.0, 3.0]).unwrap();
        assert_eq!((r.min, r.max), (1.0, 5.0));
        assert_eq!(r.place(1.0), Placement::Inside);
        assert_eq!(r.place(5.0), Placement::Inside);
        assert_eq!(r.place(5.5), Placement::Outside);
        assert_eq!(r.place(9.0), Placement::Outside);
        assert_eq!(r.place(9.01), Placement::Far);
        assert_eq!(r.place(-3.01), Placement::Far);
        assert_eq!(r.place(99.0), Placement::Far);
        let point = JudgeRange::of([3.0]).unwrap();
        assert_eq!(point.place(99.0), Placement::Outside);
        assert!(JudgeRange::of([]).is_none());
    }

    #[test]
    fn job_kinds_parse_by_name() {
        assert_eq!(JobKind::parse("bayes"), Ok(JobKind::Method(Method::Bayes)));
        assert_eq!(JobKind::parse("auto"), Ok(JobKind::Auto));
        for m in Method::ALL {
            assert_eq!(JobKind::parse(m.as_str()), Ok(JobKind::Method(*m)));
        }
        assert!(JobKind::parse("Bayes").unwrap_err().contains("bayes"));
    }
}

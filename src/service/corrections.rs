//! Corrections: what the eval platform calls, one score or 100,000 at a time.

use super::families::{Panels, Scores, Versions};
use std::sync::Arc;

use super::panels::fuse_items;
use super::versions::Loaded;
use crate::domain::calibration::CalibratorVersion;
use crate::domain::correction::CorrectionRequest;
use crate::domain::covariates::Covariates;
use crate::domain::inputs::{InputKind, Item};
use crate::domain::{ItemId, Problem};
use crate::error::{Error, Result};
use judgecal_stats::Corrected;
use judgecal_stats::panel::fusion::{FusedScore, Fusion};
use judgecal_stats::panel::items::{answers, corrector_inputs, whole_items};
use judgecal_stats::warning::{Code, Warning};

/// Corrected items and the version that made them.
pub struct Correction {
    pub version: Arc<Loaded>,
    /// One per item, in order.
    pub items: Vec<CorrectedItem>,
    /// What a reader of the numbers must know: a judge version the calibration was not
    /// trained on, scores or covariates outside the anchors', covariates not used.
    pub warnings: Vec<Warning>,
}

/// One item's correction.
pub struct CorrectedItem {
    pub id: Option<ItemId>,
    /// The judge score; a panel's item: its fused score (what the version's corrector read, or
    /// its sub-panel's corrected score where members were missing).
    pub judge_score: f64,
    /// A version trained with covariates: the item's layer score, which its corrector read.
    pub layer_score: Option<f64>,
    /// A panel's item some served member did not score: the members whose sub-panel
    /// corrected it.
    pub members: Option<Vec<String>>,
    pub corrected: Corrected,
    /// The score the version's corrector read lies outside the judge scores it was trained on
    /// (its correction extrapolates, or holds the end value).
    pub outside_anchors: bool,
}

/// What a version's corrector reads for a request's items, and what to say of them.
#[derive(Default)]
struct Reading {
    /// Each item's judge score as the answer shows it.
    shown: Vec<f64>,
    /// The scores the corrector reads (a panel's: [`corrector_inputs`]).
    read: Vec<f64>,
    /// A version trained with covariates: each item's layer score.
    layer: Option<Vec<f64>>,
    /// A panel's items as fused.
    fused: Option<Vec<FusedScore>>,
    /// The items (0-based) outside the judge scores the version was trained on.
    outside: Vec<usize>,
    warnings: Vec<Warning>,
}

/// The warning for `outside` scores outside the judge scores version `v` was trained on.
fn outside_warning(v: &CalibratorVersion, outside: usize) -> Option<Warning> {
    let range = v.judge_range.filter(|_| outside > 0)?;
    Some(Warning::new(
        Code::OutsideAnchors,
        format!(
            "{outside} scores lie outside the judge scores version {} was trained on, [{}, {}] (flagged \
             `outside_anchors`): their corrections extrapolate or hold the end value; upload anchors covering them",
            v.version, range.min, range.max
        ),
    ))
}

/// The warning for items that carry covariates version `v` was not trained with.
fn unused_covariates(v: &CalibratorVersion, given: &[Covariates]) -> Option<Warning> {
    let kept: Vec<&str> = v
        .covariate_layer
        .iter()
        .flat_map(|l| l.inputs.iter().map(|i| i.name.as_str()))
        .collect();
    let mut unused: Vec<&str> = given
        .iter()
        .flat_map(|c| c.keys().map(|k| k.as_str()))
        .filter(|k| !kept.contains(k))
        .collect();
    unused.sort_unstable();
    unused.dedup();
    let field = unused
        .first()
        .map(|name| crate::domain::covariates::field_of(name));
    (!unused.is_empty()).then(|| {
        let w = Warning::new(
            Code::CovariatesUnused,
            format!(
                "version {} does not correct at covariates {} (not trained with them, or not kept where they did not \
                 lower held-out error): they were not used",
                v.version,
                unused.join(", ")
            ),
        );
        match field {
            Some(f) if unused.len() == 1 => w.at(f),
            _ => w,
        }
    })
}

/// Batches up to this size are corrected on the request's own thread when they need only
/// look-ups; larger ones, and any that need libtorch, on a blocking thread.
const INLINE: usize = 4096;

/// At most `max` items per request (`limits.max_correct_batch`).
fn check_batch(count: usize, max: usize, field: &str) -> Result<()> {
    if count <= max {
        return Ok(());
    }
    Err(refused(vec![Problem::at(
        None,
        field,
        format!(
            "{count} scores; at most {max} per request (limits.max_correct_batch): split the batch"
        ),
    )]))
}

fn refused(problems: Vec<Problem>) -> Error {
    Error::rejected("the correction request was refused", problems)
}

/// A judge's items as version `v` reads them: scores far outside its anchors' refused, a
/// covariate version's items at their layer scores.
fn judge_reading(
    v: &CalibratorVersion,
    items: Vec<Item>,
    kind: InputKind,
    field: &str,
) -> std::result::Result<Reading, Vec<Problem>> {
    let shown: Vec<f64> = items.iter().map(|i| i.score).collect();
    let far = v.far_scores(&shown, field);
    if !far.is_empty() {
        return Err(far);
    }
    let mut reading = Reading {
        outside: v.outside_scores(&shown),
        ..Reading::default()
    };
    let ids: Option<Vec<String>> = items
        .iter()
        .map(|i| i.id.as_ref().map(|id| id.as_str().to_owned()))
        .collect();
    let given: Vec<Covariates> = match kind {
        InputKind::Covariates => items.into_iter().map(|i| i.covariates).collect(),
        _ => Vec::new(),
    };
    if let Some(l) = &v.covariate_layer {
        if kind != InputKind::Covariates && !l.inputs.is_empty() {
            let kept: Vec<String> = l.inputs.iter().map(|i| i.label()).collect();
            let names: Vec<String> = l
                .inputs
                .iter()
                .map(|i| format!("\"{}\": …", i.name))
                .collect();
            return Err(vec![Problem::at(
                None,
                field,
                format!(
                    "version {} corrects at the judge score and its covariates ({}): send items \
                     {{\"score\": …, \"covariates\": {{{}}}}}",
                    v.version,
                    if kept.is_empty() {
                        "none kept".to_owned()
                    } else {
                        kept.join(", ")
                    },
                    names.join(", ")
                ),
            )]);
        }
        reading.warnings = v.covariate_reach(&given, field, ids.as_deref())?;
        reading.layer = v.layer_scores(&shown, &given, "")?;
    }
    reading.warnings.extend(unused_covariates(v, &given));
    reading.read = reading.layer.clone().unwrap_or_else(|| shown.clone());
    reading.shown = shown;
    Ok(reading)
}

/// A panel's items as version `v` reads them: fused, each whole item by its fused score and
/// each partial item by its sub-panel.
fn panel_reading(
    v: &CalibratorVersion,
    fusion: &Fusion,
    items: Vec<Item>,
) -> std::result::Result<Reading, Vec<Problem>> {
    let members: Vec<_> = items.into_iter().map(|i| i.members).collect();
    let fused = fuse_items(fusion, &members, "scores")?;
    let read = corrector_inputs(&fused);
    let whole = fused
        .iter()
        .filter(|f| matches!(f, FusedScore::Whole(_)))
        .count();
    // Judge scores are checked by item; a panel's fused scores would be named by their rank
    // among the whole items, so they are only flagged.
    let outside = whole_items(&fused, &v.outside_scores(&read[..whole]));
    Ok(Reading {
        shown: fused.iter().map(FusedScore::score).collect(),
        read,
        outside,
        fused: Some(fused),
        ..Reading::default()
    })
}

impl Reading {
    /// Each item's answer: its id, the score shown and read, and its corrected score.
    fn answers(
        self,
        ids: Vec<Option<ItemId>>,
        results: Vec<Corrected>,
        fusion: Option<&Fusion>,
    ) -> Vec<CorrectedItem> {
        let members = |i: usize| -> Option<Vec<String>> {
            let fusion = fusion?;
            match self.fused.as_ref()?.get(i)? {
                FusedScore::Whole(_) => None,
                FusedScore::Partial { members, .. } => {
                    Some(members.iter().map(|&m| fusion.members[m].clone()).collect())
                }
            }
        };
        ids.into_iter()
            .zip(results)
            .enumerate()
            .map(|(i, (id, corrected))| CorrectedItem {
                id,
                judge_score: self.shown[i],
                layer_score: self.layer.as_ref().map(|l| l[i]),
                members: members(i),
                corrected,
                outside_anchors: self.outside.binary_search(&i).is_ok(),
            })
            .collect()
    }
}

impl Scores<'_> {
    /// Corrects a request's items with the cell's active version (or the requested one),
    /// clipped to the rubric's scale with their intervals. A panel's items are fused first:
    /// items every input member scored are corrected by the version's corrector from their
    /// fused score, the others by the sub-panel of the members present.
    pub async fn correct(&self, request: CorrectionRequest) -> Result<Correction> {
        let CorrectionRequest {
            key,
            items,
            kind,
            field,
            version,
            judge_version,
        } = request;
        let count = items.len();
        check_batch(count, self.limits.max_correct_batch, field)?;
        let served = Versions(self)
            .served(&key, version, judge_version.as_ref())
            .await?;
        // Items without covariates to a version whose layer reads some: its judge-score-only
        // fit answers them, and says so (a version that predates that fit refuses them).
        let (loaded, bare_warning) = match kind {
            InputKind::Covariates => (served.loaded, None),
            _ => served
                .loaded
                .for_bare_scores()
                .unwrap_or((served.loaded, None)),
        };
        let v = &loaded.version;
        let ids: Vec<Option<ItemId>> = items.iter().map(|i| i.id.clone()).collect();
        let mut reading = match (&v.fusion, kind) {
            (None, InputKind::Members)
            | (Some(_), InputKind::Score)
            | (Some(_), InputKind::Covariates)
            | (Some(_), InputKind::Repeats) => {
                return Err(refused(vec![wrong_kind(&key, v.fusion.as_ref(), field)]));
            }
            (None, _) => judge_reading(v, items, kind, field),
            (Some(fusion), InputKind::Members) => {
                Panels(self).check_panel(&key.judge, fusion).await?;
                panel_reading(v, fusion, items)
            }
        }
        .map_err(refused)?;
        let corrected = run_corrector(&loaded, std::mem::take(&mut reading.read)).await?;
        let results = match (&reading.fused, &v.fusion) {
            (Some(fused), Some(fusion)) => answers(fusion, fused, corrected),
            _ => corrected,
        };
        let scale = Versions(self).scale_of(&key.rubric).await?;
        let results: Vec<Corrected> = results
            .into_iter()
            .map(|c| c.clipped((scale.min, scale.max)))
            .collect();
        if results.iter().any(|c| c.sigma.is_some()) {
            self.metrics.observe_sigma(
                &key,
                results.iter().filter_map(|c| c.sigma),
                results.iter().filter(|c| c.review == Some(true)).count(),
            );
        }
        self.metrics
            .count_corrections(&key, v.model.method(), count);
        let warnings = served
            .mismatch
            .iter()
            .map(|m| m.warning(v.version))
            .chain(served.members)
            .chain(bare_warning)
            .chain(outside_warning(v, reading.outside.len()))
            .chain(std::mem::take(&mut reading.warnings))
            .collect();
        let items = reading.answers(ids, results, v.fusion.as_ref());
        let correction = Correction {
            version: loaded,
            items,
            warnings,
        };
        export_events(self, &key, &correction);
        Ok(correction)
    }
}

/// Queues an answer's evaluation events where they are exported (counted where the queue is
/// full).
fn export_events(service: &super::Service, key: &crate::domain::CellKey, c: &Correction) {
    if let Some(e) = service.evaluations()
        && !e.send(evaluation(key, c))
    {
        service
            .metrics
            .evaluation_events_dropped
            .with_label_values::<&str>(&[])
            .inc_by(c.items.len() as u64);
    }
}

/// An answer as its OpenTelemetry evaluation events report it: each item with the codes of
/// the warnings that name it (or name no item; `outside_anchors` only where the item is).
fn evaluation(key: &crate::domain::CellKey, c: &Correction) -> crate::otel::Evaluation {
    let v = &c.version.version;
    let items = c
        .items
        .iter()
        .enumerate()
        .map(|(row, item)| {
            let id = item.id.as_ref().map(|i| i.as_str().to_owned());
            let named = id.clone().unwrap_or_else(|| (row + 1).to_string());
            crate::otel::EvaluatedItem {
                corrected: item.corrected.score,
                interval: item.corrected.predictive.or(item.corrected.credible),
                outside_anchors: item.outside_anchors,
                warnings: c
                    .warnings
                    .iter()
                    .filter(|w| match w.code {
                        // Named by each item's own flag, not in the warning.
                        Code::OutsideAnchors => item.outside_anchors,
                        _ => w.items.is_empty() || w.items.contains(&named),
                    })
                    .map(|w| w.code.as_str())
                    .collect(),
                id,
            }
        })
        .collect();
    crate::otel::Evaluation {
        judge: key.judge.as_str().to_owned(),
        rubric: key.rubric.as_str().to_owned(),
        judge_version: v.judge_version.as_ref().map(|j| j.as_str().to_owned()),
        calibration_version: v.version,
        method: v.model.method().as_str(),
        at: std::time::SystemTime::now(),
        items,
    }
}

/// The refusal of items of the wrong kind: a judge's version given members' scores, or a
/// panel's given a judge's items.
fn wrong_kind(key: &crate::domain::CellKey, fusion: Option<&Fusion>, field: &str) -> Problem {
    match fusion {
        None => Problem::at(
            None,
            "items",
            format!(
                "{} is a judge, not a panel: its items carry `score`, not `scores`",
                key.judge
            ),
        ),
        Some(fusion) => Problem::at(
            None,
            field,
            format!(
                "{} is a panel: send items whose `scores` give each member's score, e.g. {{\"scores\": {{\"{}\": 3.5}}}}",
                key.judge,
                fusion.members.first().map_or("", String::as_str)
            ),
        ),
    }
}

/// The version's corrector over `read`: on this thread where it is a small batch of
/// look-ups, else on a blocking one.
async fn run_corrector(loaded: &Arc<Loaded>, read: Vec<f64>) -> Result<Vec<Corrected>> {
    if read.len() <= INLINE && !loaded.version.model.heavy(&read) {
        loaded.version.correct(&read)
    } else {
        let version = loaded.clone();
        crate::error::blocking("correcting scores", move || version.version.correct(&read)).await?
    }
    .map_err(Error::Internal)
}

//! Corrections: what the eval platform calls, one score or 100,000 at a time.

use std::sync::Arc;

use super::Service;
use super::panels::fuse_items;
use super::versions::Loaded;
use crate::domain::Problem;
use crate::domain::calibration::CalibratorVersion;
use crate::domain::correction::CorrectionRequest;
use crate::domain::covariates::Covariates;
use crate::error::{Error, Result};
use judgecal_stats::Corrected;
use judgecal_stats::panel::fusion::FusedScore;
use judgecal_stats::warning::{Code, Warning};

/// Corrected scores and the version that made them.
pub struct Correction {
    pub version: Arc<Loaded>,
    pub results: Vec<Corrected>,
    /// A panel's items: the score each result corrected, its fused score (`None` for a
    /// judge's scores, which are the request's own).
    pub inputs: Option<Vec<f64>>,
    /// A panel's items: `None` where every input member scored the item, else the members
    /// whose sub-panel corrected it (indices into the version's members).
    pub members: Option<Vec<Option<Vec<usize>>>>,
    /// A version trained with covariates: each item's layer score, the score its corrector
    /// read (the reference expected at the item's judge score and covariates).
    pub layer: Option<Vec<f64>>,
    /// The items (0-based) whose score the version's corrector read lies outside the judge
    /// scores it was trained on (its correction extrapolates, or holds the end value).
    pub outside: Vec<usize>,
    /// What a reader of the numbers must know: a judge version the calibration was not
    /// trained on, scores or covariates outside the anchors', covariates not used.
    pub warnings: Vec<Warning>,
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

impl Service {
    /// Corrects judge scores with the cell's active version (or the requested one), clipped
    /// to the rubric's scale with their intervals. A panel's items are fused first: items
    /// every input member scored are corrected by the version's corrector from their fused
    /// score, the others by the sub-panel of the members present.
    pub async fn correct(&self, request: &CorrectionRequest) -> Result<Correction> {
        let max = self.limits.max_correct_batch;
        let count = request.item_count();
        let refused = |problems| Error::rejected("the correction request was refused", problems);
        if count > max {
            return Err(refused(vec![Problem::at(
                None,
                request.field(),
                format!(
                    "{count} scores; at most {max} per request (limits.max_correct_batch): split the batch"
                ),
            )]));
        }
        let key = &request.key;
        let served = self
            .served(key, request.version, request.judge_version.as_ref())
            .await?;
        let loaded = served.loaded;
        let (inputs, panel) = match (&loaded.version.fusion, request.inputs.members()) {
            (None, None) => (None, None),
            (Some(fusion), Some(items)) => {
                self.check_panel(&key.judge, fusion).await?;
                let fused = fuse_items(fusion, items, "scores").map_err(refused)?;
                let inputs = fused.iter().map(FusedScore::score).collect();
                (Some(inputs), Some(fused))
            }
            (Some(fusion), None) => {
                return Err(refused(vec![Problem::at(
                    None,
                    request.field(),
                    format!(
                        "{} is a panel: send items whose `scores` give each member's score, e.g. {{\"scores\": {{\"{}\": 3.5}}}}",
                        key.judge,
                        fusion.members.first().map_or("", String::as_str)
                    ),
                )]));
            }
            (None, Some(_)) => {
                return Err(refused(vec![Problem::at(
                    None,
                    "items",
                    format!(
                        "{} is a judge, not a panel: its items carry `score`, not `scores`",
                        key.judge
                    ),
                )]));
            }
        };
        // The scores the version's own corrector reads: every judge score, or a panel's
        // whole items' fused scores.
        let panel_whole: Option<Vec<f64>> = panel.as_ref().map(|fused| {
            fused
                .iter()
                .filter_map(|f| match f {
                    FusedScore::Whole(s) => Some(*s),
                    FusedScore::Partial { .. } => None,
                })
                .collect()
        });
        let whole: &[f64] = panel_whole.as_deref().unwrap_or(&request.scores);
        // Judge scores: checked by item. A panel's fused scores: refused items would be named
        // by their rank among the whole items, so only flagged.
        if panel.is_none() {
            let far = loaded.version.far_scores(whole, request.field());
            if !far.is_empty() {
                return Err(refused(far));
            }
        }
        let outside_whole = loaded.version.outside_scores(whole);
        // A version trained with covariates reads each item's layer score, and checks its
        // covariates against the anchors'.
        let mut reach = Vec::new();
        let layer = match &loaded.version.covariate_layer {
            Some(l) if panel.is_none() && request.inputs.covariates().is_none() => {
                let kept: Vec<String> = l.inputs.iter().map(|i| i.label()).collect();
                return Err(refused(vec![Problem::at(
                    None,
                    request.field(),
                    format!(
                        "version {} of {key} corrects at the judge score and its covariates ({}): send items \
                         {{\"score\": …, \"covariates\": {{{}}}}}",
                        loaded.version.version,
                        if kept.is_empty() {
                            "none kept".to_owned()
                        } else {
                            kept.join(", ")
                        },
                        l.inputs
                            .iter()
                            .map(|i| format!("\"{}\": …", i.name))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )]));
            }
            Some(_) if panel.is_none() => {
                let given = request.inputs.covariates().unwrap_or_default();
                let ids: Option<Vec<String>> = request
                    .ids
                    .as_ref()
                    .map(|ids| ids.iter().map(|i| i.as_str().to_owned()).collect());
                reach = loaded
                    .version
                    .covariate_reach(given, request.field(), ids.as_deref())
                    .map_err(refused)?;
                loaded
                    .version
                    .layer_scores(whole, given, "")
                    .map_err(refused)?
            }
            _ => None,
        };
        let whole: &[f64] = layer.as_deref().unwrap_or(whole);
        // A panel's partial items' corrected scores, also corrected as whole items' fused
        // scores: the band a complete item gets there is the floor of theirs.
        let partial: Vec<f64> = panel
            .iter()
            .flatten()
            .filter_map(|f| match f {
                FusedScore::Whole(_) => None,
                FusedScore::Partial { fused, .. } => Some(fused.score),
            })
            .collect();
        let read: Vec<f64> = whole.iter().chain(&partial).copied().collect();
        let model = &loaded.version.model;
        let corrected = if read.len() <= INLINE && !model.heavy(&read) {
            loaded.version.correct(&read)
        } else {
            let version = loaded.clone();
            crate::error::blocking("correcting scores", move || version.version.correct(&read))
                .await?
        }
        .map_err(Error::Internal)?;
        let results: Vec<Corrected> = match &panel {
            None => corrected,
            Some(fused) => {
                let floor = |band, whole| match &loaded.version.fusion {
                    Some(f) => f.floored(band, whole),
                    None => band,
                };
                let (whole, floors) = corrected.split_at(whole.len());
                let (mut whole, mut floors) = (whole.iter(), floors.iter());
                fused
                    .iter()
                    .map(|f| match f {
                        FusedScore::Whole(_) => whole.next().cloned().unwrap_or_default(),
                        FusedScore::Partial { fused, .. } => Corrected {
                            score: fused.score,
                            credible: Some(fused.credible),
                            predictive: Some(floor(
                                fused.predictive,
                                floors.next().and_then(|c| c.predictive),
                            )),
                            ..Corrected::default()
                        },
                    })
                    .collect()
            }
        };
        let scale = self.scale_of(&key.rubric).await?;
        let results: Vec<Corrected> = results
            .into_iter()
            .map(|c| c.clipped((scale.min, scale.max)))
            .collect();
        if results.iter().any(|c| c.sigma.is_some()) {
            self.metrics.observe_sigma(
                key,
                results.iter().filter_map(|c| c.sigma),
                results.iter().filter(|c| c.review == Some(true)).count(),
            );
        }
        let outside = match &panel {
            None => outside_whole,
            // Back from the whole items' ranks to the items'.
            Some(fused) => fused
                .iter()
                .enumerate()
                .filter(|(_, f)| matches!(f, FusedScore::Whole(_)))
                .map(|(i, _)| i)
                .enumerate()
                .filter(|(rank, _)| outside_whole.binary_search(rank).is_ok())
                .map(|(_, i)| i)
                .collect(),
        };
        self.metrics.count_corrections(key, model.method(), count);
        let v = &loaded.version;
        let warnings = served
            .mismatch
            .iter()
            .map(|m| m.warning(v.version))
            .chain(served.members)
            .chain(outside_warning(v, outside.len()))
            .chain(reach)
            .chain(unused_covariates(
                v,
                request.inputs.covariates().unwrap_or_default(),
            ))
            .collect();
        Ok(Correction {
            version: loaded,
            results,
            inputs,
            members: panel.map(|fused| {
                fused
                    .into_iter()
                    .map(|f| match f {
                        FusedScore::Whole(_) => None,
                        FusedScore::Partial { members, .. } => Some(members),
                    })
                    .collect()
            }),
            layer,
            outside,
            warnings,
        })
    }
}

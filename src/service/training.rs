//! What a training job computes, on a blocking thread: the versions of one method (held-out
//! predictions, then the models) or of `auto`, with each cell's held-out figures beside the
//! raw judge.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use sha2::{Digest, Sha256};

use crate::domain::calibration::BareFit;
use crate::domain::calibration::{JudgeRange, NewVersion};
use crate::domain::panel::Joined;
use crate::domain::training::Plan;
use crate::domain::{Anchor, GroupName, RubricName, Scale};
use judgecal_stats::agreement::report::HeldOutRow;
use judgecal_stats::bayes::FitOptions;
use judgecal_stats::conformal::Intervals;
use judgecal_stats::covariates::{LayerOptions, Row, fit_layer};
use judgecal_stats::cv;
use judgecal_stats::error::CalibrateError;
use judgecal_stats::panel::fusion::{FusionOptions, PanelRows, fit_fusion};
use judgecal_stats::quality::Comparison;
use judgecal_stats::runlevel::groups::GroupBias;
use judgecal_stats::select;
use judgecal_stats::{Cell, Corrected, Run};

/// Shared between a running job's worker and its training thread: how far it is, what it last
/// reported, and whether it should stop.
#[derive(Default)]
pub struct Progress {
    share: AtomicU64,
    detail: Mutex<String>,
    pub cancel: AtomicBool,
}

impl Progress {
    pub fn set(&self, share: f64) {
        self.share
            .store(share.clamp(0.0, 1.0).to_bits(), Ordering::Relaxed);
    }

    pub fn share(&self) -> f64 {
        f64::from_bits(self.share.load(Ordering::Relaxed))
    }

    pub fn set_detail(&self, detail: String) {
        if let Ok(mut d) = self.detail.lock() {
            *d = detail;
        }
    }

    pub fn detail(&self) -> String {
        self.detail.lock().map(|d| d.clone()).unwrap_or_default()
    }
}

/// One cell's snapshot, as the job read it.
#[derive(Clone)]
pub struct CellData {
    pub rubric: RubricName,
    /// Each anchor's item id, in item order.
    pub items: Vec<String>,
    pub scale: Scale,
    /// (judge score, reference score), in item order.
    pub pairs: Vec<(f64, f64)>,
    /// Each anchor's group, in the same order.
    pub groups: Vec<Option<GroupName>>,
    /// Each anchor's further scores by its judge version, in the same order; empty where not
    /// known (a panel's derived cells).
    pub repeats: Vec<Vec<f64>>,
    /// Each anchor's unit of independence (its rater, or its upload), in the same order; empty
    /// where not known (a panel's derived cells).
    pub units: Vec<Option<String>>,
    /// Each anchor's upload time where it names no rater (the order of the uploads the drift
    /// alarm expects one from the one before), in the same order; empty where not known.
    pub uploads: Vec<Option<i64>>,
    pub digest: String,
}

impl CellData {
    pub fn new(rubric: RubricName, scale: Scale, anchors: &[Anchor]) -> Self {
        Self {
            rubric,
            scale,
            items: anchors
                .iter()
                .map(|a| a.item_id.as_str().to_owned())
                .collect(),
            pairs: anchors
                .iter()
                .map(|a| (a.judge_score, a.reference_score))
                .collect(),
            groups: anchors.iter().map(|a| a.group.clone()).collect(),
            repeats: anchors.iter().map(|a| a.repeats.clone()).collect(),
            units: anchors.iter().map(Anchor::unit).collect(),
            uploads: anchors
                .iter()
                .map(|a| a.rater.is_none().then_some(a.reference_at_ms).flatten())
                .collect(),
            digest: digest(anchors),
        }
    }

    fn version(&self, model: judgecal_stats::Model) -> NewVersion {
        NewVersion {
            rubric: self.rubric.clone(),
            anchor_count: self.pairs.len() as i64,
            anchor_digest: self.digest.clone(),
            model,
            evaluation: None,
            decision: None,
            intervals: None,
            groups: None,
            fusion: None,
            covariate_layer: None,
            bare: None,
            judge_range: JudgeRange::of(self.pairs.iter().map(|p| p.0)),
            held_out: None,
        }
    }

    /// Its anchors beside their held-out predictions `held_out`, for the agreement report.
    fn held_out_rows(&self, held_out: &[Option<Corrected>]) -> Vec<HeldOutRow> {
        self.pairs
            .iter()
            .enumerate()
            .map(|(i, &(judge, reference))| {
                let c = held_out.get(i).copied().flatten();
                HeldOutRow {
                    item_id: self.items.get(i).cloned().unwrap_or_default(),
                    group: self.groups.get(i).cloned().flatten().map(|g| g.to_string()),
                    judge_score: judge,
                    reference_score: reference,
                    corrected: c.map(|c| c.score).filter(|s| s.is_finite()),
                    band: c.and_then(|c| c.predictive).map(|(lo, hi)| [lo, hi]),
                    repeats: self.repeats.get(i).cloned().unwrap_or_default(),
                }
            })
            .collect()
    }

    /// The intervals of a version with held-out predictions `held_out`, its anchors' misses
    /// counted per unit for the drift alarm.
    fn intervals(&self, held_out: &[Option<Corrected>], seed: u64) -> Option<Intervals> {
        Intervals::of(&self.pairs, held_out, seed)
            .map(|i| i.with_units(&self.pairs, held_out, (&self.units, &self.uploads), seed))
    }

    /// How the bias of a version with held-out predictions `held_out` varies between this
    /// cell's groups.
    fn group_bias(&self, held_out: &[Option<Corrected>]) -> Option<GroupBias> {
        let groups: Vec<Option<&str>> = self
            .groups
            .iter()
            .map(|g| g.as_ref().map(|g| g.as_str()))
            .collect();
        GroupBias::of_held_out(&self.pairs, held_out, &groups)
    }
}

/// SHA-256 over the anchors in item order (id, both scores' exact bits, the group and the
/// covariates where there are any): two fits with the same digest saw the same data.
pub fn digest(anchors: &[Anchor]) -> String {
    let mut h = Sha256::new();
    for a in anchors {
        h.update(a.item_id.as_str().as_bytes());
        h.update([0]);
        h.update(a.judge_score.to_bits().to_le_bytes());
        h.update(a.reference_score.to_bits().to_le_bytes());
        // Only where there is one, so anchors without groups keep their digest.
        if let Some(g) = &a.group {
            h.update([1]);
            h.update(g.as_str().as_bytes());
        }
        // Likewise covariates.
        for (name, value) in &a.covariates {
            h.update([2]);
            h.update(name.as_str().as_bytes());
            h.update(value.to_bits().to_le_bytes());
        }
        // And repeats.
        for r in &a.repeats {
            h.update([3]);
            h.update(r.to_bits().to_le_bytes());
        }
    }
    crate::auth::hex(&h.finalize())
}

/// The versions `plan` makes for `cells`, one per cell.
pub fn train(
    cells: &[CellData],
    plan: &Plan,
    progress: &Progress,
) -> Result<Vec<NewVersion>, CalibrateError> {
    with_run(progress, |run| train_on(cells, plan, run))
}

/// A panel's versions: its fusion layer fitted to the members' joined anchors (`joined`, with
/// each rubric's scale), then `plan` on the cells of the derived judge, whose score of an
/// anchor is its cross-fitted fused score. Each version records the members' judge versions
/// (`versions`) and how many anchors of each the join kept.
pub fn train_panel(
    joined: &[(Joined, Scale)],
    members: &[String],
    versions: &[Option<String>],
    plan: &Plan,
    progress: &Progress,
) -> Result<Vec<NewVersion>, CalibrateError> {
    with_run(progress, |run| {
        let (seed, auto) = match plan {
            Plan::Method(job) => (job.split.seed, false),
            Plan::Auto(options) => (options.split.seed, true),
        };
        let rows: Vec<PanelRows> = joined.iter().map(|(j, _)| j.rows.clone()).collect();
        // The join's size per rubric, beside each member's anchors before it.
        let join: serde_json::Map<String, serde_json::Value> = joined
            .iter()
            .map(|(j, _)| {
                let size =
                    serde_json::json!({"items": j.rows.len(), "member_anchors": j.member_anchors});
                (j.rubric.to_string(), size)
            })
            .collect();
        let join = serde_json::Value::Object(join);
        run.detail(
            serde_json::json!({"step": "fitting the panel's fusion", "joined": join}).to_string(),
        );
        let opts = FusionOptions::new(members.len(), seed, auto);
        let fusions = fit_fusion(&rows, members, &opts, &run.part(0.0, 0.4))?;
        let cells: Vec<CellData> = joined
            .iter()
            .zip(&fusions)
            .map(|((j, scale), f)| CellData {
                rubric: j.rubric.clone(),
                scale: *scale,
                // The members' anchors come member after member, each in item order.
                items: j
                    .anchors
                    .iter()
                    .take(j.rows.len())
                    .map(|a| a.item_id.as_str().to_owned())
                    .collect(),
                pairs: f.anchors.clone(),
                groups: j.groups.clone(),
                repeats: Vec::new(),
                units: Vec::new(),
                uploads: Vec::new(),
                digest: digest(&j.anchors),
            })
            .collect();
        let mut trained = train_on(&cells, plan, &run.part(0.4, 1.0))?;
        for ((v, mut f), (j, _)) in trained.iter_mut().zip(fusions).zip(joined) {
            f.member_versions = versions.to_vec();
            f.member_anchors = j.member_anchors.clone();
            let groups: Vec<Option<&str>> = j
                .groups
                .iter()
                .map(|g| g.as_ref().map(|g| g.as_str()))
                .collect();
            f.set_group_means(&j.rows, &groups);
            v.fusion = Some(f);
        }
        // What the finished job shows: the join it fitted.
        run.detail(serde_json::json!({"joined": join}).to_string());
        Ok(trained)
    })
}

/// A training's covariates (`names`) and each fitted rubric's anchors with them (`rows[r]`,
/// in the order of its cell's anchors).
pub struct CovariateRows {
    /// The request named none: these are the ones every anchor carries.
    pub carried: bool,
    pub names: Vec<String>,
    pub rows: Vec<Vec<Row>>,
}

/// Versions trained with covariates: per rubric the input layer of the judge score and the
/// covariates, then `plan` on the layer's cross-fitted scores. Each version keeps its layer,
/// the judge-score range of its anchors (what `/v1/correct` checks) and, where its layer reads
/// a covariate, the same plan's fit of the judge score alone (what answers items sent without
/// covariates). Covariates the request did not name that no rubric keeps (or that cannot be
/// fitted) leave the judge score alone, as if the anchors carried none.
pub fn train_covariates(
    cells: &[CellData],
    covariates: &CovariateRows,
    plan: &Plan,
    progress: &Progress,
) -> Result<Vec<NewVersion>, CalibrateError> {
    let CovariateRows {
        carried,
        names,
        rows,
    } = covariates;
    with_run(progress, |run| {
        let seed = plan.seed();
        run.detail(
            serde_json::json!({"step": "fitting the covariate layer", "covariates": names})
                .to_string(),
        );
        let opts = LayerOptions {
            sampler: FitOptions {
                seed,
                ..FitOptions::default()
            },
            ..LayerOptions::default()
        };
        let layers = match fit_layer(rows, names, &opts, &run.part(0.0, 0.3)) {
            Ok(layers) if !carried || layers.iter().any(|l| !l.inputs.is_empty()) => layers,
            // Unnamed covariates that lower no rubric's held-out error, or cannot be fitted:
            // the judge score alone, and the job says why.
            Ok(_) => return judge_alone(cells, plan, run, names, "kept in no rubric"),
            Err(e) if *carried => return judge_alone(cells, plan, run, names, &e),
            Err(e) => return Err(e.into()),
        };
        let fused: Vec<CellData> = cells
            .iter()
            .zip(&layers)
            .map(|(c, layer)| CellData {
                pairs: layer.anchors.clone(),
                ..c.clone()
            })
            .collect();
        let reads = layers.iter().any(|l| !l.inputs.is_empty());
        let mut trained = train_on(&fused, plan, &run.part(0.3, if reads { 0.65 } else { 1.0 }))?;
        let mut bare: Vec<Option<NewVersion>> = if reads {
            run.detail(
                serde_json::json!({"step": "fitting the judge score alone, for items sent without covariates"})
                    .to_string(),
            );
            train_on(cells, plan, &run.part(0.65, 1.0))?
                .into_iter()
                .map(Some)
                .collect()
        } else {
            cells.iter().map(|_| None).collect()
        };
        for (((v, layer), c), b) in trained.iter_mut().zip(layers).zip(cells).zip(&mut bare) {
            v.judge_range = JudgeRange::of(c.pairs.iter().map(|p| p.0));
            // The report compares the raw judge, not the layer's score, with the reference.
            for (row, p) in v.held_out.iter_mut().flatten().zip(&c.pairs) {
                row.judge_score = p.0;
            }
            if !layer.inputs.is_empty() {
                v.bare = b.take().map(|b| {
                    Box::new(BareFit {
                        model: b.model,
                        evaluation: b.evaluation,
                        intervals: b.intervals,
                    })
                });
            }
            v.covariate_layer = Some(layer);
        }
        run.detail(kept_detail(&trained, names));
        Ok(trained)
    })
}

/// What the finished job shows: the covariates considered and, per rubric, those kept.
fn kept_detail(trained: &[NewVersion], names: &[String]) -> String {
    let kept: serde_json::Map<String, serde_json::Value> = trained
        .iter()
        .map(|v| {
            let inputs: Vec<String> = v
                .covariate_layer
                .iter()
                .flat_map(|l| l.inputs.iter().map(|i| i.label()))
                .collect();
            (v.rubric.to_string(), serde_json::json!(inputs))
        })
        .collect();
    serde_json::json!({"covariates_considered": names, "kept": kept}).to_string()
}

/// The judge score alone where the covariates the anchors carry were considered and none was
/// kept (`why`): the job's detail says which were considered.
fn judge_alone(
    cells: &[CellData],
    plan: &Plan,
    run: &Run,
    names: &[String],
    why: &str,
) -> Result<Vec<NewVersion>, CalibrateError> {
    tracing::info!(?names, why, "covariates considered, none kept");
    let trained = train_on(cells, plan, &run.part(0.3, 1.0))?;
    // What the finished job shows: what was considered, and why none was kept.
    run.detail(
        serde_json::json!({"covariates_considered": names, "kept": {}, "why_none": why})
            .to_string(),
    );
    Ok(trained)
}

/// Runs `work` with a `Run` that reports to `progress` and stops when it is cancelled.
fn with_run<T>(
    progress: &Progress,
    work: impl FnOnce(&Run) -> Result<T, CalibrateError>,
) -> Result<T, CalibrateError> {
    let report = |p: f64| progress.set(p);
    let detail = |d: String| progress.set_detail(d);
    let run = Run::new(&progress.cancel, &report).with_detail(&detail);
    let out = work(&run)?;
    if progress.cancel.load(Ordering::Relaxed) {
        return Err(CalibrateError::Cancelled);
    }
    progress.set(1.0);
    Ok(out)
}

fn train_on(cells: &[CellData], plan: &Plan, run: &Run) -> Result<Vec<NewVersion>, CalibrateError> {
    let data: Vec<Cell> = cells
        .iter()
        .map(|c| Cell {
            pairs: c.pairs.clone(),
            scale: (c.scale.min, c.scale.max),
        })
        .collect();
    let versions = match plan {
        Plan::Method(job) => {
            let (models, held_out) = job.options.train(&data, job.split, run)?;
            cells
                .iter()
                .zip(models)
                .zip(&held_out)
                .map(|((c, model), held)| NewVersion {
                    evaluation: Comparison::of(
                        job.split.scheme,
                        &cv::scores(held),
                        &c.pairs,
                        c.scale.min,
                        c.scale.max,
                    ),
                    intervals: c.intervals(held, job.split.seed),
                    groups: c.group_bias(held),
                    held_out: Some(c.held_out_rows(held)),
                    ..c.version(model)
                })
                .collect()
        }
        Plan::Auto(options) => cells
            .iter()
            .zip(select::auto(&data, options, run)?)
            .map(|(c, chosen)| {
                tracing::info!(rubric = %c.rubric, chosen = %chosen.decision.chosen, reason = %chosen.decision.reason, "auto chose");
                NewVersion {
                    evaluation: chosen.evaluation,
                    intervals: c.intervals(&chosen.held_out, options.split.seed),
                    groups: c.group_bias(&chosen.held_out),
                    held_out: Some(c.held_out_rows(&chosen.held_out)),
                    decision: Some(chosen.decision),
                    ..c.version(chosen.model)
                }
            })
            .collect(),
    };
    Ok(versions)
}

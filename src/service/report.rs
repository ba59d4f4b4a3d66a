//! The picture of a cell's version (`GET /v1/cells/{judge}/{rubric}/report.svg`, and the cell
//! page's): its anchors, fitted curve and band, residuals and group biases, drawn by
//! `crate::plots` off the async runtime. A pairwise cell's picture is `preferences.rs`'s.

use super::families::{Pairwise, Scores, Versions};
use std::sync::Arc;

use super::versions::Loaded;
use crate::domain::CellKey;
use crate::error::{Error, Result};

impl Scores<'_> {
    /// An SVG report of the cell's active version (or `version`): its anchors with the fitted
    /// curve and predictive band, the residuals against the judge score, and each group's
    /// held-out bias. A panel's anchors are its fused ones (each item's cross-fitted fused
    /// score and reference), which its members' cells do not hold.
    pub async fn report_svg(&self, key: &CellKey, version: Option<i64>) -> Result<String> {
        if let Some(svg) = Pairwise(self).preference_svg(key, version).await? {
            return Ok(svg);
        }
        let loaded = Versions(self).corrector(key, version).await?;
        let v = &loaded.version;
        let (pairs, input): (Vec<(f64, f64)>, &str) = match (&v.fusion, &v.covariate_layer) {
            (Some(fusion), _) => (fusion.anchors.clone(), "fused score"),
            (None, Some(layer)) => (layer.anchors.clone(), "judge score and covariates"),
            (None, None) => (
                self.store
                    .version_rows()
                    .judge_anchors(
                        &key.judge,
                        Some(std::slice::from_ref(&key.rubric)),
                        v.judge_version.as_ref(),
                    )
                    .await?
                    .into_iter()
                    .flat_map(|(_, a)| a)
                    .map(|a| (a.judge_score, a.reference_score))
                    .collect(),
                "judge score",
            ),
        };
        let scale = Versions(self).scale_of(&key.rubric).await?;
        let (corrected, curve) = corrected_and_curve(&loaded, &pairs).await?;
        let groups: Vec<(String, f64, f64)> = v
            .groups
            .iter()
            .flat_map(|g| &g.groups)
            .map(|g| (g.group.clone(), g.mean_residual, g.standard_error))
            .collect();
        let title = format!(
            "{}{key}: version {} ({}), {} anchors{}",
            if v.fusion.is_some() { "panel " } else { "" },
            v.version,
            v.method(),
            pairs.len(),
            figures_of(v)
        );
        // The residuals panel shows the held-out corrections where the version kept them (a
        // covariate version's rows hold the raw judge score, not the layer's input: not those).
        let held_out: Vec<(f64, f64, f64)> = if v.covariate_layer.is_none() {
            self.store
                .version_rows()
                .held_out(v.id)
                .await?
                .unwrap_or_default()
                .iter()
                .filter_map(|r| r.corrected.map(|c| (r.judge_score, r.reference_score, c)))
                .collect()
        } else {
            Vec::new()
        };
        crate::plots::draw_svg(crate::plots::cell_report(&crate::plots::CellPicture {
            title,
            scale: (scale.min, scale.max),
            input,
            pairs: &pairs,
            corrected: &corrected,
            curve: &curve,
            groups: &groups,
            held_out: &held_out,
        }))
        .await
    }
}

/// The version's held-out error and headline, for a picture's title.
fn figures_of(v: &crate::domain::calibration::CalibratorVersion) -> String {
    let held_out = v.evaluation.map_or(String::new(), |e| {
        format!(
            "; held-out MAE {:.3} (raw {:.3})",
            e.calibrated.mae, e.raw.mae
        )
    });
    let headline = v
        .model
        .report()
        .headline()
        .map_or(String::new(), |h| format!("; {h}"));
    format!("{held_out}{headline}")
}

/// The version's corrected score of each anchor, and its curve (with its band) over the
/// anchors' inputs, on a blocking thread.
async fn corrected_and_curve(
    loaded: &Arc<Loaded>,
    pairs: &[(f64, f64)],
) -> Result<(Vec<f64>, Vec<crate::plots::CurvePoint>)> {
    const CURVE: usize = 80;
    let (lo, hi) = pairs
        .iter()
        .map(|p| p.0)
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
            (a.min(x), b.max(x))
        });
    let grid: Vec<f64> = if lo < hi {
        (0..=CURVE)
            .map(|k| lo + (hi - lo) * k as f64 / CURVE as f64)
            .collect()
    } else {
        Vec::new()
    };
    let inputs: Vec<f64> = pairs
        .iter()
        .map(|p| p.0)
        .chain(grid.iter().copied())
        .collect();
    let version = loaded.clone();
    let scores = crate::error::blocking("drawing the report", move || {
        version.version.correct(&inputs)
    })
    .await?
    .map_err(Error::Internal)?;
    let (corrected, curve) = scores.split_at(pairs.len());
    let curve = grid
        .iter()
        .zip(curve)
        .map(|(&x, c)| crate::plots::CurvePoint {
            x,
            score: c.score,
            band: c.predictive,
        })
        .collect();
    Ok((corrected.iter().map(|c| c.score).collect(), curve))
}

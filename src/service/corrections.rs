//! Corrections: what the eval platform calls, one score or 100,000 at a time.

use std::sync::Arc;

use super::Service;
use super::versions::{Loaded, Mismatch};
use crate::calibrate::Corrected;
use crate::domain::Problem;
use crate::domain::correction::CorrectionRequest;
use crate::error::{Error, Result};

/// Corrected scores and the version that made them.
pub struct Correction {
    pub version: Arc<Loaded>,
    pub results: Vec<Corrected>,
    /// Set where the request named a judge version that version was not trained on.
    pub mismatch: Option<Mismatch>,
}

/// Batches up to this size are corrected on the request's own thread when they need only
/// look-ups; larger ones, and any that need libtorch, on a blocking thread.
const INLINE: usize = 4096;

impl Service {
    /// Corrects judge scores with the cell's active version (or the requested one), clipped
    /// to the rubric's scale with their intervals.
    pub async fn correct(&self, request: &CorrectionRequest) -> Result<Correction> {
        let max = self.limits.max_correct_batch;
        if request.scores.len() > max {
            return Err(Error::rejected(
                "the correction request was refused",
                vec![Problem::at(
                    None,
                    request.field(),
                    format!(
                        "{} scores; at most {max} per request (limits.max_correct_batch): split the batch",
                        request.scores.len()
                    ),
                )],
            ));
        }
        let key = &request.key;
        let served = self
            .served(key, request.version, request.judge_version.as_ref())
            .await?;
        let loaded = served.loaded;
        let model = &loaded.version.model;
        let results = if request.scores.len() <= INLINE && !model.heavy(&request.scores) {
            loaded.version.correct(&request.scores)
        } else {
            let version = loaded.clone();
            let scores = request.scores.clone();
            crate::error::blocking("correcting scores", move || {
                version.version.correct(&scores)
            })
            .await?
        }
        .map_err(Error::Internal)?;
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
        self.metrics
            .count_corrections(key, model.method(), request.scores.len());
        Ok(Correction {
            version: loaded,
            results,
            mismatch: served.mismatch,
        })
    }
}

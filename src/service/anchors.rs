//! Anchors, rubrics and cells: uploads (checked, stored, their drift checked), pages of
//! anchors, deletions, and the bundled demo.

use super::families::{Operations, Scores, Versions};
use super::{AnchorPage, DEMO_ANCHORS_CSV, IngestReport};
use crate::auth;
use crate::domain::anchors::{self, RawAnchor};
use crate::domain::training::TrainingRequest;
use crate::domain::{
    CellKey, CellSummary, JudgeName, JudgeVersion, Problem, Rubric, RubricName, Scale,
};
use crate::error::{Error, Result, blocking};

impl Scores<'_> {
    /// Checks and stores an upload (see `domain::anchors` for the checks and `Store::ingest`
    /// for what counts as unchanged or conflicting).
    pub async fn ingest(&self, rows: Vec<RawAnchor>, replace: bool) -> Result<IngestReport> {
        let scales = self.store.rubric_scales().await?;
        // A large batch takes a while to check: off the async runtime.
        let (checked, max) = (scales.clone(), self.limits.max_batch_anchors);
        let cells = blocking("checking an anchor batch", move || {
            anchors::validate(rows, &checked, max)
        })
        .await?
        .map_err(|p| Error::invalid("the anchor batch was refused", p))?;
        let mut judges: Vec<&JudgeName> = cells.iter().map(|c| &c.key.judge).collect();
        judges.sort();
        judges.dedup();
        for judge in judges {
            if self.store.panel_rows().panel(judge).await?.is_some() {
                let row = cells
                    .iter()
                    .find(|c| &c.key.judge == judge)
                    .and_then(|c| c.rows.first().copied());
                return Err(Error::conflict(
                    format!("the anchor batch was refused: {judge} is a panel"),
                    vec![Problem::at(
                        row,
                        "judge",
                        format!(
                            "{judge} is a panel, which holds no anchors of its own: upload each member's scores under the member's name; training the panel joins them on item_id"
                        ),
                    )],
                ));
            }
        }
        // A judge score far outside the range its judge version's calibration was trained on
        // is on another scale, or a typo: refused by row, as /v1/correct refuses it.
        let mut far = Vec::new();
        for c in &cells {
            if let Some(own) = Versions(self).own_calibration(&c.key, c.judge_version.as_ref()) {
                let scores: Vec<f64> = c.anchors.iter().map(|a| a.judge_score).collect();
                far.extend(
                    own.version
                        .far_scores(&scores, "judge_score")
                        .into_iter()
                        .map(|p| Problem {
                            row: p.row.and_then(|r| c.rows.get(r - 1).copied()),
                            ..p
                        }),
                );
            }
        }
        if !far.is_empty() {
            return Err(Error::invalid("the anchor batch was refused", far));
        }
        let mut outcomes = self.store.ingest(&cells, &scales, replace).await?;
        self.panel_memo.clear();
        for o in &outcomes {
            self.metrics.set_cell_anchors(&o.key, o.anchor_count);
        }
        Operations(self).check_coverage(&mut outcomes).await;
        Ok(IngestReport {
            inserted: outcomes.iter().map(|o| o.inserted).sum(),
            unchanged: outcomes.iter().map(|o| o.unchanged).sum(),
            replaced: outcomes.iter().map(|o| o.replaced).sum(),
            cells: outcomes,
        })
    }

    pub async fn put_rubric(
        &self,
        name: &str,
        min: f64,
        max: f64,
        description: &str,
    ) -> Result<Rubric> {
        let name = RubricName::parse(name).map_err(|e| {
            Error::invalid(
                "the rubric was refused",
                vec![Problem::at(None, "rubric", e)],
            )
        })?;
        let scale =
            Scale::new(min, max).map_err(|p| Error::invalid("the rubric was refused", p))?;
        if description.chars().count() > 2000 {
            return Err(Error::invalid(
                "the rubric was refused",
                vec![Problem::at(
                    None,
                    "description",
                    "longer than 2000 characters",
                )],
            ));
        }
        let rubric = self.store.put_rubric(&name, scale, description).await?;
        self.scales.put(name, scale);
        Ok(rubric)
    }

    pub async fn rubrics(&self) -> Result<Vec<Rubric>> {
        self.store.rubrics().await
    }

    pub async fn cells(&self) -> Result<Vec<CellSummary>> {
        self.store.cells().await
    }

    pub async fn anchors_page(
        &self,
        key: &CellKey,
        only: Option<&JudgeVersion>,
        cursor: Option<&str>,
        limit: Option<usize>,
    ) -> Result<AnchorPage> {
        let max = self.limits.max_page_size;
        let limit = limit.unwrap_or(max.min(100));
        if limit == 0 || limit > max {
            return Err(Error::rejected(
                "the page request was refused",
                vec![Problem::at(
                    None,
                    "limit",
                    format!("must be between 1 and {max}; got {limit}"),
                )],
            ));
        }
        let after = cursor
            .map(|c| {
                decode_cursor(c).ok_or_else(|| {
                    Error::rejected(
                        "the page request was refused",
                        vec![Problem::at(
                            None,
                            "cursor",
                            "is not a cursor this service gave out",
                        )],
                    )
                })
            })
            .transpose()?;
        let (anchors, more) = self
            .store
            .anchors_page(
                key,
                only,
                after
                    .as_deref()
                    .map(|a| a.split_once('\0').unwrap_or((a, ""))),
                limit,
            )
            .await?;
        // The cursor is the last row's item id and judge version, '\0' between (neither may
        // hold a control character).
        let next_cursor = more
            .then(|| {
                anchors.last().map(|a| {
                    let version = JudgeVersion::stored(a.judge_version.as_ref());
                    auth::hex(format!("{}\0{version}", a.item_id.as_str()).as_bytes())
                })
            })
            .flatten();
        Ok(AnchorPage {
            anchors,
            next_cursor,
        })
    }

    pub async fn delete_anchor(
        &self,
        key: &CellKey,
        item_id: &str,
        version: Option<&JudgeVersion>,
    ) -> Result<i64> {
        // The id as stored: in its composed form.
        let composed = crate::domain::ItemId::named(item_id);
        let item_id = composed.as_ref().map_or(item_id, |id| id.as_str());
        let count = self.store.delete_anchor(key, item_id, version).await?;
        self.panel_memo.clear();
        self.metrics.set_cell_anchors(key, count);
        Ok(count)
    }

    /// Loads the bundled HANNA slice (idempotent: a second load finds every anchor unchanged).
    pub async fn load_demo(&self) -> Result<IngestReport> {
        let rows = anchors::rows_from_csv(DEMO_ANCHORS_CSV.as_bytes())
            .map_err(|p| Error::invalid("the bundled demo data", p))?;
        self.ingest(rows, false).await
    }

    /// Queues a Bayesian training job for every demo judge that has no calibrator yet;
    /// returns the jobs.
    pub async fn train_demo(&self) -> Result<Vec<crate::domain::calibration::JobId>> {
        let mut judges: Vec<_> = self
            .store
            .cells()
            .await?
            .into_iter()
            .map(|c| c.key.judge)
            .collect();
        judges.dedup();
        let active = self.store.version_rows().active_calibrators().await?;
        let mut jobs = Vec::new();
        for judge in judges {
            if active.iter().any(|(key, _)| key.judge == judge) {
                continue;
            }
            let request =
                TrainingRequest::parse(judge.as_str(), "bayes", None, None, serde_json::json!({}))
                    .map_err(|p| Error::rejected("the demo's training request", p))?;
            jobs.push(Operations(self).submit_training(request).await?.id);
        }
        Ok(jobs)
    }
}

/// A cursor is the last item id of a page, hex-encoded. Any even run of hex digits is a
/// position (bytes that are not UTF-8 are read lossily: the page starts after them).
fn decode_cursor(c: &str) -> Option<String> {
    if !c.len().is_multiple_of(2) {
        return None;
    }
    let bytes = (0..c.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(c.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    #[test]
    fn cursors_round_trip_and_reject_garbage() {
        let c = crate::auth::hex("story-é/1".as_bytes());
        assert_eq!(super::decode_cursor(&c).as_deref(), Some("story-é/1"));
        assert_eq!(super::decode_cursor("zz"), None);
        assert_eq!(super::decode_cursor("abc"), None);
        assert_eq!(super::decode_cursor("ff").as_deref(), Some("\u{fffd}"));
    }
}

//! Pairwise comparison uploads: what labelling teams send for a pairwise judge.

use crate::domain::Problem;
use crate::domain::pairwise::comparisons::{self, RawComparison};
use crate::error::{Error, Result, blocking};
use crate::service::families::Pairwise;
use crate::store::ComparisonIngest;

impl Pairwise<'_> {
    /// Checks a comparison batch whole, refuses a panel's name (a panel holds nothing of its
    /// own), then stores it in one transaction.
    pub async fn ingest_comparisons(
        &self,
        rows: Vec<RawComparison>,
        replace: bool,
    ) -> Result<Vec<ComparisonIngest>> {
        let max = self.limits.max_batch_anchors;
        let cells = blocking("checking a comparison batch", move || {
            comparisons::validate(rows, max)
        })
        .await?
        .map_err(|p| Error::invalid("the comparison batch was refused", p))?;
        for cell in &cells {
            if self
                .store
                .panel_rows()
                .panel(&cell.key.judge)
                .await?
                .is_some()
            {
                return Err(Error::conflict(
                    format!(
                        "the comparison batch was refused: {} is a panel",
                        cell.key.judge
                    ),
                    vec![Problem::at(
                        cell.rows.first().copied(),
                        "judge",
                        format!(
                            "{} is a panel, which holds nothing of its own: upload each member's verdicts under the member's name",
                            cell.key.judge
                        ),
                    )],
                ));
            }
        }
        let outcomes = self
            .store
            .pairwise_rows()
            .ingest_comparisons(&cells, replace)
            .await?;
        self.check_preference_coverage(&outcomes).await;
        Ok(outcomes)
    }
}

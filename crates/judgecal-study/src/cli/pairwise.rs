//! `judgecal-study pairwise`: pairwise judges on LLMBar's sets, or ratings on worlds with
//! known truth.

use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct PairwiseArgs {
    /// LLMBar's pairwise sets (../shared/data/llmbar).
    #[arg(long, required_unless_present = "grid")]
    pub llmbar: Option<PathBuf>,
    /// Instead: the ratings' simulation grid (Bradley–Terry worlds of 2 to 50 systems).
    #[arg(long, conflicts_with = "llmbar")]
    pub grid: bool,
    /// Repetitions of each world of the grid.
    #[arg(long, default_value_t = 100)]
    pub reps: usize,
    /// Only these rows of the grid (numbered from 1), to repeat one more often.
    #[arg(long, value_delimiter = ',')]
    pub rows: Vec<usize>,
    /// Folds of the cross-fitted held-out figures.
    #[arg(long, default_value_t = 10)]
    pub folds: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

pub(super) fn pairwise(a: PairwiseArgs) -> Result<(), String> {
    match &a.llmbar {
        Some(dir) => print!("{}", crate::pairwise::report(dir, a.folds, a.seed)?),
        None => print!("{}", crate::pairwise_grid::report(a.reps, a.seed, &a.rows)?),
    }
    Ok(())
}

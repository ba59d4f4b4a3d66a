//! `judgecal-study pairwise`: pairwise judges on LLMBar's sets.

use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct PairwiseArgs {
    /// LLMBar's pairwise sets (../shared/data/llmbar).
    #[arg(long)]
    pub llmbar: PathBuf,
    /// Folds of the cross-fitted held-out figures.
    #[arg(long, default_value_t = 10)]
    pub folds: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

pub(super) fn pairwise(a: PairwiseArgs) -> Result<(), String> {
    print!("{}", crate::pairwise::report(&a.llmbar, a.folds, a.seed)?);
    Ok(())
}

//! Ranking K runs of one cell (`/v1/rank`): each run's de-biased mean as `/v1/estimate` gives
//! it, every pair's difference with intervals that hold for all pairs at once, each run's rank
//! interval, and where labels would settle what is left.
//!
//! How it works, and why: docs/internals.md, "crates/judgecal-stats/src/runlevel/rank/mod.rs".

mod draws;
mod pairs;
mod plan;
#[cfg(test)]
mod tests;

use super::inference::Estimand;
use super::{Anchored, AnswerPath, AnswerSettings, Basis, RunEstimate, RunItems, Source, chain};
use crate::error::{CalibrateError, Result};
use crate::rng::{Rng, SeedableRng};

/// The most runs one ranking takes.
pub const MAX_RUNS: usize = 50;

/// Joint draws of the runs' errors behind the critical value.
pub const DRAWS: usize = 20_000;

/// A run is first labelled with at least this many items: fewer leave the labelled path's t
/// quantile too wide to help.
pub const FIRST_LABELS: usize = 10;

/// Labels per run of a first sample (`Allocation::pilot`): what the items share between runs,
/// the residuals' spread and the pairs' gaps are measured on them before the rest is planned.
/// With a weak judge 10 put a pair's gap at ±0.13, and the plans after them needed 14% more
/// labels at K = 12 than after 20 (`judgecal-study rank`: 5, 10, 15 and 20 tried).
pub const PILOT_LABELS: usize = 20;

/// The share of the plan a step asks for ([`Allocation::step`]). A plan made on a first
/// sample sizes each pair for the lower end of its gap (|d̂| − se, se from a few labels) and
/// asks 3–5 times the labels that settle; a tenth of it, looked at, sharpens the gaps and the
/// spreads the next plan rests on (`judgecal-study rank`: 0.05 to 0.15 alike, a quarter worse,
/// half far worse).
pub const STEP_SHARE: f64 = 0.1;

/// What the pairs' pooled residual-difference noise counts for, in items, beside a pair's own
/// measure when the plan shrinks one toward the other.
const PRIOR_ITEMS: f64 = 30.0;

/// Which error the pairs' intervals control.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ErrorRate {
    /// Every pair's interval covers at once with the level's probability.
    #[default]
    Familywise,
    /// Each pair's interval covers on its own: no control over the pairs together.
    PerPair,
}

impl ErrorRate {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorRate::Familywise => "familywise",
            ErrorRate::PerPair => "per_pair",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "familywise" => Some(ErrorRate::Familywise),
            "per_pair" => Some(ErrorRate::PerPair),
            _ => None,
        }
    }
}

/// What labels to plan for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LabelGoal {
    /// The most labels in all; `None`: as many as settling every open pair takes.
    pub budget: Option<usize>,
    /// Gaps smaller than this (reference units) need not be resolved.
    pub min_gap: f64,
    /// The chance of resolving a pair whose true gap is the one planned for.
    pub power: f64,
    pub seed: u64,
}

impl Default for LabelGoal {
    fn default() -> Self {
        Self {
            budget: None,
            min_gap: 0.1,
            power: 0.8,
            seed: 0,
        }
    }
}

/// How a ranking is worked out, beyond the runs' own [`AnswerSettings`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankSettings {
    pub error: ErrorRate,
    /// This look, from 1.
    pub round: usize,
    /// The looks planned in all, fixed before the first.
    pub rounds: usize,
    pub draws: usize,
    pub labels: Option<LabelGoal>,
    /// How correlated different sources' corrector errors are (sources calibrated on the same
    /// anchor items: two judge versions of a cell; see `runlevel::shared_correlation`): each
    /// source's draws are √|ρ| of a stream all sources share and √(1 − |ρ|) of their own, the
    /// second of two sources with the stream's sign turned where ρ < 0 (errors that move
    /// apart; with more sources a negative ρ is drawn as 0). 0 (the default): independent.
    pub shared: f64,
}

impl Default for RankSettings {
    fn default() -> Self {
        Self {
            error: ErrorRate::Familywise,
            round: 1,
            rounds: 1,
            draws: DRAWS,
            labels: None,
            shared: 0.0,
        }
    }
}

impl RankSettings {
    /// The level each look's intervals hold at together: 1 − α/rounds.
    pub fn family_level(&self, level: f64) -> f64 {
        1.0 - (1.0 - level) / self.rounds.max(1) as f64
    }
}

/// One run in a ranking.
#[derive(Debug, Clone, PartialEq)]
pub struct RankedRun {
    pub estimate: RunEstimate,
    /// The ranks compatible with the pairs' intervals (1 = highest mean).
    pub rank: (usize, usize),
}

/// A pair of runs, A − B (indices into the runs, A before B).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankedPair {
    pub a: usize,
    pub b: usize,
    pub difference: f64,
    pub interval: (f64, f64),
    pub standard_error: f64,
    /// Items both runs labelled behind the pair's own answer (the labelled path on the
    /// per-item differences, weighed with the plain difference); 0 where the pair is the
    /// difference of the two runs' answers.
    pub labelled: usize,
}

impl RankedPair {
    /// Which run is surely higher, where the interval excludes 0.
    pub fn higher(&self) -> Option<usize> {
        if self.interval.0 > 0.0 {
            Some(self.a)
        } else if self.interval.1 < 0.0 {
            Some(self.b)
        } else {
            None
        }
    }

    /// Whether the interval lies within ±`gap`: the pair is settled as close.
    pub fn within(&self, gap: f64) -> bool {
        self.interval.0 > -gap && self.interval.1 < gap
    }
}

/// Where labels would settle the ranking.
#[derive(Debug, Clone, PartialEq)]
pub struct Allocation {
    pub goal: LabelGoal,
    /// Labels to add, per run.
    pub add: Vec<usize>,
    /// Which items of each run to label (indices into the run, in the order to label them).
    pub items: Vec<Vec<usize>>,
    /// Open pairs the plan targets.
    pub open: usize,
    /// Open pairs whose target the plan reaches.
    pub reached: usize,
    /// The same targets reached with one count for every run: that count times the runs
    /// (`None` where no uniform count reaches them).
    pub uniform: Option<usize>,
    /// Whether every run shares the same ids, so the labels fall on the same items.
    pub paired: bool,
    /// A first sample, [`PILOT_LABELS`] on every run in an open pair, to look at before the
    /// rest is planned: made before any labels, where the runs pair by id and two more looks
    /// remain (this one's labels, and the rest's).
    pub pilot: bool,
    /// A step toward the plan: [`STEP_SHARE`] of each run's labels in the whole plan (at
    /// least [`FIRST_LABELS`] where that share rounds above 0), made where runs that pair by id already
    /// have labels and two more looks remain; `reached` counts the whole plan's targets.
    pub step: bool,
}

impl Allocation {
    pub fn total(&self) -> usize {
        self.add.iter().sum()
    }

    /// The items to label in run `k`, named as the caller knows them: their ids where the run
    /// has ids, else their 1-based positions in the run as sent.
    pub fn item_names(&self, k: usize, ids: Option<&[String]>) -> Vec<String> {
        self.items[k]
            .iter()
            .map(|&i| match ids {
                Some(ids) => ids[i].clone(),
                None => (i + 1).to_string(),
            })
            .collect()
    }

    /// A plan that falls short of some open pairs' targets (the budget or the runs' items
    /// run out). A first sample plans no targets; a step counts the whole plan's.
    pub fn shortfall(&self) -> Option<super::warnings::RunWarning> {
        (!self.pilot && self.reached < self.open).then_some(
            super::warnings::RunWarning::PlanShort {
                reached: self.reached,
                open: self.open,
            },
        )
    }
}

/// A ranking of runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranking {
    pub runs: Vec<RankedRun>,
    /// Every pair, (0, 1), (0, 2), … .
    pub pairs: Vec<RankedPair>,
    /// The critical value of the family (max-t), or the largest per-pair one.
    pub critical: f64,
    /// The level the pairs' intervals hold at together this round.
    pub family_level: f64,
    pub allocation: Option<Allocation>,
}

impl Ranking {
    /// Every run's answer held inside `scale` (`RunEstimate::within`), and every pair's
    /// difference inside ± its width.
    pub fn within(mut self, scale: (f64, f64)) -> Self {
        let width = scale.1 - scale.0;
        for run in &mut self.runs {
            run.estimate = run.estimate.clone().within(scale);
        }
        for pair in &mut self.pairs {
            pair.difference = pair.difference.clamp(-width, width);
            pair.interval = (
                pair.interval.0.clamp(-width, width),
                pair.interval.1.clamp(-width, width),
            );
        }
        self
    }

    /// Run indices by estimate, highest first.
    pub fn order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.runs.len()).collect();
        order.sort_by(|&i, &k| {
            self.runs[k]
                .estimate
                .mean
                .estimate
                .total_cmp(&self.runs[i].estimate.mean.estimate)
        });
        order
    }

    /// The runs tied with the top: rank interval reaching 1.
    pub fn top(&self) -> Vec<usize> {
        self.order()
            .into_iter()
            .filter(|&k| self.runs[k].rank.0 == 1)
            .collect()
    }
}

/// Ranks `runs` (at least 2, at most [`MAX_RUNS`]) by their de-biased means, every run
/// corrected by one cell's version (`basis`).
pub fn rank(
    basis: Basis,
    runs: &[RunItems],
    settings: &AnswerSettings,
    how: &RankSettings,
) -> Result<Ranking> {
    let source = Anchored::new(basis)?;
    rank_sources(
        &vec![&source as &dyn Source; runs.len()],
        runs,
        settings,
        how,
    )
}

/// Ranks `runs`, run k corrected by `sources[k]` (runs of one source share its corrector's
/// error; runs of different sources draw theirs independently): each run's answer, the runs'
/// errors drawn jointly, the labelled runs' answers combined with their plain ones, every pair
/// answered, the pairs' intervals and the runs' rank intervals from them, and, where asked, a
/// label plan.
pub fn rank_sources(
    sources: &[&dyn Source],
    runs: &[RunItems],
    settings: &AnswerSettings,
    how: &RankSettings,
) -> Result<Ranking> {
    check_runs(sources, runs)?;
    let settings = AnswerSettings {
        estimand: Estimand::Runs,
        ..*settings
    };
    let (mut estimates, plains) = answer_runs(sources, runs, &settings)?;
    let mut rng = Rng::seed_from_u64(settings.seed ^ 0x7A11);
    let draws = how.draws.max(1);
    let plain_errors = draws::joint_plain_errors(
        sources,
        runs,
        &plains,
        &settings,
        (draws, how.shared),
        &mut rng,
    )?;
    let chain = chain::Chain::new(sources, runs, &estimates)?;
    let labelled =
        draws::labelled_draws(sources, runs, &estimates, chain.as_ref(), draws, &mut rng)?;
    let errors = pairs::combine_runs(
        &mut estimates,
        &plains,
        &plain_errors,
        &labelled.errors,
        settings.level,
    );
    let mut drafts = pairs::drafts(&estimates);
    pairs::answer_pairs(
        &mut drafts,
        &pairs::PairInputs {
            estimates: &estimates,
            plains: &plains,
            plain_errors: &plain_errors,
            errors: &errors,
            chain: chain.as_ref().zip(labelled.chain.as_ref()),
            level: settings.level,
            // The finest of the sources' reference scales (they share one rubric).
            spacing: sources
                .iter()
                .map(|s| s.spacing())
                .fold(f64::INFINITY, f64::min),
        },
        &mut rng,
    );
    let family_level = how.family_level(settings.level);
    let (pairs, critical) =
        pairs::pair_intervals(&drafts, &errors, runs.len(), how.error, family_level);
    let mut ranking = Ranking {
        runs: pairs::rank_intervals(estimates, &pairs),
        pairs,
        critical,
        family_level,
        allocation: None,
    };
    if let Some(goal) = how.labels {
        let model = plan::PlanModel::new(
            runs,
            &plains,
            &ranking,
            &plain_errors,
            labelled.rho,
            chain.as_ref(),
        );
        let looks_left = how.rounds.saturating_sub(how.round);
        ranking.allocation = Some(plan::allocate(&ranking, runs, &model, &goal, looks_left));
    }
    Ok(ranking)
}

/// A ranking takes 2 to [`MAX_RUNS`] runs, one source per run.
fn check_runs(sources: &[&dyn Source], runs: &[RunItems]) -> Result<()> {
    if runs.len() < 2 || runs.len() > MAX_RUNS {
        return Err(CalibrateError::TooFew(format!(
            "{} runs; a ranking takes 2 to {MAX_RUNS}",
            runs.len()
        )));
    }
    if sources.len() != runs.len() {
        return Err(CalibrateError::Numerical(format!(
            "{} sources for {} runs; a ranking takes one source per run",
            sources.len(),
            runs.len()
        )));
    }
    Ok(())
}

/// Each run's answer, and its plain answer beside it (the same where the run is plain; for a
/// labelled run, its judge scores alone): the combined answer weighs the two.
fn answer_runs(
    sources: &[&dyn Source],
    runs: &[RunItems],
    settings: &AnswerSettings,
) -> Result<(Vec<RunEstimate>, Vec<RunEstimate>)> {
    let mut estimates: Vec<RunEstimate> = Vec::with_capacity(runs.len());
    let mut plains: Vec<RunEstimate> = Vec::with_capacity(runs.len());
    for (i, (r, source)) in runs.iter().zip(sources).enumerate() {
        let name = |e| super::named(&format!("run {}", i + 1), e);
        let e = source.estimate(r, settings).map_err(name)?;
        let p = if e.path == AnswerPath::Plain {
            e.clone()
        } else {
            let bare = RunItems {
                reference: Vec::new(),
                ..r.clone()
            };
            source.estimate(&bare, settings).map_err(name)?
        };
        estimates.push(e);
        plains.push(p);
    }
    Ok((estimates, plains))
}

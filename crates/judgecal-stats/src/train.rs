//! What a training job computes for one method, whatever the method: held-out predictions of
//! every anchor by the one cross-validation routine, then the model each cell serves.

use super::corrector::{Cell, Corrector, Run};
use super::cv::{self, Folds, HeldOut, Split};

/// Cross-validates `C` under `split`, then makes each cell's model: fitted on every anchor, or,
/// for a method that serves its holdout fit, the fit that was evaluated.
pub fn train<C: Corrector>(
    options: &C::Options,
    cells: &[Cell],
    split: Split,
    run: &Run,
) -> Result<(Vec<C::Model>, HeldOut), String> {
    let sizes: Vec<usize> = cells.iter().map(|c| c.pairs.len()).collect();
    let folds = Folds::new(split, &sizes);
    let reuse = C::SERVES_HOLDOUT_FIT && folds.rounds() == 1;
    // The evaluation's share of the work: all of it when its fit is served.
    let share = if reuse {
        0.98
    } else {
        folds.rounds() as f64 / (folds.rounds() + 1) as f64
    };
    let (held_out, holdout_fit) =
        cv::cross_validate::<C>(options, cells, &folds, split.seed, &run.part(0.0, share))?;
    let models = match holdout_fit {
        Some((fit, trained_on)) if reuse => cells
            .iter()
            .enumerate()
            .map(|(r, cell)| C::model(&fit, r, cell, &held_out[r], trained_on[r]))
            .collect::<Result<_, _>>()?,
        _ => fit_models::<C>(
            options,
            cells,
            split.seed,
            &held_out,
            &run.part(share, 0.98),
        )?,
    };
    run.report(1.0);
    Ok((models, held_out))
}

/// Fits `C` on every anchor of `cells` and makes each cell's model.
pub fn fit_models<C: Corrector>(
    options: &C::Options,
    cells: &[Cell],
    seed: u64,
    held_out: &HeldOut,
    run: &Run,
) -> Result<Vec<C::Model>, String> {
    let fit = C::fit(options, cells, seed, run)?;
    cells
        .iter()
        .enumerate()
        .map(|(r, cell)| C::model(&fit, r, cell, &held_out[r], cell.pairs.len()))
        .collect()
}

/// Trains `method` (default options) on one cell as a job does (5-fold held-out predictions,
/// then the model) and measures how the version's held-out bias varies between the anchors'
/// `groups`: what the studies of run-level answers need of a version.
pub fn train_with_groups(
    method: super::Method,
    cell: &Cell,
    groups: &[Option<&str>],
    seed: u64,
    run: &Run,
) -> Result<(super::Model, Option<super::runlevel::groups::GroupBias>), String> {
    train_pooled_with_groups(method, std::slice::from_ref(cell), groups, seed, run)
}

/// As [`train_with_groups`], with the rubrics `cells` of one judge trained together (a
/// hierarchical method pools them): the first cell's model, and its groups' bias.
pub fn train_pooled_with_groups(
    method: super::Method,
    cells: &[Cell],
    groups: &[Option<&str>],
    seed: u64,
    run: &Run,
) -> Result<(super::Model, Option<super::runlevel::groups::GroupBias>), String> {
    let (model, held_out) = train_first(method, cells, seed, run)?;
    let bias = super::runlevel::groups::GroupBias::of_held_out(&cells[0].pairs, &held_out, groups);
    Ok((model, bias))
}

/// A version as a study needs it: its model, how its bias varies between groups, and its
/// predictive intervals.
pub type Served = (
    super::Model,
    Option<super::runlevel::groups::GroupBias>,
    Option<super::conformal::Intervals>,
);

/// As [`train_with_groups`], with the version's predictive intervals as a training job makes
/// them from the held-out predictions (`None` where none can be made): what a study of the
/// bands the service serves needs.
pub fn train_served(
    method: super::Method,
    cell: &Cell,
    groups: &[Option<&str>],
    seed: u64,
    run: &Run,
) -> Result<Served, String> {
    let (model, held_out) = train_first(method, std::slice::from_ref(cell), seed, run)?;
    let bias = super::runlevel::groups::GroupBias::of_held_out(&cell.pairs, &held_out, groups);
    let intervals = super::conformal::Intervals::of(&cell.pairs, &held_out, seed);
    Ok((model, bias, intervals))
}

/// The cells trained together with 5-fold held-out predictions: the first cell's model and
/// its held-out predictions.
fn train_first(
    method: super::Method,
    cells: &[Cell],
    seed: u64,
    run: &Run,
) -> Result<(super::Model, Vec<Option<super::corrector::Corrected>>), String> {
    let split = Split {
        scheme: cv::Scheme::Folds(5),
        seed,
    };
    let (mut models, mut held_out) = method.default_options().train(cells, split, run)?;
    Ok((models.remove(0), held_out.swap_remove(0)))
}

//! Readying a run-level request's runs for their versions: a panel's items fused, a covariate
//! layer's scores read, every item's score checked against the anchors' range; each problem
//! named by the run's field prefix.

use judgecal_stats::panel::fusion::{FusedScore, Fusion};
use judgecal_stats::panel::missing::{self, ScoreDependence};
use judgecal_stats::runlevel::RunItems;
use judgecal_stats::warning::{Code, Warning};

use super::layered::layered;
use super::panels::fused_with_scores;
use std::sync::Arc;

use super::versions::Loaded;
use super::versions::Mismatch;
use crate::domain::Problem;
use crate::domain::covariates::Covariates;
use crate::domain::inputs::ItemInputs;

/// What answered a run-level question: the version of the first run (the one of every run,
/// unless they named different judge versions), each run's version, and the runs' judge
/// versions that had no calibration of their own.
pub struct Served {
    pub loaded: Arc<Loaded>,
    pub runs: Vec<Arc<Loaded>>,
    pub mismatches: Vec<Mismatch>,
    /// A panel's items that lacked a member the version reads (fused from those present).
    pub partial_items: usize,
    /// Runs that name a group their version's anchors do not (answered as a new system): the
    /// run's field prefix (`a`, `runs[2]`, empty for one run) and the group.
    pub new_groups: Vec<(String, String)>,
    /// Covariates were held at fixed values (`hold`) by a version trained with them.
    pub held: bool,
    /// Items or `hold` gave covariates that this version (its number) was not trained with.
    pub unused_covariates: Option<i64>,
    /// Items of a version trained with covariates carried others it does not read (a name it
    /// was not trained with, or one it did not keep): the version's number and those names.
    pub unread_covariates: Option<(i64, Vec<String>)>,
    /// Warnings decided while serving: a panel version's member versions, runs' covariates
    /// outside the anchors' range of a covariate the version reads.
    pub notes: Vec<judgecal_stats::warning::Warning>,
    /// Items carried repeats: how they were read.
    pub repeats: Option<super::repeat_noise::RepeatUse>,
}

impl Served {
    /// Runs that give no covariates, of a version whose layer reads some: answered by its
    /// judge-score-only fit, said once (a version that predates that fit is left to refuse
    /// them).
    pub fn read_bare(&mut self) {
        let mut said = false;
        for run in std::iter::once(&mut self.loaded).chain(self.runs.iter_mut()) {
            if let Some((bare, warning)) = run.for_bare_scores() {
                *run = bare;
                if let (Some(w), false) = (warning, said) {
                    self.notes.push(w);
                    said = true;
                }
            }
        }
    }

    /// Whether the runs were corrected by different versions.
    pub fn across_versions(&self) -> bool {
        self.runs
            .iter()
            .any(|r| r.version.id != self.loaded.version.id)
    }

    /// What serving the runs found: runs served by a calibration of another judge version
    /// than they named, groups the anchors do not name, covariates held or unread, what the
    /// versions noted, and how many of a panel's items lacked a served member.
    pub fn warnings(&self) -> Vec<Warning> {
        let mut out: Vec<Warning> = self
            .mismatches
            .iter()
            .map(|m| m.warning(self.loaded.version.version))
            .collect();
        for (run, group) in &self.new_groups {
            let known: Vec<&str> = self
                .loaded
                .version
                .groups
                .as_ref()
                .map(|b| b.groups.iter().map(|g| g.group.as_str()).take(8).collect())
                .unwrap_or_default();
            out.push(
            Warning::new(
                Code::NewGroup,
                format!(
                    "{}group {group:?} is not among the systems the version's anchors name ({}{}): it was answered as a new \
                     system, its bias a draw from the between-system spread; check the spelling, or upload anchors of it",
                    if run.is_empty() { String::new() } else { format!("{run}: ") },
                    known.join(", "),
                    if known.len() == 8 { ", …" } else { "" }
                ),
            )
            .at("group")
            .systems([group]),
        );
        }
        if self.held {
            out.push(Warning::new(
            Code::CovariatesHeld,
            "every item was read at the covariates held (`hold`): the answer is what the runs would score there, \
             the judge's reward for them taken out by the version's coefficients (see its `covariates` report); \
             the interval carries the corrector's uncertainty but not those coefficients' own",
        ).at("hold"));
        }
        if let Some(version) = self.unused_covariates {
            out.push(Warning::new(
            Code::CovariatesUnused,
            format!(
                "version {version} was not trained with covariates: the items' covariates (and `hold`) were not used"
            ),
        ));
        }
        if let Some((version, names)) = &self.unread_covariates {
            out.push(Warning::new(
            Code::CovariatesUnused,
            format!(
                "version {version} does not read covariates {} (not trained with them, or not kept where they did not \
                 lower held-out error): they were not used",
                names.join(", ")
            ),
        ));
        }
        if let Some(r) = &self.repeats {
            out.extend(r.beyond_warning(self.loaded.version.model.method()));
            out.extend(r.thin_warning());
        }
        out.extend(self.notes.iter().cloned());
        if self.partial_items > 0 {
            out.push(Warning::new(
            Code::MembersMissing,
            format!(
                "{} items lacked a member the panel's version reads: each is fused from the members present (that sub-panel's fit) and carries that sub-panel's larger residual variance. This assumes the scores are missing at random: a member's absence says nothing about what it would have scored (a judge that fails on hard items breaks it, and the interval does not know). Score every item with every member where you can",
                self.partial_items
            ),
        ));
        }
        out
    }
}

/// The warning for a run whose items lie where the layer's held-out residuals are off.
fn misfit_warning(m: &judgecal_stats::covariates::Misfit, prefix: &str) -> Warning {
    let run = prefix.trim_end_matches('.');
    Warning::new(
        Code::CovariateMisfit,
        format!(
            "{}items lie where the covariate layer's held-out residuals by {} decile are off zero: its anchors there sit \
             {:+.3} (± {:.3}) from the layer's scores, a bias its coefficients do not carry; the interval is widened by \
             it. Upload anchors like these items, or hold {} at a value the anchors cover",
            if run.is_empty() { String::new() } else { format!("{run}'s ") },
            m.covariate,
            m.bias,
            m.se,
            m.covariate
        ),
    )
    .at(format!("{prefix}items"))
}

/// How the runs' items are read: covariates held at fixed values, and whether a panel's
/// missing member scores may be taken as missing at random without the run's own test.
#[derive(Clone, Copy)]
pub(super) struct Reading<'a> {
    pub hold: &'a Covariates,
    pub missing_at_random: bool,
}

/// One run to ready for its version: its field prefix, its items, and what they give beside
/// the judge score (a panel's members' scores, or a judge's items' covariates).
pub(super) struct RunInput<'a> {
    pub prefix: &'a str,
    pub run: &'a mut RunItems,
    pub inputs: &'a ItemInputs,
}

/// A request's runs being readied for their versions, and the problems found.
pub(super) struct Ready<'a, 'r> {
    pub served: &'a mut Served,
    /// The served version's panel, where it is one.
    pub fusion: Option<&'a Fusion>,
    pub read: Reading<'r>,
    /// The level each panel run's missing scores are tested at.
    pub missing_level: f64,
    /// Items or `hold` gave covariates.
    pub given: bool,
    pub problems: Vec<Problem>,
}

impl Ready<'_, '_> {
    /// Readies run `i` (`served.runs[i]`'s).
    pub fn run(&mut self, i: usize, input: RunInput<'_>) {
        let RunInput {
            prefix,
            run,
            inputs,
        } = input;
        let field = if run.ids.is_some() || inputs.members().is_some() {
            "items"
        } else {
            "scores"
        };
        let version = self.served.runs.get(i).cloned();
        // A version trained with covariates: each item's score becomes its layer score at its
        // covariates (those in `hold` replaced), its judge score checked first.
        if let Some(version) = &version
            && version.version.covariate_layer.is_some()
        {
            self.layered(version, run, inputs, prefix, field);
            return;
        }
        if self.given && self.served.unused_covariates.is_none() {
            self.served.unused_covariates = Some(version.as_ref().map_or(0, |v| v.version.version));
        }
        let before = self.problems.len();
        self.fuse(run, inputs, prefix);
        // A group the version's anchors do not name is answered as a new system: a typo would
        // silently widen the interval and change the shift, so it is said.
        if let (Some(group), Some(bias)) = (
            run.group.as_deref(),
            version.as_ref().and_then(|v| v.version.groups.as_ref()),
        ) && !bias.knows(group)
        {
            self.served
                .new_groups
                .push((prefix.trim_end_matches('.').to_owned(), group.to_owned()));
        }
        if let (Some(version), true) = (&version, self.problems.len() == before) {
            self.problems.extend(version.version.far_inputs(
                &run.scores,
                inputs.repeats(),
                &format!("{prefix}{field}"),
                prefix,
            ));
        }
    }

    /// A run of a version trained with covariates.
    fn layered(
        &mut self,
        version: &Loaded,
        run: &mut RunItems,
        inputs: &ItemInputs,
        prefix: &str,
        field: &str,
    ) {
        let (version, hold) = (&version.version, self.read.hold);
        self.problems.extend(version.far_inputs(
            &run.scores,
            inputs.repeats(),
            &format!("{prefix}{field}"),
            prefix,
        ));
        let ids: Option<Vec<String>> = run
            .ids
            .as_ref()
            .map(|ids| ids.iter().map(|i| i.to_string()).collect());
        let covariates = inputs.covariates();
        match version.covariate_reach(
            covariates.unwrap_or_default(),
            &format!("{prefix}items"),
            ids.as_deref(),
        ) {
            Ok(w) => self.served.notes.extend(w),
            Err(p) => self.problems.extend(p),
        }
        match layered(version, run, covariates, hold, prefix) {
            Ok((unread, misfit)) => {
                if let Some(m) = misfit {
                    self.served.notes.push(misfit_warning(&m, prefix));
                }
                self.served.held = !hold.is_empty();
                if !unread.is_empty() && self.served.unread_covariates.is_none() {
                    self.served.unread_covariates = Some((version.version, unread));
                }
            }
            Err(p) => self.problems.extend(p),
        }
    }

    /// A panel's run fused (its missing scores tested), or the refusal of items of the wrong
    /// kind for the version.
    fn fuse(&mut self, run: &mut RunItems, inputs: &ItemInputs, prefix: &str) {
        let judge = &self.served.loaded.version.key.judge;
        let problem = match (self.fusion, inputs.members()) {
            (None, None) => return,
            (Some(f), Some(items)) => {
                match fused_with_scores(f, items, &format!("{prefix}scores")) {
                    Ok((fused, scores)) => {
                        if !self.read.missing_at_random
                            && let Some(d) = missing::score_dependent(
                                &scores,
                                &f.input,
                                self.missing_level,
                                f.scorer(),
                            )
                        {
                            self.problems.push(Problem::at(
                                None,
                                &format!("{prefix}items"),
                                score_dependence(f, &d),
                            ));
                        }
                        for (score, item) in run.scores.iter_mut().zip(&fused) {
                            let extra;
                            (*score, extra) = f.run_score(item, run.group.as_deref());
                            run.extra_noise += extra;
                            self.served.partial_items +=
                                usize::from(matches!(item, FusedScore::Partial { .. }));
                        }
                    }
                    Err(p) => self.problems.extend(p),
                }
                return;
            }
            (Some(f), None) => format!(
                "{judge} is a panel: send items whose `scores` give each member's score ({})",
                f.members.join(", ")
            ),
            (None, Some(_)) => format!("{judge} is a judge, not a panel: its items carry `score`"),
        };
        self.problems
            .push(Problem::at(None, &format!("{prefix}items"), problem));
    }
}

/// The refusal of a panel run whose missing scores track the scores given.
fn score_dependence(fusion: &Fusion, d: &ScoreDependence) -> String {
    let missing = fusion.members.get(d.missing).map_or("?", String::as_str);
    format!(
        "{missing}'s scores look missing where they would have differed: what the other members say of the items \
         (their sub-panel's corrected score) averages {without:.2} on the {n_without} items {missing} did not score, \
         against {with:.2} on the {n_with} it scored (Welch p = {p:.1e}; {adjusted:.1e} over the members tested). A \
         partial item is corrected from the members present, which holds only where a member's absence says nothing \
         about the score it would have given; a judge that fails on hard items breaks that, and the run's interval \
         would not hold. Score those items with {missing}, or send `assume_missing_at_random: true` if its absence \
         depends only on what the other members scored",
        without = d.without.1,
        n_without = d.without.0,
        with = d.with.1,
        n_with = d.with.0,
        p = d.p_value,
        adjusted = d.adjusted,
    )
}

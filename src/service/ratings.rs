//! Ratings (`POST /v1/ratings`): Bradley–Terry ratings of a run's systems by the people's
//! preference, from the judge's verdicts on the run and the cell's labelled comparisons
//! (`judgecal_stats::pairwise::rate`). The calibrated preference is chosen and fitted on the
//! cell's labelled comparisons of the run's judge version at each request (`auto`, held-out
//! log-loss), so a rating always reads the anchors stored now.

use super::families::Pairwise;
use std::collections::{BTreeMap, BTreeSet, HashSet};

use judgecal_stats::pairwise::preference::{Candidate, Inputs, Verdicts};
use judgecal_stats::pairwise::rate::{self, Compared, RateError, RateOptions};
use judgecal_stats::pairwise::ratings::RatingError;
use judgecal_stats::rng::{Rng, SeedableRng};
use judgecal_stats::warning::Warning;

use super::pairwise_panels::member_verdicts;
use crate::domain::comparisons::Comparison;
use crate::domain::ratings::RatingsRequest;
use crate::domain::{CellKey, CovariateName, GroupName, ItemId, JudgeVersion, Problem};
use crate::error::{Error, Result};

use crate::domain::preference::MIN_LABELLED;

/// Draws of the ratings' normal law behind the joint rank intervals.
const RANK_DRAWS: usize = 4_000;

/// A win rate with its interval.
#[derive(Debug, Clone, PartialEq)]
pub struct WinRateAnswer {
    pub estimate: f64,
    pub interval: (f64, f64),
    pub comparisons: usize,
    pub labelled: usize,
}

/// One system's rating.
#[derive(Debug, Clone, PartialEq)]
pub struct SystemRating {
    pub system: GroupName,
    pub rating: f64,
    pub standard_error: f64,
    pub interval: (f64, f64),
    pub rank_interval: (usize, usize),
    pub comparisons: usize,
    /// Against the baseline, and over the field.
    pub win_rate: Option<WinRateAnswer>,
    pub field_win_rate: Option<WinRateAnswer>,
}

/// A control's coefficient: log-odds of people preferring a per unit of the covariate.
#[derive(Debug, Clone, PartialEq)]
pub struct Control {
    pub covariate: CovariateName,
    pub coefficient: f64,
    pub interval: (f64, f64),
}

/// One candidate of the calibrated preference with its held-out figures.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateFigures {
    pub inputs: String,
    pub log_loss: f64,
    pub accuracy: f64,
}

/// The answer.
#[derive(Debug, Clone, PartialEq)]
pub struct RatingsAnswer {
    pub baseline: GroupName,
    pub level: f64,
    pub systems: Vec<SystemRating>,
    pub controls: Vec<Control>,
    pub comparisons: usize,
    pub run_labelled: usize,
    pub anchors: usize,
    pub prediction_weight: f64,
    pub chosen: String,
    /// The pairwise version whose choice `chosen` is; `None`: chosen at this request.
    pub version: Option<i64>,
    pub candidates: Vec<CandidateFigures>,
    pub covariates: Vec<CovariateName>,
    /// With `target_half_width`: the labels that reach it.
    pub plan: Option<LabelPlan>,
    /// What the rating rests on that the request departs from.
    pub warnings: Vec<Warning>,
}

/// How many of the run's comparisons to label for every rating's half-width to reach the
/// target, and which: a seeded uniform draw among the run's unlabelled ones, so that labelled
/// they are drawn as the run is (what the labelled path assumes).
#[derive(Debug, Clone, PartialEq)]
pub struct LabelPlan {
    /// `reached`, `more_labelled` or `out_of_reach` (even every unlabelled comparison of the
    /// run would not do: the predictions' own noise, or too few comparisons of a system).
    pub outcome: &'static str,
    pub needed: Option<usize>,
    pub label: Vec<ItemId>,
    /// The widest rating half-width now, and the one expected with `needed` more labels.
    pub widest_half_width: f64,
    pub expected_half_width: Option<f64>,
}

/// The plan for `target` at `level`, drawing from `unlabelled` (the run's item ids).
fn label_plan(
    powered: &judgecal_stats::pairwise::powered::Powered,
    level: f64,
    target: f64,
    mut unlabelled: Vec<ItemId>,
) -> LabelPlan {
    let now = powered.widest_half_width(level, 0);
    let needed = powered.labels_for(level, target, unlabelled.len());
    let outcome = match needed {
        Some(0) => "reached",
        Some(_) => "more_labelled",
        None => "out_of_reach",
    };
    let label = match needed {
        Some(m) if m > 0 => {
            use judgecal_stats::rng::SliceRandom;
            unlabelled.shuffle(&mut Rng::seed_from_u64(0));
            unlabelled.truncate(m);
            unlabelled.sort();
            unlabelled
        }
        _ => Vec::new(),
    };
    LabelPlan {
        outcome,
        needed,
        label,
        widest_half_width: now,
        expected_half_width: needed.map(|m| powered.widest_half_width(level, m)),
    }
}

/// The comparison as the statistics read it, `index` numbering the systems; a panel's with
/// its members' verdicts (`members`, in member order; empty for a judge's).
fn compared(
    c: &Comparison,
    members: &[(f64, Option<f64>)],
    index: &BTreeMap<&GroupName, usize>,
    covariates: &[CovariateName],
    controls: &[CovariateName],
    preference: Option<f64>,
) -> Option<Compared> {
    let value = |n: &CovariateName| c.covariates.get(n).copied();
    let base = if members.is_empty() {
        Verdicts::of(c.verdict, c.verdict_swapped)
    } else {
        Verdicts::of_panel(members.to_vec())
    };
    Some(Compared {
        verdicts: Verdicts {
            covariates: covariates.iter().map(value).collect::<Option<_>>()?,
            systems: Some((*index.get(&c.a)?, *index.get(&c.b)?)),
            ..base
        },
        controls: controls.iter().map(value).collect::<Option<_>>()?,
        preference,
        // A key that tells the raters apart within this rating (the intervals count raters,
        // not labels, as independent where raters are named).
        rater: c.rater.as_ref().map(|r| {
            use std::hash::{Hash, Hasher};
            let mut h = std::hash::DefaultHasher::new();
            r.as_str().hash(&mut h);
            h.finish()
        }),
    })
}

impl Pairwise<'_> {
    /// Rates the request's systems.
    pub async fn rate(&self, request: RatingsRequest) -> Result<RatingsAnswer> {
        let key = request.batch.key.clone();
        let version = request.batch.judge_version.clone();
        let run = &request.batch.comparisons;
        // A panel's run is rated against its members' labelled comparisons, joined, and reads
        // each comparison's members' verdicts.
        let panel = self.store.panel_rows().panel(&key.judge).await?;
        let (mut anchors, mut anchor_members, run_members) =
            self.rating_anchors(&request, panel.as_ref()).await?;
        self.drop_run_items(
            &key,
            version.as_ref(),
            run,
            &mut anchors,
            &mut anchor_members,
            panel.is_some(),
        )
        .await?;
        let rated: BTreeSet<&GroupName> = run.iter().flat_map(|c| [&c.a, &c.b]).collect();
        let others: BTreeSet<&GroupName> = anchors
            .iter()
            .flat_map(|c| [&c.a, &c.b])
            .filter(|s| !rated.contains(s))
            .collect();
        let names: Vec<GroupName> = rated.iter().chain(&others).map(|&s| s.clone()).collect();
        let index: BTreeMap<&GroupName, usize> =
            names.iter().enumerate().map(|(i, s)| (s, i)).collect();
        // The map reads the covariates every comparison carries, the run's and the anchors'.
        let mut covariates: Vec<CovariateName> = run
            .first()
            .map(|c| c.covariates.keys().cloned().collect())
            .unwrap_or_default();
        for c in run.iter().chain(&anchors) {
            covariates.retain(|n| c.covariates.contains_key(n));
        }
        let controls = request.control.clone();
        let anchor_rows: Vec<Compared> = anchors
            .iter()
            .zip(&anchor_members)
            .filter_map(|(c, m)| compared(c, m, &index, &covariates, &controls, c.preference))
            .collect();
        if anchor_rows.is_empty() {
            return Err(Error::conflict(
                format!(
                    "no labelled comparison of cell {key} carries the controlled covariates ({})",
                    names_of(&controls)
                ),
                vec![],
            ));
        }
        let run_rows: Vec<Compared> = run
            .iter()
            .zip(&run_members)
            .map(|(c, m)| {
                compared(c, m, &index, &covariates, &controls, c.preference)
                    .ok_or_else(|| Error::Internal("a checked comparison lost a field".into()))
            })
            .collect::<Result<_>>()?;
        let labelled = anchor_rows
            .iter()
            .chain(&run_rows)
            .filter(|c| {
                c.preference.is_some()
                    && c.verdicts
                        .systems
                        .is_some_and(|(a, b)| a < rated.len() && b < rated.len())
            })
            .count();
        if labelled < MIN_LABELLED {
            return Err(Error::conflict(
                format!(
                    "ratings need at least {MIN_LABELLED} labelled comparisons between the run's systems to correct the judge's verdicts; cell {key} and the run hold {labelled}: label more of this judge's comparisons of these systems (POST /v1/comparisons with preference)"
                ),
                vec![],
            ));
        }
        let baseline = match &request.baseline {
            Some(b) => index[b],
            None => 0,
        };
        // The cell's newest trained version of this judge version fixes the map's inputs,
        // fitted again on the anchors of now; without one (or where the comparisons cannot
        // feed its choice), `auto` chooses here.
        let newest = self
            .store
            .comparison_rows()
            .preference_versions(&key)
            .await?
            .into_iter()
            .find(|v| v.judge_version == version);
        // A choice that reads covariates holds where the request's are the version's.
        let trained = newest.as_ref().and_then(|v| {
            Candidate::parse(&v.report.chosen)
                .filter(|c| c.inputs != Inputs::WithCovariates || v.report.covariates == covariates)
                .map(|candidate| (v.version, candidate))
        });
        // The labelled set as the statistics read it: the cell's labelled comparisons between
        // the run's systems, and the run's own.
        let labelled_set: Vec<&Comparison> = anchors
            .iter()
            .filter(|c| c.preference.is_some() && rated.contains(&c.a) && rated.contains(&c.b))
            .chain(run.iter().filter(|c| c.preference.is_some()))
            .collect();
        // A judge's run without the swapped verdict where the map reads it is rated by the
        // map on the first verdict alone (fitted on the same labels), not as if it were
        // missing at random.
        let lacks_swapped = panel.is_none() && run.iter().any(|c| c.verdict_swapped.is_none());
        let (k, known) = (rated.len(), names.len());
        let level = request.level;
        let (rated, ranks, version, reads_swapped) =
            crate::error::blocking("the ratings thread", move || {
                let options = |candidate| RateOptions {
                    baseline,
                    controls: controls.len(),
                    seed: 0,
                    candidate,
                };
                let fitted = trained.and_then(|(n, c)| {
                    rate::rate(k, known, &anchor_rows, &run_rows, &options(Some(c)))
                        .ok()
                        .map(|r| (r, Some(n)))
                });
                let (mut rated, mut version) = match fitted {
                    Some(done) => done,
                    None => (
                        rate::rate(k, known, &anchor_rows, &run_rows, &options(None))?,
                        None,
                    ),
                };
                let chosen = rated.choice.candidate;
                let reads_swapped = chosen.inputs != Inputs::Verdict;
                if reads_swapped && lacks_swapped {
                    let first = Candidate {
                        inputs: Inputs::Verdict,
                        ..chosen
                    };
                    rated = rate::rate(k, known, &anchor_rows, &run_rows, &options(Some(first)))?;
                    version = None;
                }
                let ranks = rated.powered.ratings.rank_intervals(
                    level,
                    RANK_DRAWS,
                    &mut Rng::seed_from_u64(0),
                );
                Ok::<_, RateError>((rated, ranks, version, reads_swapped))
            })
            .await?
            .map_err(|e| rating_error(e, &index, &labelled_set))?;
        let warnings = super::ratings_checks::check(run, &labelled_set, reads_swapped);
        let plan = request.target_half_width.map(|target| {
            let unlabelled: Vec<ItemId> = run
                .iter()
                .filter(|c| c.preference.is_none())
                .map(|c| c.item_id.clone())
                .collect();
            label_plan(&rated.powered, level, target, unlabelled)
        });
        Ok(answer(Answered {
            rated,
            ranks,
            version,
            index: &index,
            baseline,
            k,
            request: &request,
            covariates,
            plan,
            warnings,
        }))
    }

    /// Leaves out the anchors the run carries itself (its preference, if any, counts once);
    /// refuses a cell with no labelled comparison left, saying where it holds judge scores.
    async fn drop_run_items(
        &self,
        key: &CellKey,
        version: Option<&JudgeVersion>,
        run: &[Comparison],
        anchors: &mut Vec<Comparison>,
        anchor_members: &mut MemberRows,
        panel: bool,
    ) -> Result<()> {
        let in_run: HashSet<ItemId> = {
            let stored: HashSet<&ItemId> = anchors.iter().map(|c| &c.item_id).collect();
            run.iter()
                .filter(|c| stored.contains(&c.item_id))
                .map(|c| c.item_id.clone())
                .collect()
        };
        let kept: Vec<bool> = anchors
            .iter()
            .map(|c| !in_run.contains(&c.item_id))
            .collect();
        anchors.retain(|c| !in_run.contains(&c.item_id));
        let mut keep = kept.iter();
        anchor_members.retain(|_| keep.next().copied().unwrap_or(false));
        if anchors.is_empty() && !panel {
            // A cell of judge scores is said to be one: its runs are estimated.
            let scores = self
                .store
                .cells()
                .await?
                .into_iter()
                .any(|c| c.key == *key && c.comparison_count == 0);
            if scores {
                return Err(Error::conflict(
                    format!(
                        "cell {key} holds judge scores, not comparisons: ratings rate a pairwise judge's verdicts; a run of its scores is estimated (POST /v1/estimate) or ranked (POST /v1/rank)"
                    ),
                    vec![],
                ));
            }
        }
        if anchors.is_empty() {
            return Err(Error::conflict(
                format!(
                    "cell {key} holds no labelled comparisons of judge_version {} beside the run's: ratings need the people's preference on some of this judge's comparisons (POST /v1/comparisons with preference)",
                    JudgeVersion::describe(version)
                ),
                vec![],
            ));
        }
        Ok(())
    }

    /// The labelled comparisons a run is rated against, each one's members' verdicts (a
    /// panel's), and the run's rows' members' verdicts: a panel's members' comparisons joined,
    /// or the cell's comparisons of the run's judge version.
    async fn rating_anchors(
        &self,
        request: &RatingsRequest,
        panel: Option<&crate::domain::panel::Panel>,
    ) -> Result<Anchored> {
        let key = &request.batch.key;
        let version = &request.batch.judge_version;
        let run = &request.batch.comparisons;
        Ok(match panel {
            Some(p) => {
                if version.is_some() {
                    return Err(Error::rejected(
                        "the ratings request was refused",
                        vec![Problem::at(
                            None,
                            "judge_version",
                            format!(
                                "{} is a panel: its version reads each member's judge version it was trained on",
                                p.name
                            ),
                        )],
                    ));
                }
                let (members, joined) = self.panel_anchors(p, key).await?;
                let run_members =
                    member_verdicts(&p.name, &members, &request.batch.rows, &request.members)
                        .map_err(|e| Error::rejected("the ratings request was refused", e))?;
                (joined.rows, joined.verdicts, run_members)
            }
            None => {
                if let Some(&row) = request.members.keys().min() {
                    let panels: Vec<String> = self
                        .store
                        .panel_rows()
                        .panels()
                        .await?
                        .into_iter()
                        .map(|p| p.name.to_string())
                        .collect();
                    return Err(Error::rejected(
                        "the ratings request was refused",
                        vec![Problem::at(
                            Some(row),
                            "verdicts",
                            format!(
                                "{} is not a panel, so its comparisons give verdict; verdicts ({{member: verdict}}) is for a panel's (panels defined: {})",
                                key.judge,
                                if panels.is_empty() {
                                    "none".to_owned()
                                } else {
                                    panels.join(", ")
                                }
                            ),
                        )],
                    ));
                }
                // An anchor the run also carries is the run's: its preference, if any, counts
                // once.
                let anchors = match self
                    .store
                    .comparison_rows()
                    .cell_comparisons(key, version.as_ref(), true)
                    .await
                {
                    Err(Error::NotFound(_)) => {
                        return Err(Error::NotFound(format!(
                            "cell {key} has no comparisons; upload some, with the people's preference on some of them, with POST /v1/comparisons"
                        )));
                    }
                    other => other?,
                };
                let n = anchors.len();
                (anchors, vec![Vec::new(); n], vec![Vec::new(); run.len()])
            }
        })
    }
}

/// Each comparison's members' verdicts and swapped verdicts (empty for a judge's).
type MemberRows = Vec<Vec<(f64, Option<f64>)>>;

/// A run's labelled comparisons, their members' verdicts and the run's rows' members' verdicts.
type Anchored = (Vec<Comparison>, MemberRows, MemberRows);

/// What a rating found, to answer with.
struct Answered<'a> {
    rated: rate::Rated,
    ranks: judgecal_stats::pairwise::ratings::RankIntervals,
    version: Option<i64>,
    index: &'a BTreeMap<&'a GroupName, usize>,
    baseline: usize,
    k: usize,
    request: &'a RatingsRequest,
    covariates: Vec<CovariateName>,
    plan: Option<LabelPlan>,
    warnings: Vec<Warning>,
}

/// The ratings answer: each system's rating, interval, rank interval and win rates, best first.
fn answer(a: Answered<'_>) -> RatingsAnswer {
    let Answered {
        rated,
        ranks,
        version,
        index,
        baseline,
        k,
        request,
        covariates,
        plan,
        warnings,
    } = a;
    let (level, run) = (request.level, &request.batch.comparisons);
    let r = &rated.powered.ratings;
    let intervals = r.intervals(level);
    let z = r.quantile(level);
    let by_index: Vec<&GroupName> = {
        let mut v: Vec<(&GroupName, usize)> = index.iter().map(|(s, &i)| (*s, i)).collect();
        v.sort_by_key(|&(_, i)| i);
        v.into_iter().map(|(s, _)| s).collect()
    };
    let answer = |w: &Option<judgecal_stats::pairwise::win_rate::WinRate>| {
        w.map(|w| WinRateAnswer {
            estimate: w.estimate,
            interval: w.interval(level),
            comparisons: w.comparisons,
            labelled: w.labelled,
        })
    };
    let mut systems: Vec<SystemRating> = (0..k)
        .map(|i| SystemRating {
            system: by_index[i].clone(),
            rating: r.ratings[i],
            standard_error: r.standard_error(i),
            interval: intervals[i],
            rank_interval: ranks.ranks[i],
            comparisons: r.comparisons[i],
            win_rate: answer(&rated.win_rates[i][0]),
            field_win_rate: answer(&rated.win_rates[i][1]),
        })
        .collect();
    systems.sort_by(|a, b| b.rating.total_cmp(&a.rating).then(a.system.cmp(&b.system)));
    RatingsAnswer {
        baseline: by_index[baseline].clone(),
        level,
        systems,
        controls: request
            .control
            .iter()
            .zip(&rated.powered.controls)
            .map(|(name, &(coefficient, se))| Control {
                covariate: name.clone(),
                coefficient,
                interval: (coefficient - z * se, coefficient + z * se),
            })
            .collect(),
        comparisons: run.len(),
        run_labelled: rated.run_labelled,
        anchors: rated.anchors_used,
        prediction_weight: rated.powered.lambda,
        chosen: rated.choice.candidate.name(),
        version,
        candidates: rated
            .choice
            .candidates
            .iter()
            .map(|(c, h)| CandidateFigures {
                inputs: c.name(),
                log_loss: h.log_loss,
                accuracy: h.accuracy,
            })
            .collect(),
        covariates,
        plan,
        warnings,
    }
}

/// The statistics' refusal, in the run's names.
fn rating_error(
    e: RateError,
    index: &BTreeMap<&GroupName, usize>,
    labelled: &[&Comparison],
) -> Error {
    let named = |systems: &[usize]| {
        let names: Vec<&str> = index
            .iter()
            .filter(|(_, i)| systems.contains(i))
            .map(|(s, _)| s.as_str())
            .collect();
        names.join(", ")
    };
    let refused = |problem: String| {
        Error::rejected(
            "the ratings request was refused",
            vec![Problem::at(None, "comparisons", problem)],
        )
    };
    match e {
        RateError::Ratings(RatingError::Apart { systems }) => refused(format!(
            "{} not joined to the baseline by any chain of the run's comparisons: rate each connected part on its own",
            named(&systems)
        )),
        RateError::Ratings(RatingError::Unbounded { systems, above }) => refused(format!(
            "{} {} every comparison joining them to the baseline: no finite rating",
            named(&systems),
            if above { "won" } else { "lost" }
        )),
        RateError::Ratings(RatingError::BadComparison { index, problem }) => Error::Internal(
            format!("a checked comparison ({index}) was refused: {problem}"),
        ),
        RateError::Ratings(RatingError::Numerical(e)) => {
            // The systems whose labelled comparisons all went one way are where the fit has
            // no maximum; named, so that the labelling knows where to go.
            let one_way: Vec<&str> = index
                .keys()
                .filter(|s| {
                    let outcomes: Vec<f64> = labelled
                        .iter()
                        .filter_map(|c| match c.preference {
                            Some(p) if &&c.a == *s => Some(p),
                            Some(p) if &&c.b == *s => Some(1.0 - p),
                            _ => None,
                        })
                        .collect();
                    !outcomes.is_empty()
                        && (outcomes.iter().all(|&p| p == 1.0)
                            || outcomes.iter().all(|&p| p == 0.0))
                })
                .map(|s| s.as_str())
                .collect();
            let systems = if one_way.is_empty() {
                "these systems".to_owned()
            } else {
                format!(
                    "{} (every labelled comparison of {} went one way)",
                    one_way.join(", "),
                    if one_way.len() == 1 { "it" } else { "each" }
                )
            };
            Error::conflict(
                format!(
                    "no finite ratings ({e}): the labelled comparisons move some pair's corrected outcome past all or nothing, which happens when they are few against the run; label more comparisons of {systems}"
                ),
                vec![],
            )
        }
        RateError::Map(e) => Error::conflict(format!("no ratings: {e}"), vec![]),
    }
}

fn names_of(names: &[CovariateName]) -> String {
    let v: Vec<&str> = names.iter().map(|n| n.as_str()).collect();
    v.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fit with no maximum names the systems whose labels all went one way.
    #[test]
    fn no_finite_ratings_names_the_systems_labelled_one_way() {
        let name = |s: &str| GroupName::parse(s).unwrap();
        let (m1, m2, m3) = (name("m1"), name("m2"), name("m3"));
        let row = |i: usize, a: &GroupName, b: &GroupName, p: f64| Comparison {
            item_id: ItemId::parse(&format!("i{i}")).unwrap(),
            a: a.clone(),
            b: b.clone(),
            verdict: 1.0,
            verdict_swapped: None,
            preference: Some(p),
            rater: None,
            covariates: Default::default(),
        };
        // m3 lost both of its comparisons; m1 and m2 won some and lost some.
        let rows = [
            row(1, &m1, &m2, 1.0),
            row(2, &m2, &m1, 1.0),
            row(3, &m3, &m1, 0.0),
            row(4, &m2, &m3, 1.0),
        ];
        let labelled: Vec<&Comparison> = rows.iter().collect();
        let index: BTreeMap<&GroupName, usize> = [(&m1, 0), (&m2, 1), (&m3, 2)].into();
        let e = rating_error(
            RateError::Ratings(RatingError::Numerical("did not converge".into())),
            &index,
            &labelled,
        );
        let text = e.to_string();
        assert!(
            text.contains(
                "label more comparisons of m3 (every labelled comparison of it went one way)"
            ),
            "{text}"
        );
    }
}

//! Ratings (`POST /v1/ratings`): Bradley–Terry ratings of a run's systems by the people's
//! preference, from the judge's verdicts on the run and the cell's labelled comparisons
//! (`judgecal_stats::pairwise::rate`). The calibrated preference is chosen and fitted on the
//! cell's labelled comparisons of the run's judge version at each request (`auto`, held-out
//! log-loss), so a rating always reads the anchors stored now.

use crate::service::families::Pairwise;
use std::collections::{BTreeMap, BTreeSet, HashSet};

use judgecal_stats::pairwise::preference::{Candidate, Inputs, Verdicts};
use judgecal_stats::pairwise::rate::{self, Compared, RateError, RateOptions};
use judgecal_stats::pairwise::ratings::{RankIntervals, RatingError};

use crate::service::pairwise::answer::{Answered, RatingsAnswer, answer, label_plan};
use judgecal_stats::rng::{Rng, SeedableRng};

use crate::domain::pairwise::comparisons::Comparison;
use crate::domain::pairwise::ratings::RatingsRequest;
use crate::domain::{CellKey, CovariateName, GroupName, ItemId, JudgeVersion, Problem};
use crate::error::{Error, Result};
use crate::service::pairwise::panels::member_verdicts;
use crate::store::Store;

use crate::domain::pairwise::version::MIN_LABELLED;

/// Draws of the ratings' normal law behind the joint rank intervals.
const RANK_DRAWS: usize = 4_000;

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
        let rows = Rows {
            key: &key,
            index: &index,
            covariates: &covariates,
            controls: &request.control,
            rated: rated.len(),
        };
        let anchor_rows = rows.anchors(&anchors, &anchor_members)?;
        let run_rows = rows.run(run, &run_members, &anchor_rows)?;
        let trained = trained_choice(&self.store, &key, version.as_ref(), &covariates).await?;
        // The labelled set as the statistics read it: the cell's labelled comparisons between
        // the run's systems, and the run's own.
        let labelled_set: Vec<&Comparison> = anchors
            .iter()
            .filter(|c| c.preference.is_some() && rated.contains(&c.a) && rated.contains(&c.b))
            .chain(run.iter().filter(|c| c.preference.is_some()))
            .collect();
        let fit = Fit {
            k: rated.len(),
            known: names.len(),
            anchor_rows,
            run_rows,
            baseline: request.baseline.as_ref().map_or(0, |b| index[b]),
            controls: request.control.len(),
            trained,
            // A judge's run without the swapped verdict where the map reads it is rated by
            // the map on the first verdict alone (fitted on the same labels), not as if it
            // were missing at random.
            lacks_swapped: panel.is_none() && run.iter().any(|c| c.verdict_swapped.is_none()),
            level: request.level,
        };
        let (baseline, k) = (fit.baseline, fit.k);
        let (rated, ranks, version, reads_swapped) =
            crate::error::blocking("the ratings thread", move || fit.run())
                .await?
                .map_err(|e| rating_error(e, &index, &labelled_set))?;
        let warnings = crate::service::pairwise::checks::check(run, &labelled_set, reads_swapped);
        let plan = request.target_half_width.map(|target| {
            let unlabelled: Vec<ItemId> = run
                .iter()
                .filter(|c| c.preference.is_none())
                .map(|c| c.item_id.clone())
                .collect();
            label_plan(&rated.powered, request.level, target, unlabelled)
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
                    .pairwise_rows()
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
/// The cell's newest trained version of this judge version fixes the map's inputs, fitted
/// again on the anchors of now; without one (or where the comparisons cannot feed its
/// choice), `auto` chooses at the request. A choice that reads covariates holds where the
/// request's are the version's.
async fn trained_choice(
    store: &Store,
    key: &CellKey,
    version: Option<&JudgeVersion>,
    covariates: &[CovariateName],
) -> Result<Option<(i64, Candidate)>> {
    let newest = store
        .pairwise_rows()
        .preference_versions(key)
        .await?
        .into_iter()
        .find(|v| v.judge_version.as_ref() == version);
    Ok(newest.as_ref().and_then(|v| {
        Candidate::parse(&v.report.chosen)
            .filter(|c| c.inputs != Inputs::WithCovariates || v.report.covariates == covariates)
            .map(|candidate| (v.version, candidate))
    }))
}

/// How a rating's comparisons are read: the systems numbered, the covariates the map reads
/// and the controls.
struct Rows<'a> {
    key: &'a CellKey,
    index: &'a BTreeMap<&'a GroupName, usize>,
    covariates: &'a [CovariateName],
    controls: &'a [CovariateName],
    /// The run's systems (numbered first).
    rated: usize,
}

impl Rows<'_> {
    fn compared(&self, c: &Comparison, members: &[(f64, Option<f64>)]) -> Option<Compared> {
        compared(
            c,
            members,
            self.index,
            self.covariates,
            self.controls,
            c.preference,
        )
    }

    /// The cell's comparisons that carry the controlled covariates; refused where none does.
    fn anchors(
        &self,
        anchors: &[Comparison],
        members: &[Vec<(f64, Option<f64>)>],
    ) -> Result<Vec<Compared>> {
        let rows: Vec<Compared> = anchors
            .iter()
            .zip(members)
            .filter_map(|(c, m)| self.compared(c, m))
            .collect();
        if rows.is_empty() {
            return Err(Error::conflict(
                format!(
                    "no labelled comparison of cell {} carries the controlled covariates ({})",
                    self.key,
                    names_of(self.controls)
                ),
                vec![],
            ));
        }
        Ok(rows)
    }

    /// The run's comparisons; refused where the labelled ones between the run's systems (the
    /// cell's and the run's) are too few to correct the judge's verdicts.
    fn run(
        &self,
        run: &[Comparison],
        members: &[Vec<(f64, Option<f64>)>],
        anchor_rows: &[Compared],
    ) -> Result<Vec<Compared>> {
        let run_rows: Vec<Compared> = run
            .iter()
            .zip(members)
            .map(|(c, m)| {
                self.compared(c, m)
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
                        .is_some_and(|(a, b)| a < self.rated && b < self.rated)
            })
            .count();
        if labelled < MIN_LABELLED {
            return Err(Error::conflict(
                format!(
                    "ratings need at least {MIN_LABELLED} labelled comparisons between the run's systems to correct the judge's verdicts; cell {} and the run hold {labelled}: label more of this judge's comparisons of these systems (POST /v1/comparisons with preference)",
                    self.key
                ),
                vec![],
            ));
        }
        Ok(run_rows)
    }
}

/// A rating's fit, on the blocking pool.
struct Fit {
    /// The run's systems, and every system the comparisons name.
    k: usize,
    known: usize,
    anchor_rows: Vec<Compared>,
    run_rows: Vec<Compared>,
    baseline: usize,
    controls: usize,
    /// The trained version's number and choice, where it holds.
    trained: Option<(i64, Candidate)>,
    lacks_swapped: bool,
    level: f64,
}

/// A rating, its rank intervals, the version whose choice it read, and whether its map reads
/// the swapped verdict.
type Fitted = (rate::Rated, RankIntervals, Option<i64>, bool);

impl Fit {
    fn rate(&self, candidate: Option<Candidate>) -> std::result::Result<rate::Rated, RateError> {
        let options = RateOptions {
            baseline: self.baseline,
            controls: self.controls,
            seed: 0,
            candidate,
        };
        rate::rate(
            self.k,
            self.known,
            &self.anchor_rows,
            &self.run_rows,
            &options,
        )
    }

    fn run(self) -> std::result::Result<Fitted, RateError> {
        let fitted = self
            .trained
            .and_then(|(n, c)| self.rate(Some(c)).ok().map(|r| (r, Some(n))));
        let (mut rated, mut version) = match fitted {
            Some(done) => done,
            None => (self.rate(None)?, None),
        };
        let chosen = rated.choice.candidate;
        let reads_swapped = chosen.inputs != Inputs::Verdict;
        if reads_swapped && self.lacks_swapped {
            let first = Candidate {
                inputs: Inputs::Verdict,
                ..chosen
            };
            rated = self.rate(Some(first))?;
            version = None;
        }
        let ranks = rated.powered.ratings.rank_intervals(
            self.level,
            RANK_DRAWS,
            &mut Rng::seed_from_u64(0),
        );
        Ok((rated, ranks, version, reads_swapped))
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

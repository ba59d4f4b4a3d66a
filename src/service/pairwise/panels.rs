//! Panels of pairwise judges: every member's verdicts on the same comparisons (`item_id`, the
//! same systems a and b), joined on the item, and one calibrated preference that reads them
//! all. Training is `auto` as for one pairwise judge, with each member's own map held out on
//! the same comparisons beside the panel's; ratings of a panel's run read each comparison's
//! `verdicts` ({member: verdict}).

use crate::service::families::{Operations, Pairwise};
use std::collections::HashMap;
use std::sync::Arc;

use crate::domain::calibration::Job;
use crate::domain::pairwise::comparisons::Comparison;
use crate::domain::pairwise::ratings::MemberVerdicts;
use crate::domain::pairwise::version::{MIN_LABELLED, PreferenceVersion};
use crate::domain::panel::Panel;
use crate::domain::training::{Plan, TrainingRequest, VersionChoice};
use crate::domain::{CellKey, ItemId, JudgeName, JudgeVersion, Problem, RubricName};
use crate::error::{Error, Result};
use crate::service::jobs::Trained;
use crate::service::pairwise::training::{PanelRows, newest_version, train_blocking, train_cell};
use crate::service::training::Progress;
use judgecal_stats::pairwise::preference::Judgement;

/// One rubric's comparisons as a pairwise panel sees them: the items every member judged.
#[derive(Debug)]
pub struct JoinedComparisons {
    /// One comparison per item, in item order: its systems, the people's preference (any
    /// member's row may carry it), the first member's covariates and rater, and the members'
    /// mean verdicts.
    pub rows: Vec<Comparison>,
    /// Each row's members' verdicts and swapped verdicts, in member order.
    pub verdicts: Vec<Vec<(f64, Option<f64>)>>,
    /// Each member's comparisons in the rubric before the join.
    pub member_comparisons: Vec<usize>,
}

/// Each member as errors name it.
fn label(judge: &JudgeName, version: Option<&JudgeVersion>) -> String {
    match version {
        None => format!("{judge} (unversioned)"),
        Some(v) => format!("{judge} (judge version {})", v.as_str()),
    }
}

/// An item's preference as its members' comparisons give it (`c` the first member's,
/// `others` the rest), and each way they disagree: another pair of systems, or another
/// preference.
fn agreed(labels: &[String], c: &Comparison, others: &[&Comparison]) -> (Option<f64>, Vec<String>) {
    let mut preference = c.preference;
    let mut clash = Vec::new();
    for (k, o) in others.iter().enumerate() {
        if (&o.a, &o.b) != (&c.a, &c.b) {
            clash.push(format!(
                "{} compares {} with {}, {} compares {} with {}",
                labels[0],
                c.a,
                c.b,
                labels[k + 1],
                o.a,
                o.b
            ));
        }
        match (preference, o.preference) {
            (Some(p), Some(q)) if (p - q).abs() > 1e-9 => clash.push(format!(
                "the people's preference differs: {p} beside {}'s {q}",
                labels[k + 1]
            )),
            (None, q) => preference = q,
            _ => {}
        }
    }
    (preference, clash)
}

/// Joins the members' comparisons (`members[m]`, each in any order) on item id; problems name
/// every item whose members compare other systems or give other preferences.
pub fn join(
    labels: &[String],
    members: &[Vec<Comparison>],
) -> std::result::Result<JoinedComparisons, Vec<Problem>> {
    let member_comparisons = members.iter().map(Vec::len).collect();
    let Some((first, rest)) = members.split_first() else {
        return Ok(JoinedComparisons {
            rows: Vec::new(),
            verdicts: Vec::new(),
            member_comparisons,
        });
    };
    let by_item: Vec<HashMap<&ItemId, &Comparison>> = rest
        .iter()
        .map(|m| m.iter().map(|c| (&c.item_id, c)).collect())
        .collect();
    let mut firsts: Vec<&Comparison> = first.iter().collect();
    firsts.sort_by(|a, b| a.item_id.cmp(&b.item_id));
    let (mut rows, mut verdicts, mut problems) = (Vec::new(), Vec::new(), Vec::new());
    for c in firsts {
        let Some(others) = by_item
            .iter()
            .map(|m| m.get(&c.item_id).copied())
            .collect::<Option<Vec<&Comparison>>>()
        else {
            continue;
        };
        let (preference, clash) = agreed(labels, c, &others);
        if !clash.is_empty() {
            problems.push(Problem::at(
                None,
                &format!("item {}", c.item_id.as_str()),
                clash.join("; "),
            ));
            continue;
        }
        let members: Vec<(f64, Option<f64>)> = std::iter::once(c)
            .chain(others)
            .map(|m| (m.verdict, m.verdict_swapped))
            .collect();
        let n = members.len() as f64;
        let given: Vec<f64> = members.iter().filter_map(|m| m.1).collect();
        rows.push(Comparison {
            verdict: members.iter().map(|m| m.0).sum::<f64>() / n,
            verdict_swapped: (!given.is_empty())
                .then(|| given.iter().sum::<f64>() / given.len() as f64),
            preference,
            ..c.clone()
        });
        verdicts.push(members);
    }
    if problems.is_empty() {
        Ok(JoinedComparisons {
            rows,
            verdicts,
            member_comparisons,
        })
    } else {
        Err(problems)
    }
}

impl Pairwise<'_> {
    /// Whether `panel`'s members are pairwise judges: one holds comparisons, and then every
    /// one must (409 naming the members that hold judge scores, or nothing yet).
    pub(in crate::service) async fn pairwise_panel(&self, panel: &Panel) -> Result<bool> {
        let (mut pairwise, mut others) = (Vec::new(), Vec::new());
        for judge in &panel.judges {
            if self
                .store
                .pairwise_rows()
                .comparison_cells(judge)
                .await?
                .is_empty()
            {
                others.push(judge);
            } else {
                pairwise.push(judge.as_str());
            }
        }
        if pairwise.is_empty() {
            return Ok(false);
        }
        let mut why = Vec::new();
        for judge in others {
            why.push(if self.store.version_rows().judge_versions(judge, None).await?.is_empty() {
                format!(
                    "{judge} has no comparisons: upload its verdicts of the same comparisons (POST /v1/comparisons with judge {judge})"
                )
            } else {
                format!("{judge} holds judge scores, not comparisons")
            });
        }
        if why.is_empty() {
            return Ok(true);
        }
        Err(Error::conflict(
            format!(
                "panel {}'s members {} hold pairwise comparisons, so every member must: {}",
                panel.name,
                pairwise.join(", "),
                why.join("; ")
            ),
            vec![],
        ))
    }

    /// The judge version of each member's comparisons a pairwise panel fits, in member order:
    /// the one `named` gives (422 at `member_versions.{member}` where the member has none of
    /// it), else its only one, else its newest (whose first comparison arrived last).
    async fn member_comparison_versions(
        &self,
        panel: &Panel,
        named: &[(JudgeName, Option<JudgeVersion>)],
    ) -> Result<Vec<(JudgeName, Option<JudgeVersion>)>> {
        let mut problems = Vec::new();
        for (judge, _) in named {
            if !panel.judges.contains(judge) {
                problems.push(Problem::at(
                    None,
                    &format!("member_versions.{judge}"),
                    format!("{judge} is not a member of panel {}", panel.name),
                ));
            }
        }
        let mut out = Vec::with_capacity(panel.judges.len());
        for judge in &panel.judges {
            let cells = self.store.pairwise_rows().comparison_cells(judge).await?;
            let chosen = match named.iter().find(|(j, _)| j == judge) {
                Some((_, v)) => {
                    if !cells.iter().any(|c| &c.judge_version == v) {
                        let mut held: Vec<String> = cells
                            .iter()
                            .map(|c| JudgeVersion::describe(c.judge_version.as_ref()))
                            .collect();
                        held.dedup();
                        problems.push(Problem::at(
                            None,
                            &format!("member_versions.{judge}"),
                            format!(
                                "member {judge} has no comparisons of judge version {}; it has: {}",
                                JudgeVersion::describe(v.as_ref()),
                                held.join(", ")
                            ),
                        ));
                    }
                    v.clone()
                }
                None => newest_version(&cells),
            };
            out.push((judge.clone(), chosen));
        }
        if problems.is_empty() {
            Ok(out)
        } else {
            Err(Error::rejected(
                "the training request was refused",
                problems,
            ))
        }
    }

    /// The members' comparisons in `rubric` (each of its version in `versions`; only the
    /// labelled ones with `labelled_only`), joined on item id.
    async fn join_comparisons(
        &self,
        panel: &Panel,
        versions: &[(JudgeName, Option<JudgeVersion>)],
        rubric: &RubricName,
        labelled_only: bool,
    ) -> Result<JoinedComparisons> {
        let mut members = Vec::with_capacity(versions.len());
        for (judge, version) in versions {
            let key = CellKey {
                judge: judge.clone(),
                rubric: rubric.clone(),
            };
            members.push(
                match self
                    .store
                    .pairwise_rows()
                    .cell_comparisons(&key, version.as_ref(), labelled_only)
                    .await
                {
                    Err(Error::NotFound(_)) => Vec::new(),
                    other => other?,
                },
            );
        }
        let labels: Vec<String> = versions.iter().map(|(j, v)| label(j, v.as_ref())).collect();
        join(&labels, &members).map_err(|problems| {
            Error::conflict(
                format!(
                    "panel {}'s members disagree on {} items of rubric {rubric}: every member's comparison of an item must compare the same systems a and b, with the same people's preference",
                    panel.name,
                    problems.len()
                ),
                problems,
            )
        })
    }

    /// The rubrics a pairwise panel trains (those named, else every rubric its first member
    /// holds comparisons in), each with at least [`MIN_LABELLED`] labelled comparisons that
    /// every member judged; problems name each member's count where one falls short.
    async fn trainable_rubrics(
        &self,
        panel: &Panel,
        versions: &[(JudgeName, Option<JudgeVersion>)],
        wanted: Option<&[RubricName]>,
    ) -> Result<std::result::Result<Vec<RubricName>, Vec<Problem>>> {
        let rubrics: Vec<RubricName> = match wanted {
            Some(w) => w.to_vec(),
            None => {
                let (first, version) = &versions[0];
                let mut r: Vec<RubricName> = self
                    .store
                    .pairwise_rows()
                    .comparison_cells(first)
                    .await?
                    .into_iter()
                    .filter(|c| &c.judge_version == version)
                    .map(|c| c.rubric)
                    .collect();
                r.dedup();
                r
            }
        };
        let mut problems = Vec::new();
        let mut ok = Vec::new();
        for (i, rubric) in rubrics.iter().enumerate() {
            let joined = self.join_comparisons(panel, versions, rubric, true).await?;
            if joined.rows.len() >= MIN_LABELLED {
                ok.push(rubric.clone());
                continue;
            }
            let field = if wanted.is_some() {
                format!("rubrics[{i}]")
            } else {
                "rubrics".to_owned()
            };
            problems.push(Problem::at(
                None,
                &field,
                format!(
                    "panel {}/{rubric} has {} labelled comparisons that every member judged; training needs at least {MIN_LABELLED}. Each member's labelled comparisons in it: {}",
                    panel.name,
                    joined.rows.len(),
                    versions
                        .iter()
                        .zip(&joined.member_comparisons)
                        .map(|((j, v), n)| format!("{}: {n}", label(j, v.as_ref())))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        if ok.is_empty() && problems.is_empty() {
            problems.push(Problem::at(
                None,
                "judge",
                format!(
                    "no rubric has comparisons from every member of panel {}",
                    panel.name
                ),
            ));
        }
        Ok(if problems.is_empty() {
            Ok(ok)
        } else {
            Err(problems)
        })
    }

    /// What a pairwise panel's training reads: each member's judge version and the rubrics
    /// with enough labelled comparisons every member judged (refused as `refusal` otherwise),
    /// resolved alike when the job is queued and when it runs.
    async fn resolve_training(
        &self,
        panel: &Panel,
        request: &TrainingRequest,
        refusal: &str,
    ) -> Result<(Vec<(JudgeName, Option<JudgeVersion>)>, Vec<RubricName>)> {
        let versions = self
            .member_comparison_versions(panel, &request.member_versions)
            .await?;
        let rubrics = self
            .trainable_rubrics(panel, &versions, request.rubrics.as_deref())
            .await?
            .map_err(|p| Error::rejected(refusal, p))?;
        Ok((versions, rubrics))
    }

    /// Queues a pairwise panel's training: `auto` only, each member's judge version resolved
    /// and kept in the job's request.
    pub(in crate::service) async fn submit_pairwise_panel_training(
        &self,
        request: TrainingRequest,
        panel: Panel,
    ) -> Result<Job> {
        if let Plan::Method(job) = &request.plan {
            return Err(Error::rejected(
                "the training request was refused",
                vec![Problem::at(
                    None,
                    "method",
                    format!(
                        "panel {} fuses pairwise judges: train it with {{\"method\": \"auto\"}} (the calibrated preference); {} reads judge scores",
                        panel.name,
                        job.options.method().as_str()
                    ),
                )],
            ));
        }
        let (versions, rubrics) = self
            .resolve_training(&panel, &request, "the training request was refused")
            .await?;
        Operations(self)
            .queue(TrainingRequest {
                rubrics: Some(rubrics),
                member_versions: versions,
                judge_version: VersionChoice::Exactly(None),
                ..request
            })
            .await
    }

    /// Runs a queued pairwise panel job: joins the members' comparisons again (they may have
    /// changed) and trains each rubric off the async runtime.
    pub(in crate::service) async fn run_pairwise_panel_training(
        &self,
        request: TrainingRequest,
        panel: Panel,
        progress: Arc<Progress>,
    ) -> Result<Trained> {
        let (versions, rubrics) = self
            .resolve_training(
                &panel,
                &request,
                "the comparisons changed since the job was queued",
            )
            .await?;
        let seed = request.plan.seed();
        let mut cells = Vec::with_capacity(rubrics.len());
        for rubric in rubrics {
            let joined = self
                .join_comparisons(&panel, &versions, &rubric, false)
                .await?;
            cells.push((rubric, joined));
        }
        let members: Vec<(String, Option<String>)> = versions
            .iter()
            .map(|(j, v)| (j.to_string(), v.as_ref().map(|v| v.as_str().to_owned())))
            .collect();
        let preferences = train_blocking(
            cells,
            "choosing the panel's calibrated preference",
            progress,
            move |rubric, joined: JoinedComparisons| {
                let rows = PanelRows {
                    verdicts: &joined.verdicts,
                    members: members
                        .iter()
                        .zip(&joined.member_comparisons)
                        .map(|((j, v), &n)| (j.clone(), v.clone(), n))
                        .collect(),
                };
                train_cell(rubric, &joined.rows, Some(&rows), seed)
            },
        )
        .await?;
        Ok(Trained {
            versions: Vec::new(),
            preferences,
            force: false,
            judge_version: None,
        })
    }

    /// What a pairwise panel's run is rated against: the newest trained version of `key`
    /// (404 before one), its members unchanged since (409), and their labelled comparisons
    /// joined at the judge versions it was fitted on. Gives the version's members in order.
    pub(in crate::service) async fn panel_anchors(
        &self,
        panel: &Panel,
        key: &CellKey,
    ) -> Result<(Vec<JudgeName>, JoinedComparisons)> {
        let untrained = || {
            Error::NotFound(format!(
                "panel {} has no trained version in rubric {}: train it with POST /v1/judges/{}/calibrations {{\"method\": \"auto\"}}",
                panel.name, key.rubric, panel.name
            ))
        };
        let newest: PreferenceVersion =
            match self.store.pairwise_rows().preference_versions(key).await {
                Err(Error::NotFound(_)) => return Err(untrained()),
                other => other?.into_iter().next().ok_or_else(untrained)?,
            };
        let fitted: Vec<&str> = newest
            .report
            .panel
            .iter()
            .map(|m| m.judge.as_str())
            .collect();
        let now: Vec<&str> = panel.judges.iter().map(JudgeName::as_str).collect();
        if fitted != now {
            return Err(Error::conflict(
                format!(
                    "panel {} now has members {}, but its newest version in rubric {} was trained on {}; train it again",
                    panel.name,
                    now.join(", "),
                    key.rubric,
                    fitted.join(", ")
                ),
                vec![],
            ));
        }
        let mut versions = Vec::with_capacity(fitted.len());
        for (judge, m) in panel.judges.iter().zip(&newest.report.panel) {
            let version = m
                .judge_version
                .as_deref()
                .map(JudgeVersion::parse)
                .transpose()
                .map_err(|e| Error::Internal(format!("a stored member version: {e}")))?;
            versions.push((judge.clone(), version));
        }
        let joined = self
            .join_comparisons(panel, &versions, &key.rubric, true)
            .await?;
        Ok((panel.judges.clone(), joined))
    }
}

/// A panel run's members' verdicts in `members`' order, one list per comparison (`rows` its
/// batch rows); problems name the row and `verdicts` or `verdicts.<member>` of a row that
/// lacks a member or names a judge that is not one.
pub fn member_verdicts(
    panel: &JudgeName,
    members: &[JudgeName],
    rows: &[usize],
    given: &HashMap<usize, MemberVerdicts>,
) -> std::result::Result<Vec<Vec<Judgement>>, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut out = Vec::with_capacity(rows.len());
    let names = || {
        members
            .iter()
            .map(JudgeName::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    };
    for &row in rows {
        let Some(verdicts) = given.get(&row) else {
            problems.push(Problem::at(
                Some(row),
                "verdicts",
                format!(
                    "{panel} is a panel: give each member's verdict as verdicts {{member: verdict}} (its members: {})",
                    names()
                ),
            ));
            continue;
        };
        for (name, _, _) in verdicts {
            if !members.contains(name) {
                problems.push(Problem::at(
                    Some(row),
                    &format!("verdicts.{name}"),
                    format!(
                        "{name} is not a member of panel {panel}; its members: {}",
                        names()
                    ),
                ));
            }
        }
        let mut these = Vec::with_capacity(members.len());
        for m in members {
            match verdicts.iter().find(|(n, _, _)| n == m) {
                Some(&(_, v, s)) => these.push((v, s)),
                None => problems.push(Problem::at(
                    Some(row),
                    &format!("verdicts.{m}"),
                    format!(
                        "is missing: panel {panel}'s calibrated preference reads every member's verdict"
                    ),
                )),
            }
        }
        out.push(these);
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::GroupName;

    fn comparison(
        item: &str,
        a: &str,
        b: &str,
        verdict: f64,
        preference: Option<f64>,
    ) -> Comparison {
        Comparison {
            item_id: ItemId::parse(item).unwrap(),
            a: GroupName::parse(a).unwrap(),
            b: GroupName::parse(b).unwrap(),
            verdict,
            verdict_swapped: None,
            preference,
            rater: None,
            covariates: Default::default(),
        }
    }

    #[test]
    fn members_join_on_the_items_all_judged_and_disagreements_are_named() {
        let labels = vec!["x (unversioned)".to_owned(), "y (unversioned)".to_owned()];
        let x = vec![
            comparison("i2", "s", "t", 1.0, None),
            comparison("i1", "s", "t", 0.0, Some(1.0)),
            comparison("i3", "s", "t", 1.0, Some(1.0)),
        ];
        let y = vec![
            comparison("i1", "s", "t", 1.0, None),
            comparison("i2", "s", "t", 0.5, Some(0.0)),
        ];
        let joined = join(&labels, &[x.clone(), y]).expect("joined");
        let items: Vec<&str> = joined.rows.iter().map(|c| c.item_id.as_str()).collect();
        assert_eq!(items, ["i1", "i2"]);
        assert_eq!(
            joined.verdicts,
            vec![
                vec![(0.0, None), (1.0, None)],
                vec![(1.0, None), (0.5, None)]
            ]
        );
        // Either member's preference labels the item; the verdict is the members' mean.
        assert_eq!(joined.rows[0].preference, Some(1.0));
        assert_eq!(joined.rows[1].preference, Some(0.0));
        assert_eq!(joined.rows[1].verdict, 0.75);
        assert_eq!(joined.member_comparisons, [3, 2]);
        let clash = vec![
            comparison("i1", "t", "s", 1.0, None),
            comparison("i2", "s", "t", 1.0, Some(1.0)),
            comparison("i3", "s", "t", 1.0, Some(0.0)),
        ];
        let problems = join(&labels, &[x, clash]).expect_err("refused");
        let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(fields, ["item i1", "item i3"]);
    }

    #[test]
    fn a_panel_run_row_names_its_missing_and_unknown_members() {
        let m = |s: &str| JudgeName::parse(s).unwrap();
        let members = [m("x"), m("y")];
        let given: HashMap<usize, MemberVerdicts> = [
            (1, vec![(m("y"), 1.0, Some(0.0)), (m("x"), 0.0, None)]),
            (2, vec![(m("x"), 1.0, None), (m("z"), 1.0, None)]),
        ]
        .into_iter()
        .collect();
        let ok = member_verdicts(&m("p"), &members, &[1], &given).expect("in order");
        assert_eq!(ok, vec![vec![(0.0, None), (1.0, Some(0.0))]]);
        let problems = member_verdicts(&m("p"), &members, &[1, 2, 3], &given).expect_err("refused");
        let named: Vec<(Option<usize>, &str)> =
            problems.iter().map(|p| (p.row, p.field.as_str())).collect();
        assert_eq!(
            named,
            [
                (Some(2), "verdicts.z"),
                (Some(2), "verdicts.y"),
                (Some(3), "verdicts")
            ]
        );
    }
}

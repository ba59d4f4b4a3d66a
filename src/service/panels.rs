//! Panels: their definitions, the training of their fusion layer and derived-judge corrector,
//! and the mapping of panel items (`{member: score}`) to the scores a panel version corrects.

use super::families::{Operations, Pairwise, Panels, Versions};
use std::sync::Arc;

use super::jobs::Trained;
use super::training::{self, Progress};
use super::versions::Loaded;
use crate::domain::calibration::Job;
use crate::domain::panel::{self, Joined, MemberScores, NewPanel, Panel, PlanRequest};
use crate::domain::training::{TrainingRequest, VersionChoice};
use crate::domain::{CellKey, JudgeName, JudgeVersion, Problem, RubricName, Scale};
use crate::error::{Error, Result};
use judgecal_stats::panel::fusion::{FusedScore, Fusion};
use judgecal_stats::panel::missing::Scored;
use judgecal_stats::panel::plan::{PanelPlan, PlanAsk};

fn no_panel(name: &JudgeName) -> Error {
    Error::NotFound(format!("no panel {name}; define one with POST /v1/panels"))
}

impl Panels<'_> {
    /// Defines a panel: of judges of one kind (pairwise judges, or judges of scores), 409
    /// naming each pairwise member where its members are of both kinds.
    pub async fn create_panel(&self, new: &NewPanel) -> Result<Panel> {
        let mut pairwise = Vec::new();
        let mut scored = Vec::new();
        for (i, judge) in new.judges.iter().enumerate() {
            if !self
                .store
                .pairwise_rows()
                .comparison_cells(judge)
                .await?
                .is_empty()
            {
                pairwise.push(Problem::at(
                    None,
                    &format!("judges[{i}]"),
                    format!("{judge} holds pairwise comparisons"),
                ));
            } else if !self
                .store
                .version_rows()
                .judge_versions(judge, None)
                .await?
                .is_empty()
            {
                scored.push(judge.as_str());
            }
        }
        if !pairwise.is_empty() && !scored.is_empty() {
            return Err(Error::conflict(
                format!(
                    "panel {} was not defined: a panel's members are judges of one kind; judge scores are held by {}, pairwise comparisons by the members named below",
                    new.name,
                    scored.join(", ")
                ),
                pairwise,
            ));
        }
        let panel = self.store.panel_rows().create_panel(new).await?;
        self.panel_memo.clear();
        tracing::info!(panel = %panel.name, members = panel.judges.len(), "panel defined");
        Ok(panel)
    }

    pub async fn list(&self) -> Result<Vec<Panel>> {
        self.store.panel_rows().panels().await
    }

    pub async fn panel(&self, name: &JudgeName) -> Result<Panel> {
        self.store
            .panel_rows()
            .panel(name)
            .await?
            .ok_or_else(|| no_panel(name))
    }

    pub async fn delete_panel(&self, name: &JudgeName) -> Result<()> {
        if self.store.panel_rows().delete_panel(name).await? {
            self.panel_memo.clear();
            Ok(())
        } else {
            Err(no_panel(name))
        }
    }

    /// The judge version of each member's anchors a panel training fits, in member order:
    /// the one `named` gives (422 at `member_versions.{member}` for a non-member or a version
    /// the member has no anchors of), else the one the member's requests naming no version
    /// are served by: its unversioned anchors where it has any, else its only judge version,
    /// else the one its active calibrations were trained on (409 naming the member and its
    /// versions where they differ, or where the member has no anchors).
    pub(super) async fn member_versions(
        &self,
        panel: &Panel,
        named: &[(JudgeName, Option<JudgeVersion>)],
    ) -> Result<Vec<(JudgeName, Option<JudgeVersion>)>> {
        let mut problems = not_members(panel, named);
        let mut out = Vec::with_capacity(panel.judges.len());
        for judge in &panel.judges {
            let mut held: Vec<Option<JudgeVersion>> = Vec::new();
            for (_, v) in self
                .store
                .version_rows()
                .judge_versions(judge, None)
                .await?
            {
                if !held.contains(&v.judge_version) {
                    held.push(v.judge_version);
                }
            }
            let listed = || {
                held.iter()
                    .map(|v| JudgeVersion::describe(v.as_ref()))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            if let Some((_, v)) = named.iter().find(|(j, _)| j == judge) {
                if !held.contains(v) {
                    problems.push(Problem::at(
                        None,
                        &format!("member_versions.{judge}"),
                        format!(
                            "member {judge} has no anchors of judge version {}; it has: {}",
                            JudgeVersion::describe(v.as_ref()),
                            if held.is_empty() {
                                "none".to_owned()
                            } else {
                                listed()
                            }
                        ),
                    ));
                }
                out.push((judge.clone(), v.clone()));
                continue;
            }
            let chosen = match held.as_slice() {
                [] => Err(format!(
                    "panel {}'s member {judge} has no anchors: upload its scores of the anchor items (POST /v1/anchors with judge {judge})",
                    panel.name
                )),
                [only] => Ok(only.clone()),
                _ if held.contains(&None) => Ok(None),
                _ => self.actively_served(judge).await?.ok_or_else(|| {
                    format!(
                        "panel {}'s member {judge} has anchors of several judge versions ({}) and none serves its untagged requests alone: \
                         name the one to fit in member_versions.{judge}",
                        panel.name,
                        listed()
                    )
                }),
            };
            match chosen {
                Ok(v) => out.push((judge.clone(), v)),
                Err(e) => return Err(Error::conflict(e, vec![])),
            }
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

    /// The judge version every active calibration of `judge` was trained on, where they
    /// agree.
    async fn actively_served(&self, judge: &JudgeName) -> Result<Option<Option<JudgeVersion>>> {
        let mut seen: Option<Option<JudgeVersion>> = None;
        for (key, _) in self.store.version_rows().active_calibrators().await? {
            if &key.judge != judge {
                continue;
            }
            // The active version itself: `served` would count a version mismatch for a
            // request nobody made.
            let Ok(active) = Versions(self).corrector(&key, None).await else {
                continue;
            };
            let v = active.version.judge_version.clone();
            match &seen {
                Some(s) if *s != v => return Ok(None),
                _ => seen = Some(v),
            }
        }
        Ok(seen)
    }

    /// The members' anchors (each of its judge version in `versions`) joined on item id, per
    /// rubric every member holds.
    async fn panel_snapshot(
        &self,
        panel: &Panel,
        versions: &[(JudgeName, Option<JudgeVersion>)],
        rubrics: Option<&[RubricName]>,
    ) -> Result<Vec<Joined>> {
        let mut members = Vec::with_capacity(versions.len());
        for (judge, version) in versions {
            members.push(
                self.store
                    .version_rows()
                    .judge_anchors(judge, rubrics, version.as_ref())
                    .await?,
            );
        }
        panel::join(&member_labels(versions), &members).map_err(|problems| {
            Error::conflict(
                format!(
                    "panel {}'s members give different reference scores for {} items; every member's anchor of an item must carry the same reference",
                    panel.name,
                    problems.len()
                ),
                problems,
            )
        })
    }

    /// The snapshot a panel job fits, refused (`refusal`) where a requested rubric lacks a
    /// member's anchors or too few items join.
    async fn trainable(
        &self,
        panel: &Panel,
        request: &TrainingRequest,
        refusal: &str,
    ) -> Result<Vec<Joined>> {
        let rubrics = request.rubrics.as_deref();
        let versions = &request.member_versions;
        let joined = self.panel_snapshot(panel, versions, rubrics).await?;
        let problems = self.panel_problems(panel, versions, &joined, rubrics);
        if problems.is_empty() {
            Ok(joined)
        } else {
            Err(Error::rejected(refusal, problems))
        }
    }

    /// Rubrics of the snapshot with too few joined anchors, and requested rubrics it lacks.
    fn panel_problems(
        &self,
        panel: &Panel,
        versions: &[(JudgeName, Option<JudgeVersion>)],
        joined: &[Joined],
        wanted: Option<&[RubricName]>,
    ) -> Vec<Problem> {
        let labels = member_labels(versions);
        let min = self.jobs.min_anchors;
        let mut problems = Vec::new();
        for (i, r) in wanted.into_iter().flatten().enumerate() {
            if !joined.iter().any(|j| &j.rubric == r) {
                problems.push(Problem::at(
                    None,
                    &format!("rubrics[{i}]"),
                    format!(
                        "not every member of panel {} has anchors for rubric {r} (its members, with the judge versions fitted: {})",
                        panel.name,
                        labels.join(", ")
                    ),
                ));
            }
        }
        for j in joined {
            if j.rows.len() < min {
                problems.push(Problem::at(
                    None,
                    "rubrics",
                    format!(
                        "panel {}/{} has {} items that every member scored; training needs at least {min} (jobs.min_anchors). Each member's anchors in it: {}",
                        panel.name,
                        j.rubric,
                        j.rows.len(),
                        labels
                            .iter()
                            .zip(&j.member_anchors)
                            .map(|(l, n)| format!("{l}: {n}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
        }
        if joined.is_empty() {
            problems.push(Problem::at(
                None,
                "judge",
                format!(
                    "no rubric has anchors from every member of panel {} ({})",
                    panel.name,
                    labels.join(", ")
                ),
            ));
        }
        problems
    }

    /// Queues a panel's training: its members' anchors must join (409 naming every item whose
    /// references disagree) and hold enough items per rubric.
    pub(super) async fn submit_panel_training(
        &self,
        request: TrainingRequest,
        panel: Panel,
    ) -> Result<Job> {
        if let VersionChoice::Exactly(_) = request.judge_version {
            return Err(Error::rejected(
                "the training request was refused",
                vec![Problem::at(
                    None,
                    "judge_version",
                    format!(
                        "{} is a panel: name each member's judge version in member_versions (by default, the one its untagged requests are served by)",
                        panel.name
                    ),
                )],
            ));
        }
        if Pairwise(self).pairwise_panel(&panel).await? {
            return Pairwise(self)
                .submit_pairwise_panel_training(request, panel)
                .await;
        }
        let request = TrainingRequest {
            member_versions: self
                .member_versions(&panel, &request.member_versions)
                .await?,
            ..request
        };
        let joined = self
            .trainable(&panel, &request, "the training request was refused")
            .await?;
        let request = TrainingRequest {
            rubrics: Some(joined.into_iter().map(|j| j.rubric).collect()),
            judge_version: VersionChoice::Exactly(None),
            ..request
        };
        Operations(self).queue(request).await
    }

    /// Runs a claimed panel job: joins the members' anchors again (they may have changed) and
    /// fits off the async runtime.
    pub(super) async fn run_panel_training(
        &self,
        request: TrainingRequest,
        panel: Panel,
        progress: Arc<Progress>,
    ) -> Result<Trained> {
        // A stored job's request holds the members' versions as an object, read back in the
        // names' order; the fusion's columns are the panel's order, so put them back in it
        // (resolving any member the request lacks as at queueing).
        if Pairwise(self).pairwise_panel(&panel).await? {
            return self
                .pairwise()
                .run_pairwise_panel_training(request, panel, progress)
                .await;
        }
        let mut request = request;
        request.member_versions = self
            .member_versions(&panel, &request.member_versions)
            .await?;
        let joined = self
            .trainable(
                &panel,
                &request,
                "the anchors changed since the job was queued",
            )
            .await?;
        let scales = self.store.rubric_scales().await?;
        let joined: Vec<(Joined, Scale)> = joined
            .into_iter()
            .map(|j| {
                let scale = scales.get(&j.rubric).copied().unwrap_or(Scale::DEFAULT);
                (j, scale)
            })
            .collect();
        let members: Vec<String> = panel.judges.iter().map(|j| j.to_string()).collect();
        let versions: Vec<Option<String>> = request
            .member_versions
            .iter()
            .map(|(_, v)| v.as_ref().map(|v| v.as_str().to_owned()))
            .collect();
        let force = request.force();
        let versions = crate::error::blocking("the training thread", move || {
            training::train_panel(&joined, &members, &versions, &request.plan, &progress)
        })
        .await?
        .map_err(|e| Error::Internal(e.to_string()))?;
        Ok(Trained {
            preferences: Vec::new(),
            versions,
            force,
            judge_version: None,
        })
    }

    /// The panel a version of `fusion` serves: 404 where its panel was deleted, 409 where the
    /// panel now has other members than the version was trained on.
    pub(super) async fn check_panel(&self, judge: &JudgeName, fusion: &Fusion) -> Result<()> {
        let serving = self.panel_serving(judge).await?;
        let panel = serving.panel.as_ref().ok_or_else(|| no_panel(judge))?;
        let now: Vec<&str> = panel.judges.iter().map(JudgeName::as_str).collect();
        if now != fusion.members {
            return Err(Error::conflict(
                format!(
                    "panel {judge} now has members {}, but its served version was trained on {}; train it again",
                    now.join(", "),
                    fusion.members.join(", ")
                ),
                vec![],
            ));
        }
        Ok(())
    }
}

impl Panels<'_> {
    /// Which judges to call: the plan of the panel's active version in the rubric, with the
    /// version (costs of members not named are 1; a name that is not a member is refused).
    pub async fn plan_panel(&self, request: &PlanRequest) -> Result<(Arc<Loaded>, PanelPlan)> {
        let panel = self.panel(&request.panel).await?;
        let key = CellKey {
            judge: panel.name.clone(),
            rubric: request.rubric.clone(),
        };
        let loaded = Versions(self).served(&key, None, None).await?.loaded;
        let Some(fusion) = &loaded.version.fusion else {
            return Err(Error::Internal(format!(
                "{key} serves a version with no fusion layer"
            )));
        };
        self.check_panel(&panel.name, fusion).await?;
        let mut costs = vec![1.0; fusion.members.len()];
        let mut problems = Vec::new();
        for (name, cost) in &request.costs {
            match fusion.members.iter().position(|m| m == name.as_str()) {
                Some(k) => costs[k] = *cost,
                None => problems.push(Problem::at(
                    None,
                    &format!("costs.{name}"),
                    format!(
                        "{name} is not a member of panel {}; its members: {}",
                        panel.name,
                        fusion.members.join(", ")
                    ),
                )),
            }
        }
        if !problems.is_empty() {
            return Err(Error::rejected("the plan request was refused", problems));
        }
        let ask = PlanAsk {
            run_size: request.run_size,
            half_width: request.half_width,
            level: request.level,
            costs,
            label_cost: request.label_cost,
        };
        // A panel of twelve weighs 4,095 sub-panels, each a small solve: off the runtime.
        let version = loaded.clone();
        let plan = crate::error::blocking("planning a panel", move || {
            version.version.fusion.as_ref().map(|f| f.plan(&ask))
        })
        .await?
        .ok_or_else(|| Error::Internal(format!("{key} serves a version with no fusion layer")))?;
        Ok((loaded.clone(), plan))
    }
}

/// Each member as errors name it: `judge` for its unversioned anchors, `judge@version`.
fn member_labels(versions: &[(JudgeName, Option<JudgeVersion>)]) -> Vec<String> {
    versions
        .iter()
        .map(|(j, v)| match v {
            None => format!("{j} (unversioned)"),
            Some(v) => format!("{j} (judge version {})", v.as_str()),
        })
        .collect()
}

fn names(judges: &[JudgeName]) -> String {
    judges
        .iter()
        .map(JudgeName::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Each item's scores in the version's member order, fused; problems name the row (from 1)
/// and the field `{field}.{member}` of a name that is not a member.
pub fn fuse_items(
    fusion: &Fusion,
    items: &[MemberScores],
    field: &str,
) -> std::result::Result<Vec<FusedScore>, Vec<Problem>> {
    fused_with_scores(fusion, items, field).map(|(fused, _)| fused)
}

/// As [`fuse_items`], with each item's scores in member order (`None`: not scored).
pub fn fused_with_scores(
    fusion: &Fusion,
    items: &[MemberScores],
    field: &str,
) -> std::result::Result<(Vec<FusedScore>, Scored), Vec<Problem>> {
    let mut problems = Vec::new();
    let mut out = Vec::with_capacity(items.len());
    let mut matrix = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let mut scores = vec![None; fusion.members.len()];
        for (name, score) in item {
            match fusion.members.iter().position(|m| m == name.as_str()) {
                Some(m) => scores[m] = Some(*score),
                None => problems.push(Problem::at(
                    Some(i + 1),
                    &format!("{field}.{name}"),
                    format!(
                        "{name} is not a member of this panel; its members: {}",
                        fusion.members.join(", ")
                    ),
                )),
            }
        }
        match fusion.fuse(&scores) {
            Ok(f) => out.push(f),
            Err(e) => problems.push(Problem::at(Some(i + 1), field, e)),
        }
        matrix.push(scores);
    }
    if problems.is_empty() {
        Ok((out, matrix))
    } else {
        Err(problems)
    }
}

/// The named members' versions that name a judge outside the panel.
fn not_members(panel: &Panel, named: &[(JudgeName, Option<JudgeVersion>)]) -> Vec<Problem> {
    let mut problems = Vec::new();
    for (judge, _) in named {
        if !panel.judges.contains(judge) {
            problems.push(Problem::at(
                None,
                &format!("member_versions.{judge}"),
                format!(
                    "{judge} is not a member of panel {}; its members: {}",
                    panel.name,
                    names(&panel.judges)
                ),
            ));
        }
    }
    problems
}

//! Panels: their definitions, the training of their fusion layer and derived-judge corrector,
//! and the mapping of panel items (`{member: score}`) to the scores a panel version corrects.

use std::sync::Arc;

use super::Service;
use super::jobs::Trained;
use super::training::{self, Progress};
use super::versions::Loaded;
use crate::calibrate::panel::fusion::{FusedScore, Fusion};
use crate::calibrate::panel::plan::{PanelPlan, PlanAsk};
use crate::domain::calibration::Job;
use crate::domain::panel::{self, Joined, MemberScores, NewPanel, Panel, PlanRequest};
use crate::domain::training::{TrainingRequest, VersionChoice};
use crate::domain::{CellKey, JudgeName, Problem, RubricName, Scale};
use crate::error::{Error, Result};

fn no_panel(name: &JudgeName) -> Error {
    Error::NotFound(format!("no panel {name}; define one with POST /v1/panels"))
}

impl Service {
    pub async fn create_panel(&self, new: &NewPanel) -> Result<Panel> {
        let panel = self.store.create_panel(new).await?;
        tracing::info!(panel = %panel.name, members = panel.judges.len(), "panel defined");
        Ok(panel)
    }

    pub async fn panels(&self) -> Result<Vec<Panel>> {
        self.store.panels().await
    }

    pub async fn panel(&self, name: &JudgeName) -> Result<Panel> {
        self.store.panel(name).await?.ok_or_else(|| no_panel(name))
    }

    pub async fn delete_panel(&self, name: &JudgeName) -> Result<()> {
        if self.store.delete_panel(name).await? {
            Ok(())
        } else {
            Err(no_panel(name))
        }
    }

    /// The members' anchors joined on item id, per rubric every member holds: each member's
    /// newest judge version (the one whose first anchor arrived last).
    async fn panel_snapshot(
        &self,
        panel: &Panel,
        rubrics: Option<&[RubricName]>,
    ) -> Result<Vec<Joined>> {
        let mut members = Vec::with_capacity(panel.judges.len());
        for judge in &panel.judges {
            let versions = self.store.judge_versions(judge, None).await?;
            let Some(newest) = versions
                .iter()
                .max_by(|a, b| {
                    a.1.first_at_ms
                        .cmp(&b.1.first_at_ms)
                        .then(a.1.judge_version.cmp(&b.1.judge_version))
                })
                .map(|(_, v)| v.judge_version.clone())
            else {
                return Err(Error::conflict(
                    format!(
                        "panel {}'s member {judge} has no anchors: upload its scores of the anchor items (POST /v1/anchors with judge {judge})",
                        panel.name
                    ),
                    vec![],
                ));
            };
            members.push(
                self.store
                    .judge_anchors(judge, rubrics, newest.as_ref())
                    .await?,
            );
        }
        panel::join(&panel.judges, &members).map_err(|problems| {
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
        let joined = self.panel_snapshot(panel, rubrics).await?;
        let problems = self.panel_problems(panel, &joined, rubrics);
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
        joined: &[Joined],
        wanted: Option<&[RubricName]>,
    ) -> Vec<Problem> {
        let min = self.jobs.min_anchors;
        let mut problems = Vec::new();
        for (i, r) in wanted.into_iter().flatten().enumerate() {
            if !joined.iter().any(|j| &j.rubric == r) {
                problems.push(Problem::at(
                    None,
                    &format!("rubrics[{i}]"),
                    format!(
                        "not every member of panel {} has anchors for rubric {r}",
                        panel.name
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
                        "panel {}/{} has {} items that every member scored; training needs at least {min} (jobs.min_anchors)",
                        panel.name,
                        j.rubric,
                        j.rows.len()
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
                    names(&panel.judges)
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
                        "{} is a panel: it trains on each member's newest judge version; leave judge_version out",
                        panel.name
                    ),
                )],
            ));
        }
        let joined = self
            .trainable(&panel, &request, "the training request was refused")
            .await?;
        let request = TrainingRequest {
            rubrics: Some(joined.into_iter().map(|j| j.rubric).collect()),
            judge_version: VersionChoice::Exactly(None),
            ..request
        };
        self.queue(request).await
    }

    /// Runs a claimed panel job: joins the members' anchors again (they may have changed) and
    /// fits off the async runtime.
    pub(super) async fn run_panel_training(
        &self,
        request: TrainingRequest,
        panel: Panel,
        progress: Arc<Progress>,
    ) -> Result<Trained> {
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
        let force = request.force();
        let versions = crate::error::blocking("the training thread", move || {
            training::train_panel(&joined, &members, &request.plan, &progress)
        })
        .await?
        .map_err(|e| Error::Internal(e.to_string()))?;
        Ok(Trained {
            versions,
            force,
            judge_version: None,
        })
    }

    /// The panel a version of `fusion` serves: 404 where its panel was deleted, 409 where the
    /// panel now has other members than the version was trained on.
    pub(super) async fn check_panel(&self, judge: &JudgeName, fusion: &Fusion) -> Result<()> {
        let panel = self.panel(judge).await?;
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

impl Service {
    /// Which judges to call: the plan of the panel's active version in the rubric, with the
    /// version (costs of members not named are 1; a name that is not a member is refused).
    pub async fn plan_panel(&self, request: &PlanRequest) -> Result<(Arc<Loaded>, PanelPlan)> {
        let panel = self.panel(&request.panel).await?;
        let key = CellKey {
            judge: panel.name.clone(),
            rubric: request.rubric.clone(),
        };
        let loaded = self.served(&key, None, None).await?.loaded;
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
        let plan = fusion.plan(&PlanAsk {
            run_size: request.run_size,
            half_width: request.half_width,
            level: request.level,
            costs,
            label_cost: request.label_cost,
        });
        Ok((loaded.clone(), plan))
    }
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
    let mut problems = Vec::new();
    let mut out = Vec::with_capacity(items.len());
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
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

//! When the judge changes: the judge versions a cell holds, which items a new version should
//! re-score, the bridge between two versions (`judgecal_stats::bridge`), and the silent-change
//! check (a re-score under the same label, kept apart from the anchors).

use super::families::{Pairwise, Versions, Webhooks};
use std::sync::Arc;

use super::versions::Loaded;
use crate::domain::{CellKey, GroupName, ItemId, JudgeVersion, Problem, Scale};
use crate::error::{Error, Result};
use crate::store::{SharedItem, StoredCheck, VersionAnchors};
use crate::webhooks::{Alarm, AlarmKind};
use judgecal_stats::bridge::{self, Bridge, Finding, Pair, TOLERANCE_SHARE, Verdict};

/// One judge version of a cell: its anchors and the calibration trained on it, if any.
pub struct JudgeVersionSummary {
    pub anchors: VersionAnchors,
    /// The newest passed calibrator version trained on it.
    pub calibrated: Option<i64>,
}

/// What a new judge version should re-score.
pub struct Rescore {
    pub items: Vec<ItemId>,
    pub total: i64,
    /// Items both versions have scored so far.
    pub shared: usize,
    /// Shared items the bridge needs to reach a verdict at the default tolerance: planned
    /// before 10 are shared, then from the bridge's own estimate.
    pub bridge_items: Option<usize>,
    pub tolerance: f64,
    /// The calibrator version the bridge would test (a pairwise cell's: its trained version),
    /// and the judge version it was trained on.
    pub from_calibrator: i64,
    pub from: Option<JudgeVersion>,
}

/// A bridge between two judge versions of a cell.
pub struct BridgeAnswer {
    pub from: Option<JudgeVersion>,
    pub to: Option<JudgeVersion>,
    /// The calibrator version of `from` applied to both versions' scores (a pairwise cell's:
    /// its trained version, applied to both versions' verdicts).
    pub calibrator: i64,
    pub bridge: Bridge,
}

/// A silent-change check, as stored.
pub struct Check {
    pub id: uuid::Uuid,
    pub answer: BridgeAnswer,
}

/// A re-scored item of a silent-change check: a judge score in a cell of scores, the judge's
/// verdicts (first order, and with the answers swapped where given) in a pairwise cell.
pub struct Rescored {
    pub item_id: ItemId,
    pub judge_score: Option<f64>,
    pub verdicts: Option<(f64, Option<f64>)>,
}

pub(super) fn refused(problems: Vec<Problem>) -> Error {
    Error::rejected("the request was refused", problems)
}

/// At most `limit` of `items`, spread over their groups: each group's items in a fixed
/// pseudo-random order (a hash of the item id, so the list is the same on every call and an
/// item stays in it until re-scored), the groups taken in turn, ungrouped items as one group.
/// A bridge on the first items of the list then sees every system, not the first ids' one.
pub(super) fn spread_sample(items: Vec<(ItemId, Option<GroupName>)>, limit: usize) -> Vec<ItemId> {
    let mut groups: std::collections::BTreeMap<Option<GroupName>, Vec<ItemId>> =
        std::collections::BTreeMap::new();
    for (item, group) in items {
        groups.entry(group).or_default().push(item);
    }
    let mut queues: Vec<std::vec::IntoIter<ItemId>> = groups
        .into_values()
        .map(|mut g| {
            g.sort_by_key(|i| (fnv1a(i.as_str()), i.clone()));
            g.into_iter()
        })
        .collect();
    let mut out = Vec::with_capacity(limit);
    while out.len() < limit {
        let before = out.len();
        for q in &mut queues {
            if out.len() == limit {
                break;
            }
            out.extend(q.next());
        }
        if out.len() == before {
            break;
        }
    }
    out
}

/// FNV-1a, 64 bits: a hash that stays the same across Rust releases (the list's order).
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// 409: `judge_version` has no `what` trained on it in cell `key`, with the training request
/// that would train one (naming `method` where the cell needs it).
pub(super) fn untrained(
    field: &str,
    key: &CellKey,
    judge_version: Option<&JudgeVersion>,
    what: &str,
    method: Option<&str>,
) -> Error {
    let mut body: Vec<String> = method
        .map(|m| format!("\"method\": {m:?}"))
        .into_iter()
        .collect();
    body.extend(judge_version.map(|v| format!("\"judge_version\": {:?}", v.as_str())));
    let body = if body.is_empty() {
        String::new()
    } else {
        format!(" {{{}}}", body.join(", "))
    };
    Error::conflict(
        format!(
            "{field}: judge_version {} has no {what} in cell {key}; train one with POST /v1/judges/{}/calibrations{body}",
            JudgeVersion::describe(judge_version),
            key.judge
        ),
        vec![],
    )
}

/// The tolerance asked for, or the default for the scale.
pub(super) fn tolerance(asked: Option<f64>, scale: Scale) -> Result<f64> {
    match asked {
        None => Ok(TOLERANCE_SHARE * (scale.max - scale.min)),
        Some(t) if t.is_finite() && t > 0.0 => Ok(t),
        Some(t) => Err(refused(vec![Problem::at(
            None,
            "tolerance",
            format!("must be a positive number in reference units; got {t}"),
        )])),
    }
}

impl Versions<'_> {
    /// The judge versions a cell's anchors carry, oldest first, each with its calibration.
    pub async fn judge_versions(&self, key: &CellKey) -> Result<Vec<JudgeVersionSummary>> {
        let anchors = self
            .store
            .version_rows()
            .judge_versions(&key.judge, Some(&key.rubric))
            .await?;
        if anchors.is_empty() {
            let pairwise = Pairwise(self).comparison_versions(key).await?;
            if !pairwise.is_empty() {
                return Pairwise(self).pairwise_judge_versions(key, pairwise).await;
            }
            return Err(Error::NotFound(format!("cell {key} has no anchors")));
        }
        let versions = self.store.version_rows().versions(key).await?;
        Ok(anchors
            .into_iter()
            .map(|(_, a)| JudgeVersionSummary {
                calibrated: versions
                    .iter()
                    .find(|v| v.passed() && v.judge_version == a.judge_version)
                    .map(|v| v.version),
                anchors: a,
            })
            .collect())
    }

    /// 404 naming the judge versions the cell's anchors carry, unless each `(version, field)`
    /// is one of them (a misspelt label, or a `#` left unencoded in a URL, would otherwise
    /// read as a version with no scores yet). One store read.
    async fn known_versions(
        &self,
        key: &CellKey,
        asked: &[(Option<&JudgeVersion>, &str)],
    ) -> Result<()> {
        let versions = self
            .store
            .version_rows()
            .judge_versions(&key.judge, Some(&key.rubric))
            .await?;
        let Some(&(missing, field)) = asked.iter().find(|(asked, _)| {
            !versions
                .iter()
                .any(|(_, v)| v.judge_version.as_ref() == *asked)
        }) else {
            return Ok(());
        };
        let known: Vec<String> = versions
            .iter()
            .map(|(_, v)| {
                format!(
                    "{} ({} anchors)",
                    JudgeVersion::describe(v.judge_version.as_ref()),
                    v.anchor_count
                )
            })
            .collect();
        Err(Error::NotFound(if known.is_empty() {
            format!("cell {key} has no anchors")
        } else {
            format!(
                "{field}: cell {key} has no anchors of judge_version {}; its judge versions are {} \
                 (encode a `#` in a label as %23 in a URL)",
                JudgeVersion::describe(missing),
                known.join(", ")
            )
        }))
    }

    /// The calibration trained on `judge_version`: the active version where it was, else the
    /// newest passed one; 409 naming the version where there is none.
    async fn calibration_of(
        &self,
        key: &CellKey,
        judge_version: Option<&JudgeVersion>,
        field: &str,
    ) -> Result<Arc<Loaded>> {
        if let Ok(active) = self.corrector(key, None).await
            && active.version.judge_version.as_ref() == judge_version
        {
            return Ok(active);
        }
        let versions = self.store.version_rows().versions(key).await?;
        match versions
            .iter()
            .find(|v| v.passed() && v.judge_version.as_ref() == judge_version)
        {
            Some(v) => self.corrector(key, Some(v.version)).await,
            None => Err(untrained(field, key, judge_version, "calibration", None)),
        }
    }

    /// Both versions' scores of `items`, corrected by `calibration` and clipped to the scale
    /// as served (off the runtime where the model needs more than look-ups).
    async fn pairs(
        &self,
        key: &CellKey,
        calibration: &Arc<Loaded>,
        items: Vec<SharedItem>,
    ) -> Result<Vec<Pair>> {
        let scale = self.scale_of(&key.rubric).await?;
        let loaded = calibration.clone();
        crate::error::blocking("correcting a bridge's scores", move || {
            let model = &loaded.version;
            // A version trained with covariates reads both scores at the item's covariates; an
            // item lacking one it kept is left out of the bridge.
            let items: Vec<(SharedItem, f64, f64)> = items
                .into_iter()
                .filter_map(|i| {
                    let old = model.layer_score(i.from_score, &i.covariates).ok()?;
                    let new = model.layer_score(i.to_score, &i.covariates).ok()?;
                    Some((i, old, new))
                })
                .collect();
            let old: Vec<f64> = items.iter().map(|i| i.1).collect();
            let new: Vec<f64> = items.iter().map(|i| i.2).collect();
            let clip = |c: judgecal_stats::Corrected| c.clipped((scale.min, scale.max)).score;
            let old_c = model.correct(&old).map_err(Error::Internal)?;
            let new_c = model.correct(&new).map_err(Error::Internal)?;
            Ok(items
                .into_iter()
                .map(|(i, _, _)| i)
                .zip(old_c.into_iter().zip(new_c))
                .map(|(i, (o, n))| Pair {
                    old: i.from_score,
                    new: i.to_score,
                    old_corrected: clip(o),
                    new_corrected: clip(n),
                    group: i.group.map(|g| g.as_str().to_owned()),
                })
                .collect())
        })
        .await?
    }

    /// The bridge from judge version `from` to `to` on the items both scored.
    pub async fn bridge(
        &self,
        key: &CellKey,
        from: Option<&JudgeVersion>,
        to: Option<&JudgeVersion>,
        asked: Option<f64>,
    ) -> Result<BridgeAnswer> {
        if from == to {
            return Err(Error::conflict(
                format!(
                    "to names the same judge version as from ({}): a bridge joins two versions' scores of the same items, \
                     and a re-score under the same label is a silent-change check: POST /v1/cells/{}/{}/checks",
                    JudgeVersion::describe(from),
                    key.judge,
                    key.rubric
                ),
                vec![],
            ));
        }
        let pairwise = Pairwise(self).comparison_versions(key).await?;
        if !pairwise.is_empty() {
            return Pairwise(self)
                .pairwise_bridge(key, &pairwise, from, to, asked)
                .await;
        }
        self.known_versions(key, &[(from, "from"), (to, "to")])
            .await?;
        let scale = self.scale_of(&key.rubric).await?;
        let tolerance = tolerance(asked, scale)?;
        let calibration = self.calibration_of(key, from, "from").await?;
        let shared = self
            .store
            .version_rows()
            .shared_items(key, from, to)
            .await?;
        let pairs = self.pairs(key, &calibration, shared).await?;
        Ok(BridgeAnswer {
            from: from.cloned(),
            to: to.cloned(),
            calibrator: calibration.version.version,
            bridge: bridge::bridge(&pairs, tolerance),
        })
    }

    /// The items a new judge version should re-score, and how many the bridge needs.
    pub async fn rescore(
        &self,
        key: &CellKey,
        to: &JudgeVersion,
        from: Option<Option<&JudgeVersion>>,
        limit: Option<usize>,
    ) -> Result<Rescore> {
        let max = self.limits.max_page_size;
        let limit = limit.unwrap_or(max);
        if limit == 0 || limit > max {
            return Err(refused(vec![Problem::at(
                None,
                "limit",
                format!("must be between 1 and {max}; got {limit}"),
            )]));
        }
        let pairwise = Pairwise(self).comparison_versions(key).await?;
        if !pairwise.is_empty() {
            return Pairwise(self)
                .pairwise_rescore(key, &pairwise, to, from, limit)
                .await;
        }
        let from = match from {
            Some(f) => self.calibration_of(key, f, "from").await?,
            None => self.corrector(key, None).await?,
        };
        let from_version = from.version.judge_version.clone();
        let missing = self.store.version_rows().items_to_rescore(key, to).await?;
        let total = i64::try_from(missing.len()).unwrap_or(i64::MAX);
        let items = spread_sample(missing, limit);
        let shared = self
            .store
            .version_rows()
            .shared_items(key, from_version.as_ref(), Some(to))
            .await?;
        let scale = self.scale_of(&key.rubric).await?;
        let tolerance = TOLERANCE_SHARE * (scale.max - scale.min);
        let n = shared.len();
        let bridge_items = if n >= bridge::MIN_ITEMS {
            let b = bridge::bridge(&self.pairs(key, &from, shared).await?, tolerance);
            match b.verdict {
                Verdict::MoreItems => b.more_items.map(|k| k + n),
                _ => Some(n),
            }
        } else {
            self.planned_from_anchors(key, &from, tolerance).await?
        };
        Ok(Rescore {
            items,
            total,
            shared: n,
            bridge_items,
            tolerance,
            from_calibrator: from.version.version,
            from: from_version,
        })
    }

    /// The shared items a bridge from `from` will need before any are re-scored, planned
    /// from the spread of its corrected anchor scores (those its corrector reads: a covariate
    /// version's layer scores).
    async fn planned_from_anchors(
        &self,
        key: &CellKey,
        from: &Arc<Loaded>,
        tolerance: f64,
    ) -> Result<Option<usize>> {
        let anchors = self
            .store
            .version_rows()
            .judge_anchors(
                &key.judge,
                Some(std::slice::from_ref(&key.rubric)),
                from.version.judge_version.as_ref(),
            )
            .await?;
        // The scores its corrector reads (a covariate version's layer scores).
        let scores: Vec<f64> = anchors
            .iter()
            .flat_map(|(_, a)| a.iter())
            .filter_map(|a| from.version.layer_score(a.judge_score, &a.covariates).ok())
            .collect();
        let loaded = from.clone();
        let corrected: Vec<f64> = crate::error::blocking("planning a bridge", move || {
            loaded
                .version
                .correct(&scores)
                .map(|c| c.into_iter().map(|c| c.score).collect::<Vec<_>>())
        })
        .await?
        .map_err(Error::Internal)?;
        Ok((corrected.len() >= 2)
            .then(|| {
                bridge::planned_items(
                    judgecal_stats::stats::sample_variance(&corrected).sqrt(),
                    tolerance,
                )
            })
            .flatten())
    }

    /// A silent-change check: `items` re-scored under `judge_version`, a label the cell's
    /// anchors already carry, tested as a bridge against the stored scores. Stored apart from
    /// the anchors (never overwriting them); sets `judgecal_judge_changed`.
    pub async fn check(
        &self,
        key: &CellKey,
        judge_version: Option<&JudgeVersion>,
        items: Vec<Rescored>,
        asked: Option<f64>,
    ) -> Result<Check> {
        let pairwise = Pairwise(self).comparison_versions(key).await?;
        if !pairwise.is_empty() {
            return self
                .pairwise()
                .pairwise_check(key, &pairwise, judge_version, items, asked)
                .await;
        }
        let scale = self.scale_of(&key.rubric).await?;
        let tolerance = tolerance(asked, scale)?;
        if items.is_empty() {
            return Err(refused(vec![Problem::at(
                None,
                "items",
                "give at least one re-scored item",
            )]));
        }
        self.known_versions(key, &[(judge_version, "judge_version")])
            .await?;
        let stored = self
            .store
            .version_rows()
            .version_scores(key, judge_version)
            .await?;
        let mut problems = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut shared = Vec::with_capacity(items.len());
        let mut scores = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            if item.verdicts.is_some() {
                problems.push(Problem::at(
                    Some(i + 1),
                    "verdict",
                    format!("cell {key} holds judge scores, not comparisons: re-score the item with judge_score"),
                ));
                continue;
            }
            let Some(judge_score) = item
                .judge_score
                .filter(|s| crate::domain::bounded(*s).is_ok())
            else {
                problems.push(Problem::at(
                    Some(i + 1),
                    "judge_score",
                    if item.judge_score.is_none() {
                        "is missing: a check re-scores anchor items with the judge's new score"
                    } else {
                        "must be a finite number within ±1e9"
                    },
                ));
                continue;
            };
            if !seen.insert(item.item_id.clone()) {
                problems.push(Problem::at(
                    Some(i + 1),
                    "item_id",
                    format!("{:?} appears twice", item.item_id.as_str()),
                ));
                continue;
            }
            match stored.get(&item.item_id) {
                None => problems.push(Problem::at(
                    Some(i + 1),
                    "item_id",
                    format!(
                        "{:?} is not an anchor of cell {key} under judge_version {}: a check re-scores stored anchor items",
                        item.item_id.as_str(),
                        JudgeVersion::describe(judge_version)
                    ),
                )),
                Some(a) => {
                    scores.push((item.item_id.as_str(), judge_score));
                    shared.push(SharedItem {
                    item_id: item.item_id.clone(),
                    from_score: a.judge_score,
                    to_score: judge_score,
                    reference_score: a.reference_score,
                    group: a.group.clone(),
                    covariates: a.covariates.clone(),
                    });
                }
            }
        }
        if !problems.is_empty() {
            return Err(refused(problems));
        }
        // The calibration that serves this label (its own, else the active one): the same map
        // applied to the stored and the new scores.
        let calibration = self.served(key, None, judge_version).await?.loaded;
        let pairs = self.pairs(key, &calibration, shared).await?;
        let answer = BridgeAnswer {
            from: judge_version.cloned(),
            to: judge_version.cloned(),
            calibrator: calibration.version.version,
            bridge: bridge::bridge(&pairs, tolerance).for_check(),
        };
        self.record_check(key, &scores, answer).await
    }

    /// Stores a check's answer with what was re-scored (`scores`) and sets
    /// `judgecal_judge_changed` from it.
    pub(super) async fn record_check(
        &self,
        key: &CellKey,
        scores: &(impl serde::Serialize + ?Sized),
        answer: BridgeAnswer,
    ) -> Result<Check> {
        let finding = answer.bridge.finding();
        let id = self
            .store
            .version_rows()
            .record_check(
                key,
                answer.from.as_ref(),
                scores,
                (&answer.bridge, answer.calibrator),
                finding,
            )
            .await?;
        self.metrics.set_judge_changed(key, finding);
        tracing::info!(cell = %key, finding = finding.gauge(), verdict = answer.bridge.verdict.as_str(), "silent-change check");
        if finding == Finding::Changed {
            Webhooks(self)
                .raise(vec![changed_alarm(key, id, &answer)])
                .await;
        }
        Ok(Check { id, answer })
    }

    /// A cell's check by its id, as it was answered; 404 where the cell holds none.
    pub async fn stored_check(&self, key: &CellKey, id: uuid::Uuid) -> Result<StoredCheck> {
        self.store.version_rows().check(key, id).await?.ok_or_else(|| {
            Error::NotFound(format!(
                "cell {key} has no check {id}; a check's id is in the answer to POST /v1/cells/{}/{}/checks",
                key.judge, key.rubric
            ))
        })
    }

    /// Sets `judgecal_judge_changed` from each cell's latest check, so every replica reports
    /// the same (on the refresh timer).
    pub async fn refresh_checks(&self) -> Result<()> {
        for (key, finding) in self.store.version_rows().latest_checks().await? {
            self.metrics.set_judge_changed(&key, finding);
        }
        Ok(())
    }
}

/// The alarm of a silent-change check that found the judge changed.
fn changed_alarm(key: &CellKey, id: uuid::Uuid, answer: &BridgeAnswer) -> Alarm {
    let b = &answer.bridge;
    Alarm {
        kind: AlarmKind::JudgeChanged,
        id: format!("judge_changed:{id}"),
        cell: Some(key.clone()),
        version: Some(answer.calibrator),
        figures: serde_json::json!({
            "check": id.to_string(),
            "judge_version": answer.to.as_ref().map(|v| v.as_str()),
            "items": b.items,
            "tolerance": b.tolerance,
            "corrected_shift": b.corrected,
            "reversed": b.reversed,
            "verdict": b.verdict.as_str(),
        }),
        link: format!("/v1/cells/{}/{}/checks/{id}", key.judge, key.rubric),
        summary: format!(
            "{key}: the judge changed under the same version label: {}",
            b.reason
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(i: usize, group: Option<&str>) -> (ItemId, Option<GroupName>) {
        (
            ItemId::parse(&format!("item-{i:04}")).unwrap(),
            group.map(|g| GroupName::parse(g).unwrap()),
        )
    }

    /// 36 items of a cell whose ids run system by system: the list takes every system in
    /// turn, the same list on every call, and the ungrouped items as one more group.
    #[test]
    fn the_rescore_list_spreads_over_systems_and_is_stable() {
        let mut items: Vec<_> = (0..300)
            .map(|i| item(i, Some(["a", "b", "c"][i / 100])))
            .collect();
        items.extend((300..310).map(|i| item(i, None)));
        let list = spread_sample(items.clone(), 36);
        assert_eq!(list.len(), 36);
        let group_of = |id: &ItemId| items.iter().find(|(i, _)| i == id).unwrap().1.clone();
        let mut counts = std::collections::HashMap::new();
        for id in &list {
            *counts.entry(group_of(id)).or_insert(0) += 1;
        }
        assert_eq!(counts.len(), 4, "{counts:?}");
        assert!(counts.values().all(|&n| n == 9), "{counts:?}");
        // Not the first ids of each system: a hash order.
        assert!(
            list.iter()
                .any(|i| i.as_str() > "item-0050" && i.as_str() < "item-0100")
        );
        let mut reversed = items.clone();
        reversed.reverse();
        assert_eq!(spread_sample(reversed, 36), list);
        // Re-scoring a listed item drops it; the other systems' items stay as they were.
        let first = list.iter().find(|i| group_of(i).is_some()).unwrap().clone();
        let rest: Vec<_> = items.iter().filter(|(i, _)| *i != first).cloned().collect();
        let again = spread_sample(rest, 35);
        assert!(!again.contains(&first));
        let of = |l: &[ItemId], g: &str| -> Vec<ItemId> {
            l.iter()
                .filter(|i| group_of(i).as_ref().map(GroupName::as_str) == Some(g))
                .cloned()
                .collect()
        };
        let moved = group_of(&first).unwrap();
        // The others keep their order (one may give the dropped item's place to its next).
        for g in ["a", "b", "c"].into_iter().filter(|g| *g != moved.as_str()) {
            let (now, before) = (of(&again, g), of(&list, g));
            assert!(
                now.starts_with(&before) || before.starts_with(&now),
                "{g}: {now:?} {before:?}"
            );
        }
        assert!(spread_sample(Vec::new(), 5).is_empty());
    }
}

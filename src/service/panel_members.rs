//! Which member judge versions a panel's requests are read as, and the panel version that
//! serves them: untagged requests stay with a version trained on the members' defaults.

use super::families::Panels;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::domain::calibration::CalibratorVersion;
use crate::domain::panel::Panel;
use crate::domain::{CellKey, JudgeName, JudgeVersion, RubricName};
use crate::error::Result;
use judgecal_stats::warning::{Code, Warning};

/// Each member's judge version, as a panel's requests read it.
pub(super) type Defaults = Vec<(JudgeName, Option<JudgeVersion>)>;

/// What a panel's requests rest on, from memory so that a panel's `/v1/correct` reads no
/// store: the panel as defined (`None`: deleted), its members' defaults, and per rubric the
/// version its untagged requests stay with. Cleared by this process's uploads, activations,
/// trainings and panel changes, and on every refresh (so other processes' within
/// `calibrators.refresh_millis`).
#[derive(Default)]
pub(super) struct Memo(RwLock<HashMap<JudgeName, Arc<Serving>>>);

pub(super) struct Serving {
    pub panel: Option<Panel>,
    pub defaults: Option<Defaults>,
    kept: RwLock<HashMap<RubricName, Option<i64>>>,
}

impl Memo {
    pub(super) fn clear(&self) {
        if let Ok(mut m) = self.0.write() {
            m.clear();
        }
    }
}

impl Panels<'_> {
    /// A panel as its requests see it (see `Memo`); the store's read where this process holds
    /// none.
    pub(super) async fn panel_serving(&self, judge: &JudgeName) -> Result<Arc<Serving>> {
        if let Some(s) = self
            .panel_memo
            .0
            .read()
            .ok()
            .and_then(|m| m.get(judge).cloned())
        {
            return Ok(s);
        }
        let panel = self.store.panel_rows().panel(judge).await?;
        let defaults = match &panel {
            Some(p) => self.member_versions(p, &[]).await.ok(),
            None => None,
        };
        let serving = Arc::new(Serving {
            panel,
            defaults,
            kept: RwLock::default(),
        });
        if let Ok(mut m) = self.panel_memo.0.write() {
            m.insert(judge.clone(), serving.clone());
        }
        Ok(serving)
    }

    /// The member judge versions a panel's requests are read as (the ones a panel training fits
    /// by default: each member's unversioned anchors where it has any, else its only judge
    /// version, else the one its active calibrations were trained on); `None` for a judge's
    /// version, or where the defaults cannot be resolved (a member with no anchors, or several
    /// versions none of which serves alone: the training would have asked).
    pub(super) async fn panel_defaults(
        &self,
        version: &CalibratorVersion,
    ) -> Result<Option<Defaults>> {
        if version.fusion.is_none() {
            return Ok(None);
        }
        Ok(self
            .panel_serving(&version.key.judge)
            .await?
            .defaults
            .clone())
    }

    /// The newest passed version of a panel's cell trained on `defaults`, where there is one.
    pub(super) async fn newest_on_defaults(
        &self,
        key: &CellKey,
        defaults: &[(JudgeName, Option<JudgeVersion>)],
    ) -> Result<Option<i64>> {
        let serving = self.panel_serving(&key.judge).await?;
        if let Some(kept) = serving
            .kept
            .read()
            .ok()
            .and_then(|k| k.get(&key.rubric).copied())
        {
            return Ok(kept);
        }
        let kept = self
            .store
            .version_rows()
            .versions(key)
            .await?
            .into_iter()
            .find(|v| v.passed() && on_defaults(v, defaults))
            .map(|v| v.version);
        if let Ok(mut k) = serving.kept.write() {
            k.insert(key.rubric.clone(), kept);
        }
        Ok(kept)
    }
}

/// Each member whose judge version a panel's version was trained on differs from the one the
/// panel's requests are read as: (member, trained on, read as).
pub(super) fn member_differences<'a>(
    version: &'a CalibratorVersion,
    defaults: &[(JudgeName, Option<JudgeVersion>)],
) -> Vec<(&'a str, Option<&'a str>, Option<String>)> {
    let Some(fusion) = version.fusion.as_ref() else {
        return Vec::new();
    };
    let mut differ = Vec::new();
    for (member, trained) in fusion.members.iter().zip(&fusion.member_versions) {
        let Some((_, now)) = defaults.iter().find(|(j, _)| j.as_str() == member) else {
            continue;
        };
        let now = now.as_ref().map(|v| v.as_str().to_owned());
        if now.as_deref() != trained.as_deref() {
            differ.push((member.as_str(), trained.as_deref(), now));
        }
    }
    differ
}

fn on_defaults(v: &CalibratorVersion, defaults: &[(JudgeName, Option<JudgeVersion>)]) -> bool {
    let Some(fusion) = v.fusion.as_ref() else {
        return false;
    };
    fusion
        .members
        .iter()
        .zip(&fusion.member_versions)
        .all(|(member, trained)| {
            defaults
                .iter()
                .find(|(j, _)| j.as_str() == member)
                .is_none_or(|(_, now)| now.as_ref().map(|n| n.as_str()) == trained.as_deref())
        })
}

/// The warning a panel's answer carries where its version (pinned, or the only one there
/// is) was trained on member versions other than the ones its requests are read as.
pub(super) fn member_warning(
    version: &CalibratorVersion,
    defaults: &[(JudgeName, Option<JudgeVersion>)],
) -> Option<Warning> {
    let differ = member_differences(version, defaults);
    if differ.is_empty() {
        return None;
    }
    let said: Vec<String> = differ
        .iter()
        .map(|(m, trained, now)| {
            format!(
                "{m}: trained on judge_version {}, its untagged scores read as {}",
                trained.unwrap_or("(none)"),
                now.as_deref().unwrap_or("(none)")
            )
        })
        .collect();
    Some(
        Warning::new(
            Code::MemberVersionMismatch,
            format!(
                "version {} of panel {} was trained on member judge versions other than those the panel's requests \
                 are read as ({}): the members' scores in this request were corrected as those versions' scores; \
                 if they are not, train the panel on the members' defaults (POST /v1/judges/{}/calibrations without \
                 member_versions) or pin a version trained on them (`version`)",
                version.version,
                version.key.judge,
                said.join("; "),
                version.key.judge
            ),
        )
        .at("scores"),
    )
}

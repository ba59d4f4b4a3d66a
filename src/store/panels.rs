//! Panels (`domain::panel`): defined once under a name no judge's anchors use, listed, read
//! and deleted. A panel's versions live in cells of its own, made when its first version is
//! stored.

use super::families::PanelRows;
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::domain::panel::{NewPanel, Panel};
use crate::domain::{JudgeName, now_ms};
use crate::error::{Error, Result};

fn panel_of(r: &AnyRow) -> Result<Panel> {
    let corrupt = || Error::Internal("a stored panel is unreadable".into());
    let name: String = r.try_get("name")?;
    let judges: Vec<String> =
        serde_json::from_str(&r.try_get::<String, _>("judges")?).map_err(|_| corrupt())?;
    Ok(Panel {
        name: JudgeName::parse(&name).map_err(|_| corrupt())?,
        judges: judges
            .iter()
            .map(|j| JudgeName::parse(j).map_err(|_| corrupt()))
            .collect::<Result<_>>()?,
        created_at_ms: r.try_get("created_at_ms")?,
    })
}

impl PanelRows<'_> {
    /// Stores a new panel. 409 when the name is a panel already or a judge with anchors, or
    /// when a member is itself a panel.
    pub async fn create_panel(&self, new: &NewPanel) -> Result<Panel> {
        let mut tx = self.pool.begin().await?;
        let judged: i64 = sqlx::query(
            "SELECT COUNT(*) FROM anchors a JOIN cells c ON c.id = a.cell_id WHERE c.judge = $1",
        )
        .bind(new.name.as_str())
        .fetch_one(&mut *tx)
        .await?
        .try_get(0)?;
        if judged > 0 {
            return Err(Error::conflict(
                format!(
                    "{} is a judge with {judged} anchors: a panel's name serves wherever a judge's does, so it must be one no judge uses",
                    new.name
                ),
                vec![],
            ));
        }
        for (i, j) in new.judges.iter().enumerate() {
            let nested = sqlx::query("SELECT name FROM panels WHERE name = $1")
                .bind(j.as_str())
                .fetch_optional(&mut *tx)
                .await?;
            if nested.is_some() {
                return Err(Error::conflict(
                    format!("judges[{i}]: {j} is a panel; a panel's members are judges"),
                    vec![],
                ));
            }
        }
        let now = now_ms();
        let judges: Vec<&str> = new.judges.iter().map(JudgeName::as_str).collect();
        let judges = serde_json::to_string(&judges)
            .map_err(|e| Error::Internal(format!("cannot encode a panel: {e}")))?;
        let inserted = sqlx::query(
            "INSERT INTO panels (name, judges, created_at_ms) VALUES ($1, $2, $3)
             ON CONFLICT (name) DO NOTHING",
        )
        .bind(new.name.as_str())
        .bind(judges)
        .bind(now)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if inserted != 1 {
            return Err(Error::conflict(
                format!(
                    "a panel named {} exists; delete it first (DELETE /v1/panels/{})",
                    new.name, new.name
                ),
                vec![],
            ));
        }
        tx.commit().await?;
        Ok(Panel {
            name: new.name.clone(),
            judges: new.judges.clone(),
            created_at_ms: now,
        })
    }

    pub async fn panels(&self) -> Result<Vec<Panel>> {
        sqlx::query("SELECT name, judges, created_at_ms FROM panels ORDER BY name")
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(panel_of)
            .collect()
    }

    pub async fn panel(&self, name: &JudgeName) -> Result<Option<Panel>> {
        sqlx::query("SELECT name, judges, created_at_ms FROM panels WHERE name = $1")
            .bind(name.as_str())
            .fetch_optional(&self.pool)
            .await?
            .as_ref()
            .map(panel_of)
            .transpose()
    }

    /// Deletes the panel's definition; its versions stay, as every version does, and serve
    /// again only if a panel of the same name and members is defined. `false` when there was
    /// none.
    pub async fn delete_panel(&self, name: &JudgeName) -> Result<bool> {
        Ok(sqlx::query("DELETE FROM panels WHERE name = $1")
            .bind(name.as_str())
            .execute(&self.pool)
            .await?
            .rows_affected()
            == 1)
    }
}

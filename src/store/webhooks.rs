//! Webhooks and their deliveries: the log of every alarm posted and the queue of those still
//! to send are one table, so what the log says is what was sent.

use sqlx::Row;
use sqlx::any::AnyRow;

use super::families::WebhookRows;
use crate::error::Result;

/// The id of the webhook `webhooks.url` configures.
pub const CONFIGURED: &str = "configured";

#[derive(Debug, Clone, PartialEq)]
pub struct StoredWebhook {
    pub id: String,
    pub url: String,
    pub secret: String,
    /// The event types it receives; empty: every one.
    pub events: Vec<String>,
    /// The prefix of the key that made it; `None` for the configured one.
    pub owner: Option<String>,
    pub created_at_ms: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    pub id: String,
    pub webhook_id: String,
    pub event_id: String,
    pub event: String,
    pub payload: String,
    pub state: String,
    pub attempts: i64,
    pub next_attempt_at_ms: i64,
    pub last_status: Option<i64>,
    pub last_error: Option<String>,
    pub created_at_ms: i64,
    pub delivered_at_ms: Option<i64>,
}

/// A delivery claimed for one attempt, with what signing and sending it needs.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub delivery: Delivery,
    pub url: String,
    pub secret: String,
}

/// What an attempt came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Attempt {
    Delivered {
        status: i64,
    },
    /// Failed; sent again at `retry_at_ms`, or never (`None`: attempts exhausted).
    Failed {
        status: Option<i64>,
        error: String,
        retry_at_ms: Option<i64>,
    },
}

const HOOK_COLUMNS: &str = "id, url, secret, events, owner, created_at_ms";
const DELIVERY_COLUMNS: &str = "id, webhook_id, event_id, event, payload, state, attempts, \
     next_attempt_at_ms, last_status, last_error, created_at_ms, delivered_at_ms";

fn hook_from_row(r: &AnyRow) -> Result<StoredWebhook> {
    let events: String = r.try_get(3)?;
    Ok(StoredWebhook {
        id: r.try_get(0)?,
        url: r.try_get(1)?,
        secret: r.try_get(2)?,
        events: events
            .split(',')
            .filter(|e| !e.is_empty())
            .map(str::to_owned)
            .collect(),
        owner: r.try_get(4)?,
        created_at_ms: r.try_get(5)?,
    })
}

fn delivery_from_row(r: &AnyRow) -> Result<Delivery> {
    Ok(Delivery {
        id: r.try_get(0)?,
        webhook_id: r.try_get(1)?,
        event_id: r.try_get(2)?,
        event: r.try_get(3)?,
        payload: r.try_get(4)?,
        state: r.try_get(5)?,
        attempts: r.try_get(6)?,
        next_attempt_at_ms: r.try_get(7)?,
        last_status: r.try_get(8)?,
        last_error: r.try_get(9)?,
        created_at_ms: r.try_get(10)?,
        delivered_at_ms: r.try_get(11)?,
    })
}

impl WebhookRows<'_> {
    pub async fn insert_webhook(&self, hook: &StoredWebhook) -> Result<()> {
        sqlx::query(
            "INSERT INTO webhooks (id, url, secret, events, owner, created_at_ms)
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&hook.id)
        .bind(&hook.url)
        .bind(&hook.secret)
        .bind(hook.events.join(","))
        .bind(&hook.owner)
        .bind(hook.created_at_ms)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Makes the configured webhook say what the settings say (`hook`), or deletes it
    /// (`None`); its log stays.
    pub async fn configure(&self, hook: Option<&StoredWebhook>, now_ms: i64) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        match hook {
            Some(h) => {
                sqlx::query(
                    "INSERT INTO webhooks (id, url, secret, events, owner, created_at_ms)
                     VALUES ($1, $2, $3, $4, NULL, $5)
                     ON CONFLICT (id) DO UPDATE SET url = excluded.url,
                         secret = excluded.secret, events = excluded.events, deleted_at_ms = NULL",
                )
                .bind(CONFIGURED)
                .bind(&h.url)
                .bind(&h.secret)
                .bind(h.events.join(","))
                .bind(now_ms)
                .execute(&mut *tx)
                .await?;
            }
            None => {
                sqlx::query(
                    "UPDATE webhooks SET deleted_at_ms = $1 WHERE id = $2 AND deleted_at_ms IS NULL",
                )
                .bind(now_ms)
                .bind(CONFIGURED)
                .execute(&mut *tx)
                .await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }

    /// The hooks not deleted, oldest first.
    pub async fn webhooks(&self) -> Result<Vec<StoredWebhook>> {
        let sql = format!(
            "SELECT {HOOK_COLUMNS} FROM webhooks WHERE deleted_at_ms IS NULL
             ORDER BY created_at_ms, id"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(hook_from_row).collect()
    }

    /// The hooks an alarm reaches now: not deleted, and configured or made by a key that is
    /// neither revoked nor expired at `now_ms`.
    pub async fn live_webhooks(&self, now_ms: i64) -> Result<Vec<StoredWebhook>> {
        let sql = format!(
            "SELECT {HOOK_COLUMNS} FROM webhooks w
             WHERE deleted_at_ms IS NULL AND (owner IS NULL OR EXISTS (
                 SELECT 1 FROM api_keys k WHERE k.prefix = w.owner AND k.revoked_at_ms IS NULL
                     AND (k.expires_at_ms IS NULL OR k.expires_at_ms > $1)))
             ORDER BY created_at_ms, id"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(now_ms)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(hook_from_row).collect()
    }

    /// A hook by id; a deleted one too where `deleted` (its log stays readable).
    pub async fn webhook(&self, id: &str, deleted: bool) -> Result<Option<StoredWebhook>> {
        let live = if deleted {
            ""
        } else {
            "AND deleted_at_ms IS NULL"
        };
        let sql = format!("SELECT {HOOK_COLUMNS} FROM webhooks WHERE id = $1 {live}");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(hook_from_row).transpose()
    }

    /// Deletes a hook: it receives nothing new; deliveries still queued are dropped (marked
    /// `cancelled`), and its log stays readable by id.
    pub async fn delete_webhook(&self, id: &str, now_ms: i64) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        let deleted = sqlx::query(
            "UPDATE webhooks SET deleted_at_ms = $1 WHERE id = $2 AND deleted_at_ms IS NULL",
        )
        .bind(now_ms)
        .bind(id)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        sqlx::query(
            "UPDATE webhook_deliveries SET state = 'cancelled' WHERE webhook_id = $1 AND state = 'pending'",
        )
        .bind(id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(deleted)
    }

    /// Queues `event_id` for `webhook_id` unless it was queued before; true when it is new.
    pub async fn enqueue(
        &self,
        webhook_id: &str,
        event_id: &str,
        event: &str,
        payload: &str,
        now_ms: i64,
    ) -> Result<bool> {
        let added = sqlx::query(
            "INSERT INTO webhook_deliveries (id, webhook_id, event_id, event, payload, state,
                 attempts, next_attempt_at_ms, created_at_ms)
             VALUES ($1, $2, $3, $4, $5, 'pending', 0, $6, $6)
             ON CONFLICT (webhook_id, event_id) DO NOTHING",
        )
        .bind(uuid::Uuid::new_v4().to_string())
        .bind(webhook_id)
        .bind(event_id)
        .bind(event)
        .bind(payload)
        .bind(now_ms)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(added == 1)
    }

    /// Claims up to `limit` due deliveries for one attempt each: a claimed row's next attempt
    /// moves to `until_ms`, so no other sender takes it while this one tries (and, should this
    /// process die, it is sent again then).
    pub async fn claim_due(&self, now_ms: i64, until_ms: i64, limit: i64) -> Result<Vec<Claimed>> {
        let sql = format!(
            "SELECT d.{}, w.url, w.secret FROM webhook_deliveries d
             JOIN webhooks w ON w.id = d.webhook_id
             WHERE d.state = 'pending' AND d.next_attempt_at_ms <= $1
             ORDER BY d.next_attempt_at_ms, d.id LIMIT $2",
            DELIVERY_COLUMNS.replace(", ", ", d.")
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(now_ms)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        let mut claimed = Vec::new();
        for r in &rows {
            let delivery = delivery_from_row(r)?;
            let taken = sqlx::query(
                "UPDATE webhook_deliveries SET next_attempt_at_ms = $1
                 WHERE id = $2 AND state = 'pending' AND next_attempt_at_ms = $3",
            )
            .bind(until_ms)
            .bind(&delivery.id)
            .bind(delivery.next_attempt_at_ms)
            .execute(&self.pool)
            .await?
            .rows_affected()
                == 1;
            if taken {
                claimed.push(Claimed {
                    delivery,
                    url: r.try_get(12)?,
                    secret: r.try_get(13)?,
                });
            }
        }
        Ok(claimed)
    }

    /// Records an attempt of a claimed delivery.
    pub async fn record_attempt(&self, id: &str, attempt: &Attempt, now_ms: i64) -> Result<()> {
        let query = match attempt {
            Attempt::Delivered { status } => sqlx::query(
                "UPDATE webhook_deliveries SET state = 'delivered', attempts = attempts + 1,
                     last_status = $1, last_error = NULL, delivered_at_ms = $2
                 WHERE id = $3 AND state = 'pending'",
            )
            .bind(*status)
            .bind(now_ms)
            .bind(id),
            Attempt::Failed {
                status,
                error,
                retry_at_ms,
            } => sqlx::query(
                "UPDATE webhook_deliveries SET attempts = attempts + 1, last_status = $1,
                     last_error = $2, state = $3, next_attempt_at_ms = $4
                 WHERE id = $5 AND state = 'pending'",
            )
            .bind(*status)
            .bind(error.as_str())
            .bind(if retry_at_ms.is_some() {
                "pending"
            } else {
                "failed"
            })
            .bind(retry_at_ms.unwrap_or(now_ms))
            .bind(id),
        };
        query.execute(&self.pool).await?;
        Ok(())
    }

    /// A hook's deliveries, newest first, at most `limit`; of one state where given.
    pub async fn deliveries(
        &self,
        webhook_id: &str,
        state: Option<&str>,
        limit: i64,
    ) -> Result<Vec<Delivery>> {
        // The state is one of a fixed few, checked by the caller; bound, never written in.
        let of_state = if state.is_some() {
            "AND state = $3"
        } else {
            "AND $3 = ''"
        };
        let sql = format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries
             WHERE webhook_id = $1 {of_state}
             ORDER BY created_at_ms DESC, id DESC LIMIT $2"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(webhook_id)
            .bind(limit)
            .bind(state.unwrap_or(""))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(delivery_from_row).collect()
    }
}

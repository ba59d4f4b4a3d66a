//! API keys, stored as SHA-256 hashes: the key itself is shown once, at creation. A key may
//! expire, and may be revoked; neither is ever deleted, so `keys list` shows what each was.

use super::families::KeyRows;
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::error::Result;

#[derive(Debug, Clone, PartialEq)]
pub struct StoredKey {
    pub id: String,
    pub prefix: String,
    pub scopes: String,
    pub name: String,
    pub created_at_ms: i64,
    /// When it stops working, where it was created with an expiry.
    pub expires_at_ms: Option<i64>,
    /// When it was revoked.
    pub revoked_at_ms: Option<i64>,
}

const COLUMNS: &str = "id, prefix, scopes, name, created_at_ms, expires_at_ms, revoked_at_ms";

fn key_from_row(r: &AnyRow) -> Result<StoredKey> {
    Ok(StoredKey {
        id: r.try_get(0)?,
        prefix: r.try_get(1)?,
        scopes: r.try_get(2)?,
        name: r.try_get(3)?,
        created_at_ms: r.try_get(4)?,
        expires_at_ms: r.try_get(5)?,
        revoked_at_ms: r.try_get(6)?,
    })
}

impl KeyRows<'_> {
    pub async fn insert_key(&self, key: &StoredKey, hash: &str) -> Result<()> {
        sqlx::query(
            "INSERT INTO api_keys (id, key_hash, prefix, scopes, name, created_at_ms, expires_at_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&key.id)
        .bind(hash)
        .bind(&key.prefix)
        .bind(&key.scopes)
        .bind(&key.name)
        .bind(key.created_at_ms)
        .bind(key.expires_at_ms)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn key_by_hash(&self, hash: &str) -> Result<Option<StoredKey>> {
        let sql = format!("SELECT {COLUMNS} FROM api_keys WHERE key_hash = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(hash)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(key_from_row).transpose()
    }

    /// Every key, oldest first.
    pub async fn keys(&self) -> Result<Vec<StoredKey>> {
        let sql = format!("SELECT {COLUMNS} FROM api_keys ORDER BY created_at_ms, id");
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(key_from_row).collect()
    }

    /// Revokes the keys whose hash is `hash`, or whose prefix or name is `label`, that are not
    /// revoked yet; returns those revoked.
    pub async fn revoke_keys(
        &self,
        hash: &str,
        label: &str,
        now_ms: i64,
    ) -> Result<Vec<StoredKey>> {
        let mut tx = self.pool.begin().await?;
        let sql = format!(
            "SELECT {COLUMNS} FROM api_keys
             WHERE (key_hash = $1 OR prefix = $2 OR (name = $3 AND name <> ''))
                 AND revoked_at_ms IS NULL
             ORDER BY created_at_ms, id"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(hash)
            .bind(label)
            .bind(label)
            .fetch_all(&mut *tx)
            .await?;
        let mut revoked = rows.iter().map(key_from_row).collect::<Result<Vec<_>>>()?;
        for key in &mut revoked {
            sqlx::query("UPDATE api_keys SET revoked_at_ms = $1 WHERE id = $2")
                .bind(now_ms)
                .bind(&key.id)
                .execute(&mut *tx)
                .await?;
            key.revoked_at_ms = Some(now_ms);
        }
        tx.commit().await?;
        Ok(revoked)
    }
}

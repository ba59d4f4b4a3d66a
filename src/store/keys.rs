//! API keys, stored as SHA-256 hashes: the key itself is shown once, at creation.

use sqlx::Row;

use super::Store;
use crate::error::Result;

#[derive(Debug, Clone, PartialEq)]
pub struct StoredKey {
    pub id: String,
    pub prefix: String,
    pub scopes: String,
}

impl Store {
    pub async fn insert_key(
        &self,
        key: &StoredKey,
        hash: &str,
        name: &str,
        created_at_ms: i64,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO api_keys (id, key_hash, prefix, scopes, name, created_at_ms)
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&key.id)
        .bind(hash)
        .bind(&key.prefix)
        .bind(&key.scopes)
        .bind(name)
        .bind(created_at_ms)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn key_by_hash(&self, hash: &str) -> Result<Option<StoredKey>> {
        let row = sqlx::query("SELECT id, prefix, scopes FROM api_keys WHERE key_hash = $1")
            .bind(hash)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| {
            Ok(StoredKey {
                id: r.try_get(0)?,
                prefix: r.try_get(1)?,
                scopes: r.try_get(2)?,
            })
        })
        .transpose()
    }
}

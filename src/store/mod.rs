//! Storage over sqlx's `Any` driver: the same queries run on Postgres (production) and SQLite
//! (the embedded default). Returns domain types, never rows.
//!
//! Notes on the `Any` driver (see ../shared/NOTES.md): it decodes only bool, integers, floats,
//! text and bytes, so ids are UUID text and times are Unix milliseconds; `$N` placeholders work
//! on both backends.

mod anchors;
mod calibrators;
mod checks;
mod coverage;
mod jobs;
mod judge_versions;
mod keys;
mod panels;
mod rank_sessions;

pub use anchors::CellIngest;
pub use checks::StoredCheck;
pub use coverage::{BatchCoverage, CellMisses, CoverageWindow};
pub use jobs::{ClaimedJob, FinishedJob, Lease};
pub use judge_versions::{SharedItem, VersionAnchors};
pub use keys::StoredKey;

use std::path::Path;

use sqlx::any::AnyPoolOptions;
use sqlx::migrate::Migrator;
use sqlx::{AnyPool, Row};

use crate::error::Result;

static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

#[derive(Clone)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
}

impl Store {
    /// Connects to `url`. For SQLite the file and its folder are created when missing, and the
    /// database is put in WAL mode so readers do not wait on the writer.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self> {
        sqlx::any::install_default_drivers();
        let backend = if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else {
            Backend::Postgres
        };
        let mut url = url.to_owned();
        if backend == Backend::Sqlite {
            let path = url
                .trim_start_matches("sqlite:")
                .trim_start_matches("//")
                .split('?')
                .next()
                .unwrap_or_default()
                .to_owned();
            if let Some(parent) = Path::new(&path)
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
            {
                std::fs::create_dir_all(parent).map_err(|e| {
                    crate::Error::Internal(format!("cannot create {}: {e}", parent.display()))
                })?;
            }
            if !url.contains("mode=") {
                url.push_str(if url.contains('?') {
                    "&mode=rwc"
                } else {
                    "?mode=rwc"
                });
            }
        }
        let pool = AnyPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(std::time::Duration::from_secs(10))
            .connect(&url)
            .await?;
        if backend == Backend::Sqlite {
            sqlx::query("PRAGMA journal_mode = WAL")
                .execute(&pool)
                .await?;
        }
        Ok(Self { pool, backend })
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    pub async fn migrate(&self) -> Result<()> {
        MIGRATOR.run(&self.pool).await?;
        Ok(())
    }

    /// True when the store answers and every migration this build knows has been applied.
    pub async fn ready(&self) -> Result<bool> {
        let applied: Vec<i64> =
            match sqlx::query("SELECT version FROM _sqlx_migrations WHERE success = TRUE")
                .fetch_all(&self.pool)
                .await
            {
                Ok(rows) => rows
                    .iter()
                    .map(|r| r.try_get(0))
                    .collect::<Result<_, _>>()?,
                // No migrations table yet: reachable, but not migrated.
                Err(sqlx::Error::Database(_)) => return Ok(false),
                Err(e) => return Err(e.into()),
            };
        Ok(MIGRATOR.iter().all(|m| applied.contains(&m.version)))
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// `($1,$2,$3),($4,$5,$6)...`: the placeholder list of a multi-row statement. Only the shape is
/// formatted; every value is bound.
fn placeholder_rows(rows: usize, columns: usize, first: usize) -> String {
    let mut s = String::with_capacity(rows * columns * 6);
    for r in 0..rows {
        if r > 0 {
            s.push(',');
        }
        s.push('(');
        for c in 0..columns {
            if c > 0 {
                s.push(',');
            }
            s.push('$');
            s.push_str(&(first + r * columns + c).to_string());
        }
        s.push(')');
    }
    s
}

/// `$2,$3,$4`: the placeholders of an `IN (...)` list of `n` values from `$first`.
fn placeholder_list(n: usize, first: usize) -> String {
    (first..first + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    #[test]
    fn placeholders_number_rows_then_columns() {
        assert_eq!(super::placeholder_rows(2, 2, 3), "($3,$4),($5,$6)");
        assert_eq!(super::placeholder_list(3, 2), "$2,$3,$4");
    }
}

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
mod families;
mod jobs;
mod judge_versions;
mod keys;
mod pairwise;
mod panels;
mod pending_checks;
mod rank_sessions;
mod webhooks;
mod writer;

pub use anchors::CellIngest;
pub use checks::StoredCheck;
pub use coverage::{BatchCoverage, CellMisses, CoverageWindow};
pub use families::{
    DriftRows, JobRows, KeyRows, PairwiseRows, PanelRows, SessionRows, VersionRows, WebhookRows,
};
pub use jobs::{ClaimedJob, FinishedJob, Lease};
pub use judge_versions::{SharedItem, VersionAnchors};
pub use keys::StoredKey;
pub use pairwise::comparisons::ComparisonIngest;
pub use pairwise::versions::ComparisonCell;
pub use pending_checks::PendingCheck;
pub use rank_sessions::Recorded;
pub use webhooks::{Attempt, CONFIGURED, Claimed, Delivery, StoredWebhook};

use std::path::Path;

use sqlx::any::AnyPoolOptions;
use sqlx::migrate::Migrator;
use sqlx::{AnyPool, Row};

use crate::error::{Error, Result};

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
    /// database is put in WAL mode so readers do not wait on the writer. A request waits at most
    /// `acquire_timeout` for a connection (then `Error::Storage` of a timed-out pool, which
    /// `http` answers 503). A server that cannot be reached is named, without its password.
    pub async fn connect(
        url: &str,
        max_connections: u32,
        acquire_timeout: std::time::Duration,
    ) -> Result<Self> {
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
            .acquire_timeout(acquire_timeout)
            .connect(&url)
            .await
            .map_err(|e| {
                crate::Error::Internal(format!(
                    "cannot connect to the database at {} (database.url): {e}",
                    redacted(&url)
                ))
            })?;
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

/// `url` without its password, for messages: `postgres://user@host:port/db`.
pub fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let authority = match authority.rsplit_once('@') {
        Some((user, host)) => format!("{}@{host}", user.split(':').next().unwrap_or("")),
        None => authority.to_owned(),
    };
    let path = path.split('?').next().unwrap_or("");
    format!("{scheme}://{authority}{path}")
}

/// Whether a store failure is the store being out of reach (a connection refused, cut or timed
/// out, the pool exhausted past its wait): retrying later may succeed, so `http` answers 503
/// with Retry-After instead of 500.
pub fn unreachable(e: &sqlx::Error) -> bool {
    matches!(
        e,
        sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::WorkerCrashed
    )
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

/// A statement of many bound values in the form its backend binds fastest. Each `$n`
/// placeholder of `sql` must appear once, in order (`$1`, `$2`, ...): then on SQLite they
/// become anonymous `?`s, bound in the same order. (sqlx binds a numbered SQLite parameter by
/// looking its name up, and SQLite's look-up walks the statement's parameter list, so a
/// statement of 9,000 numbered values cost 40 million steps to bind: 100,000 anchors took
/// 15 s to store on SQLite, most of it here.)
fn many_values(backend: Backend, sql: String) -> sqlx::AssertSqlSafe<String> {
    if backend == Backend::Postgres {
        return sqlx::AssertSqlSafe(sql);
    }
    let mut out = String::with_capacity(sql.len());
    let mut next = 1usize;
    let mut rest = sql.as_str();
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let digits = rest[at + 1..]
            .find(|c: char| !c.is_ascii_digit())
            .map_or(rest.len() - at - 1, |n| n);
        let number = &rest[at + 1..at + 1 + digits];
        assert_eq!(
            number.parse::<usize>().ok(),
            Some(next),
            "placeholders of a many-values statement are $1, $2, ... in order: {sql}"
        );
        out.push('?');
        next += 1;
        rest = &rest[at + 1 + digits..];
    }
    out.push_str(rest);
    sqlx::AssertSqlSafe(out)
}

/// Items looked up by one statement on SQLite.
const ITEM_CHUNK: usize = 1000;

/// The statements that touch the rows of `table` (as `t`) matching `filter` (on `t`, binding
/// `$1..=$fixed`) whose item is one of `items`, each with the values to bind after the fixed
/// ones; `action` is `SELECT <columns of t>` or `DELETE`. Postgres joins one JSON array of the
/// items, so each is found through the (cell, item) index whatever the planner knows of the
/// table: an `IN` list of 1,000 bound values was instead tested against every stored row of
/// the cell while the table had no statistics (a 100,000-row upload into a cell of 700,000
/// took minutes). SQLite looks them up in `IN` lists, which it always reads by the index.
fn by_items(
    backend: Backend,
    action: &str,
    table: &str,
    filter: &str,
    fixed: usize,
    items: &[&str],
) -> Result<Vec<(sqlx::AssertSqlSafe<String>, Vec<String>)>> {
    let param = fixed + 1;
    if backend == Backend::Postgres {
        let list = serde_json::to_string(items)
            .map_err(|e| Error::Internal(format!("encoding a list of items: {e}")))?;
        let wanted = format!("json_array_elements_text(${param}::json) AS wanted(item_id)");
        let sql = if action == "DELETE" {
            format!(
                "DELETE FROM {table} AS t USING {wanted} WHERE {filter} AND t.item_id = wanted.item_id"
            )
        } else {
            format!(
                "{action} FROM {wanted} JOIN {table} AS t ON {filter} AND t.item_id = wanted.item_id"
            )
        };
        return Ok(vec![(sqlx::AssertSqlSafe(sql), vec![list])]);
    }
    Ok(items
        .chunks(ITEM_CHUNK)
        .map(|chunk| {
            let sql = format!(
                "{action} FROM {table} AS t WHERE {filter} AND t.item_id IN ({})",
                placeholder_list(chunk.len(), param)
            );
            (
                many_values(backend, sql),
                chunk.iter().map(|i| (*i).to_owned()).collect(),
            )
        })
        .collect())
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
    fn urls_lose_their_password_in_messages() {
        assert_eq!(
            super::redacted("postgres://app:s3cret@db.internal:5432/judgecal?sslmode=require"),
            "postgres://app@db.internal:5432/judgecal"
        );
        assert_eq!(
            super::redacted("postgres://db:5432/x"),
            "postgres://db:5432/x"
        );
        assert_eq!(
            super::redacted("sqlite://data/judgecal.db?mode=rwc"),
            "sqlite://data/judgecal.db"
        );
    }

    #[test]
    fn placeholders_number_rows_then_columns() {
        assert_eq!(super::placeholder_rows(2, 2, 3), "($3,$4),($5,$6)");
        assert_eq!(super::placeholder_list(3, 2), "$2,$3,$4");
    }

    #[test]
    fn many_values_are_anonymous_on_sqlite_and_numbered_on_postgres() {
        use super::{Backend, many_values, placeholder_rows};
        let sql = format!("INSERT INTO t VALUES {}", placeholder_rows(2, 6, 1));
        assert_eq!(
            many_values(Backend::Sqlite, sql.clone()).0,
            "INSERT INTO t VALUES (?,?,?,?,?,?),(?,?,?,?,?,?)"
        );
        assert_eq!(many_values(Backend::Postgres, sql.clone()).0, sql);
        let select = "SELECT a FROM t WHERE c = $1 AND i IN ($2,$3)".to_owned();
        assert_eq!(
            many_values(Backend::Sqlite, select).0,
            "SELECT a FROM t WHERE c = ? AND i IN (?,?)"
        );
    }

    #[test]
    #[should_panic(expected = "in order")]
    fn many_values_refuses_placeholders_out_of_order() {
        let _ = super::many_values(super::Backend::Sqlite, "SELECT $2, $1".to_owned());
    }
}

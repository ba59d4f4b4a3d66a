//! The one writer of an upload's plan, for anchors and comparisons alike: labels set on the
//! cell's stored rows of an item, the replaced rows deleted, the new and replacing rows
//! inserted in chunks, and the cell's count moved by what was written, all inside the upload's
//! transaction.

use sqlx::Row as _;

use super::{Backend, by_items, many_values, placeholder_rows};
use crate::domain::ItemId;
use crate::error::Result;

/// Rows per insert: 12 columns × 1,000 rows stays far below both backends' bind-parameter
/// limits (65,535 on Postgres, 32,766 on SQLite).
const CHUNK: usize = 1000;

/// A query on either backend, its arguments bound.
pub(super) type AnyQuery<'q> =
    sqlx::query::Query<'q, sqlx::Any, <sqlx::Any as sqlx::Database>::Arguments>;

/// A kind of row an upload writes.
pub(super) trait Written {
    /// Its table.
    const TABLE: &'static str;
    /// The column a label sets on every stored row of an item (a reference, a preference).
    const LABEL: &'static str;
    /// The cell's column that counts its rows.
    const COUNT: &'static str;
    /// The columns an insert names after `cell_id, judge_version`.
    const COLUMNS: &'static str;
    /// How many they are.
    const WIDTH: usize;
    /// Whether an insert may be kept prepared: not where an optional column bound as NULL
    /// would fix its parameter's type (Postgres then refuses a later number bound to it).
    const PREPARED: bool;

    /// Binds the row's `COLUMNS`, in order; `now` is the upload's time.
    fn bind<'q>(&self, q: AnyQuery<'q>, now: i64) -> AnyQuery<'q>;
}

/// What one cell's plan writes.
pub(super) struct Writes<'a, W> {
    /// Items whose every stored row takes this label.
    pub labels: &'a [(ItemId, f64)],
    /// Items whose row of the batch's judge version is deleted and written again.
    pub replaced: Vec<&'a str>,
    /// The rows to insert: the new ones, then the replacing ones.
    pub rows: Vec<W>,
    /// How many of `rows` are new to the cell (what its count grows by).
    pub fresh: usize,
}

/// Writes one cell's plan inside the upload's transaction; returns the cell's count after it.
/// The cell's `updated_at_ms` moves where anything was inserted or labelled.
pub(super) async fn write<W: Written>(
    backend: Backend,
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    cell_id: &str,
    version: &str,
    writes: Writes<'_, W>,
    now: i64,
) -> Result<i64> {
    let label = format!(
        "UPDATE {} SET {} = $1, updated_at_ms = $2 WHERE cell_id = $3 AND item_id = $4",
        W::TABLE,
        W::LABEL
    );
    for (item, y) in writes.labels {
        sqlx::query(sqlx::AssertSqlSafe(label.clone()))
            .bind(*y)
            .bind(now)
            .bind(cell_id)
            .bind(item.as_str())
            .execute(&mut **tx)
            .await?;
    }
    let filter = "t.cell_id = $1 AND t.judge_version = $2";
    for (sql, items) in by_items(backend, "DELETE", W::TABLE, filter, 2, &writes.replaced)? {
        let mut q = sqlx::query(sql).bind(cell_id).bind(version);
        for item in items {
            q = q.bind(item);
        }
        q.execute(&mut **tx).await?;
    }
    for chunk in writes.rows.chunks(CHUNK) {
        let sql = format!(
            "INSERT INTO {} (cell_id, judge_version, {}) VALUES {}",
            W::TABLE,
            W::COLUMNS,
            placeholder_rows(chunk.len(), W::WIDTH + 2, 1)
        );
        let mut q = sqlx::query(many_values(backend, sql)).persistent(W::PREPARED);
        for row in chunk {
            q = row.bind(q.bind(cell_id).bind(version), now);
        }
        q.execute(&mut **tx).await?;
    }
    let touched = !writes.rows.is_empty() || !writes.labels.is_empty();
    let count = sqlx::AssertSqlSafe(format!(
        "UPDATE cells SET {count} = {count} + $1,
             updated_at_ms = CASE WHEN $2 = 1 THEN $3 ELSE updated_at_ms END
         WHERE id = $4 RETURNING {count}",
        count = W::COUNT
    ));
    // Counted by what the plan wrote, not again over the cell (a count of a million rows on
    // every upload): a replaced row is deleted and written again, a fresh one added.
    Ok(sqlx::query(count)
        .bind(i64::try_from(writes.fresh).unwrap_or(i64::MAX))
        .bind(i64::from(touched))
        .bind(now)
        .bind(cell_id)
        .fetch_one(&mut **tx)
        .await?
        .try_get(0)?)
}

//! What workers publish about the keys they serve (the `key_schedule` table): whether a key is
//! being detected now or waiting its turn, and when its worker expects it to be caught up, so
//! that any process answering GetKeyStatus can say so.

use sqlx::Row;

use crate::backend::{now_ms, numbered_rows};
use crate::{Store, StoreError};

/// One key's published schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySchedule {
    /// `detecting` or `waiting`.
    pub state: String,
    /// When its worker expects it to be caught up (ms since the epoch), if it estimated it.
    pub eta_ms: Option<i64>,
    /// When this was published (ms since the epoch).
    pub updated_ms: i64,
}

/// Rows per statement when publishing (4 parameters each: within SQLite's 32,766 and
/// PostgreSQL's 65,535).
const SCHEDULE_ROWS: usize = 1_000;

impl Store {
    /// Publish `(key_id, state, eta_ms)` for each key, in one transaction. Keys deleted
    /// meanwhile are skipped.
    pub async fn publish_schedule(
        &self,
        rows: &[(String, &'static str, Option<i64>)],
    ) -> Result<(), StoreError> {
        if rows.is_empty() {
            return Ok(());
        }
        let now = now_ms();
        let mut tx = self.begin_write().await?;
        for chunk in rows.chunks(SCHEDULE_ROWS) {
            // One statement a chunk; the join skips keys deleted meanwhile (and gives SQLite's
            // upsert the WHERE its parser needs after a SELECT).
            let sql = format!(
                "INSERT INTO key_schedule (key_id, state, eta_ms, updated_ms) \
                 SELECT v.column1, v.column2, v.column3, v.column4 FROM (VALUES {}) AS v \
                 WHERE v.column1 IN (SELECT key_id FROM detection_keys) \
                 ON CONFLICT (key_id) DO UPDATE SET state = excluded.state, \
                 eta_ms = excluded.eta_ms, updated_ms = excluded.updated_ms",
                numbered_rows(chunk.len(), 4)
            );
            let mut q = sqlx::query(&sql);
            for (key_id, state, eta) in chunk {
                q = q
                    .bind(key_id.clone())
                    .bind(state.to_string())
                    .bind(*eta)
                    .bind(now);
            }
            q.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The schedule last published for `key_id`, if any.
    pub async fn key_schedule(&self, key_id: &str) -> Result<Option<KeySchedule>, StoreError> {
        let row =
            sqlx::query("SELECT state, eta_ms, updated_ms FROM key_schedule WHERE key_id = $1")
                .bind(key_id.to_string())
                .fetch_optional(self.pool())
                .await?;
        row.map(|r| {
            Ok(KeySchedule {
                state: r.try_get(0)?,
                eta_ms: r.try_get(1)?,
                updated_ms: r.try_get(2)?,
            })
        })
        .transpose()
    }

    /// Whether a live worker (lease not expired) holds `key_id`.
    pub async fn key_is_leased(&self, key_id: &str) -> Result<bool, StoreError> {
        let row = sqlx::query(
            "SELECT COUNT(*) FROM worker_leases WHERE key_id = $1 AND owner <> '' \
             AND expires_ms > $2",
        )
        .bind(key_id.to_string())
        .bind(now_ms())
        .fetch_one(self.pool())
        .await?;
        Ok(row.try_get::<i64, _>(0)? > 0)
    }
}

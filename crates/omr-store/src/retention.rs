//! Retention: delete, in small batches, board messages every key has detected and old
//! accumulators; and the oldest board index retention has kept, below which no key may start.

use sqlx::Row;

use crate::backend::to_u64;
use crate::{Store, StoreError};

/// The PostgreSQL advisory lock that serialises retention with registrations that start at an
/// index ("omr_rete" in ASCII): a key checked against the oldest retained index is committed
/// before retention reads the cursors again. (SQLite: the writer lock does the same.)
pub(crate) const RETENTION_LOCK: i64 = 0x6f6d_725f_7265_7465;

impl Store {
    /// Delete up to `batch` board messages below `keep_from` that every key has already
    /// detected, and up to `batch` accumulators that end at or before `accumulators_before`.
    /// Small batches, so detection and ingestion never wait long. Returns (messages, epochs).
    pub async fn apply_retention(
        &self,
        keep_from: u64,
        accumulators_before: u64,
        batch: u32,
    ) -> Result<(u64, u64), StoreError> {
        let mut tx = self.begin_write().await?;
        tx.serialise(RETENTION_LOCK).await?;
        let min_cursor: Option<i64> = sqlx::query("SELECT MIN(next_index) FROM key_cursors")
            .fetch_one(&mut *tx)
            .await?
            .try_get(0)?;
        let limit = (keep_from as i64).min(min_cursor.unwrap_or(i64::MAX));
        let messages = sqlx::query(
            "DELETE FROM board WHERE idx IN (SELECT idx FROM board WHERE idx < $1 ORDER BY idx LIMIT $2)",
        )
        .bind(limit)
        .bind(batch as i64)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        // Replay protection forgets what retention drops.
        sqlx::query(
            "DELETE FROM board_fingerprints WHERE idx IN \
             (SELECT idx FROM board_fingerprints WHERE idx < $1 ORDER BY idx LIMIT $2)",
        )
        .bind(limit)
        .bind(batch as i64)
        .execute(&mut *tx)
        .await?;
        let epochs = sqlx::query(
            "DELETE FROM accumulators WHERE (key_id, epoch_start) IN \
             (SELECT key_id, epoch_start FROM accumulators WHERE epoch_end <= $1 LIMIT $2)",
        )
        .bind(accumulators_before as i64)
        .bind(batch as i64)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        Ok((messages, epochs))
    }

    /// The oldest board index still stored: the first message, or the board head when
    /// retention deleted every message (0 on a new board). Detection of a key starting below it
    /// could never begin.
    pub async fn oldest_retained_index(&self) -> Result<u64, StoreError> {
        oldest_retained(self.pool()).await
    }
}

/// [`Store::oldest_retained_index`], read through `db` (the pool, or a transaction).
pub(crate) async fn oldest_retained<'e>(
    db: impl sqlx::Executor<'e, Database = sqlx::Any>,
) -> Result<u64, StoreError> {
    let row = sqlx::query(
        "SELECT COALESCE((SELECT MIN(idx) FROM board), \
                         (SELECT next_index FROM board_head WHERE id = 1))",
    )
    .fetch_one(db)
    .await?;
    to_u64(row.try_get::<i64, _>(0)?, "oldest retained index")
}

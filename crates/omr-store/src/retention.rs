//! Retention: delete, in small batches, board messages every key has detected and old
//! accumulators.

use sqlx::Row;

use crate::{Store, StoreError};

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
        let _w = self.write_lock().await;
        let min_cursor: Option<i64> = sqlx::query("SELECT MIN(next_index) FROM key_cursors")
            .fetch_one(self.pool())
            .await?
            .try_get(0)?;
        let limit = (keep_from as i64).min(min_cursor.unwrap_or(i64::MAX));
        let messages = sqlx::query(
            "DELETE FROM board WHERE idx IN (SELECT idx FROM board WHERE idx < $1 ORDER BY idx LIMIT $2)",
        )
        .bind(limit)
        .bind(batch as i64)
        .execute(self.pool())
        .await?
        .rows_affected();
        let epochs = sqlx::query(
            "DELETE FROM accumulators WHERE (key_id, epoch_start) IN \
             (SELECT key_id, epoch_start FROM accumulators WHERE epoch_end <= $1 LIMIT $2)",
        )
        .bind(accumulators_before as i64)
        .bind(batch as i64)
        .execute(self.pool())
        .await?
        .rows_affected();
        Ok((messages, epochs))
    }
}

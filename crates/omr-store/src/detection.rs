//! Detection state: the keys to serve with their cursors, the per-epoch accumulators, and
//! `commit_progress`, the compare-and-set that moves a cursor and writes its accumulator together.

use sqlx::Row;

use crate::backend::to_u64;
use crate::notify::PROGRESS_CHANNEL;
use crate::{Store, StoreError};

/// A key as the detection worker sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveKey {
    pub key_id: String,
    pub start_index: u64,
    pub cursor: u64,
    /// When the key's recipient was last seen online (milliseconds since the Unix epoch; see
    /// [`Store::mark_seen`]); `None` when never.
    pub last_seen_ms: Option<i64>,
}

/// An accumulator row: the encoded accumulator of one epoch `[start, end)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAccumulator {
    pub start: u64,
    pub end: u64,
    pub data: Vec<u8>,
}

impl Store {
    /// Every registered key with its cursor and when its recipient was last seen, oldest
    /// registration first.
    pub async fn active_keys(&self) -> Result<Vec<ActiveKey>, StoreError> {
        let rows = sqlx::query(
            "SELECT k.key_id, k.start_index, c.next_index, p.last_seen_ms FROM detection_keys k \
             JOIN key_cursors c ON c.key_id = k.key_id \
             LEFT JOIN key_presence p ON p.key_id = k.key_id \
             ORDER BY k.registered_ms, k.key_id",
        )
        .fetch_all(self.pool())
        .await?;
        rows.into_iter()
            .map(|r| {
                Ok(ActiveKey {
                    key_id: r.try_get(0)?,
                    start_index: to_u64(r.try_get::<i64, _>(1)?, "start index")?,
                    cursor: to_u64(r.try_get::<i64, _>(2)?, "cursor")?,
                    last_seen_ms: r.try_get(3)?,
                })
            })
            .collect()
    }

    /// A key's cursor (next index to detect).
    pub async fn cursor(&self, key_id: &str) -> Result<Option<u64>, StoreError> {
        let row = sqlx::query("SELECT next_index FROM key_cursors WHERE key_id = $1")
            .bind(key_id.to_string())
            .fetch_optional(self.pool())
            .await?;
        row.map(|r| to_u64(r.try_get::<i64, _>(0)?, "cursor"))
            .transpose()
    }

    /// The accumulator that ends at `end` (the one a worker continues), if any.
    pub async fn accumulator_ending_at(
        &self,
        key_id: &str,
        end: u64,
    ) -> Result<Option<StoredAccumulator>, StoreError> {
        let row = sqlx::query(
            "SELECT epoch_start, epoch_end, data FROM accumulators WHERE key_id = $1 AND epoch_end = $2",
        )
        .bind(key_id.to_string())
        .bind(end as i64)
        .fetch_optional(self.pool())
        .await?;
        row.map(stored_accumulator).transpose()
    }

    /// Accumulators of a key that cover anything at or after `from`, in order.
    pub async fn accumulators_from(
        &self,
        key_id: &str,
        from: u64,
        limit: u32,
    ) -> Result<Vec<StoredAccumulator>, StoreError> {
        let rows = self
            .accumulator_rows("epoch_start, epoch_end, data", key_id, from, limit)
            .await?;
        rows.into_iter().map(stored_accumulator).collect()
    }

    /// The `(start, end)` of the accumulators [`Store::accumulators_from`] would return, without
    /// their data (for deciding whether a cached digest is still current).
    pub async fn accumulator_ranges_from(
        &self,
        key_id: &str,
        from: u64,
        limit: u32,
    ) -> Result<Vec<(u64, u64)>, StoreError> {
        let rows = self
            .accumulator_rows("epoch_start, epoch_end", key_id, from, limit)
            .await?;
        rows.iter().map(epoch_bounds).collect()
    }

    /// `columns` (starting with epoch_start, epoch_end) of a key's accumulators that cover
    /// anything at or after `from`, in order.
    async fn accumulator_rows(
        &self,
        columns: &'static str,
        key_id: &str,
        from: u64,
        limit: u32,
    ) -> Result<Vec<sqlx::any::AnyRow>, StoreError> {
        Ok(sqlx::query(&format!(
            "SELECT {columns} FROM accumulators \
             WHERE key_id = $1 AND epoch_end > $2 ORDER BY epoch_start LIMIT $3"
        ))
        .bind(key_id.to_string())
        .bind(i64::try_from(from).unwrap_or(i64::MAX))
        .bind(limit as i64)
        .fetch_all(self.pool())
        .await?)
    }

    /// Advance a key from `old_cursor` to `acc.end` and write its accumulator, in one
    /// transaction. Returns false (and changes nothing) if the cursor was not `old_cursor` any
    /// more (another worker progressed, or the key was deleted).
    pub async fn commit_progress(
        &self,
        key_id: &str,
        old_cursor: u64,
        acc: &StoredAccumulator,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin_write().await?;
        let moved = sqlx::query(
            "UPDATE key_cursors SET next_index = $1 WHERE key_id = $2 AND next_index = $3",
        )
        .bind(acc.end as i64)
        .bind(key_id.to_string())
        .bind(old_cursor as i64)
        .execute(&mut *tx)
        .await?;
        if moved.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(false);
        }
        sqlx::query(
            "INSERT INTO accumulators (key_id, epoch_start, epoch_end, data) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (key_id, epoch_start) DO UPDATE SET epoch_end = excluded.epoch_end, data = excluded.data",
        )
        .bind(key_id.to_string())
        .bind(acc.start as i64)
        .bind(acc.end as i64)
        .bind(acc.data.clone())
        .execute(&mut *tx)
        .await?;
        // Other processes' waiting recipients are answered.
        let payload = format!("{key_id} {}", acc.end);
        (self.notify_at_commit(&mut tx, PROGRESS_CHANNEL, &payload)).await?;
        tx.commit().await?;
        Ok(true)
    }
}

fn stored_accumulator(r: sqlx::any::AnyRow) -> Result<StoredAccumulator, StoreError> {
    let (start, end) = epoch_bounds(&r)?;
    Ok(StoredAccumulator {
        start,
        end,
        data: r.try_get(2)?,
    })
}

/// (epoch_start, epoch_end) from the first two columns of an accumulator row.
fn epoch_bounds(r: &sqlx::any::AnyRow) -> Result<(u64, u64), StoreError> {
    Ok((
        to_u64(r.try_get::<i64, _>(0)?, "epoch start")?,
        to_u64(r.try_get::<i64, _>(1)?, "epoch end")?,
    ))
}

//! Attachments (written by [`Store::append`] with their messages) read back a range at a time to
//! build an epoch's PIR database, each epoch's PIR seed, and their deletion a whole epoch at a
//! time.

use sqlx::Row;

use crate::backend::{now_ms, to_u64};
use crate::{Store, StoreError};

impl Store {
    /// The attachments of board indices `start..end`, in index order, as (index, bytes).
    pub async fn attachments(
        &self,
        start: u64,
        end: u64,
    ) -> Result<Vec<(u64, Vec<u8>)>, StoreError> {
        let rows = sqlx::query(
            "SELECT idx, bytes FROM attachments WHERE idx >= $1 AND idx < $2 ORDER BY idx",
        )
        .bind(i64::try_from(start).unwrap_or(i64::MAX))
        .bind(i64::try_from(end).unwrap_or(i64::MAX))
        .fetch_all(self.pool())
        .await?;
        rows.into_iter()
            .map(|r| {
                Ok((
                    to_u64(r.try_get::<i64, _>(0)?, "board index")?,
                    r.try_get(1)?,
                ))
            })
            .collect()
    }

    /// The PIR seed of attachment epoch `epoch`: `fresh` if this call is the first to ask (it is
    /// stored), otherwise the one stored first, so every process serves the same hint.
    pub async fn pir_seed(&self, epoch: u64, fresh: [u8; 32]) -> Result<[u8; 32], StoreError> {
        let epoch = i64::try_from(epoch).unwrap_or(i64::MAX);
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO pir_epochs (epoch, seed, created_ms) VALUES ($1, $2, $3) \
             ON CONFLICT (epoch) DO NOTHING",
        )
        .bind(epoch)
        .bind(fresh.to_vec())
        .bind(now_ms())
        .execute(&mut *tx)
        .await?;
        let seed: Vec<u8> = sqlx::query("SELECT seed FROM pir_epochs WHERE epoch = $1")
            .bind(epoch)
            .fetch_one(&mut *tx)
            .await?
            .try_get(0)?;
        tx.commit().await?;
        seed.try_into()
            .map_err(|_| StoreError::Corrupt("a PIR seed is not 32 bytes".into()))
    }

    /// Delete up to `batch` attachments below board index `before` (the caller passes an
    /// epoch boundary), and the seeds of the epochs that end at or before it. Returns how many
    /// attachments went.
    pub async fn delete_attachments_before(
        &self,
        before: u64,
        epoch_messages: u64,
        batch: u32,
    ) -> Result<u64, StoreError> {
        let before_i = i64::try_from(before).unwrap_or(i64::MAX);
        let mut tx = self.begin_write().await?;
        let deleted = sqlx::query(
            "DELETE FROM attachments WHERE idx IN \
             (SELECT idx FROM attachments WHERE idx < $1 ORDER BY idx LIMIT $2)",
        )
        .bind(before_i)
        .bind(i64::from(batch))
        .execute(&mut *tx)
        .await?
        .rows_affected();
        let epochs_before = i64::try_from(before / epoch_messages.max(1)).unwrap_or(i64::MAX);
        sqlx::query("DELETE FROM pir_epochs WHERE epoch < $1")
            .bind(epochs_before)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(deleted)
    }
}

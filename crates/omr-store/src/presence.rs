//! Presence: when each key's recipient was last seen (a digest, status or wait call), kept in
//! the store so that every process's detection scheduler can put online recipients first.

use sqlx::Row;

use crate::{Store, StoreError};

impl Store {
    /// Record that `key_id`'s recipient was seen at `at_ms` (milliseconds since the Unix
    /// epoch). The stored time only moves forward; an unknown (or just deleted) key records
    /// nothing.
    pub async fn mark_seen(&self, key_id: &str, at_ms: i64) -> Result<(), StoreError> {
        let _w = self.write_lock().await;
        sqlx::query(
            "INSERT INTO key_presence (key_id, last_seen_ms) \
             SELECT key_id, $2 FROM detection_keys WHERE key_id = $1 \
             ON CONFLICT (key_id) DO UPDATE SET last_seen_ms = excluded.last_seen_ms \
             WHERE key_presence.last_seen_ms < excluded.last_seen_ms",
        )
        .bind(key_id.to_string())
        .bind(at_ms)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// When `key_id`'s recipient was last seen (milliseconds since the Unix epoch); `None` when
    /// never (or the key is unknown).
    pub async fn last_seen(&self, key_id: &str) -> Result<Option<i64>, StoreError> {
        let row = sqlx::query("SELECT last_seen_ms FROM key_presence WHERE key_id = $1")
            .bind(key_id.to_string())
            .fetch_optional(self.pool())
            .await?;
        Ok(row.map(|r| r.try_get(0)).transpose()?)
    }

    /// Every key seen at or after `since_ms`, with when it was last seen: the keys that may be
    /// online, without listing them all.
    pub async fn seen_since(&self, since_ms: i64) -> Result<Vec<(String, i64)>, StoreError> {
        let rows =
            sqlx::query("SELECT key_id, last_seen_ms FROM key_presence WHERE last_seen_ms >= $1")
                .bind(since_ms)
                .fetch_all(self.pool())
                .await?;
        rows.into_iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect()
    }
}

//! Worker leases: which worker process detects for which key, until when.

use std::time::Duration;

use sqlx::Row;

use crate::backend::now_ms;
use crate::{Backend, Store, StoreError};

impl Store {
    /// Renew `owner`'s leases, take free or expired ones until it holds `max_keys`, and return
    /// the keys it holds. PostgreSQL takes rows with `FOR UPDATE SKIP LOCKED`, so concurrent
    /// workers never take the same key; SQLite has a single writer.
    pub async fn acquire_leases(
        &self,
        owner: &str,
        lease: Duration,
        max_keys: usize,
    ) -> Result<Vec<String>, StoreError> {
        let now = now_ms();
        let expires = now + lease.as_millis() as i64;
        let mut tx = self.begin_write().await?;
        sqlx::query("UPDATE worker_leases SET expires_ms = $1 WHERE owner = $2")
            .bind(expires)
            .bind(owner.to_string())
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO worker_leases (key_id, owner, expires_ms) \
             SELECT key_id, '', 0 FROM detection_keys k \
             WHERE NOT EXISTS (SELECT 1 FROM worker_leases l WHERE l.key_id = k.key_id) \
             ON CONFLICT (key_id) DO NOTHING",
        )
        .execute(&mut *tx)
        .await?;
        let held: i64 = sqlx::query("SELECT COUNT(*) FROM worker_leases WHERE owner = $1")
            .bind(owner.to_string())
            .fetch_one(&mut *tx)
            .await?
            .try_get(0)?;
        let wanted = (max_keys as i64 - held).max(0);
        if wanted > 0 {
            let lock = match self.backend() {
                Backend::Postgres => " FOR UPDATE SKIP LOCKED",
                Backend::Sqlite => "",
            };
            sqlx::query(&format!(
                "UPDATE worker_leases SET owner = $1, expires_ms = $2 WHERE key_id IN \
                 (SELECT key_id FROM worker_leases WHERE expires_ms < $3 AND owner <> $1 \
                  ORDER BY key_id LIMIT $4{lock})"
            ))
            .bind(owner.to_string())
            .bind(expires)
            .bind(now)
            .bind(wanted)
            .execute(&mut *tx)
            .await?;
        }
        let rows = sqlx::query("SELECT key_id FROM worker_leases WHERE owner = $1 ORDER BY key_id")
            .bind(owner.to_string())
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        rows.into_iter().map(|r| Ok(r.try_get(0)?)).collect()
    }

    /// Give up `owner`'s leases (graceful shutdown), so another worker takes them at once.
    pub async fn release_leases(&self, owner: &str) -> Result<(), StoreError> {
        let _w = self.write_lock().await;
        sqlx::query("UPDATE worker_leases SET expires_ms = 0 WHERE owner = $1")
            .bind(owner.to_string())
            .execute(self.pool())
            .await?;
        Ok(())
    }
}

//! The detection-key registry: a key in chunks with its registration (token hash), digest key
//! and cursor, stored (taking an invite's use, when it needs one) and deleted in one
//! transaction each.

use futures::TryStreamExt;
use sqlx::Row;

use crate::backend::{now_ms, to_u64};
use crate::invites::take_invite_use;
use crate::retention::{oldest_retained, RETENTION_LOCK};
use crate::{Store, StoreError};

/// The PostgreSQL advisory lock that serialises capped registrations ("omr_keys" in ASCII).
const REGISTRATION_LOCK: i64 = 0x6f6d_725f_6b65_7973;

/// Size of one stored detection-key chunk.
pub const KEY_CHUNK_BYTES: usize = omr_api::CHUNK_BYTES;

/// Where a new key's detection starts (a wire type: the registry passes it through).
pub use omr_api::StartAt;

/// A detection key to register.
#[derive(Debug, Clone)]
pub struct NewKey<'a> {
    pub key_id: String,
    pub param_set: &'a str,
    pub kbar: u32,
    pub start: StartAt,
    pub token_hash: [u8; 32],
    pub key: &'a [u8],
    /// The encoded digest key extracted from `key`.
    pub digest_key: &'a [u8],
    /// The SHA-256 of the invite code this registration presents (`registration = "invite"`):
    /// one use is taken in the transaction that stores the key, or the insert is refused with
    /// [`StoreError::InviteRefused`]. `None`: no invite needed.
    pub invite_hash: Option<[u8; 32]>,
}

/// A registered key's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyMeta {
    pub key_id: String,
    pub param_set: String,
    pub kbar: u32,
    pub start_index: u64,
    pub key_bytes: u64,
    pub registered_ms: i64,
    pub token_hash: Vec<u8>,
    pub cursor: u64,
}

impl Store {
    /// Store a key, its registration and its cursor in one transaction; returns the resolved
    /// start index. A start index below the oldest board message retention kept is refused with
    /// [`StoreError::StartRetired`] (checked in the same transaction, serialised with
    /// retention), since detection could never read the messages it would start from.
    pub async fn insert_key(&self, key: &NewKey<'_>) -> Result<u64, StoreError> {
        self.insert_key_capped(key, None).await
    }

    /// [`Store::insert_key`] unless `max_keys` keys are registered already: then
    /// [`StoreError::KeyLimit`] and nothing is stored. The count and the insert are one
    /// transaction, serialised with every other capped registration (the SQLite writer lock; a
    /// transaction-scoped advisory lock on PostgreSQL), so concurrent uploads cannot overshoot.
    pub async fn insert_key_within(
        &self,
        key: &NewKey<'_>,
        max_keys: u64,
    ) -> Result<u64, StoreError> {
        self.insert_key_capped(key, Some(max_keys)).await
    }

    async fn insert_key_capped(
        &self,
        key: &NewKey<'_>,
        cap: Option<u64>,
    ) -> Result<u64, StoreError> {
        let mut tx = self.begin_write().await?;
        if let Some(hash) = &key.invite_hash {
            // First, so that the transaction starts as a write: on SQLite another process (an
            // `omrd invite create`) may write meanwhile, and a transaction that read first
            // could not upgrade to a write after it.
            take_invite_use(&mut tx, hash).await?;
        }
        if let Some(cap) = cap {
            tx.serialise(REGISTRATION_LOCK).await?;
            let keys = count_keys(&mut *tx).await?;
            if keys >= cap {
                return Err(StoreError::KeyLimit { keys, cap });
            }
        }
        if let StartAt::Index(start) = key.start {
            // Under the retention lock (SQLite: the writer lock): retention cannot delete the
            // board below `start` between this check and the commit of the cursor.
            tx.serialise(RETENTION_LOCK).await?;
            let oldest = oldest_retained(&mut *tx).await?;
            if start < oldest {
                return Err(StoreError::StartRetired { start, oldest });
            }
        }
        let start = match key.start {
            StartAt::Index(i) => i64::try_from(i).unwrap_or(i64::MAX),
            StartAt::Now => sqlx::query("SELECT next_index FROM board_head WHERE id = 1")
                .fetch_one(&mut *tx)
                .await?
                .try_get::<i64, _>(0)?,
        };
        let chunks: Vec<&[u8]> = key.key.chunks(KEY_CHUNK_BYTES).collect();
        sqlx::query(
            "INSERT INTO detection_keys \
             (key_id, param_set, kbar, start_index, key_bytes, chunk_count, registered_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(key.key_id.clone())
        .bind(key.param_set.to_string())
        .bind(key.kbar as i32)
        .bind(start)
        .bind(key.key.len() as i64)
        .bind(chunks.len() as i32)
        .bind(now_ms())
        .execute(&mut *tx)
        .await?;
        for (seq, chunk) in chunks.iter().enumerate() {
            sqlx::query("INSERT INTO detection_key_chunks (key_id, seq, data) VALUES ($1, $2, $3)")
                .bind(key.key_id.clone())
                .bind(seq as i32)
                .bind(chunk.to_vec())
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query("INSERT INTO digest_keys (key_id, data) VALUES ($1, $2)")
            .bind(key.key_id.clone())
            .bind(key.digest_key.to_vec())
            .execute(&mut *tx)
            .await?;
        sqlx::query("INSERT INTO registrations (key_id, token_hash) VALUES ($1, $2)")
            .bind(key.key_id.clone())
            .bind(key.token_hash.to_vec())
            .execute(&mut *tx)
            .await?;
        sqlx::query("INSERT INTO key_cursors (key_id, next_index) VALUES ($1, $2)")
            .bind(key.key_id.clone())
            .bind(start)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        to_u64(start, "start index")
    }

    /// A key's metadata, token hash and cursor, if it exists.
    pub async fn key(&self, key_id: &str) -> Result<Option<KeyMeta>, StoreError> {
        let row = sqlx::query(
            "SELECT k.key_id, k.param_set, k.kbar, k.start_index, k.key_bytes, k.registered_ms, \
                    r.token_hash, c.next_index \
             FROM detection_keys k \
             JOIN registrations r ON r.key_id = k.key_id \
             JOIN key_cursors c ON c.key_id = k.key_id \
             WHERE k.key_id = $1",
        )
        .bind(key_id.to_string())
        .fetch_optional(self.pool())
        .await?;
        row.map(|r| {
            Ok(KeyMeta {
                key_id: r.try_get(0)?,
                param_set: r.try_get(1)?,
                kbar: r.try_get::<i32, _>(2)? as u32,
                start_index: to_u64(r.try_get::<i64, _>(3)?, "start index")?,
                key_bytes: to_u64(r.try_get::<i64, _>(4)?, "key size")?,
                registered_ms: r.try_get(5)?,
                token_hash: r.try_get(6)?,
                cursor: to_u64(r.try_get::<i64, _>(7)?, "cursor")?,
            })
        })
        .transpose()
    }

    /// The stored key bytes, reassembled from their chunks as they stream in: each chunk is
    /// copied once, from the row into the key (a light key is 32.5 MB, and a worker catching
    /// up loads keys by the hundred).
    pub async fn key_bytes(&self, key_id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let mut rows = sqlx::query(
            "SELECT c.seq, c.data, k.key_bytes FROM detection_key_chunks c \
             JOIN detection_keys k ON k.key_id = c.key_id WHERE c.key_id = $1 ORDER BY c.seq",
        )
        .bind(key_id.to_string())
        .fetch(self.pool());
        let mut out: Option<Vec<u8>> = None;
        let (mut expected, mut size) = (0usize, 0usize);
        while let Some(r) = rows.try_next().await? {
            let seq: i32 = r.try_get(0)?;
            if seq as usize != expected {
                return Err(StoreError::Corrupt(format!(
                    "key {key_id}: chunk {expected} missing"
                )));
            }
            let data: &[u8] = r.try_get(1)?;
            // Sized once (growing by doubling copied the key again in pieces).
            size = to_u64(r.try_get::<i64, _>(2)?, "key size")? as usize;
            out.get_or_insert_with(|| Vec::with_capacity(size))
                .extend_from_slice(data);
            expected += 1;
        }
        match out {
            Some(key) if key.len() != size => Err(StoreError::Corrupt(format!(
                "key {key_id}: {} bytes stored, {size} registered",
                key.len()
            ))),
            out => Ok(out),
        }
    }

    /// Number of registered keys.
    pub async fn key_count(&self) -> Result<u64, StoreError> {
        count_keys(self.pool()).await
    }

    /// The parameter sets of the registered keys (each once, sorted): what a server configured
    /// for another set must refuse to serve.
    pub async fn key_param_sets(&self) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query("SELECT DISTINCT param_set FROM detection_keys ORDER BY param_set")
            .fetch_all(self.pool())
            .await?;
        rows.iter()
            .map(|r| r.try_get::<String, _>(0).map_err(StoreError::from))
            .collect()
    }

    /// Delete a key and everything derived from it. Returns false if it did not exist.
    pub async fn delete_key(&self, key_id: &str) -> Result<bool, StoreError> {
        let mut tx = self.begin_write().await?;
        // Children first: SQLite enforces foreign keys only when the pragma is on, PostgreSQL
        // cascades; deleting explicitly is correct on both.
        for table in [
            "digest_keys",
            "fetch_keys",
            "worker_leases",
            "accumulators",
            "key_cursors",
            "registrations",
            "detection_key_chunks",
        ] {
            sqlx::query(&format!("DELETE FROM {table} WHERE key_id = $1"))
                .bind(key_id.to_string())
                .execute(&mut *tx)
                .await?;
        }
        let done = sqlx::query("DELETE FROM detection_keys WHERE key_id = $1")
            .bind(key_id.to_string())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(done.rows_affected() > 0)
    }

    /// Store (or replace) the fetch key of `key_id` (omr-light-v1); false when there is no such
    /// key.
    pub async fn put_fetch_key(&self, key_id: &str, data: &[u8]) -> Result<bool, StoreError> {
        let mut tx = self.begin_write().await?;
        let exists = sqlx::query("SELECT 1 FROM detection_keys WHERE key_id = $1")
            .bind(key_id.to_string())
            .fetch_optional(&mut *tx)
            .await?
            .is_some();
        if exists {
            sqlx::query("DELETE FROM fetch_keys WHERE key_id = $1")
                .bind(key_id.to_string())
                .execute(&mut *tx)
                .await?;
            sqlx::query("INSERT INTO fetch_keys (key_id, data) VALUES ($1, $2)")
                .bind(key_id.to_string())
                .bind(data.to_vec())
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(exists)
    }

    /// The fetch key of a key, if one was uploaded.
    pub async fn fetch_key(&self, key_id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.key_data("fetch_keys", key_id).await
    }

    /// The encoded digest key of a key.
    pub async fn digest_key(&self, key_id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.key_data("digest_keys", key_id).await
    }

    /// The `data` of `key_id`'s row in `table` (a fixed table name, never input).
    async fn key_data(&self, table: &str, key_id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let row = sqlx::query(&format!("SELECT data FROM {table} WHERE key_id = $1"))
            .bind(key_id.to_string())
            .fetch_optional(self.pool())
            .await?;
        Ok(row.map(|r| r.try_get(0)).transpose()?)
    }
}

/// Registered keys, read through `db` (the pool, or a transaction that must see its own view).
async fn count_keys<'e>(
    db: impl sqlx::Executor<'e, Database = sqlx::Any>,
) -> Result<u64, StoreError> {
    let row = sqlx::query("SELECT COUNT(*) FROM detection_keys")
        .fetch_one(db)
        .await?;
    to_u64(row.try_get::<i64, _>(0)?, "key count")
}

//! omr-store: the bulletin board, the detection-key registry and detection state, on PostgreSQL
//! (production) or SQLite (the embedded default, a file under the data directory).
//!
//! One [`Store`] type over sqlx's `Any` driver; where the dialects differ (migrations, SQLite
//! pragmas) the backend is chosen at connection time. Migrations are embedded from the top-level
//! `migrations/` directory and applied by [`Store::connect`].
//!
//! The board is gapless and ordered: every append runs in one transaction that first bumps the
//! single `board_head` row, whose lock (PostgreSQL) or the single writer (SQLite) serialises
//! appenders until commit. So indices are assigned and become visible in order: a reader that
//! sees index i has already been able to see every index below it.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::any::{install_default_drivers, AnyPoolOptions};
use sqlx::migrate::Migrator;
use sqlx::{AnyPool, Executor, Row};
use thiserror::Error;

static PG_MIGRATIONS: Migrator = sqlx::migrate!("../../migrations/postgres");
static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("../../migrations/sqlite");

/// Rows per multi-row INSERT (well under both databases' bind-parameter limits).
const INSERT_ROWS: usize = 1000;
/// Size of one stored detection-key chunk (the same as a gRPC upload chunk).
pub const KEY_CHUNK_BYTES: usize = omr_api::CHUNK_BYTES;

/// Store errors. `Database` carries the driver's message for logs; callers show clients a
/// generic message.
#[derive(Debug, Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("unsupported database URL {0:?}: use postgres://… or sqlite://…")]
    UnsupportedUrl(String),
    #[error("cannot create data directory {path}: {source}")]
    DataDir {
        path: String,
        source: std::io::Error,
    },
    #[error("stored data is inconsistent: {0}")]
    Corrupt(String),
}

/// Which database a store talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

/// A message to append to the board (already validated by the caller).
#[derive(Debug, Clone)]
pub struct NewMessage {
    pub clue: Vec<u8>,
    pub payload: Vec<u8>,
}

/// A message read back from the board.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMessage {
    pub index: u64,
    pub clue: Vec<u8>,
    pub payload: Vec<u8>,
    pub received_ms: i64,
}

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

/// The PostgreSQL channel `append` notifies after each commit.
pub const BOARD_CHANNEL: &str = "omr_board";

/// Wait for board notifications from any process on a PostgreSQL database; calls `on_notify`
/// for each. Returns only on a connection error (the caller retries and polls meanwhile).
pub async fn listen_board(url: &str, mut on_notify: impl FnMut()) -> Result<(), StoreError> {
    let mut listener = sqlx::postgres::PgListener::connect(url).await?;
    listener.listen(BOARD_CHANNEL).await?;
    loop {
        listener.recv().await?;
        on_notify();
    }
}

/// The board and registry.
#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
    /// SQLite allows one writer: write transactions take this first, so a transaction that reads
    /// before it writes never fails its lock upgrade with SQLITE_BUSY.
    sqlite_writer: std::sync::Arc<tokio::sync::Mutex<()>>,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn to_u64(v: i64, what: &str) -> Result<u64, StoreError> {
    u64::try_from(v).map_err(|_| StoreError::Corrupt(format!("negative {what}: {v}")))
}

impl Store {
    /// Connect to `url` (`postgres://…` or `sqlite://…`) and apply the migrations.
    pub async fn connect(url: &str) -> Result<Store, StoreError> {
        install_default_drivers();
        let backend = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Backend::Postgres
        } else if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else {
            return Err(StoreError::UnsupportedUrl(url.to_string()));
        };
        let mut options = AnyPoolOptions::new().acquire_timeout(Duration::from_secs(30));
        options = match backend {
            Backend::Postgres => options.max_connections(16),
            Backend::Sqlite => options.max_connections(4).after_connect(|conn, _| {
                Box::pin(async move {
                    // Durable: WAL with a full fsync at every commit.
                    conn.execute(
                        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; \
                         PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 10000;",
                    )
                    .await?;
                    Ok(())
                })
            }),
        };
        let pool = options.connect(url).await?;
        match backend {
            Backend::Postgres => PG_MIGRATIONS.run(&pool).await?,
            Backend::Sqlite => SQLITE_MIGRATIONS.run(&pool).await?,
        }
        Ok(Store {
            pool,
            backend,
            sqlite_writer: Default::default(),
        })
    }

    /// The embedded default: an SQLite file `omr.sqlite3` under `data_dir`, created if needed.
    pub async fn open_embedded(data_dir: &Path) -> Result<Store, StoreError> {
        std::fs::create_dir_all(data_dir).map_err(|source| StoreError::DataDir {
            path: data_dir.display().to_string(),
            source,
        })?;
        let file = data_dir.join("omr.sqlite3");
        Store::connect(&format!("sqlite://{}?mode=rwc", file.display())).await
    }

    async fn write_lock(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        match self.backend {
            Backend::Sqlite => Some(self.sqlite_writer.lock().await),
            Backend::Postgres => None,
        }
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Close the pool, waiting for connections to be returned.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Cheap round trip, for readiness.
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    // --- The board -------------------------------------------------------------------------

    /// Append `messages` in one transaction; returns the index of the first. All or nothing.
    pub async fn append(&self, messages: &[NewMessage]) -> Result<u64, StoreError> {
        if messages.is_empty() {
            return self.board_head().await;
        }
        let n = messages.len() as i64;
        let _w = self.write_lock().await;
        let mut tx = self.pool.begin().await?;
        let row = sqlx::query(
            "UPDATE board_head SET next_index = next_index + $1 WHERE id = 1 RETURNING next_index",
        )
        .bind(n)
        .fetch_one(&mut *tx)
        .await?;
        let first = row.try_get::<i64, _>(0)? - n;
        let received = now_ms();
        for (c, chunk) in messages.chunks(INSERT_ROWS).enumerate() {
            let base = first + (c * INSERT_ROWS) as i64;
            // Numbered placeholders: both PostgreSQL and SQLite accept $N (QueryBuilder on the
            // Any driver would emit `?`, which PostgreSQL rejects).
            let mut sql =
                String::from("INSERT INTO board (idx, clue, payload, received_ms) VALUES ");
            for k in 0..chunk.len() {
                if k > 0 {
                    sql.push_str(", ");
                }
                let b = 4 * k;
                sql.push_str(&format!("(${}, ${}, ${}, ${})", b + 1, b + 2, b + 3, b + 4));
            }
            let mut q = sqlx::query(&sql);
            for (k, m) in chunk.iter().enumerate() {
                q = q
                    .bind(base + k as i64)
                    .bind(m.clue.clone())
                    .bind(m.payload.clone())
                    .bind(received);
            }
            q.execute(&mut *tx).await?;
        }
        if self.backend == Backend::Postgres {
            // Delivered at commit to every process listening (their detection workers wake).
            sqlx::query("SELECT pg_notify('omr_board', '')")
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        to_u64(first, "board index")
    }

    /// The next index to be assigned (= number of messages ever appended).
    pub async fn board_head(&self) -> Result<u64, StoreError> {
        let row = sqlx::query("SELECT next_index FROM board_head WHERE id = 1")
            .fetch_one(&self.pool)
            .await?;
        to_u64(row.try_get::<i64, _>(0)?, "board head")
    }

    /// Up to `limit` messages with index ≥ `from`, in index order.
    pub async fn read(&self, from: u64, limit: u32) -> Result<Vec<StoredMessage>, StoreError> {
        let from = i64::try_from(from).unwrap_or(i64::MAX);
        let rows = sqlx::query(
            "SELECT idx, clue, payload, received_ms FROM board WHERE idx >= $1 ORDER BY idx LIMIT $2",
        )
        .bind(from)
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|r| {
                Ok(StoredMessage {
                    index: to_u64(r.try_get::<i64, _>(0)?, "board index")?,
                    clue: r.try_get(1)?,
                    payload: r.try_get(2)?,
                    received_ms: r.try_get(3)?,
                })
            })
            .collect()
    }

    // --- Detection keys ----------------------------------------------------------------------

    /// Store a key, its registration and its cursor in one transaction; returns the resolved
    /// start index.
    pub async fn insert_key(&self, key: &NewKey<'_>) -> Result<u64, StoreError> {
        let _w = self.write_lock().await;
        let mut tx = self.pool.begin().await?;
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
        .fetch_optional(&self.pool)
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

    /// The stored key bytes, reassembled from their chunks.
    pub async fn key_bytes(&self, key_id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let rows = sqlx::query(
            "SELECT seq, data FROM detection_key_chunks WHERE key_id = $1 ORDER BY seq",
        )
        .bind(key_id.to_string())
        .fetch_all(&self.pool)
        .await?;
        if rows.is_empty() {
            return Ok(None);
        }
        let mut out = Vec::new();
        for (expected, r) in rows.into_iter().enumerate() {
            let seq: i32 = r.try_get(0)?;
            if seq as usize != expected {
                return Err(StoreError::Corrupt(format!(
                    "key {key_id}: chunk {expected} missing"
                )));
            }
            let data: Vec<u8> = r.try_get(1)?;
            out.extend_from_slice(&data);
        }
        Ok(Some(out))
    }

    /// Number of registered keys.
    pub async fn key_count(&self) -> Result<u64, StoreError> {
        let row = sqlx::query("SELECT COUNT(*) FROM detection_keys")
            .fetch_one(&self.pool)
            .await?;
        to_u64(row.try_get::<i64, _>(0)?, "key count")
    }

    /// Delete a key and everything derived from it. Returns false if it did not exist.
    pub async fn delete_key(&self, key_id: &str) -> Result<bool, StoreError> {
        let _w = self.write_lock().await;
        let mut tx = self.pool.begin().await?;
        // Children first: SQLite enforces foreign keys only when the pragma is on, PostgreSQL
        // cascades; deleting explicitly is correct on both.
        for table in [
            "digest_keys",
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

    // --- Detection state --------------------------------------------------------------------

    /// Every registered key with its cursor, oldest registration first.
    pub async fn active_keys(&self) -> Result<Vec<ActiveKey>, StoreError> {
        let rows = sqlx::query(
            "SELECT k.key_id, k.start_index, c.next_index FROM detection_keys k \
             JOIN key_cursors c ON c.key_id = k.key_id ORDER BY k.registered_ms, k.key_id",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|r| {
                Ok(ActiveKey {
                    key_id: r.try_get(0)?,
                    start_index: to_u64(r.try_get::<i64, _>(1)?, "start index")?,
                    cursor: to_u64(r.try_get::<i64, _>(2)?, "cursor")?,
                })
            })
            .collect()
    }

    /// A key's cursor (next index to detect).
    pub async fn cursor(&self, key_id: &str) -> Result<Option<u64>, StoreError> {
        let row = sqlx::query("SELECT next_index FROM key_cursors WHERE key_id = $1")
            .bind(key_id.to_string())
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| to_u64(r.try_get::<i64, _>(0)?, "cursor"))
            .transpose()
    }

    /// The encoded digest key of a key.
    pub async fn digest_key(&self, key_id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let row = sqlx::query("SELECT data FROM digest_keys WHERE key_id = $1")
            .bind(key_id.to_string())
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.try_get(0)).transpose()?)
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
        .fetch_optional(&self.pool)
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
        .fetch_all(&self.pool)
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
        let _w = self.write_lock().await;
        let mut tx = self.pool.begin().await?;
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
        tx.commit().await?;
        Ok(true)
    }

    // --- Retention ---------------------------------------------------------------------------

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
            .fetch_one(&self.pool)
            .await?
            .try_get(0)?;
        let limit = (keep_from as i64).min(min_cursor.unwrap_or(i64::MAX));
        let messages = sqlx::query(
            "DELETE FROM board WHERE idx IN (SELECT idx FROM board WHERE idx < $1 ORDER BY idx LIMIT $2)",
        )
        .bind(limit)
        .bind(batch as i64)
        .execute(&self.pool)
        .await?
        .rows_affected();
        let epochs = sqlx::query(
            "DELETE FROM accumulators WHERE (key_id, epoch_start) IN \
             (SELECT key_id, epoch_start FROM accumulators WHERE epoch_end <= $1 LIMIT $2)",
        )
        .bind(accumulators_before as i64)
        .bind(batch as i64)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok((messages, epochs))
    }

    // --- Worker leases -----------------------------------------------------------------------

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
        let _w = self.write_lock().await;
        let mut tx = self.pool.begin().await?;
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
            let lock = match self.backend {
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
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

/// A key as the detection worker sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveKey {
    pub key_id: String,
    pub start_index: u64,
    pub cursor: u64,
}

/// An accumulator row: the encoded accumulator of one epoch `[start, end)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAccumulator {
    pub start: u64,
    pub end: u64,
    pub data: Vec<u8>,
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

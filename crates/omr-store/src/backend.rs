//! The `Store` handle and what depends on the backend: connecting, SQLite pragmas, migrations,
//! the pool, and SQLite's single-writer lock that every write takes first.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::any::{install_default_drivers, AnyPoolOptions};
use sqlx::migrate::Migrator;
use sqlx::{Any, AnyConnection, AnyPool, Executor, Transaction};
use tokio::sync::{Mutex, MutexGuard};

use crate::StoreError;

static PG_MIGRATIONS: Migrator = sqlx::migrate!("../../migrations/postgres");
static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("../../migrations/sqlite");

/// Which database a store talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

/// The board and registry.
#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
    /// SQLite allows one writer: write transactions take this first, so a transaction that reads
    /// before it writes never fails its lock upgrade with SQLITE_BUSY.
    sqlite_writer: Arc<Mutex<()>>,
    /// PostgreSQL: where [`Store::board_notifications`] opens its LISTEN connection.
    listen_url: Option<ListenUrl>,
}

/// A database URL kept for opening further connections. It may hold a password, so `Debug`
/// does not print it.
#[derive(Clone)]
pub(crate) struct ListenUrl(Arc<str>);

impl ListenUrl {
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ListenUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ListenUrl(..)")
    }
}

/// A write transaction holding the SQLite writer lock (none on PostgreSQL) until it commits,
/// rolls back or is dropped. Dereferences to the connection, so `&mut *tx` executes on it.
pub(crate) struct WriteTx<'a> {
    // Dropped before the lock: the rollback of an abandoned transaction is queued first.
    tx: Transaction<'static, Any>,
    writer: Option<MutexGuard<'a, ()>>,
}

impl WriteTx<'_> {
    pub(crate) async fn commit(self) -> Result<(), sqlx::Error> {
        self.tx.commit().await
    }

    pub(crate) async fn rollback(self) -> Result<(), sqlx::Error> {
        self.tx.rollback().await
    }

    /// Serialise the rest of this transaction with every other one that takes `lock`: a
    /// transaction-scoped advisory lock on PostgreSQL; nothing more on SQLite, whose writer lock
    /// this transaction already holds.
    pub(crate) async fn serialise(&mut self, lock: i64) -> Result<(), sqlx::Error> {
        if self.writer.is_none() {
            sqlx::query("SELECT pg_advisory_xact_lock($1)")
                .bind(lock)
                .execute(&mut *self.tx)
                .await?;
        }
        Ok(())
    }
}

impl Deref for WriteTx<'_> {
    type Target = AnyConnection;

    fn deref(&self) -> &AnyConnection {
        &self.tx
    }
}

impl DerefMut for WriteTx<'_> {
    fn deref_mut(&mut self) -> &mut AnyConnection {
        &mut self.tx
    }
}

/// `rows` tuples of `columns` numbered placeholders, `($1, $2), ($3, $4), …`: a multi-row
/// VALUES list both PostgreSQL and SQLite accept (QueryBuilder on the Any driver would emit `?`,
/// which PostgreSQL rejects). Bind the rows' values in order.
pub(crate) fn numbered_rows(rows: usize, columns: usize) -> String {
    let row = |r: usize| {
        let cells: Vec<String> = (1..=columns)
            .map(|c| format!("${}", r * columns + c))
            .collect();
        format!("({})", cells.join(", "))
    };
    (0..rows).map(row).collect::<Vec<_>>().join(", ")
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The SQLite pool's size: one connection per core, at least 4 and at most 16.
fn sqlite_connections() -> u32 {
    let cores = std::thread::available_parallelism().map_or(4, |n| n.get());
    cores.clamp(4, 16) as u32
}

/// A stored BIGINT that must not be negative.
pub(crate) fn to_u64(v: i64, what: &str) -> Result<u64, StoreError> {
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
            // Readers run side by side in WAL mode (writes take `sqlite_writer`, one at a
            // time): a connection per core, 4 to 16, so that a worker loading keys on every
            // core (a light key is a 32.5 MB read) leaves connections to the API.
            Backend::Sqlite => {
                (options.max_connections(sqlite_connections())).after_connect(|conn, _| {
                    Box::pin(async move {
                        // Durable: WAL with a full fsync at every commit.
                        conn.execute(
                            "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; \
                         PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 10000;",
                        )
                        .await?;
                        Ok(())
                    })
                })
            }
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
            listen_url: match backend {
                Backend::Postgres => Some(ListenUrl(url.into())),
                Backend::Sqlite => None,
            },
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

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Whether the database belongs to this process alone (SQLite, opened by
    /// [`Store::open_embedded`] or a `sqlite:` URL): no other process appends or holds leases,
    /// so a fixed worker name is safe and there are no other processes' commits to listen for.
    pub fn is_embedded(&self) -> bool {
        self.backend == Backend::Sqlite
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

    /// The pool, for reads (writes go through [`Store::begin_write`] or [`Store::write_lock`]).
    pub(crate) fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// PostgreSQL: the URL to open a LISTEN connection on.
    pub(crate) fn listen_url(&self) -> Option<&ListenUrl> {
        self.listen_url.as_ref()
    }

    /// Begin a write transaction, first taking the SQLite writer lock.
    pub(crate) async fn begin_write(&self) -> Result<WriteTx<'_>, StoreError> {
        let writer = self.write_lock().await;
        let tx = self.pool.begin().await?;
        Ok(WriteTx { tx, writer })
    }

    /// The SQLite writer lock, for a write outside a transaction; `None` on PostgreSQL.
    pub(crate) async fn write_lock(&self) -> Option<MutexGuard<'_, ()>> {
        match self.backend {
            Backend::Sqlite => Some(self.sqlite_writer.lock().await),
            Backend::Postgres => None,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn numbered_rows_number_every_cell_row_by_row() {
        assert_eq!(super::numbered_rows(1, 2), "($1, $2)");
        assert_eq!(super::numbered_rows(2, 3), "($1, $2, $3), ($4, $5, $6)");
        assert_eq!(super::numbered_rows(0, 4), "");
    }
}

//! A fresh, migrated database per test (feature `testing`): SQLite in a temporary directory, or
//! PostgreSQL as a new database on the server at `OMR_TEST_POSTGRES_URL`, dropped afterwards.
//!
//! ```no_run
//! # async fn example() {
//! use omr_store::testing::TestDb;
//!
//! let db = TestDb::sqlite().await;
//! assert_eq!(db.store().board_head().await.unwrap(), 0);
//! db.cleanup().await;
//!
//! // `None` (after a SKIPPED line on stderr) when OMR_TEST_POSTGRES_URL is not set.
//! if let Some(db) = TestDb::postgres("example_postgres").await {
//!     let _url = db.url(); // what another process (omrd) would connect to
//!     db.cleanup().await;
//! }
//! # }
//! ```

use std::io::Write;
use std::path::Path;

use sqlx::{Connection, PgConnection};

use crate::{Backend, Store};

/// The variable naming a PostgreSQL server tests may create databases on, e.g.
/// `postgres://postgres@127.0.0.1:5432/postgres`.
pub const POSTGRES_URL_VAR: &str = "OMR_TEST_POSTGRES_URL";

/// One test's own database and a [`Store`] connected to it (migrations applied).
///
/// Call [`TestDb::cleanup`] at the end of a test; if the test panics first, dropping the
/// `TestDb` still removes a PostgreSQL database (best effort, from a thread of its own) and
/// the SQLite directory.
#[derive(Debug)]
pub struct TestDb {
    store: Store,
    url: String,
    /// SQLite: the directory holding `omr.sqlite3`, removed on drop.
    dir: Option<tempfile::TempDir>,
    /// PostgreSQL: the database still to drop.
    to_drop: Option<PgDatabase>,
}

/// A database created on a PostgreSQL server.
#[derive(Debug)]
struct PgDatabase {
    admin_url: String,
    name: String,
}

impl TestDb {
    /// A fresh SQLite store in a new temporary directory, opened like omrd's embedded default
    /// (`omr.sqlite3` under [`TestDb::data_dir`]).
    pub async fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let store = Store::open_embedded(dir.path())
            .await
            .expect("open a fresh SQLite store");
        let url = format!(
            "sqlite://{}?mode=rwc",
            dir.path().join("omr.sqlite3").display()
        );
        TestDb {
            store,
            url,
            dir: Some(dir),
            to_drop: None,
        }
    }

    /// A fresh PostgreSQL database `omr_test_<uuid>` on the server at `OMR_TEST_POSTGRES_URL`,
    /// or `None` when the variable is not set: then a `SKIPPED: <test_name>: …` line goes to
    /// stderr, so a skipped test is not mistaken for a passed one.
    pub async fn postgres(test_name: &str) -> Option<TestDb> {
        let Ok(admin_url) = std::env::var(POSTGRES_URL_VAR) else {
            // Straight to stderr: libtest captures `eprintln!`, and a skip should be seen.
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: {test_name}: {POSTGRES_URL_VAR} is not set"
            );
            return None;
        };
        let name = format!("omr_test_{}", uuid::Uuid::new_v4().simple());
        let mut admin = PgConnection::connect(&admin_url)
            .await
            .unwrap_or_else(|e| panic!("connect to {POSTGRES_URL_VAR}: {e}"));
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut admin)
            .await
            .unwrap_or_else(|e| panic!("create database {name}: {e}"));
        let _ = admin.close().await;
        let url = database_url(&admin_url, &name);
        // From here on, dropping `db` drops the database, also if connecting fails.
        let to_drop = Some(PgDatabase { admin_url, name });
        let store = match Store::connect(&url).await {
            Ok(store) => store,
            Err(e) => {
                if let Some(pg) = to_drop {
                    pg.drop_blocking();
                }
                panic!("connect to the fresh database: {e}");
            }
        };
        Some(TestDb {
            store,
            url,
            dir: None,
            to_drop,
        })
    }

    /// The store on this database.
    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn backend(&self) -> Backend {
        self.store.backend()
    }

    /// The URL [`Store::connect`] (or omrd's `database_url`) opens this database with.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// SQLite: the data directory, for [`Store::open_embedded`] or omrd's `data_dir`;
    /// `None` on PostgreSQL.
    pub fn data_dir(&self) -> Option<&Path> {
        self.dir.as_ref().map(|d| d.path())
    }

    /// Close the store and remove the database (PostgreSQL: `DROP DATABASE … WITH (FORCE)`,
    /// which also ends other processes' connections to it).
    pub async fn cleanup(mut self) {
        self.store.close().await;
        if let Some(pg) = self.to_drop.take() {
            if let Err(e) = pg.drop_database().await {
                eprintln!("warning: dropping test database {}: {e}", pg.name);
            }
        }
        // The SQLite directory goes when `self` is dropped.
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some(pg) = self.to_drop.take() {
            pg.drop_blocking();
        }
    }
}

impl PgDatabase {
    async fn drop_database(&self) -> Result<(), sqlx::Error> {
        let mut admin = PgConnection::connect(&self.admin_url).await?;
        sqlx::query(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ))
        .execute(&mut admin)
        .await?;
        admin.close().await
    }

    /// Drop the database from a thread with a runtime of its own, so it works from `Drop`, in
    /// or outside a runtime, also while a failed test unwinds. Errors are printed, not raised.
    fn drop_blocking(self) {
        let done = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime
                .block_on(self.drop_database())
                .map_err(|e| format!("dropping test database {}: {e}", self.name))
        })
        .join();
        match done {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("warning: {e}"),
            Err(_) => eprintln!("warning: dropping a test database panicked"),
        }
    }
}

/// The URL of database `name` on the server `admin_url` names: the path replaced, user,
/// host and query parameters kept.
fn database_url(admin_url: &str, name: &str) -> String {
    let (base, query) = match admin_url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (admin_url, None),
    };
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let path_start = base[authority_start..]
        .find('/')
        .map_or(base.len(), |i| authority_start + i);
    let mut url = format!("{}/{name}", &base[..path_start]);
    if let Some(query) = query {
        url.push('?');
        url.push_str(query);
    }
    url
}

#[cfg(test)]
mod tests {
    use super::database_url;

    #[test]
    fn database_url_replaces_only_the_path() {
        assert_eq!(
            database_url("postgres://postgres@127.0.0.1:5432/postgres", "omr_test_x"),
            "postgres://postgres@127.0.0.1:5432/omr_test_x"
        );
        assert_eq!(
            database_url("postgres://u:p@db:5432", "omr_test_x"),
            "postgres://u:p@db:5432/omr_test_x"
        );
        assert_eq!(
            database_url("postgresql://db/admin?sslmode=disable", "omr_test_x"),
            "postgresql://db/omr_test_x?sslmode=disable"
        );
    }
}

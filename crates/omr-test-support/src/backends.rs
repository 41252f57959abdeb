//! One check, one test per backend: [`test_each_backend!`](crate::test_each_backend).

/// For each `check` (an `async fn check(db: &TestDb)` in scope), two tests, each on a fresh
/// database of its own (`omr_store::testing::TestDb`, removed afterwards):
///
/// - `<check>_sqlite`, on SQLite in a temporary directory;
/// - `<check>_postgres`, on a new database on the server at `OMR_TEST_POSTGRES_URL`; without
///   that variable it prints `SKIPPED: <check>_postgres: …` on stderr and passes.
///
/// Both run on a multi-threaded runtime with two workers (the calling crate needs `tokio` with
/// its `macros` and `rt-multi-thread` features). A failed check still drops its database.
/// The crate documentation has an example.
#[macro_export]
macro_rules! test_each_backend {
    ($($check:ident),+ $(,)?) => {
        $(
            $crate::__paste::paste! {
                #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn [<$check _sqlite>]() {
                    let db = $crate::TestDb::sqlite().await;
                    $check(&db).await;
                    db.cleanup().await;
                }

                #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn [<$check _postgres>]() {
                    let name = concat!(stringify!($check), "_postgres");
                    if let Some(db) = $crate::TestDb::postgres(name).await {
                        $check(&db).await;
                        db.cleanup().await;
                    }
                }
            }
        )+
    };
}

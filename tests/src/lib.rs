//! Helpers for the end-to-end tests: start the real omrd (the library's `Application`, serving
//! real HTTP and gRPC on ephemeral ports) on a fresh SQLite directory or a fresh PostgreSQL
//! database, stop it, restart it on the same store.

use std::net::SocketAddr;
use std::path::PathBuf;

use omr_server::{Application, Config};
use sqlx::Connection;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Which store a test runs against.
#[derive(Debug, Clone)]
pub enum StoreKind {
    Sqlite,
    /// A fresh database on the server at `OMR_TEST_POSTGRES_URL`.
    Postgres(String),
}

impl StoreKind {
    /// SQLite always; PostgreSQL too when `OMR_TEST_POSTGRES_URL` is set (a fresh database is
    /// created for each call).
    pub async fn all() -> Vec<StoreKind> {
        let mut v = vec![StoreKind::Sqlite];
        if let Ok(admin) = std::env::var("OMR_TEST_POSTGRES_URL") {
            v.push(StoreKind::Postgres(fresh_postgres_database(&admin).await));
        }
        v
    }

    pub fn name(&self) -> &'static str {
        match self {
            StoreKind::Sqlite => "sqlite",
            StoreKind::Postgres(_) => "postgres",
        }
    }
}

/// Create an empty database next to the one `admin_url` names; return its URL.
pub async fn fresh_postgres_database(admin_url: &str) -> String {
    sqlx::any::install_default_drivers();
    let name = format!("omr_test_{}", uuid::Uuid::new_v4().simple());
    let mut conn = sqlx::AnyConnection::connect(admin_url)
        .await
        .expect("connect to OMR_TEST_POSTGRES_URL");
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .expect("create database");
    let base = admin_url
        .rsplit_once('/')
        .map(|(b, _)| b)
        .unwrap_or(admin_url);
    format!("{base}/{name}")
}

/// A running omrd.
#[derive(Debug)]
pub struct TestServer {
    pub http: SocketAddr,
    pub grpc: SocketAddr,
    pub config: Config,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<anyhow::Result<()>>>,
    _dir: Option<std::sync::Arc<tempfile::TempDir>>,
}

impl TestServer {
    /// A config for a test: ephemeral ports, its own data directory, the insecure test set.
    pub fn config(kind: &StoreKind, data_dir: PathBuf) -> Config {
        Config {
            http_addr: "127.0.0.1:0".parse().unwrap(),
            grpc_addr: "127.0.0.1:0".parse().unwrap(),
            data_dir,
            database_url: match kind {
                StoreKind::Sqlite => None,
                StoreKind::Postgres(url) => Some(url.clone()),
            },
            param_set: omr_core::INSECURE_TEST.name.to_string(),
            allow_insecure_params: true,
            ..Config::default()
        }
    }

    /// Start on a fresh store of `kind`.
    pub async fn start(kind: &StoreKind) -> TestServer {
        let dir = std::sync::Arc::new(tempfile::tempdir().expect("tempdir"));
        let config = Self::config(kind, dir.path().to_path_buf());
        let mut s = Self::start_with(config).await;
        s._dir = Some(dir);
        s
    }

    /// Start with an explicit configuration.
    pub async fn start_with(config: Config) -> TestServer {
        if std::env::var_os("OMR_TEST_LOG").is_some() {
            // Server logs on stderr (first server of the process installs the subscriber).
            let _ = omr_server::telemetry::init(omr_server::LogFormat::Human);
        }
        let app = Application::build(config.clone())
            .await
            .expect("omrd builds");
        let (http, grpc) = (app.http_addr(), app.grpc_addr());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(app.run_until_stopped(async move {
            let _ = stopped.await;
        }));
        let server = TestServer {
            http,
            grpc,
            config,
            stop: Some(stop),
            task: Some(task),
            _dir: None,
        };
        server.wait_ready().await;
        server
    }

    async fn wait_ready(&self) {
        let client = reqwest::Client::new();
        for _ in 0..200 {
            if let Ok(r) = client.get(self.url("/readyz")).send().await {
                if r.status().is_success() {
                    return;
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        panic!("omrd did not become ready");
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.http)
    }

    pub fn grpc_url(&self) -> String {
        format!("http://{}", self.grpc)
    }

    /// Stop gracefully and wait; returns the data directory handle for a restart.
    pub async fn stop(mut self) -> (Config, Option<std::sync::Arc<tempfile::TempDir>>) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            t.await.expect("server task").expect("clean shutdown");
        }
        (self.config.clone(), self._dir.take())
    }

    /// Stop and start again on the same store.
    pub async fn restart(self) -> TestServer {
        let (mut config, dir) = self.stop().await;
        config.http_addr = "127.0.0.1:0".parse().unwrap();
        config.grpc_addr = "127.0.0.1:0".parse().unwrap();
        let mut s = Self::start_with(config).await;
        s._dir = dir;
        s
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

//! omrd in-process: the library's `Application` serving real HTTP and gRPC on ephemeral ports,
//! on a test's own database; stopped, restarted on the same store, or stopped on drop.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Duration;

use omr_server::state::ApiState;
use omr_server::{Application, Config};
use omr_store::testing::TestDb;
use reqwest::StatusCode;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::faults::Faults;
use crate::raw::RawClient;
use crate::wait::wait_until;

/// How long a started server may take to answer `/readyz` with 200.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// A running omrd. Dropping it asks it to stop (without waiting); [`TestServer::stop`] waits
/// for a clean shutdown.
#[derive(Debug)]
pub struct TestServer {
    /// Where it listens (no gRPC for `role = "worker"`).
    pub http: SocketAddr,
    pub grpc: Option<SocketAddr>,
    /// What it was started with.
    pub config: Config,
    /// The state its services share (see [`TestServer::state`]). Weak: the server's shutdown
    /// waits for the last strong reference to go.
    state: Weak<ApiState>,
    /// The fault injection its worker calls before each detection job.
    faults: Arc<Faults>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<anyhow::Result<()>>>,
    /// What the server's files live in when the test did not hand it a directory: its own
    /// SQLite database, or a directory for `omrd.addr` next to a PostgreSQL database. Kept
    /// across restarts.
    owned: Option<Owned>,
}

#[derive(Debug)]
#[expect(
    dead_code,
    reason = "held only to be removed when the server is dropped"
)]
enum Owned {
    Dir(tempfile::TempDir),
    Db(TestDb),
}

impl TestServer {
    /// Start on `db` (SQLite: its data directory, as omrd's embedded store; PostgreSQL: its
    /// URL) with [`TestServer::start_configured`]'s defaults.
    pub async fn start(db: &TestDb) -> TestServer {
        Self::start_configured(db, |_| {}).await
    }

    /// Start on `db` with the test defaults — ephemeral ports, the insecure test parameter
    /// set — changed by `configure`.
    pub async fn start_configured(db: &TestDb, configure: impl FnOnce(&mut Config)) -> TestServer {
        let (data_dir, owned) = match db.data_dir() {
            Some(dir) => (dir.to_path_buf(), None),
            None => {
                let dir = tempfile::tempdir().expect("create a data directory");
                (dir.path().to_path_buf(), Some(Owned::Dir(dir)))
            }
        };
        let mut config = test_config(data_dir);
        if db.data_dir().is_none() {
            config.database_url = Some(db.url().to_string());
        }
        configure(&mut config);
        let mut server = Self::start_with(config).await;
        server.owned = owned;
        server
    }

    /// Start on a fresh SQLite store of its own, removed when the server is dropped.
    pub async fn start_sqlite() -> TestServer {
        let db = TestDb::sqlite().await;
        let mut server = Self::start(&db).await;
        server.owned = Some(Owned::Db(db));
        server
    }

    /// Start with exactly `config` (the caller owns its data directory and database).
    pub async fn start_with(config: Config) -> TestServer {
        if std::env::var_os("OMR_TEST_LOG").is_some() {
            // Server logs on stderr (the first server of the process installs the subscriber).
            let _ = omr_server::telemetry::init(omr_server::LogFormat::Human);
        }
        let mut app = Application::build(config.clone())
            .await
            .expect("omrd builds");
        let faults = Arc::new(Faults::default());
        app.set_job_hooks(faults.clone());
        let (http, grpc) = (app.http_addr(), app.grpc_addr());
        let state = Arc::downgrade(&app.state());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(app.run_until_stopped(async move {
            let _ = stopped.await;
        }));
        let server = TestServer {
            http,
            grpc,
            config,
            state,
            faults,
            stop: Some(stop),
            task: Some(task),
            owned: None,
        };
        let client = server.client();
        wait_until(READY_TIMEOUT, "omrd answers /readyz with 200", || async {
            matches!(
                client
                    .http()
                    .get(client.url("/readyz"))
                    .send()
                    .await
                    .map(|r| r.status()),
                Ok(StatusCode::OK)
            )
        })
        .await;
        server
    }

    /// The state its APIs share, for inspection. Drop it before stopping the server: the
    /// shutdown waits for the last reference (the group-commit writer ends with it).
    pub fn state(&self) -> Arc<ApiState> {
        self.state.upgrade().expect("the server is running")
    }

    /// Its detection worker's fault injection (`inject_detection_panics`, `hold_bulk_jobs`,
    /// `hold_online_jobs`).
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// A client of its HTTP and gRPC APIs (over TLS, trusting its certificate, when it has
    /// `tls_cert`: a self-signed one, as [`crate::TestCert`] makes).
    pub fn client(&self) -> RawClient {
        match &self.config.tls_cert {
            Some(cert) => {
                let pem = std::fs::read(cert).expect("read tls_cert");
                RawClient::with_tls(self.http, self.grpc, &pem)
            }
            None => RawClient::new(self.http, self.grpc),
        }
    }

    /// `https` when it speaks TLS, else `http`.
    fn scheme(&self) -> &'static str {
        if self.config.tls_cert.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// The URL of `path` on its HTTP server (`""`: the base URL).
    pub fn url(&self, path: &str) -> String {
        format!("{}://{}{path}", self.scheme(), self.http)
    }

    /// Its gRPC server's URL.
    pub fn grpc_url(&self) -> String {
        let grpc = self
            .grpc
            .expect("this omrd serves no gRPC (role = \"worker\")");
        format!("{}://{grpc}", self.scheme())
    }

    /// Stop gracefully and wait for the shutdown to finish.
    pub async fn stop(mut self) {
        self.shut_down().await;
    }

    /// Stop, then start again on the same store and configuration (new ports).
    pub async fn restart(self) -> TestServer {
        self.restart_configured(|_| {}).await
    }

    /// Stop, then start again on the same store with the configuration changed by `configure`
    /// (new ports).
    pub async fn restart_configured(mut self, configure: impl FnOnce(&mut Config)) -> TestServer {
        self.shut_down().await;
        let mut config = self.config.clone();
        config.http_addr = "127.0.0.1:0".parse().expect("literal");
        config.grpc_addr = "127.0.0.1:0".parse().expect("literal");
        configure(&mut config);
        let mut server = Self::start_with(config).await;
        server.owned = self.owned.take();
        server
    }

    async fn shut_down(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await
                .expect("the server task does not panic")
                .expect("a clean shutdown");
        }
    }
}

/// Detection that is quick to watch: epochs of 8 messages (a few messages cross a boundary),
/// batches of 3, a poll every 200 ms, 2 detection threads. For
/// [`TestServer::start_configured`].
pub fn quick_detection(config: &mut Config) {
    config.epoch_len = 8;
    config.detect_batch = 3;
    config.poll_interval_ms = 200;
    config.worker_threads = 2;
}

/// omr-light-v1 quick to watch: its own epoch (one batch of 4,096, which a test's few messages
/// never close), a poll every 200 ms, the open epoch's fetch snapshot rebuilt within 100 ms.
/// For [`TestServer::start_configured`].
pub fn quick_light(config: &mut Config) {
    config.param_set = Some(omr_light::OMR_LIGHT_V1.name.to_string());
    config.epoch_len = omr_light::OMR_LIGHT_V1.batch as u64;
    config.poll_interval_ms = 200;
    config.light_fetch_open_rebuild_ms = 100;
}

/// Ephemeral ports, `data_dir`, the insecure test parameter set, no rate limits (every test
/// request comes from one address; a test of the limits sets them), requests given 300 s instead
/// of 30 (the suite runs its servers side by side, and on a small machine a request that builds
/// an epoch's PIR database can pass 30 s; the tests of the timeouts set theirs); the rest omrd's
/// defaults.
fn test_config(data_dir: PathBuf) -> Config {
    Config {
        http_addr: "127.0.0.1:0".parse().expect("literal"),
        grpc_addr: "127.0.0.1:0".parse().expect("literal"),
        data_dir,
        database_url: None,
        param_set: Some(omr_core::INSECURE_TEST.name.to_string()),
        allow_insecure_params: true,
        request_timeout_secs: 300,
        grpc_request_timeout_secs: 300,
        // omr-light-v1: every ask detects the open batch up to the head, so that a test's
        // digest catches up with the few messages it posts; the refresh policy's own tests
        // set it.
        light_refresh_messages: 1,
        ..Config::default()
    }
    .without_rate_limits()
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

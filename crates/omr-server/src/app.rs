//! The server as a library: [`Application::build`] binds both listeners (port 0 allowed),
//! connects the store and writes the address file; [`Application::run_until_stopped`] serves
//! until the shutdown future resolves, then stops in order: stop accepting, finish in-flight
//! requests and commits, close the store.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use omr_core::ParamSet;
use omr_proto::v1::detector_server::DetectorServer;
use omr_store::Store;
use serde::Serialize;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::grpc::DetectorService;
use crate::health::WorkerHealth;
use crate::ingest::Ingestor;
use crate::metrics::Metrics;
use crate::state::AppState;

/// gRPC messages may be up to this large (key chunks are ≤ 4 MiB).
const GRPC_MAX_MESSAGE: usize = 5 * 1024 * 1024;

/// What `omrd.addr` holds.
#[derive(Debug, Serialize)]
struct AddrFile {
    http: SocketAddr,
    grpc: SocketAddr,
    pid: u32,
}

/// A built, not yet serving, server.
#[derive(Debug)]
pub struct Application {
    state: Arc<AppState>,
    http: TcpListener,
    grpc: TcpListener,
    writer: tokio::task::JoinHandle<()>,
}

impl Application {
    /// Validate the configuration, connect and migrate the store, bind the listeners.
    pub async fn build(config: Config) -> anyhow::Result<Application> {
        let params = ParamSet::by_name(&config.param_set)
            .with_context(|| format!("parameter set {:?}", config.param_set))?;
        if params.insecure && !config.allow_insecure_params {
            anyhow::bail!(
                "parameter set {} is insecure (for tests only); refusing to start. \
                 Pass --allow-insecure-params (OMR_ALLOW_INSECURE_PARAMS=true) to override",
                params.name
            );
        }
        if config.postage_bits > omr_core::MAX_POSTAGE_BITS {
            anyhow::bail!(
                "postage_bits = {} is over the maximum of {}: every message would cost its \
                 sender 2^{} hashes. Use 0 (no postage) up to {}",
                config.postage_bits,
                omr_core::MAX_POSTAGE_BITS,
                config.postage_bits,
                omr_core::MAX_POSTAGE_BITS
            );
        }
        let admin_token_hash = config.resolve_admin_token()?.map(|t| t.sha256());
        warn_if_open_to_the_network(&config);
        let store = open_store(&config).await?;
        tracing::info!(backend = ?store.backend(), param_set = params.name, "store ready, migrations applied");
        let http = TcpListener::bind(config.http_addr)
            .await
            .with_context(|| format!("binding HTTP on {}", config.http_addr))?;
        let grpc = TcpListener::bind(config.grpc_addr)
            .await
            .with_context(|| format!("binding gRPC on {}", config.grpc_addr))?;
        let metrics = Metrics::new();
        metrics.board_head.set(store.board_head().await? as i64);
        let board_notify = Arc::new(tokio::sync::Notify::new());
        let (ingestor, writer) = Ingestor::start(
            store.clone(),
            metrics.clone(),
            config.max_commit_messages,
            board_notify.clone(),
        );
        let lease_secs = config.lease_secs;
        let presence = crate::presence::Presence::new(&config);
        let state = Arc::new(AppState {
            config,
            params,
            store,
            ingestor,
            metrics,
            ready: AtomicBool::new(false),
            board_notify,
            digest_keys: Default::default(),
            digests: Default::default(),
            worker_health: WorkerHealth::new(Duration::from_secs(lease_secs.max(1))),
            inject_detection_panics: Default::default(),
            hold_bulk_jobs: Default::default(),
            bulk_jobs_held: Default::default(),
            presence,
            progress: Default::default(),
            admin_token_hash,
        });
        let app = Application {
            state,
            http,
            grpc,
            writer,
        };
        app.write_addr_file()?;
        Ok(app)
    }

    /// The store this application serves from (for in-process benchmarks and tools).
    pub fn store(&self) -> omr_store::Store {
        self.state.store.clone()
    }

    pub fn http_addr(&self) -> SocketAddr {
        self.http.local_addr().expect("bound listener")
    }

    pub fn grpc_addr(&self) -> SocketAddr {
        self.grpc.local_addr().expect("bound listener")
    }

    /// The state its services share (for tests: inspection and fault injection).
    #[doc(hidden)]
    pub fn state(&self) -> Arc<AppState> {
        self.state.clone()
    }

    fn write_addr_file(&self) -> anyhow::Result<()> {
        let path = self.state.config.addr_file();
        std::fs::create_dir_all(&self.state.config.data_dir)
            .with_context(|| format!("creating {}", self.state.config.data_dir.display()))?;
        let body = serde_json::to_vec_pretty(&AddrFile {
            http: self.http_addr(),
            grpc: self.grpc_addr(),
            pid: std::process::id(),
        })?;
        let tmp = path.with_extension("addr.tmp");
        std::fs::write(&tmp, body).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
        Ok(())
    }

    /// Serve until `shutdown` resolves, then stop gracefully.
    pub async fn run_until_stopped(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let Application {
            state,
            http,
            grpc,
            writer,
        } = self;
        let cancel = CancellationToken::new();
        let (http_addr, grpc_addr) = (http.local_addr()?, grpc.local_addr()?);
        let http_task = serve_http(&state, http, &cancel);
        let (grpc_task, health) = serve_grpc(&state, grpc, &cancel).await?;
        let background = Background::spawn(&state, &cancel);
        if state.config.role != crate::config::Role::Worker {
            // Other processes' commits wake this one's waiting recipients (ends at `stop`).
            state.progress.spawn_listener(&state.store);
        }
        state.ready.store(true, Ordering::Release);
        tracing::info!(%http_addr, %grpc_addr, addr_file = %state.config.addr_file().display(), "omrd listening");

        shutdown.await;
        tracing::info!("shutting down: no new connections, finishing in-flight work");
        state.ready.store(false, Ordering::Release);
        health
            .set_not_serving::<DetectorServer<DetectorService>>()
            .await;
        cancel.cancel();
        // Waiting recipients are answered now, so the servers can finish their requests.
        state.progress.stop();
        let deadline = Duration::from_secs(state.config.shutdown_timeout_secs);
        join_servers(http_task, grpc_task, deadline).await;
        background.join(deadline).await;
        // The routers are gone: drop the last submitter so the writer commits what is queued
        // and exits.
        let store = state.store.clone();
        drop(state);
        if tokio::time::timeout(deadline, writer).await.is_err() {
            tracing::warn!(
                "group-commit writer did not finish within {} s",
                deadline.as_secs()
            );
        }
        store.close().await;
        tracing::info!("omrd stopped");
        Ok(())
    }
}

/// The store `config` names: PostgreSQL at `database_url`, else the SQLite file under
/// `data_dir` (created if needed); migrated.
pub async fn open_store(config: &Config) -> anyhow::Result<Store> {
    match &config.database_url {
        Some(url) => Store::connect(url)
            .await
            .context("connecting to the database"),
        None => Store::open_embedded(&config.data_dir)
            .await
            .with_context(|| {
                format!(
                    "opening the embedded store under {}",
                    config.data_dir.display()
                )
            }),
    }
}

/// Open registration is the default for an omrd on the loopback interface; on an address others
/// can reach, anyone could register keys, each costing a detection per message for ever.
fn warn_if_open_to_the_network(config: &Config) {
    let serves_grpc = config.role != crate::config::Role::Worker;
    if config.registration == crate::config::Registration::Open
        && serves_grpc
        && !config.grpc_addr.ip().is_loopback()
    {
        tracing::warn!(
            grpc_addr = %config.grpc_addr,
            "registration is open on an address others may reach: anyone who reaches it can \
             register detection keys (up to max_keys); set registration = \"invite\" \
             (OMR_REGISTRATION=invite) and mint codes with `omrd invite create`"
        );
    }
}

type ServerTask<E> = tokio::task::JoinHandle<Result<(), E>>;

/// The HTTP API on `listener` until `cancel` fires.
fn serve_http(
    state: &Arc<AppState>,
    listener: TcpListener,
    cancel: &CancellationToken,
) -> ServerTask<std::io::Error> {
    let router = crate::http::router(state.clone());
    let c = cancel.clone();
    tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async move { c.cancelled().await })
            .await
    })
}

/// The gRPC registry, health and reflection services on `listener` until `cancel` fires (a
/// `role = "worker"` process serves none of them); returns the health reporter.
async fn serve_grpc(
    state: &Arc<AppState>,
    listener: TcpListener,
    cancel: &CancellationToken,
) -> anyhow::Result<(
    ServerTask<tonic::transport::Error>,
    tonic_health::server::HealthReporter,
)> {
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    health_reporter
        .set_serving::<DetectorServer<DetectorService>>()
        .await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(omr_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let detector = DetectorServer::new(DetectorService::new(state.clone()))
        .max_decoding_message_size(GRPC_MAX_MESSAGE);
    let c = cancel.clone();
    let serve = state.config.role != crate::config::Role::Worker;
    let task = tokio::spawn(async move {
        if !serve {
            c.cancelled().await;
            return Ok(());
        }
        tonic::transport::Server::builder()
            .add_service(health_service)
            .add_service(reflection)
            .add_service(detector)
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::TcpListenerStream::new(listener),
                async move { c.cancelled().await },
            )
            .await
    });
    Ok((task, health_reporter))
}

/// Wait (at most `deadline`) for both servers to finish their in-flight requests.
async fn join_servers(
    http: ServerTask<std::io::Error>,
    grpc: ServerTask<tonic::transport::Error>,
    deadline: Duration,
) {
    match tokio::time::timeout(deadline, async { (http.await, grpc.await) }).await {
        Ok((h, g)) => {
            if let Ok(Err(e)) = h {
                tracing::warn!(error = %e, "HTTP server stopped with an error");
            }
            if let Ok(Err(e)) = g {
                tracing::warn!(error = %e, "gRPC server stopped with an error");
            }
        }
        Err(_) => tracing::warn!("servers did not stop within {} s", deadline.as_secs()),
    }
}

/// The detection worker (unless `role = "api"`) and the retention task.
struct Background {
    worker: Option<tokio::task::JoinHandle<()>>,
    retention: tokio::task::JoinHandle<()>,
}

impl Background {
    fn spawn(state: &Arc<AppState>, cancel: &CancellationToken) -> Background {
        let worker = (state.config.role != crate::config::Role::Api)
            .then(|| tokio::spawn(crate::worker::run(state.clone(), cancel.clone())));
        let retention = tokio::spawn(crate::worker::retention(state.clone(), cancel.clone()));
        Background { worker, retention }
    }

    /// After cancellation: the worker finishes its batch in progress (at most `deadline`).
    async fn join(self, deadline: Duration) {
        let _ = self.retention.await;
        if let Some(w) = self.worker {
            if tokio::time::timeout(deadline, w).await.is_err() {
                tracing::warn!(
                    "detection worker did not stop within {} s",
                    deadline.as_secs()
                );
            }
        }
    }
}

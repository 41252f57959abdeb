//! The server as a library, and the one module that sees both transports: [`Application::build`]
//! does every start-up step (validate the configuration, pin the FFT plans, connect the store
//! and refuse another parameter set's, bind the listeners — port 0 allowed; no gRPC listener for
//! `role = "worker"`, which serves no gRPC — and write the address file), composing the service
//! core, the state both APIs share, the HTTP-only state and the worker's context;
//! [`Application::run_until_stopped`] serves until the shutdown future resolves, then stops in
//! order: stop accepting, finish in-flight requests and commits, close the store. `omrd`, the
//! tests' in-process server, `omr demo` and `omr bench-capacity` all start through it.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use omr_proto::v1::detector_server::DetectorServer;
use omr_store::Store;
use serde::Serialize;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

mod param_guard;
mod servers;

use crate::admission::Admission;
use crate::config::{Config, Role};
use crate::connections::ConnectionLimit;
use crate::grpc::DetectorService;
use crate::health::WorkerHealth;
use crate::http::HttpState;
use crate::metrics::Metrics;
use crate::progress::KeyProgress;
use crate::service::ingest::Ingestor;
use crate::service::Service;
use crate::state::ApiState;
use crate::tls::Tls;
use crate::worker::{JobHooks, NoHooks, WorkerContext};
use servers::{join_servers, serve_grpc, serve_http};

/// How often the rate limiters forget clients whose buckets are full again.
const FORGET_IDLE_CLIENTS: Duration = Duration::from_secs(60);

/// What `omrd.addr` holds.
#[derive(Debug, Serialize)]
struct AddrFile {
    http: SocketAddr,
    /// `null` for `role = "worker"`.
    grpc: Option<SocketAddr>,
    /// Whether both listeners speak TLS only (`https://`), from `tls_cert` and `tls_key`.
    tls: bool,
    pid: u32,
}

/// A built, not yet serving, server.
#[derive(Debug)]
pub struct Application {
    state: Arc<ApiState>,
    admin_token_hash: Option<[u8; 32]>,
    worker: WorkerContext,
    http: TcpListener,
    grpc: Option<TcpListener>,
    tls: Option<Tls>,
    /// SIGHUP, listened for from `build` on when TLS is on (it reloads the certificate).
    hangup: Option<tokio::signal::unix::Signal>,
    writer: tokio::task::JoinHandle<()>,
}

impl Application {
    /// Validate the configuration, connect and migrate the store, bind the listeners.
    pub async fn build(mut config: Config) -> anyhow::Result<Application> {
        // Checked before the store is touched; again once an unset set is the store's.
        let configured = config.validate()?;
        let admin_token_hash = config.resolve_admin_token()?.map(|t| t.sha256());
        let tls = config.load_tls()?;
        let hangup = tls.as_ref().and_then(|_| Tls::listen_for_hangup());
        warn_if_open_to_the_network(&config);
        let metrics = Metrics::new();
        let admission = Admission::new(&config, metrics.clone()).map_err(anyhow::Error::msg)?;
        let store = open_store(&config).await?;
        let set = param_guard::settle_param_set(&store, &mut config, configured).await?;
        // Before anything transforms a polynomial: expanded-key files stay valid across runs.
        crate::worker::key_files::pin_fft_plans(&config);
        // `detect_device = "cuda"` without a usable GPU refuses to start.
        let gpu = crate::scheme::GpuDetector::resolve(&config, set, &metrics.device)?;
        tracing::info!(backend = ?store.backend(), param_set = set.name(), "store ready, migrations applied");
        let http = TcpListener::bind(config.http_addr)
            .await
            .with_context(|| format!("binding HTTP on {}", config.http_addr))?;
        let grpc = match config.role {
            Role::Worker => None,
            Role::Both | Role::Api => Some(
                TcpListener::bind(config.grpc_addr)
                    .await
                    .with_context(|| format!("binding gRPC on {}", config.grpc_addr))?,
            ),
        };
        metrics.board_head.set(store.board_head().await? as i64);
        let board_notify = Arc::new(crate::board_signal::BoardSignal::default());
        let (ingestor, writer) = Ingestor::start(
            store.clone(),
            metrics.clone(),
            config.max_commit_messages,
            board_notify.clone(),
        );
        let progress = Arc::new(KeyProgress::default());
        let worker_health = Arc::new(WorkerHealth::new(Duration::from_secs(
            config.lease_secs.max(1),
        )));
        let mut service = Service::new(config, set, store, ingestor, metrics, progress);
        service.scheme = service.scheme.with_gpu(gpu);
        // Asks for open batches go straight to this process's worker, when it runs one.
        let asks = Arc::new(crate::presence::Asks::new(board_notify.clone()));
        if matches!(service.config.role, Role::Both | Role::Worker) {
            service.presence.tell(asks.clone());
        }
        // The worker works by the same configuration and epoch rule as the service core.
        let worker = WorkerContext {
            config: service.config.clone(),
            set,
            epochs: service.epochs,
            store: service.store.clone(),
            metrics: service.metrics.clone(),
            board_notify,
            progress: service.progress.clone(),
            roster: service.roster.clone(),
            asks,
            worker_health: worker_health.clone(),
            hooks: Arc::new(NoHooks),
        };
        let state = Arc::new(ApiState {
            service: Arc::new(service),
            admission,
            ready: AtomicBool::new(false),
            worker_health,
        });
        let app = Application {
            state,
            admin_token_hash,
            worker,
            http,
            grpc,
            tls,
            hangup,
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

    /// Where gRPC listens; `None` for `role = "worker"`, which binds no gRPC port.
    pub fn grpc_addr(&self) -> Option<SocketAddr> {
        (self.grpc.as_ref()).map(|l| l.local_addr().expect("bound listener"))
    }

    /// The state both APIs share (for tests: inspection).
    #[doc(hidden)]
    pub fn state(&self) -> Arc<ApiState> {
        self.state.clone()
    }

    /// Call `hooks` before every detection job (tests: fault injection); omrd has none.
    #[doc(hidden)]
    pub fn set_job_hooks(&mut self, hooks: Arc<dyn JobHooks>) {
        self.worker.hooks = hooks;
    }

    fn write_addr_file(&self) -> anyhow::Result<()> {
        let path = self.state.config.addr_file();
        std::fs::create_dir_all(&self.state.config.data_dir)
            .with_context(|| format!("creating {}", self.state.config.data_dir.display()))?;
        let body = serde_json::to_vec_pretty(&AddrFile {
            http: self.http_addr(),
            grpc: self.grpc_addr(),
            tls: self.tls.is_some(),
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
            admin_token_hash,
            worker,
            http,
            grpc,
            tls,
            hangup,
            writer,
        } = self;
        let http_state = Arc::new(HttpState {
            api: state.clone(),
            admin_token_hash,
        });
        let cancel = CancellationToken::new();
        let http_addr = http.local_addr()?;
        let grpc_addr = grpc.as_ref().map(TcpListener::local_addr).transpose()?;
        let connections = ConnectionLimit::new(state.config.max_connections, state.metrics.clone());
        let http_task = serve_http(&http_state, http, connections.clone(), tls.clone(), &cancel);
        drop(http_state);
        let (grpc_task, health) =
            serve_grpc(&state, grpc, connections, tls.clone(), &cancel).await?;
        let tls_watch =
            tls.map(|tls| tokio::spawn(tls.watch(hangup, state.metrics.clone(), cancel.clone())));
        let background = Background::spawn(&state, Arc::new(worker), &cancel);
        if state.config.role != Role::Worker {
            // Other processes' commits wake this one's waiting recipients (ends at `stop`).
            state.progress.spawn_listener(&state.store);
        }
        state.ready.store(true, Ordering::Release);
        let grpc_addr = grpc_addr.map_or("none".to_string(), |a| a.to_string());
        let tls_on = tls_watch.is_some();
        tracing::info!(%http_addr, %grpc_addr, tls = tls_on, addr_file = %state.config.addr_file().display(), "omrd listening");

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
        if let Some(task) = tls_watch {
            let _ = task.await;
        }
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

/// The detection worker (unless `role = "api"`), the retention task and the rate limiters'
/// housekeeping.
struct Background {
    worker: Option<tokio::task::JoinHandle<()>>,
    retention: tokio::task::JoinHandle<()>,
    forget_clients: tokio::task::JoinHandle<()>,
}

impl Background {
    fn spawn(
        state: &Arc<ApiState>,
        worker: Arc<WorkerContext>,
        cancel: &CancellationToken,
    ) -> Background {
        let retention = tokio::spawn(crate::worker::retention(worker.clone(), cancel.clone()));
        let scheme = state.scheme.clone();
        let worker = (state.config.role != Role::Api)
            .then(|| tokio::spawn(crate::worker::run(worker, scheme, cancel.clone())));
        let (s, c) = (state.clone(), cancel.clone());
        let forget_clients = tokio::spawn(async move {
            let mut tick = tokio::time::interval(FORGET_IDLE_CLIENTS);
            loop {
                tokio::select! {
                    _ = c.cancelled() => return,
                    _ = tick.tick() => s.admission.forget_idle(),
                }
            }
        });
        Background {
            worker,
            retention,
            forget_clients,
        }
    }

    /// After cancellation: the worker finishes its batch in progress (at most `deadline`).
    async fn join(self, deadline: Duration) {
        let _ = self.retention.await;
        let _ = self.forget_clients.await;
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

//! omrd: the OMR detector service. Parses options, sets up telemetry, builds the application and
//! serves until SIGINT/SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use omr_server::{Application, Config, LogFormat};

/// The OMR detector service: a bulletin board over HTTP, a detection-key registry over gRPC.
///
/// Configuration comes from built-in defaults, then the file given with --config, then OMR_*
/// environment variables (OMR_HTTP_ADDR, OMR_GRPC_ADDR, OMR_DATA_DIR, OMR_DATABASE_URL,
/// OMR_PARAM_SET, OMR_LOG_FORMAT, OMR_MAX_KEY_BYTES, …: every config key, upper-cased), then the
/// flags below. With no database URL, omrd keeps everything in an SQLite file under the data
/// directory. Port 0 binds any free port; the bound addresses are logged and written to
/// DATA_DIR/omrd.addr as JSON.
///
/// Examples:
///   omrd                                   # embedded SQLite under ./omr-data, 127.0.0.1:8080 / :50051
///   omrd --http-addr 127.0.0.1:0 --grpc-addr 127.0.0.1:0 --data-dir /tmp/omr
///   OMR_DATABASE_URL=postgres://postgres@127.0.0.1/omr omrd --log-format json
#[derive(Debug, Parser)]
#[command(name = "omrd", version, verbatim_doc_comment)]
struct Args {
    /// TOML configuration file (see config/omrd.toml).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// HTTP listen address.
    #[arg(long, value_name = "ADDR")]
    http_addr: Option<SocketAddr>,
    /// gRPC listen address.
    #[arg(long, value_name = "ADDR")]
    grpc_addr: Option<SocketAddr>,
    /// Data directory (embedded store, address file).
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// postgres://… to use PostgreSQL instead of the embedded SQLite store.
    #[arg(long, value_name = "URL")]
    database_url: Option<String>,
    /// Parameter set to run (default omr-v1).
    #[arg(long, value_name = "NAME")]
    param_set: Option<String>,
    /// Allow a parameter set marked insecure (tests only).
    #[arg(long)]
    allow_insecure_params: bool,
    /// Log format on stderr.
    #[arg(long, value_enum)]
    log_format: Option<LogFormat>,
}

fn config(args: Args) -> Result<Config, Box<figment::Error>> {
    let mut c = Config::load(args.config.as_deref())?;
    if let Some(v) = args.http_addr {
        c.http_addr = v;
    }
    if let Some(v) = args.grpc_addr {
        c.grpc_addr = v;
    }
    if let Some(v) = args.data_dir {
        c.data_dir = v;
    }
    if let Some(v) = args.database_url {
        c.database_url = Some(v);
    }
    if let Some(v) = args.param_set {
        c.param_set = v;
    }
    if args.allow_insecure_params {
        c.allow_insecure_params = true;
    }
    if let Some(v) = args.log_format {
        c.log_format = v;
    }
    Ok(c)
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => tracing::info!("SIGINT received"),
        _ = term => tracing::info!("SIGTERM received"),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let config = match config(Args::parse()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("omrd: invalid configuration: {e}");
            return ExitCode::from(2);
        }
    };
    let _telemetry = match omr_server::telemetry::init(config.log_format) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("omrd: cannot set up telemetry: {e:#}");
            return ExitCode::from(2);
        }
    };
    // Before anything transforms a polynomial: expanded-key files stay valid across restarts.
    omr_server::worker::key_files::pin_fft_plans(&config);
    let app = match Application::build(config).await {
        Ok(app) => app,
        Err(e) => {
            tracing::error!("cannot start: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    match app.run_until_stopped(shutdown_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("stopped with an error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

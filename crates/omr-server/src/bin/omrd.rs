//! omrd: the OMR detector service. Parses options, sets up telemetry, builds the application and
//! serves until SIGINT/SIGTERM; or, with `omrd invite create`, mints an invite code on the
//! configured store and exits.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use omr_server::{Application, Config, LogFormat, Registration};

/// The OMR detector service: a bulletin board over HTTP, a detection-key registry over gRPC.
///
/// Configuration comes from built-in defaults, then the file given with --config, then OMR_*
/// environment variables (OMR_HTTP_ADDR, OMR_GRPC_ADDR, OMR_DATA_DIR, OMR_DATABASE_URL,
/// OMR_PARAM_SET, OMR_LOG_FORMAT, OMR_MAX_KEY_BYTES, …: every config key, upper-cased), then the
/// flags below. With no database URL, omrd keeps everything in an SQLite file under the data
/// directory. Port 0 binds any free port; the bound addresses are logged and written to
/// DATA_DIR/omrd.addr as JSON.
///
/// With registration = "invite" (OMR_REGISTRATION=invite), a key is registered only with an
/// invite code: mint codes with `omrd invite create` (same configuration as the running
/// server) or the admin API (POST /v1/admin/invites, with admin_token or admin_token_file).
///
/// With tls_cert and tls_key (--tls-cert, --tls-key), both listeners speak TLS only; omrd reads
/// the files again on SIGHUP and when they change (certificate renewal without a restart).
///
/// Examples:
///   omrd                                   # embedded SQLite under ./omr-data, 127.0.0.1:8080 / :50051
///   omrd --http-addr 127.0.0.1:0 --grpc-addr 127.0.0.1:0 --data-dir /tmp/omr
///   OMR_DATABASE_URL=postgres://postgres@127.0.0.1/omr omrd --log-format json
///   omrd --http-addr 0.0.0.0:8443 --grpc-addr 0.0.0.0:50051 --tls-cert cert.pem --tls-key key.pem
///   omrd --config /etc/omr/omrd.toml invite create --uses 5 --expires 7d
///   omrd openapi > openapi.json            # the HTTP API's OpenAPI 3.1 document
#[derive(Debug, Parser)]
#[command(name = "omrd", version, verbatim_doc_comment)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// TOML configuration file (see config/omrd.toml).
    #[arg(long, value_name = "FILE", global = true)]
    config: Option<PathBuf>,
    /// HTTP listen address.
    #[arg(long, value_name = "ADDR")]
    http_addr: Option<SocketAddr>,
    /// gRPC listen address.
    #[arg(long, value_name = "ADDR")]
    grpc_addr: Option<SocketAddr>,
    /// Data directory (embedded store, address file).
    #[arg(long, value_name = "DIR", global = true)]
    data_dir: Option<PathBuf>,
    /// postgres://… to use PostgreSQL instead of the embedded SQLite store.
    #[arg(long, value_name = "URL", global = true)]
    database_url: Option<String>,
    #[arg(long, value_name = "NAME", help = param_set_help())]
    param_set: Option<String>,
    /// Allow a parameter set marked insecure (tests only).
    #[arg(long)]
    allow_insecure_params: bool,
    /// Log format on stderr.
    #[arg(long, value_enum)]
    log_format: Option<LogFormat>,
    /// PEM certificate chain: with --tls-key, serve HTTPS and gRPC over TLS only.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the OpenAPI 3.1 document of the HTTP API (what GET /openapi.json serves) and exit.
    Openapi,
    /// Invite codes for registration = "invite", on the configured store (while omrd runs or
    /// not; SQLite or PostgreSQL).
    #[command(subcommand)]
    Invite(InviteCommand),
}

#[derive(Debug, Subcommand)]
enum InviteCommand {
    /// Mint an invite code and print it on stdout, once: the store keeps only its SHA-256.
    #[command(after_help = "Examples:
  omrd invite create                                   # one registration, no expiry
  omrd invite create --uses 10 --expires 7d
  omrd --config /etc/omr/omrd.toml invite create --expires 24h
  docker compose exec omrd omrd --config /etc/omr/omrd.toml invite create

Use the same --config / --data-dir / OMR_DATABASE_URL as the running omrd. The recipient \
registers with `omr register --keys DIR --invite CODE`; a use is taken only when a key is \
actually stored.")]
    Create(CreateInvite),
}

#[derive(Debug, clap::Args)]
struct CreateInvite {
    /// Registrations the code admits.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(omr_store::MAX_INVITE_USES)))]
    uses: u32,
    /// Expire this long from now: e.g. 30m, 24h, 7d, "1d 12h" [default: never].
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    expires: Option<Duration>,
}

/// `--param-set`'s help, from the one list of sets.
fn param_set_help() -> String {
    format!(
        "Parameter set to run: {}. Unset: the set the store already holds, or the default on a \
         new store. One store holds one set: omrd refuses to start on keys or messages of \
         another (docs/running.md, \"Moving to another parameter set\")",
        omr_api::param_sets::param_set_list()
    )
}

fn config(args: &Args) -> Result<Config, Box<figment::Error>> {
    let mut c = Config::load(args.config.as_deref())?;
    if let Some(v) = args.http_addr {
        c.http_addr = v;
    }
    if let Some(v) = args.grpc_addr {
        c.grpc_addr = v;
    }
    if let Some(v) = &args.data_dir {
        c.data_dir = v.clone();
    }
    if let Some(v) = &args.database_url {
        c.database_url = Some(v.clone());
    }
    if let Some(v) = &args.param_set {
        c.param_set = Some(v.clone());
    }
    if args.allow_insecure_params {
        c.allow_insecure_params = true;
    }
    if let Some(v) = args.log_format {
        c.log_format = v;
    }
    if let Some(v) = &args.tls_cert {
        c.tls_cert = Some(v.clone());
    }
    if let Some(v) = &args.tls_key {
        c.tls_key = Some(v.clone());
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

/// `omrd invite create`: mint a code on the configured store; the code alone on stdout.
async fn create_invite(config: &Config, a: &CreateInvite) -> anyhow::Result<()> {
    let sqlite = config.data_dir.join("omr.sqlite3");
    if config.database_url.is_none() && !sqlite.exists() {
        // Opening it would create an empty store that no running omrd reads.
        anyhow::bail!(
            "there is no store at {}: give the running omrd's --config, --data-dir or \
             OMR_DATABASE_URL",
            sqlite.display()
        );
    }
    let store = omr_server::app::open_store(config).await?;
    let created = omr_server::service::invites::mint(&store, a.uses, a.expires).await;
    store.close().await;
    let created = created?;
    println!("{}", created.code);
    let place = match &config.database_url {
        Some(_) => "the PostgreSQL store".to_string(),
        None => sqlite.display().to_string(),
    };
    eprintln!(
        "Invite code for {} registration{}, {}, stored (as its SHA-256) in {place}; it is shown \
         only now. The recipient runs: omr register --keys DIR --invite CODE",
        created.uses,
        if created.uses == 1 { "" } else { "s" },
        created
            .expires_at
            .map_or("never expires".to_string(), |t| format!("expires {t}")),
    );
    if config.registration == Registration::Open {
        eprintln!(
            "Note: registration is open in this configuration, so the server needs no code until \
             registration = \"invite\" (OMR_REGISTRATION=invite)."
        );
    }
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(Command::Openapi) = &args.command {
        let document = omr_server::http::openapi_json();
        return match serde_json::to_string_pretty(&document) {
            Ok(json) => {
                println!("{json}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("omrd openapi: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let config = match config(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("omrd: invalid configuration: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(Command::Invite(InviteCommand::Create(a))) = &args.command {
        return match create_invite(&config, a).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("omrd invite create: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    let _telemetry = match omr_server::telemetry::init(config.log_format) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("omrd: cannot set up telemetry: {e:#}");
            return ExitCode::from(2);
        }
    };
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

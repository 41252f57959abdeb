//! Logging and tracing in one place: `tracing` to stderr (human or JSON), plus OpenTelemetry
//! export when `OTEL_EXPORTER_OTLP_ENDPOINT` is set (and `OTEL_SDK_DISABLED` is not `true`).
//! The returned guard flushes and shuts the exporter down when dropped. The exporter's own
//! errors (an unreachable collector fails every export) are not printed as they come — they
//! carry no message — but summarised by [`ExportErrors`]: once, then at most once a minute,
//! saying what to check.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::field::{Field, Visit};
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// How often an OpenTelemetry export failure is logged at most.
const EXPORT_ERROR_EVERY: Duration = Duration::from_secs(60);

/// Whether an event is the OpenTelemetry SDK's or exporter's own log.
fn from_opentelemetry(target: &str) -> bool {
    target.starts_with("opentelemetry")
}

/// Turns the OpenTelemetry crates' warnings and errors into one warning of omrd's that says
/// what failed and what to check, logged at once and then at most every
/// [`EXPORT_ERROR_EVERY`] with the count of those held back.
#[derive(Debug)]
struct ExportErrors {
    endpoint: String,
    last: Mutex<Option<Instant>>,
    held_back: AtomicU64,
}

/// The fields of an event as `name=value` pairs.
#[derive(Default)]
struct Fields(String);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let sep = if self.0.is_empty() { "" } else { ", " };
        let _ = write!(self.0, "{sep}{}={value:?}", field.name());
    }
}

impl<S: tracing::Subscriber> Layer<S> for ExportErrors {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let meta = event.metadata();
        if !from_opentelemetry(meta.target()) || *meta.level() > tracing::Level::WARN {
            return;
        }
        let now = Instant::now();
        {
            let mut last = self.last.lock().expect("export error clock");
            if last.is_some_and(|t| now.duration_since(t) < EXPORT_ERROR_EVERY) {
                self.held_back.fetch_add(1, Ordering::Relaxed);
                return;
            }
            *last = Some(now);
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let held_back = self.held_back.swap(0, Ordering::Relaxed);
        tracing::warn!(
            endpoint = %self.endpoint,
            details = %fields.0,
            held_back,
            "exporting spans to the OpenTelemetry collector failed; spans are dropped until it \
             answers. Check OTEL_EXPORTER_OTLP_ENDPOINT and that the collector is up (logged at \
             most once a minute)"
        );
    }
}

use crate::config::LogFormat;

/// Flushes telemetry on drop.
#[derive(Debug, Default)]
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(p) = self.provider.take() {
            if let Err(e) = p.shutdown() {
                eprintln!("flushing OpenTelemetry spans failed: {e}");
            }
        }
    }
}

fn otel_enabled() -> bool {
    let disabled = std::env::var("OTEL_SDK_DISABLED")
        .map(|v| v.eq_ignore_ascii_case("true"))
        .unwrap_or(false);
    !disabled && std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
}

/// Install the global subscriber. Call once, inside the tokio runtime. `RUST_LOG` filters
/// (default `info`).
pub fn init(format: LogFormat) -> anyhow::Result<TelemetryGuard> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let fmt = match format {
        LogFormat::Human => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_writer(std::io::stderr)
            .boxed(),
    };
    // The OpenTelemetry crates' own events go to `ExportErrors`, not straight to stderr.
    let fmt = fmt.with_filter(filter_fn(|m| !from_opentelemetry(m.target())));
    let mut guard = TelemetryGuard::default();
    let otel = if otel_enabled() {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .build()?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(
                opentelemetry_sdk::Resource::builder()
                    .with_service_name("omrd")
                    .build(),
            )
            .build();
        let tracer = provider.tracer("omrd");
        guard.provider = Some(provider);
        let errors = ExportErrors {
            endpoint: std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").unwrap_or_default(),
            last: Mutex::new(None),
            held_back: AtomicU64::new(0),
        };
        Some((tracing_opentelemetry::layer().with_tracer(tracer), errors))
    } else {
        None
    };
    let (otel, export_errors) = otel.unzip();
    tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .with(otel)
        .with(export_errors)
        .try_init()?;
    Ok(guard)
}

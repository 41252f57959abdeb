//! Logging and tracing in one place: `tracing` to stderr (human or JSON), plus OpenTelemetry
//! export when `OTEL_EXPORTER_OTLP_ENDPOINT` is set (and `OTEL_SDK_DISABLED` is not `true`).
//! The returned guard flushes and shuts the exporter down when dropped.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

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
        Some(tracing_opentelemetry::layer().with_tracer(tracer))
    } else {
        None
    };
    tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .with(otel)
        .try_init()?;
    Ok(guard)
}

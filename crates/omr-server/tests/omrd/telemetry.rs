//! The `omrd` binary exports its traces over OTLP/gRPC when `OTEL_EXPORTER_OTLP_ENDPOINT` is
//! set: a minimal OTLP trace collector (the generated `TraceService` of opentelemetry-proto,
//! served by tonic on an ephemeral port) receives omrd's detection spans.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use omr_proto::v1::registration_header::Start;
use omr_test_support::{wait_until, Omrd};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;

/// Records every export it receives.
#[derive(Debug, Default, Clone)]
struct Collector {
    received: Arc<Mutex<Vec<ExportTraceServiceRequest>>>,
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.received.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

impl Collector {
    /// (service.name, span name) of every span received so far.
    fn spans(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for req in self.received.lock().unwrap().iter() {
            for rs in &req.resource_spans {
                let service = rs
                    .resource
                    .iter()
                    .flat_map(|r| &r.attributes)
                    .find(|kv| kv.key == "service.name")
                    .and_then(|kv| kv.value.as_ref()?.value.as_ref())
                    .map(|v| match v {
                        Value::StringValue(s) => s.clone(),
                        other => format!("{other:?}"),
                    })
                    .unwrap_or_default();
                for ss in &rs.scope_spans {
                    for span in &ss.spans {
                        out.push((service.clone(), span.name.clone()));
                    }
                }
            }
        }
        out
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detection_spans_reach_an_otlp_collector() {
    let collector = Collector::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let otlp = listener.local_addr().unwrap();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(collector.clone()))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );

    let dir = tempfile::tempdir().unwrap();
    let endpoint = format!("http://{otlp}");
    let mut omrd = Omrd::spawn(env!("CARGO_BIN_EXE_omrd"), dir.path(), |cmd| {
        cmd.args(["--param-set", "insecure-test", "--allow-insecure-params"])
            .env_remove("OTEL_SDK_DISABLED")
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
            .env("OTEL_BSP_SCHEDULE_DELAY", "200")
            .env("RUST_LOG", "info");
    });

    // A message for a registered key makes the worker run a detection batch, in a span.
    let keys = omr_core::keygen(&omr_core::INSECURE_TEST, 2).unwrap();
    let clue_key = keys.clue_key.clone();
    omrd.client().register(keys, Start::FromNow(true)).await;
    omrd.client().post(&clue_key, b"traced").await;

    wait_until(
        Duration::from_secs(30),
        "a detect_batch span from service omrd reaches the collector",
        || async {
            collector
                .spans()
                .iter()
                .any(|(service, name)| service == "omrd" && name == "detect_batch")
        },
    )
    .await;
    assert!(omrd.terminate().success());
    server.abort();
}

/// With the collector unreachable, every export fails: omrd says so once (within a minute),
/// with what to check, and prints none of the exporter's own message-less errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_collector_is_reported_once_with_what_to_check() {
    // A port nothing listens on: bound, then closed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let dir = tempfile::tempdir().unwrap();
    let mut omrd = Omrd::spawn(env!("CARGO_BIN_EXE_omrd"), dir.path(), |cmd| {
        cmd.args(["--param-set", "insecure-test", "--allow-insecure-params"])
            .env_remove("OTEL_SDK_DISABLED")
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
            .env("OTEL_BSP_SCHEDULE_DELAY", "100")
            .env("RUST_LOG", "info")
            .stderr(std::process::Stdio::piped());
    });
    let logs = Arc::new(Mutex::new(String::new()));
    let mut stderr = omrd.take_stderr().expect("piped stderr");
    let sink = logs.clone();
    std::thread::spawn(move || {
        use std::io::Read;
        let mut buf = [0u8; 4096];
        while let Ok(n) = stderr.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });

    // Several detection batches, each a span, exported in several failed rounds.
    let keys = omr_core::keygen(&omr_core::INSECURE_TEST, 4).unwrap();
    let clue_key = keys.clue_key.clone();
    let client = omrd.client();
    let r = client.register(keys, Start::FromNow(true)).await;
    const WARNING: &str = "exporting spans to the OpenTelemetry collector failed";
    for payload in [b"one", b"two", b"six"] {
        client.post(&clue_key, payload).await;
        client.caught_up_digest(&r, None).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    wait_until(
        Duration::from_secs(30),
        "omrd reports the failed export",
        || async { logs.lock().unwrap().contains(WARNING) },
    )
    .await;
    assert!(omrd.terminate().success());
    let logs = logs.lock().unwrap().clone();
    assert_eq!(logs.matches(WARNING).count(), 1, "{logs}");
    assert!(logs.contains("OTEL_EXPORTER_OTLP_ENDPOINT"), "{logs}");
    assert!(
        !logs.lines().any(|l| l.contains(" opentelemetry")),
        "the exporter's own lines were printed:\n{logs}"
    );
}

//! Generate a detection key and upload it to a running omrd over gRPC in 1 MiB chunks; print the
//! time taken. For measuring key uploads until the `omr` CLI exists.
//!
//! cargo run --release -p omr-server --example register_key -- http://127.0.0.1:50051 [omr-v1] [kbar]

use std::time::Instant;

use omr_proto::v1::detector_client::DetectorClient;
use omr_proto::v1::registration_header::Start;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "http://127.0.0.1:50051".to_string());
    let params = omr_core::ParamSet::by_name(&args.next().unwrap_or_else(|| "omr-v1".into()))?;
    let kbar: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(50);
    let key = omr_core::keygen(params, kbar)?.detection_key.to_bytes();
    let msgs =
        omr_proto::registration_requests(params.name, kbar as u32, Start::FromNow(true), &key);
    let mut client = DetectorClient::connect(url)
        .await?
        .max_encoding_message_size(8 << 20);
    let started = Instant::now();
    let r = client
        .register_detection_key(tokio_stream::iter(msgs))
        .await?
        .into_inner();
    println!(
        "{{\"key_bytes\": {}, \"upload_ms\": {:.0}, \"key_id\": \"{}\"}}",
        key.len(),
        started.elapsed().as_secs_f64() * 1e3,
        r.key_id
    );
    Ok(())
}

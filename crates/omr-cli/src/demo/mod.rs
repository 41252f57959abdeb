//! `omr demo`: an embedded omrd, recipients, a board, detection, digests — checked end to end.
//! This module starts the embedded omrd and reports; `phases` runs the demo against it.

mod phases;

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::Args;
use omr_client::{Client, Keys, Registration};
use serde_json::json;

use crate::print_json;
use crate::ui::{self, Ui};

const NAMES: [&str; 8] = [
    "alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi",
];

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Recipients (each holds an expanded detection key in the server: ≈ 362 MB for omr-v1).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=8))]
    recipients: u64,
    /// Messages on the board [default: 24]. On omr-light-v1 every payload comes by PIR, from
    /// the open epoch's snapshot (and, past 4,096 messages, the closed epochs' too).
    #[arg(long)]
    messages: Option<usize>,
    /// Messages sent to each recipient (the rest go to an outsider).
    #[arg(long, default_value_t = 2)]
    per_recipient: usize,
    /// k̄ of the recipients' keys.
    #[arg(long, default_value_t = 50)]
    kbar: usize,
    /// Detection threads in the embedded omrd [default: one per core].
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Parameter set: omr-v2, omr-v1 or omr-light-v1 (linear detection; payloads by PIR).
    #[arg(long, default_value = omr_api::param_sets::DEFAULT_PARAM_SET)]
    param_set: String,
    /// Use the fast insecure-test parameter set (NOT secure; to try things quickly).
    #[arg(long, conflicts_with = "param_set")]
    insecure_test_params: bool,
    /// Keep the embedded omrd's data directory here instead of a temporary one.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<std::path::PathBuf>,
}

struct Recipient {
    name: String,
    keys: Keys,
    reg: Registration,
    /// What was sent to it: board index → payload.
    sent: BTreeMap<u64, Vec<u8>>,
}

pub async fn run(a: DemoArgs, ui: Ui, json_out: bool) -> anyhow::Result<()> {
    let name = (a.insecure_test_params).then_some(omr_core::INSECURE_TEST.name);
    let (set, insecure, max_kbar) = crate::commands::known_set(name.unwrap_or(&a.param_set))?;
    let light = set == omr_client::scheme::LIGHT_SET;
    let messages = a.messages.unwrap_or(24);
    let n = a.recipients as usize;
    let kbar = a.kbar.min(max_kbar);
    if a.per_recipient * n > messages {
        bail!(
            "--per-recipient {} × --recipients {n} is more than --messages {messages}",
            a.per_recipient,
        );
    }
    if a.per_recipient > kbar && !light {
        bail!(
            "--per-recipient {} is more than k̄ = {kbar}",
            a.per_recipient
        );
    }
    let say = |s: String| {
        if !json_out {
            println!("{s}");
        }
    };
    let started = Instant::now();

    // 1. omrd, in this process, on ephemeral ports and a fresh embedded store.
    let tmp = tempfile::tempdir().context("creating a temporary directory")?;
    let data_dir = a
        .data_dir
        .clone()
        .unwrap_or_else(|| tmp.path().to_path_buf());
    let config = omr_server::Config {
        http_addr: "127.0.0.1:0".parse()?,
        grpc_addr: "127.0.0.1:0".parse()?,
        data_dir: data_dir.clone(),
        param_set: Some(set.to_string()),
        allow_insecure_params: insecure,
        worker_threads: a.threads,
        // Every key stays in memory for the whole demo: files of expanded keys would never be
        // read back.
        key_disk_bytes: Some(0),
        ..Default::default()
    }
    .without_rate_limits();
    let app = omr_server::Application::build(config)
        .await
        .context("starting the embedded omrd")?;
    let (http, grpc) = (
        format!("http://{}", app.http_addr()),
        format!(
            "http://{}",
            app.grpc_addr().context("the embedded omrd serves gRPC")?
        ),
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(app.run_until_stopped(async move {
        let _ = stopped.await;
    }));
    say(format!(
        "omrd ({}{}) on {http} (HTTP) and {grpc} (gRPC), SQLite in {}",
        set,
        if insecure {
            ", INSECURE test parameters"
        } else {
            ""
        },
        data_dir.display()
    ));
    // The demo shows the server's side: digests and the payload fetch, not a recipient that
    // reads the board's newest messages itself (which a client this close to the head does).
    let options = omr_client::ClientOptions {
        tail_messages: 0,
        ..Default::default()
    };
    let client = Client::with_options(&http, &grpc, options)?;

    let result = phases::flow(&a, set, messages, kbar, &client, ui, &say).await;
    let _ = stop.send(());
    server.await.context("omrd task")??;
    let (report, ok) = result?;
    if json_out {
        let mut report = report;
        report["elapsed_ms"] = json!(started.elapsed().as_secs_f64() * 1e3);
        print_json(&report);
    }
    if !ok {
        bail!("demo FAILED: a recipient's retrieved messages differ from what was sent to it");
    }
    say(format!(
        "OK: every recipient retrieved exactly its messages ({} in all).",
        ui::secs(started.elapsed())
    ));
    Ok(())
}

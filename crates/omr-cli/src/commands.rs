//! The commands other than `demo`.

use std::io::Read;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use base64::Engine as _;
use clap::Args;
use omr_bench::{BenchOptions, BenchPhase};
use omr_client::keydir::{self, KeyDir};
use omr_client::StartAt;
use omr_core::ParamSet;
use serde_json::json;

use crate::ui::{self, Ui};
use crate::{print_json, KeysDir, Servers};

#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Directory to write the keys to (created 0700 if missing).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Most messages one digest decodes (k̄); more in a range makes `omr digest` split it
    /// [default: 50, or the parameter set's maximum if lower].
    #[arg(long)]
    kbar: Option<usize>,
    /// Parameter set; must be the server's.
    #[arg(long, default_value = "omr-v1")]
    param_set: String,
    /// Allow a parameter set marked insecure (insecure-test): for tests only.
    #[arg(long)]
    allow_insecure_params: bool,
    /// Replace keys already in DIR (their registration and digests become useless).
    #[arg(long)]
    force: bool,
}

pub async fn keygen(a: KeygenArgs, ui: Ui, json: bool) -> anyhow::Result<()> {
    let params = param_set(&a.param_set, a.allow_insecure_params)?;
    let kbar = a.kbar.unwrap_or(50.min(params.max_kbar));
    if KeyDir::new(&a.out).file(keydir::SECRET_KEY_FILE).exists() && !a.force {
        bail!(
            "{} already holds a secret key; choose another directory or pass --force to replace it",
            a.out.display()
        );
    }
    let pb = ui.spinner(format!("generating {} keys (k̄ = {kbar})", params.name));
    let started = Instant::now();
    let keys = tokio::task::spawn_blocking(move || omr_core::keygen(params, kbar)).await??;
    let elapsed = started.elapsed();
    pb.finish_and_clear();
    let dir = KeyDir::create(&a.out, &keys, a.force)?;
    let files = [
        (keydir::SECRET_KEY_FILE, "secret: keep it (mode 0600)"),
        (keydir::CLUE_KEY_FILE, "public address: give it to senders"),
        (
            keydir::DETECTION_KEY_FILE,
            "upload it with `omr register --keys DIR`",
        ),
    ];
    let sizes: Vec<u64> = files
        .iter()
        .map(|(f, _)| std::fs::metadata(dir.file(f)).map(|m| m.len()).unwrap_or(0))
        .collect();
    if json {
        print_json(&json!({
            "dir": dir.path(),
            "param_set": params.name,
            "kbar": kbar,
            "keygen_ms": elapsed.as_secs_f64() * 1e3,
            "files": files.iter().zip(&sizes).map(|((f, _), s)| json!({
                "path": dir.file(f), "bytes": s,
            })).collect::<Vec<_>>(),
        }));
    } else {
        println!(
            "Generated {} keys (k̄ = {kbar}) in {}:",
            params.name,
            ui::secs(elapsed)
        );
        for ((f, what), s) in files.iter().zip(&sizes) {
            println!(
                "  {:<40} {:>9}  {what}",
                dir.file(f).display(),
                ui::size(*s)
            );
        }
    }
    Ok(())
}

fn param_set(name: &str, allow_insecure: bool) -> anyhow::Result<&'static ParamSet> {
    let params = ParamSet::by_name(name).with_context(|| {
        format!("unknown parameter set {name:?} (known: omr-v1; insecure-test for tests)")
    })?;
    if params.insecure && !allow_insecure {
        bail!(
            "parameter set {} is insecure (for tests only); pass --allow-insecure-params to use it anyway",
            params.name
        );
    }
    Ok(params)
}

#[derive(Debug, Args)]
pub struct RegisterArgs {
    #[command(flatten)]
    keys: KeysDir,
    #[command(flatten)]
    servers: Servers,
    /// Detect from this board index instead of from the board head at registration.
    #[arg(long, value_name = "INDEX")]
    start_index: Option<u64>,
    /// Register again even though DIR/registration.json exists (the old key stays on the
    /// server until deleted).
    #[arg(long)]
    force: bool,
}

pub async fn register(a: RegisterArgs, ui: Ui, json: bool) -> anyhow::Result<()> {
    let dir = KeyDir::new(&a.keys.keys);
    if let Some(old) = dir.registration()? {
        if !a.force {
            bail!(
                "{} is already registered as key {} at {}; run `omr delete --keys {}` first, or pass --force",
                dir.path().display(),
                old.key_id,
                old.grpc_url,
                dir.path().display()
            );
        }
    }
    let key = dir.detection_key_bytes()?;
    let client = a.servers.client(None)?;
    let pb = ui.bytes(
        format!("uploading to {}", client.grpc_url()),
        key.len() as u64,
    );
    let started = Instant::now();
    let start = a.start_index.map_or(StartAt::Now, StartAt::Index);
    let reg = client.register(&key, start, Some(ui::progress(&pb))).await;
    pb.finish_and_clear();
    let reg = reg?;
    let elapsed = started.elapsed();
    dir.save_registration(&reg)?;
    let reg_file = dir.file(keydir::REGISTRATION_FILE);
    if json {
        print_json(&json!({
            "key_id": reg.key_id,
            "start_index": reg.start_index,
            "param_set": reg.param_set,
            "kbar": reg.kbar,
            "key_bytes": key.len(),
            "upload_ms": elapsed.as_secs_f64() * 1e3,
            "registration": reg_file,
        }));
    } else {
        println!(
            "Registered key {} ({} in {}); detection starts at board index {}.",
            reg.key_id,
            ui::size(key.len() as u64),
            ui::secs(elapsed),
            reg.start_index
        );
        println!(
            "Key id and access token saved to {} (mode 0600).",
            reg_file.display()
        );
    }
    Ok(())
}

#[derive(Debug, Args)]
pub struct SendArgs {
    /// The recipient's clue key file (their public address).
    #[arg(long, value_name = "CLUE_KEY_FILE")]
    to: PathBuf,
    /// The payload: a file, or - for standard input.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "message",
        required_unless_present = "message"
    )]
    payload: Option<PathBuf>,
    /// The payload as text.
    #[arg(long, value_name = "TEXT")]
    message: Option<String>,
    #[command(flatten)]
    servers: Servers,
}

pub async fn send(a: SendArgs, json: bool) -> anyhow::Result<()> {
    let clue_key = keydir::read_clue_key(&a.to)?;
    let payload = match (&a.payload, &a.message) {
        (_, Some(text)) => text.clone().into_bytes(),
        (Some(p), None) if p.as_os_str() == "-" => {
            let mut b = Vec::new();
            std::io::stdin()
                .read_to_end(&mut b)
                .context("reading the payload from standard input")?;
            b
        }
        (Some(p), None) => {
            std::fs::read(p).with_context(|| format!("cannot read payload {}", p.display()))?
        }
        (None, None) => unreachable!("clap requires --payload or --message"),
    };
    omr_core::validate_payload(clue_key.params(), &payload)
        .with_context(|| format!("payload for {}", a.to.display()))?;
    let client = a.servers.client(None)?;
    let index = client.send(&clue_key, &payload).await?;
    if json {
        print_json(&json!({ "index": index, "payload_bytes": payload.len() }));
    } else {
        println!("{index}");
    }
    Ok(())
}

#[derive(Debug, Args)]
pub struct DigestArgs {
    #[command(flatten)]
    keys: KeysDir,
    #[command(flatten)]
    servers: Servers,
    /// Also write each message's payload to DIR/INDEX.bin.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Start from this board index instead of where the last call stopped.
    #[arg(long, value_name = "INDEX")]
    from: Option<u64>,
}

pub async fn digest(a: DigestArgs, ui: Ui, json: bool) -> anyhow::Result<()> {
    let dir = KeyDir::new(&a.keys.keys);
    let reg = dir.require_registration()?;
    let secret = dir.secret_key()?;
    let mut state = dir.digest_state(&reg)?;
    if let Some(from) = a.from {
        state.next_from = from.max(reg.start_index);
        state.seen.clear();
    }
    let client = a.servers.client(Some(&reg))?;
    let pb = ui.bytes("downloading digest", 0);
    let started = Instant::now();
    let got = client
        .retrieve(&secret, &reg, &mut state, Some(ui::progress(&pb)))
        .await;
    pb.finish_and_clear();
    let got = got?;
    let elapsed = started.elapsed();
    if let Some(out) = &a.out {
        std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
        for m in &got.messages {
            let path = out.join(format!("{}.bin", m.index));
            std::fs::write(&path, &m.payload)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    // Only now that the payloads are safe is the state advanced on disk.
    dir.save_digest_state(&state)?;
    if json {
        let mut v = serde_json::to_value(&got).expect("serializable");
        v["key_id"] = json!(reg.key_id);
        v["elapsed_ms"] = json!(elapsed.as_secs_f64() * 1e3);
        v["messages"] = got
            .messages
            .iter()
            .map(|m| {
                json!({
                    "index": m.index,
                    "bytes": m.payload.len(),
                    "payload_base64": base64::engine::general_purpose::STANDARD.encode(&m.payload),
                    "text": std::str::from_utf8(&m.payload).ok(),
                })
            })
            .collect();
        print_json(&v);
    } else {
        println!(
            "{} new message{} in board indices [{}, {}) ({} digest{}, {}, {}); board head {}, {} not yet detected.",
            got.messages.len(),
            if got.messages.len() == 1 { "" } else { "s" },
            got.from,
            got.to,
            got.digests,
            if got.digests == 1 { "" } else { "s" },
            ui::size(got.digest_bytes as u64),
            ui::secs(elapsed),
            got.board_head,
            got.lag,
        );
        for m in &got.messages {
            println!(
                "  #{:<8} {:>5} B  {}",
                m.index,
                m.payload.len(),
                ui::preview(&m.payload)
            );
        }
    }
    Ok(())
}

pub async fn status(a: KeyArgs, json: bool) -> anyhow::Result<()> {
    let dir = KeyDir::new(&a.keys.keys);
    let reg = dir.require_registration()?;
    let client = a.servers.client(Some(&reg))?;
    let s = client.key_status(&reg).await?;
    if json {
        print_json(&serde_json::to_value(&s).expect("serializable"));
    } else {
        println!("key {} at {}", s.key_id, client.grpc_url());
        println!("  parameter set  {} (k̄ = {})", s.param_set, s.kbar);
        println!("  registered     {}", s.registered_at);
        println!("  detection key  {}", ui::size(s.key_bytes));
        println!("  start index    {}", s.start_index);
        println!(
            "  detected up to {} (board head {})",
            s.cursor, s.board_head
        );
        println!(
            "  lag            {} message{}",
            s.lag,
            if s.lag == 1 { "" } else { "s" }
        );
    }
    Ok(())
}

#[derive(Debug, Args)]
pub struct KeyArgs {
    #[command(flatten)]
    keys: KeysDir,
    #[command(flatten)]
    servers: Servers,
}

pub async fn delete(a: KeyArgs, json: bool) -> anyhow::Result<()> {
    let dir = KeyDir::new(&a.keys.keys);
    let reg = dir.require_registration()?;
    let client = a.servers.client(Some(&reg))?;
    match client.delete_key(&reg).await {
        // Already gone on the server: forgetting it locally is what the user wants.
        Ok(()) | Err(omr_client::Error::UnknownKey { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    dir.remove_registration()?;
    if json {
        print_json(&json!({ "deleted": reg.key_id }));
    } else {
        println!(
            "Deleted key {} from {}; removed {}.",
            reg.key_id,
            client.grpc_url(),
            dir.file(keydir::REGISTRATION_FILE).display()
        );
    }
    Ok(())
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Parameter set to measure.
    #[arg(long, default_value = "omr-v1")]
    param_set: String,
    /// Detection threads.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Messages detected.
    #[arg(long, default_value_t = 8)]
    messages: usize,
    /// k̄ of the benchmarked key [default: 50, or the parameter set's maximum if lower].
    #[arg(long)]
    kbar: Option<usize>,
    /// Messages for the benchmarked recipient [default: half, at most k̄].
    #[arg(long)]
    pertinent: Option<usize>,
    /// Clues detected together (they share key loads; the server uses up to detect_batch).
    #[arg(long, default_value_t = 4)]
    batch: usize,
}

pub async fn bench(a: BenchArgs, ui: Ui, json: bool) -> anyhow::Result<()> {
    // Measuring an insecure set is harmless: no flag needed.
    let params = ParamSet::by_name(&a.param_set)
        .with_context(|| format!("unknown parameter set {:?}", a.param_set))?;
    let mut o = BenchOptions::new(params);
    o.threads = a.threads;
    o.messages = a.messages;
    o.kbar = a.kbar.unwrap_or(o.kbar);
    o.pertinent = a.pertinent.unwrap_or((a.messages / 2).min(o.kbar));
    o.batch = a.batch;
    let kbar = o.kbar;
    let pb = ui.items("benchmark", 1, "");
    let pb2 = pb.clone();
    let report = tokio::task::spawn_blocking(move || {
        omr_bench::run(&o, &move |phase, done, total| {
            let name = match phase {
                BenchPhase::Keygen => "generating keys",
                BenchPhase::Reference => "timing the reference PBS",
                BenchPhase::Detect => "detecting",
                BenchPhase::Fold => "folding",
                BenchPhase::Decode => "decoding",
            };
            pb2.set_message(name);
            pb2.set_length(total);
            pb2.set_position(done);
        })
    })
    .await??;
    pb.finish_and_clear();
    if json {
        print_json(&report);
    } else {
        let f = |k: &str| report[k].as_f64().unwrap_or(f64::NAN);
        let st = |k: &str| report["stage_ms"][k].as_f64().unwrap_or(f64::NAN);
        let n = |k: &str| report[k].as_u64().unwrap_or(0);
        println!(
            "{} on {} thread{}, {} messages, batch {}, k̄ = {}:",
            params.name,
            a.threads,
            if a.threads == 1 { "" } else { "s" },
            a.messages,
            a.batch,
            kbar
        );
        println!(
            "  detection        {:>9.1} ms/message",
            f("detect_ms_per_message")
        );
        for s in ["level1", "keyswitch", "level2", "trace", "fold"] {
            println!("    {s:<14} {:>9.1} ms", st(s));
        }
        println!(
            "  reference PBS    {:>9.1} ms (tfhe-rs KS+PBS, for machine speed)",
            f("reference_pbs_ms")
        );
        println!("  digest encode    {:>9.1} ms", f("digest_encode_ms"));
        println!("  decode           {:>9.1} ms", f("decode_ms"));
        println!("  keygen           {:>9.1} ms", f("keygen_ms"));
        println!("  key expansion    {:>9.1} ms", f("expand_ms"));
        println!("  clue             {:>9}", ui::size(n("clue_bytes")));
        println!("  clue key         {:>9}", ui::size(n("clue_key_bytes")));
        println!(
            "  detection key    {:>9} (in memory {})",
            ui::size(n("detection_key_bytes")),
            ui::size(n("detection_key_memory_bytes"))
        );
        println!("  digest           {:>9}", ui::size(n("digest_bytes")));
    }
    Ok(())
}

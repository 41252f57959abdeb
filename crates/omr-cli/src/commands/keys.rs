//! `omr keygen`, `omr register`, `omr status` and `omr delete`: a recipient's keys and their
//! registration with omrd.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{anyhow, bail, Context};
use clap::Args;
use omr_client::keydir::{self, KeyDir};
use omr_client::{Keys, StartAt};
use serde_json::json;

use crate::ui::{self, Ui};
use crate::{print_json, KeysDir, Servers};

#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Directory to write the keys to (created 0700 if missing).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Most messages one digest decodes (k̄); more in a range makes `omr digest` split it
    /// [default: 50, or the parameter set's maximum if lower; omr-light-v1 has no k̄: its
    /// digest names every message of its range].
    #[arg(long)]
    kbar: Option<usize>,
    /// Parameter set; must be the server's: `omr-v2` (TFHE, payloads inside the digest),
    /// `omr-v1` (TFHE, a longer digest range, a larger key) or `omr-light-v1` (linear
    /// detection, far cheaper to serve; payloads by PIR).
    #[arg(long, default_value = omr_api::param_sets::DEFAULT_PARAM_SET)]
    param_set: String,
    /// Allow a parameter set marked insecure (insecure-test): for tests only.
    #[arg(long)]
    allow_insecure_params: bool,
    /// Replace keys already in DIR (their registration and digests become useless).
    #[arg(long)]
    force: bool,
}

pub async fn keygen(a: KeygenArgs, ui: Ui, json: bool) -> anyhow::Result<()> {
    let (name, max_kbar) = param_set(&a.param_set, a.allow_insecure_params)?;
    if a.kbar.is_some_and(|k| k != 1) && name == omr_client::scheme::LIGHT_SET {
        bail!(
            "--kbar does not apply to {name}: its digest names every message of its range (k̄ is 1)"
        );
    }
    let kbar = a.kbar.unwrap_or(50.min(max_kbar));
    if KeyDir::new(&a.out).file(keydir::SECRET_KEY_FILE).exists() && !a.force {
        bail!(
            "{} already holds a secret key; choose another directory or pass --force to replace it",
            a.out.display()
        );
    }
    let pb = ui.spinner(format!("generating {name} keys (k̄ = {kbar})"));
    let started = Instant::now();
    let keys = tokio::task::spawn_blocking(move || Keys::generate(name, kbar)).await??;
    let elapsed = started.elapsed();
    pb.finish_and_clear();
    let dir = KeyDir::create_keys(&a.out, &keys, a.force)?;
    let files = [
        (keydir::SECRET_KEY_FILE, "secret: keep it (mode 0600)"),
        (
            keydir::SEAL_KEY_FILE,
            "secret: opens sealed payloads (mode 0600)",
        ),
        (
            keydir::ADDRESS_FILE,
            "public address: give it to senders (`omr address`)",
        ),
        (
            keydir::CLUE_KEY_FILE,
            "public clue key (inside the address)",
        ),
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
            "param_set": name,
            "kbar": kbar,
            "keygen_ms": elapsed.as_secs_f64() * 1e3,
            "files": files.iter().zip(&sizes).map(|((f, _), s)| json!({
                "path": dir.file(f), "bytes": s,
            })).collect::<Vec<_>>(),
        }));
    } else {
        let kbar = match name == omr_client::scheme::LIGHT_SET {
            true => String::new(), // no k̄: the digest names every message of its range
            false => format!(" (k̄ = {kbar})"),
        };
        println!("Generated {name} keys{kbar} in {}:", ui::secs(elapsed));
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

/// The parameter set `name` of either scheme: its name, whether it is insecure, and its
/// largest k̄; or an error naming the sets there are.
pub fn known_set(name: &str) -> anyhow::Result<(&'static str, bool, usize)> {
    omr_client::scheme::param_set(name).with_context(|| {
        format!(
            "unknown parameter set {name:?} (known: {}; insecure-test for tests)",
            omr_api::param_sets::param_set_list()
        )
    })
}

/// The parameter set `name` (either scheme), refused if insecure unless allowed: its name and
/// largest k̄.
fn param_set(name: &str, allow_insecure: bool) -> anyhow::Result<(&'static str, usize)> {
    let (name, insecure, max_kbar) = known_set(name)?;
    if insecure && !allow_insecure {
        bail!(
            "parameter set {name} is insecure (for tests only); pass --allow-insecure-params to use it anyway"
        );
    }
    Ok((name, max_kbar))
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
    /// An invite code from the server's operator (32 hex digits), for a server that registers
    /// keys only by invitation.
    #[arg(long, value_name = "CODE")]
    invite: Option<String>,
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
    if let Some(code) = &a.invite {
        // Before reading a 107 MB key: a typo is caught here, not after the upload starts.
        omr_client::normalize_invite_code(code).map_err(|e| anyhow!("--invite: {e}"))?;
    }
    let key = dir.detection_key_bytes()?;
    let client = a.servers.client(None)?;
    let pb = ui.bytes(
        format!("uploading to {}", client.grpc_url()),
        key.len() as u64,
    );
    let started = Instant::now();
    let start = a.start_index.map_or(StartAt::Now, StartAt::Index);
    let invite = a.invite.as_deref();
    let progress = Some(ui::progress(&pb));
    let reg = client
        .register_with_invite(&key, start, invite, progress)
        .await;
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
        println!("  detection      {}", describe_state(&s.state, s.eta_secs));
        if let Some(at) = s.refresh_at {
            // omr-light-v1: its open batch is detected again when the board reaches `at`.
            println!("  next refresh   when the board reaches {at} (asked for by a digest)");
        }
    }
    Ok(())
}

/// The key's detection state for people.
fn describe_state(state: &str, eta_secs: Option<u64>) -> String {
    let eta = match eta_secs {
        Some(s) if s >= 120 => format!(" (caught up in about {} min)", s.div_ceil(60)),
        Some(s) => format!(" (caught up in about {s} s)"),
        None => String::new(),
    };
    match state {
        "caught_up" => "caught up".to_string(),
        "detecting" => format!("being detected now{eta}"),
        "waiting" => format!("waiting for its turn{eta}"),
        "unassigned" => "unassigned: no detection worker holds this key (tell the operator)".into(),
        other => other.to_string(),
    }
}

#[derive(Debug, Args)]
pub struct AddressArgs {
    #[command(flatten)]
    keys: KeysDir,
}

/// `omr address`: the key directory's address, as one line to copy.
pub async fn address(a: AddressArgs, json: bool) -> anyhow::Result<()> {
    let address = KeyDir::new(&a.keys.keys).address()?;
    let text = address.encode();
    if json {
        print_json(&json!({
            "address": text,
            "chars": text.len(),
            "param_set": address.clue_key.param_set(),
        }));
    } else {
        println!("{text}");
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

//! `omr send` (a sender posts to a clue key) and `omr digest` (a recipient retrieves; with
//! `--follow` it stays and prints each new message as the server detects it).
//!
//! Long: send and digest share their key-directory, output and follow handling; splitting them would scatter one command family.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use omr_client::keydir::{self, DigestState, KeyDir, Registration};
use omr_client::mailbox;
use omr_client::{
    Address, Client, ClientOptions, ClueKey, Follow, Progress, Retrieval, SealKey, SecretKey,
    FOLLOW_RETRY,
};
use serde_json::json;

use super::attachments;
use super::letters::{message_json, print_message, seal_key, write_payloads};
use crate::ui::{self, Ui};
use crate::{print_json, KeysDir, Servers};

#[derive(Debug, Args)]
pub struct SendArgs {
    /// The recipient: their address (the `omr1…` text `omr address` prints), a file holding it
    /// (`DIR/address`), or a bare clue key file (`DIR/clue.key`: cannot seal, needs
    /// --plaintext).
    #[arg(long, value_name = "ADDRESS|FILE")]
    to: String,
    /// Post the payload unsealed, readable by anyone who reads the board (the default seals it
    /// to the recipient).
    #[arg(long)]
    plaintext: bool,
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
    /// Attach FILE (up to the server's max_attachment_bytes less 50 bytes of seal), sealed to
    /// the recipient like the payload; the recipient fetches it by PIR once its epoch closes.
    #[arg(long, value_name = "FILE", conflicts_with = "plaintext")]
    attach: Option<PathBuf>,
    /// Threads that search for the postage stamp when the server asks for one (0: every core).
    #[arg(long, value_name = "N", default_value_t = 0)]
    postage_threads: usize,
    #[command(flatten)]
    servers: Servers,
}

/// Who `omr send --to` names.
enum Recipient {
    Address(Address),
    /// A clue key alone (from `clue.key`): no seal key.
    ClueKey(ClueKey),
}

/// `--to`: an address, an address file, or a clue key file.
fn recipient(to: &str) -> anyhow::Result<Recipient> {
    if Address::looks_like(to) {
        return Ok(Recipient::Address(Address::parse(to)?));
    }
    let path = Path::new(to);
    let head = std::fs::File::open(path)
        .and_then(|f| {
            let mut head = Vec::new();
            f.take(4).read_to_end(&mut head).map(|_| head)
        })
        .with_context(|| {
            format!("cannot read --to {to}: it is not an address (omr1…) nor a readable file")
        })?;
    if head == omr_client::address::ADDRESS_PREFIX.as_bytes() {
        Ok(Recipient::Address(keydir::read_address(path)?))
    } else {
        Ok(Recipient::ClueKey(keydir::read_clue_key(path)?))
    }
}

pub async fn send(a: SendArgs, ui: Ui, json: bool) -> anyhow::Result<()> {
    let to = recipient(&a.to)?;
    let (clue_key, seal_to) = match to {
        Recipient::Address(address) if a.plaintext => (address.clue_key, None),
        Recipient::Address(address) => (address.clue_key.clone(), Some(address)),
        Recipient::ClueKey(k) if a.plaintext => (k, None),
        Recipient::ClueKey(_) => bail!(
            "--to {}: a clue key alone cannot seal the payload (it has no seal key). Send to \
             the recipient's address instead (`omr address --keys DIR` prints it; DIR/address \
             holds it), or pass --plaintext to post the payload readable by anyone",
            a.to
        ),
    };
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
    if seal_to.is_none() {
        (clue_key.validate_payload(&payload)).with_context(|| format!("payload for {}", a.to))?;
    }
    let attachment = match &a.attach {
        Some(path) => Some(
            std::fs::read(path)
                .with_context(|| format!("cannot read attachment {}", path.display()))?,
        ),
        None => None,
    };
    let options = ClientOptions {
        postage_threads: a.postage_threads,
        ..ClientOptions::default()
    };
    let client = a.servers.client_with(None, options)?;
    let spinner = Arc::new(ui.spinner_after("stamping (postage)", Duration::from_secs(1)));
    let progress: Progress = {
        let spinner = spinner.clone();
        Arc::new(move |hashes, expected| {
            spinner.update(|| {
                format!(
                    "{:.1} M of ~{:.1} M hashes",
                    hashes as f64 / 1e6,
                    expected as f64 / 1e6
                )
            })
        })
    };
    let sent = match (&seal_to, &attachment) {
        (Some(address), Some(file)) => {
            (client.send_with_attachment(address, &payload, file, Some(progress))).await
        }
        (Some(address), None) => client.send_to(address, &payload, Some(progress)).await,
        (None, _) => {
            client
                .send_stamped(&clue_key, &payload, Some(progress))
                .await
        }
    };
    spinner.finish_and_clear();
    let sent = sent?;
    if json {
        let postage = sent.stamp.map(|s| {
            json!({
                "bits": s.bits,
                "nonce": s.nonce,
                "hashes": s.hashes,
                "threads": s.threads,
                "solve_ms": s.elapsed.as_secs_f64() * 1e3,
            })
        });
        print_json(&json!({
            "index": sent.index,
            "payload_bytes": payload.len(),
            "sealed": seal_to.is_some(),
            "attachment_bytes": attachment.as_ref().map(Vec::len),
            "postage": postage,
        }));
    } else {
        println!("{}", sent.index);
        if let (Some(s), false) = (sent.stamp, ui.quiet) {
            eprintln!(
                "postage: {} bits in {} ({:.1} M hashes on {} thread{})",
                s.bits,
                ui::secs_ms(s.elapsed),
                s.hashes as f64 / 1e6,
                s.threads,
                if s.threads == 1 { "" } else { "s" }
            );
        }
    }
    Ok(())
}

#[derive(Debug, Args)]
pub struct DigestArgs {
    #[command(flatten)]
    keys: KeysDir,
    #[command(flatten)]
    servers: Servers,
    /// Also write each message's payload to DIR/INDEX.bin, and fetch attachments by PIR to
    /// DIR/INDEX.attachment (one per closed epoch per call; the rest on the next call).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Start from this board index instead of where the last call stopped.
    #[arg(long, value_name = "INDEX")]
    from: Option<u64>,
    /// Then keep waiting, and print each new message as the server detects it, until Ctrl-C.
    /// On omr-light-v1 it reads the board's new messages itself each second.
    #[arg(long)]
    follow: bool,
    /// omr-light-v1: when at most this many board messages behind, read them from the board
    /// and check their clues here instead of asking for a digest and fetching the payloads by
    /// PIR (≈ 4 KB a message; the server does no work for it); 0: always digest and PIR.
    #[arg(long, value_name = "N", default_value_t = omr_client::DEFAULT_TAIL_MESSAGES)]
    tail_messages: u64,
}

/// For `--follow`: `Some` of what a call returned; `None`, after a warning and a pause of
/// [`FOLLOW_RETRY`], when it failed in a way worth trying again (the server restarting or out of
/// reach), so that the caller keeps following; any other failure.
async fn unless_transient<T>(r: omr_client::Result<T>) -> anyhow::Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.is_transient() => {
            warn_retrying(&e);
            tokio::time::sleep(FOLLOW_RETRY).await;
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

fn warn_retrying(e: &omr_client::Error) {
    eprintln!("warning: {e}; trying again in {} s", FOLLOW_RETRY.as_secs());
}

pub async fn digest(a: DigestArgs, ui: Ui, json: bool) -> anyhow::Result<()> {
    let dir = KeyDir::new(&a.keys.keys);
    let reg = dir.require_registration()?;
    let secret = dir.secret()?;
    let seal = seal_key(&dir)?;
    let mut state = dir.digest_state(&reg)?;
    if let Some(from) = a.from {
        state.next_from = from.max(reg.start_index);
        state.seen.clear();
    }
    let options = ClientOptions {
        tail_messages: a.tail_messages,
        ..ClientOptions::default()
    };
    let client = a.servers.client_with(Some(&reg), options)?;
    let pb = ui.bytes("downloading digest", 0);
    let started = Instant::now();
    let got = client
        .retrieve(&secret, &reg, &mut state, Some(ui::progress(&pb)))
        .await;
    pb.finish_and_clear();
    let got = got?;
    let elapsed = started.elapsed();
    let letters = mailbox::open_letters(seal.as_ref(), &got);
    let out = a.out.as_deref();
    write_payloads(out, &letters)?;
    let arrived = attachments::arrived(seal.as_ref(), &mut state, &got, &letters, out)?;
    mailbox::remember_attachments(&mut state, &got, &letters);
    // Only now that the payloads are safe is the state advanced on disk.
    dir.save_digest_state(&state)?;
    let fetched =
        attachments::fetch(&client, seal.as_ref(), &mut state, out, got.board_head, &ui).await;
    dir.save_digest_state(&state)?;
    let mut fetched = fetched?;
    fetched.splice(0..0, arrived);
    if json {
        let mut v = serde_json::to_value(&got).expect("serializable");
        v["key_id"] = json!(reg.key_id);
        v["elapsed_ms"] = json!(elapsed.as_secs_f64() * 1e3);
        v["messages"] = letters.iter().map(message_json).collect();
        v["attachments"] = fetched.iter().map(attachments::Outcome::json).collect();
        print_json(&v);
    } else {
        println!(
            "{} new message{} in board indices [{}, {}) ({} digest{}, {}, {}); board head {}, {} not yet detected{}.",
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
            match got.pending.len() {
                0 => String::new(),
                n => format!("; {n} detected whose payload comes on a later call"),
            }
        );
        if let Some(tail) = &got.tail {
            println!(
                "  read the board's newest {} message{} itself ({})",
                tail.messages,
                if tail.messages == 1 { "" } else { "s" },
                ui::size(tail.bytes)
            );
        }
        for m in &letters {
            print_message(m);
        }
        print_light(&got);
        fetched.iter().for_each(attachments::Outcome::print);
    }
    if a.follow {
        let following = Following {
            client: &client,
            dir: &dir,
            reg: &reg,
            secret: &secret,
            seal: seal.as_ref(),
            out: a.out.as_deref(),
            json,
        };
        tokio::select! {
            r = following.run(state) => r?,
            r = tokio::signal::ctrl_c() => r.context("waiting for Ctrl-C")?,
        }
    }
    Ok(())
}

/// omr-light-v1: the messages whose payloads wait for their epoch to close, and what the PIR
/// fetch of the others cost.
fn print_light(got: &Retrieval) {
    if let Some(pir) = &got.pir {
        let key = if pir.key_bytes_up > 0 {
            format!(", and the fetch key once: {}", ui::size(pir.key_bytes_up))
        } else {
            String::new()
        };
        println!(
            "  payloads by PIR: {} epoch{}, {} queries ({} up, {} down{key})",
            pir.epochs,
            if pir.epochs == 1 { "" } else { "s" },
            pir.queries,
            ui::size(pir.bytes_up),
            ui::size(pir.bytes_down)
        );
    }
    for &index in &got.pending {
        print_pending(index, got.epoch_length);
    }
}

/// A message detected whose payload has not come yet: a round could not fetch it this time
/// (more than a round's records), or a server with attachments serves it once its epoch closes.
fn print_pending(index: u64, epoch_length: u64) {
    let closes = (index / epoch_length.max(1) + 1) * epoch_length.max(1);
    println!(
        "  #{index:<8} detected; its payload comes on a later call (with attachments: once its epoch closes at board index {closes})"
    );
}

/// `omr digest --follow` after the first retrieval: wait for the server to detect past what
/// was retrieved, retrieve what is new, print it, save the state; again, until stopped.
struct Following<'a> {
    client: &'a Client,
    dir: &'a KeyDir,
    reg: &'a Registration,
    secret: &'a SecretKey,
    seal: Option<&'a SealKey>,
    out: Option<&'a Path>,
    json: bool,
}

impl Following<'_> {
    async fn run(&self, mut state: DigestState) -> anyhow::Result<()> {
        if !self.json {
            eprintln!(
                "Waiting for new messages for key {} (Ctrl-C to stop)...",
                self.reg.key_id
            );
        }
        let mut follow = Follow::new(state.next_from, state.pending_payloads.iter().copied());
        loop {
            let waited = follow.news(self.client, self.secret, self.reg, warn_retrying);
            let cursor = waited.await?;
            // A failed retrieval leaves `state` as it was, so a transient one is tried again.
            let got = (self.client).retrieve(self.secret, self.reg, &mut state, None);
            let Some(got) = unless_transient(got.await).await? else {
                continue;
            };
            let letters = mailbox::open_letters(self.seal, &got);
            write_payloads(self.out, &letters)?;
            let arrived = attachments::arrived(self.seal, &mut state, &got, &letters, self.out)?;
            mailbox::remember_attachments(&mut state, &got, &letters);
            self.dir.save_digest_state(&state)?;
            for m in &letters {
                if self.json {
                    let mut v = message_json(m);
                    v["key_id"] = json!(self.reg.key_id);
                    print_json(&v);
                } else {
                    print_message(m);
                }
            }
            // omr-light-v1: a message detected in the open epoch, its payload not fetched yet.
            // The digest covered up to the cursor it saw (at least the one waited for).
            for index in follow.retrieved(state.next_from, cursor, &got.pending) {
                if self.json {
                    print_json(
                        &json!({"index": index, "pending": true, "key_id": self.reg.key_id}),
                    );
                } else {
                    print_pending(index, got.epoch_length);
                }
            }
            for a in &arrived {
                if self.json {
                    let mut v = a.json();
                    v["attachment"] = json!(true);
                    v["key_id"] = json!(self.reg.key_id);
                    print_json(&v);
                } else {
                    a.print();
                }
            }
        }
    }
}

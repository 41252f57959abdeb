//! The demo's phases against a running omrd: keys, registration, the board, detection,
//! retrieval compared with what was sent.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use omr_client::{Client, DigestState, Keys, StartAt};
use rand::seq::SliceRandom;
use rand::Rng;
use serde_json::json;

use super::{DemoArgs, Recipient, NAMES};
use crate::ui::{self, Ui};

pub(super) async fn flow(
    a: &DemoArgs,
    set: &'static str,
    messages: usize,
    kbar: usize,
    client: &Client,
    ui: Ui,
    say: &dyn Fn(String),
) -> anyhow::Result<(serde_json::Value, bool)> {
    let mut demo = Demo {
        client,
        ui,
        say,
        timings: serde_json::Map::new(),
    };
    let (sets, outsider) = demo.generate_keys(set, kbar, a.recipients as usize).await?;
    let mut recipients = demo.register(sets).await?;
    let light = set == omr_client::scheme::LIGHT_SET;
    demo.post_board(a, light, messages, &mut recipients, &outsider)
        .await?;
    demo.wait_for_detection(&recipients, messages).await?;
    let (report_recipients, ok) = demo.retrieve(&recipients).await?;
    Ok((
        json!({
            "param_set": set,
            "recipients": report_recipients,
            "messages": messages,
            "kbar": kbar,
            "timings_ms": demo.timings,
            "ok": ok,
        }),
        ok,
    ))
}

/// The demo's phases, each timed into `timings` (milliseconds by phase name).
struct Demo<'a> {
    client: &'a Client,
    ui: Ui,
    say: &'a dyn Fn(String),
    timings: serde_json::Map<String, serde_json::Value>,
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

impl Demo<'_> {
    fn time(&mut self, name: &str, t: Instant) {
        let ms = t.elapsed().as_secs_f64() * 1e3;
        self.timings.insert(name.to_string(), json!(ms));
    }

    /// One key set per recipient, and one for an outsider who receives the noise.
    async fn generate_keys(
        &mut self,
        set: &'static str,
        kbar: usize,
        n: usize,
    ) -> anyhow::Result<(Vec<Keys>, Keys)> {
        let t = Instant::now();
        let label = format!("generating {set} keys");
        let pb = self.ui.items(label, n as u64 + 1, "key sets");
        let mut sets = Vec::with_capacity(n + 1);
        for _ in 0..=n {
            sets.push(tokio::task::spawn_blocking(move || Keys::generate(set, kbar)).await??);
            pb.inc(1);
        }
        pb.finish_and_clear();
        let outsider = sets.pop().expect("n + 1 sets");
        self.time("keygen_ms", t);
        (self.say)(format!(
            "generated keys for {n} recipient{} and an outsider (k̄ = {kbar}) in {}",
            plural(n),
            ui::secs(t.elapsed())
        ));
        Ok((sets, outsider))
    }

    /// Upload each recipient's detection key over gRPC.
    async fn register(&mut self, sets: Vec<Keys>) -> anyhow::Result<Vec<Recipient>> {
        let t = Instant::now();
        let n = sets.len();
        let total: u64 = sets.iter().map(|k| k.detection_key.len() as u64).sum();
        let key_bytes = sets[0].detection_key.len() as u64;
        let pb = self.ui.bytes("registering detection keys", total);
        let mut recipients = Vec::with_capacity(n);
        let mut offset = 0u64;
        for (keys, name) in sets.into_iter().zip(NAMES) {
            let key = &keys.detection_key;
            let p = pb.clone();
            let base = offset;
            let progress: omr_client::Progress =
                std::sync::Arc::new(move |done, _| p.set_position(base + done));
            let reg = self
                .client
                .register(key, StartAt::Now, Some(progress))
                .await
                .with_context(|| format!("registering {name}'s detection key"))?;
            offset += key.len() as u64;
            recipients.push(Recipient {
                name: name.to_string(),
                keys,
                reg,
                sent: BTreeMap::new(),
            });
        }
        pb.finish_and_clear();
        self.time("register_ms", t);
        (self.say)(format!(
            "registered {n} detection key{} ({} each) in {}",
            plural(n),
            ui::size(key_bytes),
            ui::secs(t.elapsed())
        ));
        Ok(recipients)
    }

    /// `per_recipient` messages to each recipient at random places, noise elsewhere, posted in
    /// batches; records what each recipient was sent.
    async fn post_board(
        &mut self,
        a: &DemoArgs,
        light: bool,
        messages: usize,
        recipients: &mut [Recipient],
        outsider: &Keys,
    ) -> anyhow::Result<()> {
        let t = Instant::now();
        let n = recipients.len();
        let open_from = self.client.params().await?.epoch_len;
        let planned = plan_board(a, messages, recipients, light.then_some(open_from));
        let pb = self
            .ui
            .items("posting the board", messages as u64, "messages");
        for chunk in planned.chunks(256) {
            let batch: Vec<_> = chunk
                .iter()
                .map(|(slot, payload)| {
                    let clue_key = match slot {
                        Some(r) => &recipients[*r].keys.clue_key,
                        None => &outsider.clue_key,
                    };
                    (clue_key.clone(), payload.clone())
                })
                .collect();
            let indices = self.client.send_batch(&batch).await?;
            for ((slot, payload), index) in chunk.iter().zip(indices) {
                if let Some(r) = slot {
                    recipients[*r].sent.insert(index, payload.clone());
                }
            }
            pb.inc(chunk.len() as u64);
        }
        pb.finish_and_clear();
        self.time("post_ms", t);
        (self.say)(format!(
            "posted {messages} messages ({} to each recipient, {} to the outsider) in {}",
            a.per_recipient,
            messages - n * a.per_recipient,
            ui::secs(t.elapsed())
        ));
        Ok(())
    }

    /// Wait until every key's cursor reaches the board head.
    async fn wait_for_detection(
        &mut self,
        recipients: &[Recipient],
        messages: usize,
    ) -> anyhow::Result<()> {
        let t = Instant::now();
        let detections = (recipients.len() * messages) as u64;
        let pb = self.ui.items("detecting", detections, "detections");
        let deadline = Instant::now() + Duration::from_secs(60 + detections);
        loop {
            let mut done = 0;
            let mut lag = 0;
            for r in recipients {
                let s = self.client.key_status(&r.reg).await?;
                done += s.cursor - s.start_index;
                lag += s.lag;
            }
            pb.set_position(done.min(detections));
            if lag == 0 && done >= detections {
                break;
            }
            if Instant::now() > deadline {
                bail!("detection did not finish in time ({done} of {detections} detections)");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        pb.finish_and_clear();
        let detect_secs = t.elapsed().as_secs_f64();
        self.time("detect_ms", t);
        let each = detect_secs / detections as f64;
        (self.say)(format!(
            "detected {detections} (message, key) pairs in {} ({} each)",
            ui::secs(t.elapsed()),
            match each < 1e-3 {
                true => format!("{:.1} µs", each * 1e6),
                false => format!("{:.1} ms", each * 1e3),
            }
        ));
        Ok(())
    }

    /// Each recipient downloads and decodes its digest; compared with what was sent.
    async fn retrieve(
        &mut self,
        recipients: &[Recipient],
    ) -> anyhow::Result<(Vec<serde_json::Value>, bool)> {
        let t = Instant::now();
        let mut ok = true;
        let mut report = Vec::new();
        for r in recipients {
            let pb = self.ui.bytes(format!("{}'s digest", r.name), 0);
            let mut state = DigestState::new(&r.reg);
            let got = self
                .client
                .retrieve(&r.keys.secret, &r.reg, &mut state, Some(ui::progress(&pb)))
                .await
                .with_context(|| format!("retrieving {}'s messages", r.name))?;
            pb.finish_and_clear();
            let retrieved: BTreeMap<u64, Vec<u8>> = got
                .messages
                .iter()
                .map(|m| (m.index, m.payload.clone()))
                .collect();
            // omr-light-v1: messages detected whose payloads a round could not fetch this time
            // (TFHE: none).
            let pending: BTreeSet<u64> = got.pending.iter().copied().collect();
            let due: BTreeMap<u64, Vec<u8>> = (r.sent.iter())
                .filter(|(i, _)| !pending.contains(i))
                .map(|(i, p)| (*i, p.clone()))
                .collect();
            let matches = retrieved == due && pending.iter().all(|i| r.sent.contains_key(i));
            ok &= matches;
            let shown = (&pending, got.digest_bytes, got.pir);
            self.show_comparison(r, &retrieved, shown, matches);
            report.push(json!({
                "name": r.name,
                "key_id": r.reg.key_id,
                "sent": r.sent.keys().collect::<Vec<_>>(),
                "retrieved": retrieved.keys().collect::<Vec<_>>(),
                "pending": pending,
                "digest_bytes": got.digest_bytes,
                "pir": got.pir,
                "match": matches,
            }));
        }
        self.time("retrieve_ms", t);
        Ok((report, ok))
    }

    /// Print sent next to retrieved, message by message.
    fn show_comparison(
        &self,
        r: &Recipient,
        retrieved: &BTreeMap<u64, Vec<u8>>,
        (pending, digest_bytes, pir): (&BTreeSet<u64>, usize, Option<omr_client::PirFetch>),
        matches: bool,
    ) {
        (self.say)(format!(
            "{:<6} sent {}, retrieved {} from a {} digest{}: {}",
            r.name,
            r.sent.len(),
            retrieved.len(),
            ui::size(digest_bytes as u64),
            match pir {
                Some(p) => format!(
                    " and payloads by PIR ({} epoch{}, {} queries, {} up, {} down)",
                    p.epochs,
                    plural(p.epochs),
                    p.queries,
                    ui::size(p.bytes_up),
                    ui::size(p.bytes_down)
                ),
                None => String::new(),
            },
            if matches { "match" } else { "MISMATCH" }
        ));
        let extra = retrieved.keys().filter(|i| !r.sent.contains_key(i));
        for index in r.sent.keys().chain(extra) {
            let (s, g) = (r.sent.get(index), retrieved.get(index));
            if pending.contains(index) {
                (self.say)(format!(
                    "    #{index:<5} sent {:<34} ≈ detected; its payload comes by PIR on a later call",
                    s.map_or("(nothing)".to_string(), |p| ui::preview(p))
                ));
                continue;
            }
            let mark = if s == g { "=" } else { "≠" };
            let show = |p: Option<&Vec<u8>>| p.map_or("(nothing)".to_string(), |p| ui::preview(p));
            (self.say)(format!(
                "    #{index:<5} sent {:<34} {mark} retrieved {}",
                show(s),
                show(g)
            ));
        }
    }
}

/// The board in posting order (from index 0): for each slot, the recipient it goes to (`None`:
/// the outsider) and its payload. With `open_from` (omr-light-v1's first epoch length), each
/// recipient's last message goes past it where there is room, into the epoch still open, whose
/// payloads come from the open epoch's snapshot.
fn plan_board(
    a: &DemoArgs,
    messages: usize,
    recipients: &[Recipient],
    open_from: Option<u64>,
) -> Vec<(Option<usize>, Vec<u8>)> {
    let n = recipients.len();
    let rng = &mut rand::thread_rng();
    let mut slots: Vec<Option<usize>> = (0..messages)
        .map(|i| (i < n * a.per_recipient).then_some(i % n))
        .collect();
    slots.shuffle(rng);
    if let Some(open) = open_from.map(|o| o as usize).filter(|&o| o < messages) {
        for r in 0..n {
            let last = slots.iter().rposition(|s| *s == Some(r));
            let free = (open..messages).rev().find(|&i| slots[i].is_none());
            if let (Some(last), Some(free)) = (last, free) {
                if last < open {
                    slots.swap(last, free);
                }
            }
        }
    }
    let mut counters = vec![0usize; n];
    slots
        .into_iter()
        .map(|slot| {
            let payload = match slot {
                Some(r) => {
                    counters[r] += 1;
                    let tag: u32 = rng.gen();
                    format!("to {} #{}: {tag:08x}", recipients[r].name, counters[r])
                }
                None => format!("noise {:016x}", rng.gen::<u64>()),
            };
            (slot, payload.into_bytes())
        })
        .collect()
}

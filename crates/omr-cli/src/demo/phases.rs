//! The demo's phases against a running omrd: keys, registration, the board, detection,
//! retrieval compared with what was sent.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use omr_client::{Client, DigestState, StartAt};
use omr_core::{KeySet, Message, ParamSet};
use rand::seq::SliceRandom;
use rand::Rng;
use serde_json::json;

use super::{DemoArgs, Recipient, NAMES};
use crate::ui::{self, Ui};

pub(super) async fn flow(
    a: &DemoArgs,
    params: &'static ParamSet,
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
    let (sets, outsider) = demo
        .generate_keys(params, kbar, a.recipients as usize)
        .await?;
    let mut recipients = demo.register(sets).await?;
    demo.post_board(a, &mut recipients, &outsider).await?;
    demo.wait_for_detection(&recipients, a.messages).await?;
    let (report_recipients, ok) = demo.retrieve(&recipients).await?;
    Ok((
        json!({
            "param_set": params.name,
            "recipients": report_recipients,
            "messages": a.messages,
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
        params: &'static ParamSet,
        kbar: usize,
        n: usize,
    ) -> anyhow::Result<(Vec<KeySet>, KeySet)> {
        let t = Instant::now();
        let label = format!("generating {} keys", params.name);
        let pb = self.ui.items(label, n as u64 + 1, "key sets");
        let mut sets = Vec::with_capacity(n + 1);
        for _ in 0..=n {
            sets.push(tokio::task::spawn_blocking(move || omr_core::keygen(params, kbar)).await??);
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
    async fn register(&mut self, sets: Vec<KeySet>) -> anyhow::Result<Vec<Recipient>> {
        let t = Instant::now();
        let n = sets.len();
        let encoded: Vec<Vec<u8>> = sets.iter().map(|k| k.detection_key.to_bytes()).collect();
        let total: u64 = encoded.iter().map(|k| k.len() as u64).sum();
        let pb = self.ui.bytes("registering detection keys", total);
        let mut recipients = Vec::with_capacity(n);
        let mut offset = 0u64;
        for ((keys, key), name) in sets.into_iter().zip(&encoded).zip(NAMES) {
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
            ui::size(encoded[0].len() as u64),
            ui::secs(t.elapsed())
        ));
        Ok(recipients)
    }

    /// `per_recipient` messages to each recipient at random places, noise elsewhere, posted in
    /// batches; records what each recipient was sent.
    async fn post_board(
        &mut self,
        a: &DemoArgs,
        recipients: &mut [Recipient],
        outsider: &KeySet,
    ) -> anyhow::Result<()> {
        let t = Instant::now();
        let n = recipients.len();
        let planned = plan_board(a, recipients);
        let pb = self
            .ui
            .items("posting the board", a.messages as u64, "messages");
        for chunk in planned.chunks(64) {
            let messages = chunk
                .iter()
                .map(|(slot, payload)| {
                    let clue_key = match slot {
                        Some(r) => &recipients[*r].keys.clue_key,
                        None => &outsider.clue_key,
                    };
                    Message::new(clue_key.make_clue(), payload.clone())
                })
                .collect::<Result<Vec<_>, _>>()?;
            let indices = self.client.post_batch(&messages).await?;
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
            "posted {} messages ({} to each recipient, {} to the outsider) in {}",
            a.messages,
            a.per_recipient,
            a.messages - n * a.per_recipient,
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
        (self.say)(format!(
            "detected {detections} (message, key) pairs in {} ({:.1} ms each)",
            ui::secs(t.elapsed()),
            detect_secs * 1e3 / detections as f64
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
            let matches = retrieved == r.sent;
            ok &= matches;
            self.show_comparison(r, &retrieved, got.digest_bytes, matches);
            report.push(json!({
                "name": r.name,
                "key_id": r.reg.key_id,
                "sent": r.sent.keys().collect::<Vec<_>>(),
                "retrieved": retrieved.keys().collect::<Vec<_>>(),
                "digest_bytes": got.digest_bytes,
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
        digest_bytes: usize,
        matches: bool,
    ) {
        (self.say)(format!(
            "{:<6} sent {}, retrieved {} from a {} digest: {}",
            r.name,
            r.sent.len(),
            retrieved.len(),
            ui::size(digest_bytes as u64),
            if matches { "match" } else { "MISMATCH" }
        ));
        let extra = retrieved.keys().filter(|i| !r.sent.contains_key(i));
        for index in r.sent.keys().chain(extra) {
            let (s, g) = (r.sent.get(index), retrieved.get(index));
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

/// The board in posting order: for each slot, the recipient it goes to (`None`: the outsider)
/// and its payload.
fn plan_board(a: &DemoArgs, recipients: &[Recipient]) -> Vec<(Option<usize>, Vec<u8>)> {
    let n = recipients.len();
    let mut slots: Vec<Option<usize>> = (0..a.messages)
        .map(|i| (i < n * a.per_recipient).then_some(i % n))
        .collect();
    slots.shuffle(&mut rand::thread_rng());
    let mut counters = vec![0usize; n];
    slots
        .into_iter()
        .map(|slot| {
            let payload = match slot {
                Some(r) => {
                    counters[r] += 1;
                    let tag: u32 = rand::thread_rng().gen();
                    format!("to {} #{}: {tag:08x}", recipients[r].name, counters[r])
                }
                None => format!("noise {:016x}", rand::thread_rng().gen::<u64>()),
            };
            (slot, payload.into_bytes())
        })
        .collect()
}

//! Planning a turn: this worker's keys with their cursors and who is online, and the board head,
//! read so that a turn's planning costs the same at any number of keys (docs/SERVICE.md,
//! "Planning does not grow with the keys"); and the metrics of what it holds and what waits.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use omr_store::ActiveKey;

use super::schedule::KeyView;
use super::Worker;
use crate::scheme::{DetectionScheme, Walk};

/// How long the worker plans from its last look at who is online before it looks again: how
/// stale its view of presence may be (written by whichever process serves the recipient). The
/// look reads only the keys seen within `online_secs`; the whole list of keys is read again
/// when the leases are renewed (a third of `lease_secs`, or at once after this process
/// registered or deleted a key), which is also when keys registered elsewhere are leased.
const LIST_EVERY: Duration = Duration::from_secs(1);

/// This worker's keys as last listed from the store, and when; the views of them that each
/// plan brings up to date in place.
pub(super) struct Listed {
    at: Instant,
    keys: Arc<Vec<ActiveKey>>,
    /// Where each key is in `keys` (and `views`).
    index: Arc<HashMap<String, usize>>,
    online: Arc<HashSet<String>>,
    views: Arc<Vec<KeyView>>,
    /// Each key's `omr_key_lag` gauge (a label look-up per key once per listing, not per
    /// report: per report, the look-ups would grow a turn's planning with the keys).
    lag: Vec<prometheus::IntGauge>,
}

/// The board head as last read, with the board signal's count before the read, and when.
#[derive(Debug, Clone, Copy)]
pub(super) struct HeadSeen {
    head: u64,
    raised: u64,
    at: Instant,
}

/// This worker's keys as one turn's decision sees them (shared with the listing it comes
/// from: a plan copies nothing per key).
pub(super) struct Plan {
    pub(super) head: u64,
    pub(super) keys: Arc<Vec<ActiveKey>>,
    pub(super) index: Arc<HashMap<String, usize>>,
    pub(super) views: Arc<Vec<KeyView>>,
    /// Keys of online recipients (pinned in memory).
    pub(super) online: Arc<HashSet<String>>,
}

impl Plan {
    /// The key `key_id` of this plan, found without a scan.
    pub(super) fn key(&self, key_id: &str) -> Option<&ActiveKey> {
        self.index.get(key_id).map(|&i| &self.keys[i])
    }
}

/// Whether `key`'s recipient (online) asks for its open batch, for a scheme that detects in
/// batches: it was seen after the mark that this worker's last detection of that batch answered
/// (`answered`), or it had none here. Each mark asks once: a recipient that reads the board's
/// tail itself asks for nothing after its digest caught up, so its key costs a pass per full
/// batch, not one per new message for `online_secs`; one that polls its digest, or waits on its
/// status, asks at most once a second while its key is behind (`Presence::asked`).
pub(super) fn asks_open(answered: &HashMap<String, i64>, key: &ActiveKey) -> bool {
    (key.last_seen_ms).is_some_and(|seen| answered.get(&key.key_id).is_none_or(|&a| seen > a))
}

/// `key`'s recipient was seen at `at_ms` (a mark from the store or an ask in memory, in any
/// order): the newest mark wins.
fn seen_at(key: &mut ActiveKey, at_ms: i64) {
    key.last_seen_ms = Some(key.last_seen_ms.map_or(at_ms, |t| t.max(at_ms)));
}

impl<S: DetectionScheme> Worker<S> {
    /// Plan a turn: the board head, and this worker's keys with their cursors and who is
    /// online; `None` (logged) when the store fails. What does not change from turn to turn is
    /// not read every turn: the leases are renewed, and the keys listed from the store, when a
    /// third of the lease went by, or at once after this process registered or deleted a key
    /// (their cursors meanwhile are the cache's, which sees every commit this worker makes);
    /// who is online is read every [`LIST_EVERY`], from the keys seen lately alone. So a turn's
    /// planning reads one row, and a second the recently seen keys, at any number of keys.
    pub(super) async fn plan(&mut self) -> Option<Plan> {
        let changed = self.ctx.roster.take();
        let renew = changed || self.leases.due();
        if renew {
            if let Err(e) = self.leases.renew(&self.ctx).await {
                tracing::error!(error = %e, "renewing leases failed; retrying");
                self.ctx.roster.changed(); // list again once it succeeds
                return None;
            }
        }
        let stale = (self.listed.as_ref()).is_none_or(|l| l.at.elapsed() >= LIST_EVERY);
        let relist = renew || self.listed.is_none();
        if !relist && stale {
            if let Err(e) = self.look_who_is_online().await {
                tracing::error!(error = %e, "reading who is online failed; retrying");
                return None;
            }
        }
        if relist {
            let keys = match self.ctx.store.active_keys().await {
                Ok(all) => (all.into_iter())
                    .filter(|k| self.leases.holds(&k.key_id))
                    .collect::<Vec<_>>(),
                Err(e) => {
                    tracing::error!(error = %e, "listing keys failed; retrying");
                    return None;
                }
            };
            self.cache.retain_only(&keys);
            let listing = self.listing(keys);
            (self.open_answered).retain(|id, _| listing.index.contains_key(id));
            self.listed = Some(listing);
        }
        self.take_asks();
        let head = match self.board_head().await {
            Ok(head) => head,
            Err(e) => {
                tracing::error!(error = %e, "reading the board head failed; retrying");
                return None;
            }
        };
        self.board_rate.observe(head, Instant::now());
        let scheme = &self.scheme;
        let reach = [
            self.reach(head, false).min(head),
            self.reach(head, true).min(head),
        ];
        let changed = self.cache.take_changed();
        let listed = self.listed.as_mut().expect("listed above");
        let cache = &self.cache;
        let views = Arc::make_mut(&mut listed.views);
        let update = |v: &mut KeyView, k: &ActiveKey| {
            v.cursor = cache.cursor(&k.key_id).unwrap_or(k.cursor).max(k.cursor);
            v.group = S::Walk::group_of(scheme, v.cursor);
            v.cached = cache.contains(&k.key_id);
        };
        // A key's cursor and presence in memory change only through the cache, which says
        // which: after a listing every view is made again, otherwise only those keys' are
        // (no look-up per key per turn).
        if relist {
            views
                .iter_mut()
                .zip(listed.keys.iter())
                .for_each(|(v, k)| update(v, k));
        } else {
            for i in changed.iter().filter_map(|id| listed.index.get(id)) {
                update(&mut views[*i], &listed.keys[*i]);
            }
        }
        // An online key's open batch is detected when its recipient asked for it.
        let answered = &self.open_answered;
        for (v, k) in views.iter_mut().zip(listed.keys.iter()) {
            v.head = reach[usize::from(v.online && asks_open(answered, k))];
        }
        self.queue
            .observe(views, &listed.index, head, Instant::now());
        let plan = Plan {
            head,
            keys: listed.keys.clone(),
            index: listed.index.clone(),
            views: listed.views.clone(),
            online: listed.online.clone(),
        };
        if relist || stale {
            self.report(&plan);
        }
        Some(plan)
    }

    /// The board head: read from the store only when the board moved since the last read (its
    /// signal was raised: a commit of this process, or one another announced) or `poll` went by
    /// (an announcement is missed while the listener reconnects, and the idle worker looks every
    /// `poll` anyway). Turns back to back while nothing is posted read it once per `poll`, not
    /// once each.
    async fn board_head(&mut self) -> Result<u64, omr_store::StoreError> {
        let raised = self.ctx.board_notify.raised();
        if let Some(seen) = self.head_seen.filter(|s| s.raised == raised) {
            if seen.at.elapsed() < self.poll {
                return Ok(seen.head);
            }
        }
        let head = self.ctx.store.board_head().await?;
        self.head_seen = Some(HeadSeen {
            head,
            raised,
            at: Instant::now(),
        });
        Ok(head)
    }

    /// Between listings: which of the listed keys are online now, from the keys seen within
    /// `online_secs` (a few rows, at any number of keys) and those online at the last look.
    async fn look_who_is_online(&mut self) -> Result<(), omr_store::StoreError> {
        let config = &self.ctx.config;
        let now_ms = crate::presence::now_ms();
        let window = crate::presence::online_window_ms(config);
        let seen = (self.ctx.store)
            .seen_since(now_ms.saturating_sub(window))
            .await?;
        let listed = self.listed.as_mut().expect("looked after a listing");
        let keys = Arc::make_mut(&mut listed.keys);
        for (key_id, at) in &seen {
            if let Some(&i) = listed.index.get(key_id) {
                seen_at(&mut keys[i], *at);
            }
        }
        let was = listed.online.iter().map(String::as_str);
        let candidates = was.chain(seen.iter().map(|(id, _)| id.as_str()));
        let online: HashSet<String> = (candidates.filter_map(|id| listed.index.get(id)))
            .map(|&i| &keys[i])
            .filter(|k| crate::presence::is_online(config, k, now_ms))
            .map(|k| k.key_id.clone())
            .collect();
        let views = Arc::make_mut(&mut listed.views);
        for id in listed.online.iter().chain(online.iter()) {
            if let Some(&i) = listed.index.get(id) {
                views[i].online = online.contains(id);
            }
        }
        listed.online = Arc::new(online);
        listed.at = Instant::now();
        Ok(())
    }

    /// The asks for open batches made through this process since the last plan: each asking
    /// key seen then, and online (as the store will say within a second or two).
    fn take_asks(&mut self) {
        let asked = self.ctx.asks.take();
        let Some(listed) = self.listed.as_mut().filter(|_| !asked.is_empty()) else {
            return;
        };
        let now_ms = crate::presence::now_ms();
        let keys = Arc::make_mut(&mut listed.keys);
        for (key_id, at) in asked {
            let Some(&i) = listed.index.get(&key_id) else {
                continue; // not this worker's (another holds its lease), or deleted
            };
            let k = &mut keys[i];
            seen_at(k, at);
            if crate::presence::is_online(&self.ctx.config, k, now_ms) {
                Arc::make_mut(&mut listed.views)[i].online = true;
                Arc::make_mut(&mut listed.online).insert(key_id);
            }
        }
    }

    /// `keys` just listed, who of them is online now, and their views (brought up to date by
    /// each plan), each key keeping its place in the queue from the last listing.
    fn listing(&self, keys: Vec<ActiveKey>) -> Listed {
        let before = self.listed.as_ref();
        let since = |id: &str| before.and_then(|l| l.index.get(id).and_then(|&i| l.views[i].since));
        let now_ms = crate::presence::now_ms();
        let online: HashSet<String> = (keys.iter())
            .filter(|k| crate::presence::is_online(&self.ctx.config, k, now_ms))
            .map(|k| k.key_id.clone())
            .collect();
        let views = (keys.iter().enumerate())
            .map(|(place, k)| KeyView {
                key_id: k.key_id.clone(),
                cursor: k.cursor,
                online: online.contains(&k.key_id),
                cached: false,
                head: 0,
                group: 0,
                since: since(&k.key_id),
                place,
            })
            .collect();
        let index = (keys.iter().enumerate())
            .map(|(i, k)| (k.key_id.clone(), i))
            .collect();
        // The keys no longer listed lose their gauge.
        let gauges = &self.ctx.metrics.detection.key_lag;
        gauges.reset();
        let lag = (keys.iter())
            .map(|k| gauges.with_label_values(&[k.key_id.as_str()]))
            .collect();
        Listed {
            lag,
            at: Instant::now(),
            index: Arc::new(index),
            keys: Arc::new(keys),
            online: Arc::new(online),
            views: Arc::new(views),
        }
    }

    /// Per-key lag of this worker's keys, and what it holds and what waits.
    fn report(&self, plan: &Plan) {
        let m = &self.ctx.metrics.detection;
        let lag = self.listed.as_ref().map_or(&[][..], |l| &l.lag[..]);
        for (v, gauge) in plan.views.iter().zip(lag) {
            gauge.set(plan.head.saturating_sub(v.cursor) as i64);
        }
        let waiting = plan.views.iter().filter(|v| v.cursor < plan.head).count();
        m.keys_waiting.set(waiting as i64);
        m.keys_online.set(plan.online.len() as i64);
        m.keys_loaded.set(self.cache.len() as i64);
        m.key_memory_bytes.set(self.cache.used_bytes() as i64);
    }
}

//! Each key's last answer for its whole range (no `from`, no `to`: what a polling client asks
//! again and again), kept with what authorizes it, and valid while the key's cursor has not
//! moved and for at most [`MAX_AGE`].

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use omr_store::KeyMeta;
use tokio::sync::watch;

use super::{BuiltDigest, DIGEST_KEY_ENTRIES};

/// Longest an answer is served from memory: what a key deleted through another process, or a
/// commit whose announcement was lost, may go unseen here.
pub const MAX_AGE: Duration = Duration::from_secs(30);

/// The answers, by key id.
#[derive(Debug, Default)]
pub struct Answers(Mutex<HashMap<String, Answer>>);

/// A key's answer, what authorizes it, and the key's announced cursors since it was built.
#[derive(Debug)]
struct Answer {
    meta: KeyMeta,
    built: BuiltDigest,
    progress: watch::Receiver<u64>,
    at: Instant,
}

impl Answers {
    /// `key_id`'s last answer, while its cursor has not moved and for at most [`MAX_AGE`].
    pub fn answer(&self, key_id: &str) -> Option<(KeyMeta, BuiltDigest)> {
        let answers = self.0.lock().expect("digest answers");
        let a = answers.get(key_id)?;
        let moved = a.progress.has_changed().unwrap_or(true);
        let fresh = !moved && a.at.elapsed() < MAX_AGE;
        fresh.then(|| (a.meta.clone(), a.built.clone()))
    }

    /// Keep `built`, the answer for `meta`'s whole range; `progress` was subscribed before
    /// `meta` was read (a commit after the read is announced to it).
    pub fn keep(&self, meta: KeyMeta, built: BuiltDigest, progress: watch::Receiver<u64>) {
        let mut answers = self.0.lock().expect("digest answers");
        if answers.len() >= DIGEST_KEY_ENTRIES && !answers.contains_key(&meta.key_id) {
            answers.clear();
        }
        let at = Instant::now();
        let key_id = meta.key_id.clone();
        let answer = Answer {
            meta,
            built,
            progress,
            at,
        };
        answers.insert(key_id, answer);
    }

    /// Forget `key_id`'s answer (the key was deleted).
    pub fn forget(&self, key_id: &str) {
        self.0.lock().expect("digest answers").remove(key_id);
    }
}

//! Following a key, the loop `omr digest --follow` and the bindings' `follow` share:
//! [`Follow`] waits for news ([`Client::wait_for_news`]), waits again after a transient failure,
//! follows on from where each retrieval ended, and says which pending payloads are new. Each
//! caller keeps only what is its own: what it does with a retrieval (print it, hand it to a
//! listener) and where it keeps the digest state.

use std::collections::BTreeSet;
use std::time::Duration;

use super::Client;
use crate::error::{Error, Result};
use crate::keydir::Registration;
use crate::scheme::Secret;

/// How long a follower pauses after the server could not be reached (restarting, or out of
/// reach) before it tries again.
pub const FOLLOW_RETRY: Duration = Duration::from_secs(5);

/// Where a follower stands: the board index it follows on from, and the payloads it has
/// announced as detected but not yet fetched.
#[derive(Debug, Clone, Default)]
pub struct Follow {
    past: u64,
    announced: BTreeSet<u64>,
}

impl Follow {
    /// Following on from board index `past` (a digest state's `next_from`), with the pending
    /// payloads `announced` already announced.
    pub fn new(past: u64, announced: impl IntoIterator<Item = u64>) -> Follow {
        Follow {
            past,
            announced: announced.into_iter().collect(),
        }
    }

    /// The board index this follower follows on from.
    pub fn past(&self) -> u64 {
        self.past
    }

    /// Wait until a retrieval may find something past [`past`](Self::past), and return the
    /// cursor the wait saw (give it to [`retrieved`](Self::retrieved)). A wait that ends with
    /// nothing new is made again; a transient failure is handed to `on_retry` and the wait
    /// made again after [`FOLLOW_RETRY`]; any other failure is returned.
    pub async fn news<'s>(
        &self,
        client: &Client,
        secret: impl Into<Secret<'s>>,
        reg: &Registration,
        mut on_retry: impl FnMut(&Error),
    ) -> Result<u64> {
        let secret = secret.into();
        loop {
            match client.wait_for_news(secret, reg, self.past).await {
                Ok(Some(cursor)) => return Ok(cursor),
                Ok(None) => {}
                Err(e) if e.is_transient() => {
                    on_retry(&e);
                    tokio::time::sleep(FOLLOW_RETRY).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// A retrieval made after a wait that saw `cursor` ended at board index `to` with the
    /// payloads `pending` detected but not fetched: follow on from the larger of `to` and
    /// `cursor`, and return the pending payloads not announced before (each is announced once
    /// while it stays pending).
    pub fn retrieved(&mut self, to: u64, cursor: u64, pending: &[u64]) -> Vec<u64> {
        self.past = to.max(cursor);
        let fresh = (pending.iter().copied())
            .filter(|i| !self.announced.contains(i))
            .collect();
        self.announced = pending.iter().copied().collect();
        fresh
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_follower_moves_past_the_larger_end_and_announces_a_pending_payload_once() {
        let mut f = Follow::new(10, [12]);
        assert_eq!(f.past(), 10);
        assert_eq!(f.retrieved(20, 15, &[12, 17]), vec![17]);
        assert_eq!(f.past(), 20);
        assert_eq!(f.retrieved(20, 25, &[12, 17]), Vec::<u64>::new());
        assert_eq!(f.past(), 25);
        // 12 came; 17 still pends; 12 pending again later is news again.
        assert_eq!(f.retrieved(30, 0, &[17]), Vec::<u64>::new());
        assert_eq!(f.retrieved(31, 0, &[12, 17]), vec![12]);
    }
}

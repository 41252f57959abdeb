//! Messages made now and posted later: [`Client::prepare_to`] seals, makes the clue and stamps;
//! [`Client::post_prepared`] posts, and reports a repeat as [`crate::Error::AlreadyPosted`] (a
//! wallet offline, a queue of outgoing messages, a retry after a lost answer).

use super::board::{sealed_draft, Draft};
use super::{Client, Progress};
use crate::address::Address;
use crate::error::Result;

/// A message sealed to its recipient and stamped, not posted yet ([`Client::prepare_to`]).
#[derive(Debug, Clone)]
pub struct Prepared {
    draft: Draft,
}

impl Client {
    /// Seal `letter` (and `attachment`, if any) to the recipient at `to`, make its clue and
    /// stamp it as the server asks now, without posting it: [`Client::post_prepared`] posts it,
    /// now or later, and again after an answer that was lost. `progress` sees the postage
    /// search as in [`Client::send_stamped`].
    pub async fn prepare_to(
        &self,
        to: &Address,
        letter: &[u8],
        attachment: Option<&[u8]>,
        progress: Option<Progress>,
    ) -> Result<Prepared> {
        let mut draft = match attachment {
            Some(a) => self.attachment_draft(to, letter, a).await?,
            None => sealed_draft(to, letter)?,
        };
        let bits = self.postage_bits().await?;
        let stamp = self.solve_postage(draft.postage(), bits, progress).await?;
        draft.set_nonce(stamp);
        Ok(Prepared { draft })
    }

    /// Post a message made by [`Client::prepare_to`]; its board index. Unlike the `send`
    /// calls, a message that is already on the board (posted before, perhaps by a call whose
    /// answer was lost) is reported as [`Error::AlreadyPosted`] with the index it has, so the
    /// caller can tell a first post from a repeat; the board holds it once either way. A post
    /// refused for its postage (the server asks for more since it was prepared) stores
    /// nothing: prepare it again.
    pub async fn post_prepared(&self, message: &Prepared) -> Result<u64> {
        Ok(self.post_draft_once(&message.draft).await?.index)
    }
}

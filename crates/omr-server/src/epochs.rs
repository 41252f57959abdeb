//! [`Epochs`]: the one rule for how the board is cut into accumulator epochs. The worker closes
//! a key's accumulator at an epoch boundary, the digest endpoint sums whole epochs, retention
//! deletes whole epochs and PIR serves one database per closed epoch (of the shape
//! [`Epochs::pir_shape`] gives); all of them ask this type, so they agree by
//! construction.

use omr_pir::Shape;

use crate::set::Set;

/// The largest `max_attachment_bytes` omrd accepts: a fetch uploads one query per 4 KiB chunk,
/// each as long as the epoch has chunks, so the upload grows with the square of this.
pub const MAX_ATTACHMENT_BYTES: usize = 64 * 1024;

/// Board indices per epoch as the server runs it: `epoch_len` clamped to 1 ..= the parameter
/// set's range M (an accumulator never covers more than M messages; omr-light-v1's epoch is its
/// batch, which `Config::validate` checks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Epochs {
    len: u64,
}

impl Epochs {
    /// The epochs of a server configured with `epoch_len` running `params`.
    pub fn new(epoch_len: u64, set: Set) -> Epochs {
        Epochs {
            len: epoch_len.clamp(1, set.max_range()),
        }
    }

    /// Board indices per epoch.
    pub fn size(self) -> u64 {
        self.len
    }

    /// The epoch holding board index `index`.
    pub fn of(self, index: u64) -> u64 {
        index / self.len
    }

    /// Whether `index` starts an epoch (an accumulator ending there is complete).
    pub fn is_boundary(self, index: u64) -> bool {
        index.is_multiple_of(self.len)
    }

    /// The first index of the epoch after the one holding `index`.
    pub fn next_boundary(self, index: u64) -> u64 {
        (self.of(index) + 1) * self.len
    }

    /// The board range `[start, end)` of epoch `epoch`; `None` past any board (overflow).
    pub fn range(self, epoch: u64) -> Option<(u64, u64)> {
        let start = epoch.checked_mul(self.len)?;
        Some((start, start.checked_add(self.len)?))
    }

    /// The start of the epoch holding `index` (whole epochs only, for retention).
    pub fn start_of(self, index: u64) -> u64 {
        self.of(index) * self.len
    }

    /// omr-light-v1's refresh marks are every `every` messages from an epoch's (its batch's)
    /// start. The last mark at or below `head`: how far an online recipient's open batch is
    /// detected with the board at `head` (the epoch's start while fewer than `every` messages
    /// are in it).
    pub fn refresh_mark(self, head: u64, every: u64) -> u64 {
        let start = self.start_of(head);
        let every = every.max(1);
        start + (head - start) / every * every
    }

    /// The first refresh mark past `cursor` (at most its epoch's end): the board index whose
    /// arrival makes a key detected up to `cursor` due for its next refresh.
    pub fn next_refresh(self, cursor: u64, every: u64) -> u64 {
        let start = self.start_of(cursor);
        let every = every.max(1);
        (start + ((cursor - start) / every + 1) * every).min(self.next_boundary(cursor))
    }

    /// The board index below which retention deletes whole epochs (attachments and their PIR
    /// databases, so a database never changes) when it keeps `retain` messages below `head`:
    /// the start of the epoch holding `head - retain`; 0 when nothing is retired.
    pub fn retired_below(self, retain: Option<u64>, head: u64) -> u64 {
        retain.map_or(0, |n| self.start_of(head.saturating_sub(n)))
    }

    /// The PIR database shape of one epoch on a server running `set` that takes attachments of
    /// at most `max_attachment_bytes`: each record an attachment (omr-v1, omr-v2), or a whole
    /// message, payload and attachment (omr-light-v1, whose digest carries no payloads).
    pub fn pir_shape(self, set: Set, max_attachment_bytes: usize) -> Result<Shape, String> {
        let epoch_len = self.len;
        let records = usize::try_from(epoch_len).map_err(|e| e.to_string())?;
        let (shape, of) = match set {
            Set::Tfhe(_) => (Shape::for_attachments(records, max_attachment_bytes), ""),
            Set::Light(p) => (
                Shape::for_messages(records, p.payload_bytes, max_attachment_bytes),
                " of messages",
            ),
        };
        shape.map_err(|e| {
            format!(
                "epoch_len = {epoch_len} with max_attachment_bytes = {max_attachment_bytes} \
                 makes no PIR database{of}: {e}"
            )
        })
    }

    /// Epochs one digest can sum at most (M messages, plus a first epoch entered mid-way).
    pub fn per_digest(self, set: Set) -> u32 {
        (set.max_range() / self.len + 1) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_are_clamped_to_the_range_and_cut_the_board_evenly() {
        let p = &omr_core::INSECURE_TEST;
        assert_eq!(Epochs::new(0, Set::Tfhe(p)).size(), 1);
        assert_eq!(Epochs::new(u64::MAX, Set::Tfhe(p)).size(), p.max_range);
        let e = Epochs::new(8, Set::Tfhe(p));
        assert_eq!((e.of(7), e.of(8)), (0, 1));
        assert!(e.is_boundary(16) && !e.is_boundary(17));
        assert_eq!((e.next_boundary(8), e.next_boundary(15)), (16, 16));
        assert_eq!(e.range(2), Some((16, 24)));
        assert_eq!(e.range(u64::MAX), None);
        assert_eq!(e.start_of(23), 16);
        assert_eq!(e.retired_below(None, 100), 0);
        assert_eq!(e.retired_below(Some(10), 100), 88);
        assert_eq!(e.retired_below(Some(200), 100), 0);
    }

    #[test]
    fn refresh_marks_fall_every_few_messages_from_each_epoch_s_start() {
        let e = Epochs::new(8, Set::Tfhe(&omr_core::INSECURE_TEST));
        // Every 3 from 8: marks at 8, 11, 14, then the epoch's end 16.
        assert_eq!(e.refresh_mark(10, 3), 8);
        assert_eq!((e.refresh_mark(11, 3), e.refresh_mark(13, 3)), (11, 11));
        assert_eq!((e.refresh_mark(15, 3), e.refresh_mark(16, 3)), (14, 16));
        assert_eq!((e.next_refresh(8, 3), e.next_refresh(10, 3)), (11, 11));
        assert_eq!((e.next_refresh(11, 3), e.next_refresh(14, 3)), (14, 16));
        // Every message: the head itself; the whole epoch: only its end.
        assert_eq!((e.refresh_mark(13, 1), e.next_refresh(13, 1)), (13, 14));
        assert_eq!((e.refresh_mark(15, 8), e.next_refresh(9, 8)), (8, 16));
        // A mark never passes the head, and the next one is always past the cursor.
        for every in 1..=8 {
            for i in 0..40 {
                let mark = e.refresh_mark(i, every);
                assert!(mark <= i && mark >= e.start_of(i), "{i} {every}");
                let next = e.next_refresh(i, every);
                assert!(next > i && next <= e.next_boundary(i), "{i} {every}");
                assert_eq!(e.refresh_mark(next, every), next, "{i} {every}");
            }
        }
    }
}

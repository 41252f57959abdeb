//! How omrd lays attachments out as PIR records, shared by the server that builds an epoch's
//! database and the client that decodes a fetch: the attachment's length (u32 LE), its bytes,
//! then the database's zero padding (a message without an attachment: all zeros, length 0).

use crate::error::PirError;
use crate::params::Shape;

/// Bytes of the length that frames an attachment in its record.
pub const FRAME_BYTES: usize = 4;

impl Shape {
    /// The shape of an epoch of `records` attachments of at most `max_attachment_bytes`, each
    /// framed by its length: 64 KiB attachments are 17 chunks of 4 KiB.
    pub fn for_attachments(records: usize, max_attachment_bytes: usize) -> Result<Shape, PirError> {
        Shape::for_records(records, max_attachment_bytes + FRAME_BYTES)
    }
}

/// `attachment` as the start of its record: its length, then it.
pub fn frame(attachment: &[u8]) -> Vec<u8> {
    let mut record = Vec::with_capacity(FRAME_BYTES + attachment.len());
    record.extend_from_slice(&(attachment.len() as u32).to_le_bytes());
    record.extend_from_slice(attachment);
    record
}

/// The attachment a record frames; `None` when the record is shorter than its frame or its
/// length runs past it (a decoding failure, or not a framed record).
pub fn unframe(record: &[u8]) -> Option<&[u8]> {
    let len = u32::from_le_bytes(record.get(..FRAME_BYTES)?.try_into().ok()?) as usize;
    record.get(FRAME_BYTES..FRAME_BYTES.checked_add(len)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_bad_lengths_are_refused() {
        let mut record = frame(b"photo");
        record.resize(64, 0);
        assert_eq!(unframe(&record), Some(&b"photo"[..]));
        assert_eq!(unframe(&[0; 64]), Some(&[][..]));
        assert_eq!(unframe(&[1, 2]), None);
        assert_eq!(unframe(&[61, 0, 0, 0, 1]), None);
        assert_eq!(unframe(&[0xFF; 8]), None);
        let shape = Shape::for_attachments(4096, 64 << 10).unwrap();
        assert_eq!((shape.chunks, shape.rows()), (17, 4096));
    }
}

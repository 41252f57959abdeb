//! How omrd lays attachments out as PIR records, shared by the server that builds an epoch's
//! database and the client that decodes a fetch: the attachment's length (u32 LE), its bytes,
//! then the database's zero padding (a message without an attachment: all zeros, length 0).
//!
//! On omr-light-v1, whose digest carries no payloads, a record is the whole message: its
//! payload framed, then its attachment framed ([`frame_message`]).

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

    /// The shape of an epoch of `records` messages (omr-light-v1) of at most `max_payload_bytes`
    /// and `max_attachment_bytes`, each framed ([`frame_message`]).
    pub fn for_messages(
        records: usize,
        max_payload_bytes: usize,
        max_attachment_bytes: usize,
    ) -> Result<Shape, PirError> {
        Shape::for_records(
            records,
            2 * FRAME_BYTES + max_payload_bytes + max_attachment_bytes,
        )
    }
}

/// A message as its record: its payload framed, then its attachment framed (none: length 0).
pub fn frame_message(payload: &[u8], attachment: &[u8]) -> Vec<u8> {
    let mut record = frame(payload);
    record.extend_from_slice(&frame(attachment));
    record
}

/// The payload and the attachment a record of [`frame_message`] holds; `None` when a length
/// runs past the record.
pub fn unframe_message(record: &[u8]) -> Option<(&[u8], &[u8])> {
    let payload = unframe(record)?;
    let attachment = unframe(&record[FRAME_BYTES + payload.len()..])?;
    Some((payload, attachment))
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

    #[test]
    fn messages_round_trip_and_bad_lengths_are_refused() {
        let mut record = frame_message(b"letter", b"photo");
        record.resize(64, 0);
        assert_eq!(
            unframe_message(&record),
            Some((&b"letter"[..], &b"photo"[..]))
        );
        let mut plain = frame_message(b"letter", b"");
        plain.resize(64, 0);
        assert_eq!(unframe_message(&plain), Some((&b"letter"[..], &[][..])));
        assert_eq!(unframe_message(&[0; 64]), Some((&[][..], &[][..])));
        // The payload's length leaves no room for the attachment's frame.
        let mut short = frame(&[7; 58]);
        short.resize(64, 0);
        assert_eq!(unframe_message(&short), None);
        let shape = Shape::for_messages(4096, 612, 0).unwrap();
        assert!(shape.record_bytes >= 620, "{shape:?}");
    }
}

//! omr-core's decoders: every `from_bytes` of a type that crosses a process boundary, a digest
//! decoded all the way to messages with the recipient's secret key, and the expanded key's file
//! format. Allocation bounds are per input byte: a value packed in b bits becomes a u64, so a
//! decoder may allocate 64/b bytes per input byte for it, and never more however large a length
//! the input declares.

use omr_core::{
    Accumulator, Clue, ClueKey, CompressedDetectionKey, DetectionKey, Digest, DigestKey, Message,
    SecretKey, INSECURE_TEST,
};

use crate::fixtures::{both, insecure, insecure_secret, omr_v1, omr_v2, Fixture};
use crate::harness::{Decoder, Field, SLACK};

/// k̄ (u32) right after the 6-byte header.
fn kbar_field(_: &[u8]) -> Vec<Field> {
    vec![(6, 4)]
}

/// k̄ then the range's start and end (u64 each), as accumulators and digests encode them.
fn kbar_and_range_fields(_: &[u8]) -> Vec<Field> {
    vec![(6, 4), (10, 8), (18, 8)]
}

pub fn clue() -> Decoder {
    // 10-bit (insecure) and 12-bit (omr-v1, omr-v2) values.
    Decoder::new("clue", both(|f| f.clues.clone()), Clue::from_bytes)
        .alloc(6.5, SLACK)
        .cases(1000)
}

/// Where a message encoding declares its payload length: after the header (6 bytes), and the
/// nonce in version 2.
pub fn payload_length(b: &[u8]) -> Vec<Field> {
    match b.get(4) {
        Some(2) => vec![(14, 2)],
        _ => vec![(6, 2)],
    }
}

pub fn message() -> Decoder {
    let valid = both(|f| [f.messages.clone(), f.stamped.clone()].concat());
    Decoder::new("message (versions 1 and 2)", valid, Message::from_bytes)
        .fields(payload_length)
        .alloc(6.5, SLACK)
        .cases(1000)
}

pub fn clue_key() -> Decoder {
    // omr-v1 keeps 22 bits of each body coefficient, omr-v2 16.
    Decoder::new(
        "clue key",
        both(|f| vec![f.clue_key.clone()]),
        ClueKey::from_bytes,
    )
    .alloc(4.0, SLACK)
    .cases(1000)
}

pub fn secret_key() -> Decoder {
    // One bit per key coefficient.
    let valid = both(|f| vec![f.secret_key.clone()]);
    Decoder::new("secret key", valid, SecretKey::from_bytes)
        .fields(kbar_field)
        .alloc(64.0, SLACK)
        .cases(500)
}

pub fn detection_key() -> Decoder {
    let valid = vec![insecure().detection_key.clone()];
    Decoder::new("detection key", valid, CompressedDetectionKey::from_bytes)
        .fields(kbar_field)
        .alloc(1.5, SLACK)
        .cases(48)
}

/// A production key: a few cases of each property.
fn production_detection_key(name: &'static str, fixture: &Fixture) -> Decoder {
    let valid = vec![fixture.detection_key.clone()];
    Decoder::new(name, valid, CompressedDetectionKey::from_bytes)
        .fields(kbar_field)
        .alloc(1.5, SLACK)
        .cases(3)
}

/// The 107 MB omr-v1 key.
pub fn detection_key_omr_v1() -> Decoder {
    production_detection_key("detection key (omr-v1)", omr_v1())
}

/// The 60 MB omr-v2 key (no level-1 key of its own, a 32-bit keyswitching key).
pub fn detection_key_omr_v2() -> Decoder {
    production_detection_key("detection key (omr-v2)", omr_v2())
}

pub fn accumulator() -> Decoder {
    let valid = both(|f| f.accumulators.clone());
    Decoder::new("accumulator", valid, Accumulator::from_bytes)
        .fields(kbar_and_range_fields)
        .alloc(1.0, SLACK)
        .cases(300)
}

pub fn digest() -> Decoder {
    // 19-bit (insecure) and 18-bit (omr-v1) values.
    Decoder::new("digest", both(|f| f.digests.clone()), Digest::from_bytes)
        .fields(kbar_and_range_fields)
        .alloc(3.6, SLACK)
        .cases(300)
}

/// A downloaded digest decoded to messages, as `omr digest` does.
pub fn digest_decoded() -> Decoder {
    let valid = insecure().digests.clone();
    Decoder::new("digest, decoded with the secret key", valid, |b| {
        insecure_secret().decode(&Digest::from_bytes(b)?)
    })
    .fields(kbar_and_range_fields)
    .alloc(3.6, SLACK)
    .cases(300)
}

pub fn digest_key() -> Decoder {
    // Expanded on decoding: the NTT-domain rows are twice the bodies.
    let valid = both(|f| vec![f.digest_key.clone()]);
    Decoder::new("digest key", valid, DigestKey::from_bytes)
        .fields(kbar_field)
        .alloc(2.0, SLACK)
        .cases(300)
}

/// Offsets of the expanded key file's k̄ and container counts (after the header and the
/// fingerprint; the fifth count is the number of trace keys, one count each follows).
fn expanded_fields(b: &[u8]) -> Vec<Field> {
    let mut fields = vec![(14, 4)];
    let traces = u64::from_le_bytes(b[82..90].try_into().expect("8 bytes")) as usize;
    fields.extend((0..6 + traces).map(|i| (50 + 8 * i, 8)));
    fields
}

/// The largest container of an insecure expanded key (the level-2 Fourier bootstrapping key):
/// read_expanded allocates it once its count matches the set, before reading it.
pub fn largest_expanded_container() -> usize {
    let p = &INSECURE_TEST;
    p.lwe2_dim * 4 * p.bsk2_levels * p.n2 / 2 * 16
}

pub fn expanded_key() -> Decoder {
    let valid = vec![insecure()
        .expanded
        .clone()
        .expect("insecure fixture expands")];
    Decoder::new("expanded detection key", valid, |b| {
        DetectionKey::from_expanded_bytes(b, &INSECURE_TEST)
    })
    .fields(expanded_fields)
    .alloc(1.0, largest_expanded_container() + SLACK)
    .cases(32)
}

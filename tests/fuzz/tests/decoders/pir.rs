//! Attachments: messages that carry one (version 3: omr-core's decoder and omrd's body rules),
//! and omr-pir's three encodings: the query omrd decodes from the network, the hint and answer
//! the SDK decodes from omrd. Each PIR encoding declares its database's shape and counts in
//! u32 fields after its 5-byte header; a huge value there must be refused before anything is
//! allocated for it.

use omr_core::Message;
use omr_pir::{Answer, Database, Hint, Query, Shape, PIR_V1};
use omr_server::http::body::{self, BodyKind};
use rand::SeedableRng;

use crate::fixtures::{both, insecure, Fixture};
use crate::harness::{Decoder, Field, SLACK};
use crate::service::{refusal, RULES};

/// `f`'s messages with attachments of 1 and 3,000 bytes, with and without a stamp's nonce.
fn attached(f: &Fixture) -> Vec<Vec<u8>> {
    let m = Message::from_bytes(&f.messages[1]).expect("a fixture message");
    [vec![9u8], vec![7u8; 3000]]
        .into_iter()
        .flat_map(|a| {
            let with = m.clone().with_attachment(a).expect("an attachment");
            let stamped = Message {
                nonce: Some(12345),
                ..with.clone()
            };
            [with.to_bytes(), stamped.to_bytes()]
        })
        .collect()
}

/// Where a version-3 message declares its attachment's length: after the header (6 bytes), the
/// flag byte and the nonce when flagged.
fn attachment_length(b: &[u8]) -> Vec<Field> {
    match b.get(6) {
        Some(1) => vec![(15, 4)],
        _ => vec![(7, 4)],
    }
}

pub fn message_with_attachment() -> Decoder {
    Decoder::new(
        "message (version 3, with an attachment)",
        both(attached),
        Message::from_bytes,
    )
    .fields(attachment_length)
    .alloc(6.5, SLACK)
    .cases(500)
}

pub fn http_message_with_attachment() -> Decoder {
    Decoder::new(
        "POST /v1/messages (binary, with an attachment)",
        // The routes' rules run the insecure set.
        attached(insecure()),
        |b| body::message(RULES, BodyKind::Binary, b).map_err(refusal),
    )
    .fields(attachment_length)
    .alloc(6.5, SLACK)
    .cases(500)
}

/// A small database (5 records of 600 bytes: 3 chunks of 256) and a valid hint, fetch and
/// answer of it.
fn encodings() -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let shape = Shape::for_records(5, 600).expect("a shape");
    let records: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 100 * i as usize]).collect();
    let db =
        Database::from_records(&PIR_V1, shape, records.iter().map(|r| &r[..])).expect("a database");
    let hint = db.preprocess([3; 32]);
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(4);
    let (query, _) = hint.query(2, &mut rng).expect("a query");
    let answer = db.answer(&query).expect("an answer");
    (hint.to_bytes(), query.to_bytes(), answer.to_bytes())
}

/// Records, record bytes, chunks (and a count): u32 fields after the 5-byte header.
fn shape_fields(_: &[u8]) -> Vec<Field> {
    vec![(5, 4), (9, 4), (13, 4), (17, 4)]
}

pub fn pir_query() -> Decoder {
    Decoder::new(
        "PIR query (POST /v1/pir/{epoch}/query)",
        vec![encodings().1],
        Query::from_bytes,
    )
    .fields(shape_fields)
    .alloc(1.5, SLACK)
    .cases(500)
}

pub fn pir_hint() -> Decoder {
    // 20-bit values become u32s: 1.6 bytes per input byte.
    Decoder::new("PIR hint", vec![encodings().0], Hint::from_bytes)
        .fields(|b| shape_fields(b)[..3].to_vec())
        .alloc(2.0, SLACK)
        .cases(300)
}

pub fn pir_answer() -> Decoder {
    // 16-bit values become u32s: 2 bytes per input byte.
    Decoder::new("PIR answer", vec![encodings().2], Answer::from_bytes)
        .fields(|_| vec![(5, 4), (9, 4)])
        .alloc(2.5, SLACK)
        .cases(500)
}

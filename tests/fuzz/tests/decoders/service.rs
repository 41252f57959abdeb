//! omrd's decoders, called as its handlers call them on a server running the insecure set: the
//! board's request bodies (a message as JSON or binary, a batch as JSON or in the binary
//! framing), the key registration's first gRPC message (protobuf, then the header checks), and
//! the expanded key files of `DATA_DIR/expanded-keys/`. Refusals must be 4xx errors: a 5xx for
//! bad input fails the case.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use omr_api::http::{BatchIn, MessageIn};
use omr_core::{Message, INSECURE_TEST};
use omr_proto::v1::register_detection_key_request::Part;
use omr_proto::v1::registration_header::Start;
use omr_proto::v1::{RegisterDetectionKeyRequest, RegistrationHeader};
use omr_server::error::ServiceError;
use omr_server::http::body::{self, BodyKind, Rules, SINGLE_BODY_LIMIT};

/// The routes' rules on a server running the insecure set without postage.
pub const RULES: Rules = Rules {
    set: omr_server::set::Set::Tfhe(&INSECURE_TEST),
    postage_bits: 0,
    max_attachment_bytes: 64 * 1024,
};
use prost::Message as _;

use crate::fixtures::{insecure, STAMP_BITS};
use crate::harness::{Decoder, Field, SLACK};
use crate::scheme::largest_expanded_container;
use crate::scheme::payload_length;

/// omrd's default `max_batch_messages`.
const MAX_BATCH: usize = 1000;

/// A refusal's message; a 5xx for bad input panics (a failed case).
pub fn refusal(e: ServiceError) -> String {
    let status = e.code.http_status();
    assert!(status < 500, "bad input answered with {status}: {e}");
    e.to_string()
}

fn json_message(encoded: &[u8]) -> MessageIn {
    let m = Message::from_bytes(encoded).expect("a fixture message");
    MessageIn {
        clue: B64.encode(m.clue.to_bytes()),
        payload: B64.encode(&m.payload),
        nonce: m.nonce,
        attachment: (!m.attachment.is_empty()).then(|| B64.encode(&m.attachment)),
    }
}

/// Messages in the binary batch framing: (u32 little-endian length, encoding) each.
fn framed(messages: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for m in messages {
        out.extend_from_slice(&(m.len() as u32).to_le_bytes());
        out.extend_from_slice(m);
    }
    out
}

/// The length prefixes of a binary batch.
fn frame_fields(b: &[u8]) -> Vec<Field> {
    let mut fields = Vec::new();
    let mut at = 0;
    while at + 4 <= b.len() {
        fields.push((at, 4));
        at += 4 + u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes")) as usize;
    }
    fields
}

pub fn message_binary() -> Decoder {
    let valid = insecure().messages.clone();
    Decoder::new("POST /v1/messages (binary)", valid, |b| {
        body::message(RULES, BodyKind::Binary, b).map_err(refusal)
    })
    .fields(|_| vec![(6, 2)])
    .alloc(6.5, SLACK)
    .cases(1000)
}

/// A stamped message (version 2) on a server with postage on: a bit flip anywhere in the
/// clue, payload or nonce spoils the stamp (`402`), a valid stamp is accepted.
pub fn message_binary_stamped() -> Decoder {
    let rules = Rules {
        set: omr_server::set::Set::Tfhe(&INSECURE_TEST),
        postage_bits: STAMP_BITS,
        max_attachment_bytes: 64 * 1024,
    };
    let valid = insecure().stamped.clone();
    Decoder::new("POST /v1/messages (binary, stamped)", valid, move |b| {
        body::message(rules, BodyKind::Binary, b).map_err(refusal)
    })
    .fields(payload_length)
    .alloc(6.5, SLACK)
    .cases(1000)
}

/// An invite code as a registration header carries it (a protobuf string: UTF-8), checked for
/// its shape as both the CLI and omrd do before looking it up.
pub fn invite_code() -> Decoder {
    let valid = vec![
        b"0123456789abcdef0123456789abcdef".to_vec(),
        b"0123456789ABCDEF0123456789ABCDEF".to_vec(),
    ];
    Decoder::new("invite code", valid, |b| {
        let text = std::str::from_utf8(b).map_err(|e| e.to_string())?;
        omr_api::invite::normalize_invite_code(text).map_err(|e| e.to_string())
    })
    .crafted(vec![vec![b'a'; 1 << 20], "é".repeat(32).into_bytes()])
    .alloc(1.0, SLACK)
    .cases(2000)
}

pub fn message_json() -> Decoder {
    let valid = (insecure().messages.iter())
        .map(|m| serde_json::to_vec(&json_message(m)).expect("JSON"))
        .collect();
    Decoder::new("POST /v1/messages (JSON)", valid, |b| {
        body::message(RULES, BodyKind::Json, b).map_err(refusal)
    })
    .crafted(vec![
        // A clue of a whole body's worth of base64: refused by its size after decoding it.
        format!(
            r#"{{"clue":"{}","payload":""}}"#,
            "A".repeat(SINGLE_BODY_LIMIT - 64)
        )
        .into_bytes(),
    ])
    .alloc(1.0, SLACK)
    .cases(1000)
}

pub fn batch_binary() -> Decoder {
    let m = &insecure().messages;
    let valid = vec![framed(&m[..1]), framed(m)];
    Decoder::new("POST /v1/messages/batch (binary framing)", valid, |b| {
        body::batch(RULES, BodyKind::Binary, b, MAX_BATCH).map_err(refusal)
    })
    .fields(frame_fields)
    .prefixes_decode()
    .crafted(vec![framed(&vec![m[0].clone(); MAX_BATCH + 1])])
    .alloc(6.5, SLACK)
    .cases(500)
}

pub fn batch_json() -> Decoder {
    let messages: Vec<MessageIn> = insecure()
        .messages
        .iter()
        .map(|m| json_message(m))
        .collect();
    let valid = vec![serde_json::to_vec(&BatchIn { messages }).expect("JSON")];
    // The largest body the route reads, of empty messages: refused at message 1001, without
    // holding the other 600,000 (serde's Vec would grow to 50 MB first).
    let empty = r#"{"clue":"","payload":""}"#;
    let count = (MAX_BATCH * SINGLE_BODY_LIMIT - 64) / (empty.len() + 1);
    let many = format!(r#"{{"messages":[{}]}}"#, vec![empty; count].join(","));
    Decoder::new("POST /v1/messages/batch (JSON)", valid, |b| {
        body::batch(RULES, BodyKind::Json, b, MAX_BATCH).map_err(refusal)
    })
    .crafted(vec![many.into_bytes()])
    .alloc(1.0, SLACK)
    .cases(500)
}

fn header_request(param_set: &str, kbar: u32, total_bytes: u64, start: Option<Start>) -> Vec<u8> {
    RegisterDetectionKeyRequest {
        part: Some(Part::Header(RegistrationHeader {
            param_set: param_set.to_string(),
            kbar,
            total_bytes,
            start,
            invite_code: String::new(),
        })),
    }
    .encode_to_vec()
}

/// The first message of `RegisterDetectionKey`: decoded, then checked before any key byte is
/// read (as `DetectorService::receive` does).
pub fn registration_header() -> Decoder {
    let max_key_bytes = omr_server::Config::default().max_key_bytes;
    let name = INSECURE_TEST.name;
    let len = insecure().detection_key.len() as u64;
    let valid = vec![
        header_request(name, 4, len, Some(Start::FromNow(true))),
        header_request(name, 32, max_key_bytes, Some(Start::StartIndex(u64::MAX))),
    ];
    let crafted = vec![
        header_request(name, 4, u64::MAX, Some(Start::FromNow(true))),
        header_request(name, 4, max_key_bytes + 1, Some(Start::FromNow(true))),
        header_request(name, u32::MAX, len, Some(Start::FromNow(true))),
        header_request(name, 4, len, None),
        header_request("omr-v1", 4, len, Some(Start::FromNow(true))),
        header_request(&"x".repeat(4096), 4, len, Some(Start::FromNow(true))),
        // Field 1 (the header) declaring 2^32 - 1 bytes, then the header's param_set doing so.
        vec![0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f],
        vec![0x0a, 0x06, 0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f],
        // A 10-byte varint length (u64::MAX).
        [&[0x0a][..], &[0xff; 9], &[0x01]].concat(),
        // A chunk where the header must be.
        RegisterDetectionKeyRequest {
            part: Some(Part::Chunk(vec![0; 64])),
        }
        .encode_to_vec(),
    ];
    Decoder::new("RegisterDetectionKey header", valid, move |b| {
        let req = RegisterDetectionKeyRequest::decode(b).map_err(|e| e.to_string())?;
        match req.part {
            Some(Part::Header(h)) => omr_server::grpc::check_header(
                &h,
                omr_server::set::Set::Tfhe(&INSECURE_TEST),
                max_key_bytes,
            )
            .map_err(refusal),
            _ => Err("the first message must be the header".to_string()),
        }
    })
    .prefixes_decode()
    .crafted(crafted)
    .alloc(1.0, SLACK)
    .cases(1000)
}

/// An expanded key file as the worker reads it (`read_file`), written anew for each case.
pub fn expanded_key_file() -> Decoder {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("key.key");
    let valid = vec![insecure()
        .expanded
        .clone()
        .expect("insecure fixture expands")];
    Decoder::new("expanded key file (read_file)", valid, move |b| {
        let _keep = &dir;
        std::fs::write(&path, b).expect("writing the case's file");
        match omr_server::worker::key_files::read_file(&path, &INSECURE_TEST) {
            Ok(Some(_)) => Ok(()),
            Ok(None) => panic!("the file was just written"),
            Err(e) => Err(format!("{e:#}")),
        }
    })
    .alloc(1.0, largest_expanded_container() + SLACK)
    .cases(24)
}

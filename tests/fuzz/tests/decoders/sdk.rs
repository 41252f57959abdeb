//! The SDK's decoders: a key directory's files as `omr` reads them (a clue key — someone else's
//! file —, the secret key, registration.json, digest-state.json), and the JSON bodies omrd
//! answers (omr-api's types). The downloaded digest is `scheme::digest_decoded`. Each file case
//! writes a file first (a few milliseconds on a busy machine), so these run fewer cases; the
//! decoders behind them run more in memory.

use std::collections::BTreeSet;
use std::path::PathBuf;

use omr_api::http::{BoardMessage, BoardPage, ErrorBody, KeyStatus, Params};
use omr_api::ErrorCode;
use omr_client::keydir::{
    read_clue_key, CLUE_KEY_FILE, DETECTION_KEY_FILE, DIGEST_STATE_FILE, REGISTRATION_FILE,
    SECRET_KEY_FILE,
};
use omr_client::{DigestState, KeyDir, Registration};
use omr_core::keys::{CLUE_KEY_LIMIT, DETECTION_KEY_LIMIT, SECRET_KEY_LIMIT};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::alloc::largest_allocation;
use crate::fixtures::{both, insecure};
use crate::harness::{Decoder, SLACK};

/// A key directory in a temporary directory, kept as long as the decoder.
fn key_dir() -> (tempfile::TempDir, KeyDir) {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = KeyDir::new(tmp.path());
    (tmp, dir)
}

/// `decode` after writing the case's bytes to `file` of a fresh key directory.
fn from_file<T, E: std::fmt::Display>(
    name: &'static str,
    file: &'static str,
    valid: Vec<Vec<u8>>,
    decode: impl Fn(&KeyDir, PathBuf) -> Result<T, E> + Send + Sync + 'static,
) -> Decoder {
    let (tmp, dir) = key_dir();
    Decoder::new(name, valid, move |b| {
        let _keep = &tmp;
        let path = dir.file(file);
        std::fs::write(&path, b).expect("writing the case's file");
        decode(&dir, path)
    })
}

pub fn clue_key_file() -> Decoder {
    let valid = both(|f| vec![f.clue_key.clone()]);
    from_file("clue key file", CLUE_KEY_FILE, valid, |_, p| {
        read_clue_key(&p)
    })
    .alloc(3.0, SLACK)
    .cases(200)
}

pub fn secret_key_file() -> Decoder {
    let valid = both(|f| vec![f.secret_key.clone()]);
    from_file("secret key file", SECRET_KEY_FILE, valid, |d, _| {
        d.secret_key()
    })
    .fields(|_| vec![(6, 4)])
    .alloc(64.0, SLACK)
    .cases(150)
}

fn registration() -> Registration {
    Registration {
        key_id: "9840e217-b3c6-49bb-be02-d0faeb2ca8e1".into(),
        access_token: "0f".repeat(32),
        start_index: 7,
        param_set: "insecure-test".into(),
        kbar: 4,
        grpc_url: "http://127.0.0.1:50051".into(),
        http_url: Some("http://127.0.0.1:8080".into()),
        registered_at: "2026-11-22T05:29:03.478Z".into(),
    }
}

/// As the SDK writes its JSON files: pretty, with a final newline.
fn json_file(value: &impl Serialize) -> Vec<u8> {
    let mut b = serde_json::to_vec_pretty(value).expect("JSON");
    b.push(b'\n');
    b
}

pub fn registration_file() -> Decoder {
    let valid = vec![json_file(&registration())];
    from_file("registration.json", REGISTRATION_FILE, valid, |d, _| {
        d.registration()
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "no file".to_string())
    })
    .prefixes_decode()
    .alloc(2.0, SLACK)
    .cases(200)
}

pub fn digest_state_file() -> Decoder {
    let state = DigestState {
        key_id: registration().key_id,
        next_from: 96,
        seen: BTreeSet::from([64, 70, 95]),
        pending_attachments: vec![omr_client::PendingAttachment {
            index: 70,
            bytes: 5000,
            sha256: "ab".repeat(32),
        }],
        pending_payloads: vec![4100, 4101],
        next_pir_epoch: Some(1),
    };
    from_file(
        "digest-state.json",
        DIGEST_STATE_FILE,
        vec![json_file(&state)],
        |d, _| d.digest_state(&registration()),
    )
    .prefixes_decode()
    .alloc(2.0, SLACK)
    .cases(200)
}

/// A JSON body of omrd's as the SDK parses it.
fn json<T: DeserializeOwned + Serialize + 'static>(name: &'static str, samples: &[T]) -> Decoder {
    let valid = samples
        .iter()
        .map(|s| serde_json::to_vec(s).expect("JSON"))
        .collect();
    Decoder::new(name, valid, |b| serde_json::from_slice::<T>(b))
        .alloc(4.0, SLACK)
        .cases(500)
}

pub fn error_body() -> Decoder {
    let samples: Vec<ErrorBody> = (ErrorCode::ALL.iter())
        .map(|&c| ErrorBody::new(c, "what went wrong"))
        .collect();
    let valid = samples
        .iter()
        .map(|s| serde_json::to_vec(s).expect("JSON"))
        .collect();
    Decoder::new("error body", valid, |b| {
        serde_json::from_slice::<ErrorBody>(b).map(|e| e.error_code())
    })
    .alloc(2.0, SLACK)
    .cases(500)
}

pub fn params_body() -> Decoder {
    let p = &omr_core::OMR_V1;
    json(
        "GET /v1/params",
        &[Params {
            param_set: p.name.into(),
            clue_bytes: p.clue_bytes(),
            max_payload_bytes: p.payload_bytes,
            max_kbar: p.max_kbar,
            max_range: p.max_range,
            max_key_bytes: 128 << 20,
            postage_bits: 20,
            invite_required: true,
            max_batch_messages: 1000,
            board_head: 12345,
            max_attachment_bytes: 65536,
            epoch_len: 4096,
            pir_params: Some("pir-v1".into()),
        }],
    )
}

pub fn key_status_body() -> Decoder {
    json(
        "key status",
        &[KeyStatus {
            key_id: registration().key_id,
            param_set: "omr-v1".into(),
            kbar: 50,
            start_index: 0,
            cursor: 10,
            board_head: 12,
            lag: 2,
            key_bytes: 106_900_000,
            registered_at: "2026-11-22T05:29:03.478Z".into(),
            state: "waiting".into(),
            eta_secs: Some(3),
            refresh_at: None,
        }],
    )
}

pub fn board_page_body() -> Decoder {
    let clue = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        &insecure().clues[0],
    );
    let message = |index| BoardMessage {
        index,
        clue: clue.clone(),
        payload: "bHVuY2g=".into(),
        received_ms: 1_763_789_343_478,
        // A page read with `attachments=true`: one of them carries one.
        attachment: (index == 1).then(|| "YXR0YWNoZWQ=".into()),
    };
    json(
        "GET /v1/messages",
        &[BoardPage {
            messages: (0..3).map(message).collect(),
            next: 3,
            head: 3,
        }],
    )
}

#[test]
fn a_gigabyte_key_file_is_refused_without_reading_it() {
    // Sparse files: a gigabyte on paper, nothing on disk. The SDK must refuse a key file by its
    // size, not read it whole for its decoder's size limit to refuse.
    let (_tmp, dir) = key_dir();
    let reads: [(&str, usize, ReadKey); 3] = [
        (CLUE_KEY_FILE, CLUE_KEY_LIMIT, |d| {
            read_clue_key(&d.file(CLUE_KEY_FILE)).map(drop)
        }),
        (SECRET_KEY_FILE, SECRET_KEY_LIMIT, |d| {
            d.secret_key().map(drop)
        }),
        (DETECTION_KEY_FILE, DETECTION_KEY_LIMIT, |d| {
            d.detection_key_bytes().map(drop)
        }),
    ];
    for (file, limit, read) in reads {
        let f = std::fs::File::create(dir.file(file)).unwrap();
        f.set_len(1 << 30).unwrap();
        let (result, largest) = largest_allocation(|| read(&dir));
        let e = result.unwrap_err().to_string();
        assert!(e.contains(file) && e.contains("more than any"), "{e}");
        assert!(
            largest <= SLACK,
            "{file}: allocated {largest} bytes at once (limit {limit})"
        );
    }
}

type ReadKey = fn(&KeyDir) -> omr_client::Result<()>;

/// A recipient's address as `omr send --to` reads it (UTF-8 text, then `Address::parse`): a
/// damaged copy must be refused by its checksum, not send to nobody.
pub fn address() -> Decoder {
    let valid = both(|f| {
        let address = omr_client::Address {
            clue_key: omr_core::ClueKey::from_bytes(&f.clue_key)
                .expect("a fixture clue key")
                .into(),
            seal: omr_client::SealKey::generate().public().clone(),
        };
        vec![address.encode().into_bytes()]
    });
    Decoder::new("address (omr1…)", valid, |b| {
        let text = std::str::from_utf8(b).map_err(|e| e.to_string())?;
        omr_client::Address::parse(text).map_err(|e| e.to_string())
    })
    .alloc(2.0, SLACK)
    .cases(500)
}

/// A sealed payload as a recipient opens it: anything but the sealed bytes unchanged is
/// refused (it reads as a payload that cannot be opened).
pub fn sealed_payload() -> Decoder {
    let key = omr_client::SealKey::generate();
    let valid = [&b""[..], b"lunch at noon?", &[0xA5; 562]]
        .iter()
        .map(|p| key.public().seal(p))
        .collect();
    Decoder::new("sealed payload (HPKE)", valid, move |b| {
        if !omr_client::seal::is_sealed(b) {
            return Err("not a sealed payload".to_string());
        }
        match key.open(b) {
            omr_client::Letter::Opened(p) => Ok(p),
            other => Err(format!("cannot be opened: {other:?}")),
        }
    })
    .alloc(1.5, SLACK)
    .cases(1000)
}

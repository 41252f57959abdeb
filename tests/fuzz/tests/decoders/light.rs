//! omr-light's decoders: clue, address, secret key, detection key and digest, and a digest
//! decoded to indices with the recipient's key. Values packed in b bits become u64s, so a decoder
//! may allocate 64/b bytes per input byte; the secret key derives fixed-size polynomials (n + D
//! coefficients) from 38 bytes, and decoding a digest allocates one polynomial of D.

use std::sync::OnceLock;

use omr_light::{Address, Batch, Clue, DetectionKey, Digest, DigestPart, SecretKey, OMR_LIGHT_V1};
use rand::SeedableRng;

use crate::harness::{Decoder, Field, SLACK};

/// Valid encodings, made once.
struct Light {
    secret: SecretKey,
    secret_key: Vec<u8>,
    address: Vec<u8>,
    detection_key: Vec<u8>,
    clues: Vec<Vec<u8>>,
    digests: Vec<Vec<u8>>,
}

fn light() -> &'static Light {
    static F: OnceLock<Light> = OnceLock::new();
    F.get_or_init(|| {
        let p = &OMR_LIGHT_V1;
        let secret = SecretKey::from_seed(p, [7; 32]);
        let address = secret.address();
        let other = SecretKey::from_seed(p, [8; 32]).address();
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
        let clues: Vec<Clue> = (0..6)
            .map(|i| {
                if i % 2 == 0 {
                    address.clue_with(&mut rng)
                } else {
                    other.clue_with(&mut rng)
                }
            })
            .collect();
        let detection_key = secret.detection_key();
        let refs: Vec<_> = clues.iter().collect();
        let batch = Batch::prepare(p, &refs);
        let part = |first| DigestPart {
            first,
            own: batch.detect(&detection_key.expand()),
            shared: batch.shared().clone(),
        };
        let digests = vec![
            Digest::new(p, vec![]).to_bytes(),
            Digest::new(p, vec![part(0)]).to_bytes(),
            Digest::new(p, vec![part(0), part(4096)]).to_bytes(),
        ];
        Light {
            secret_key: secret.to_bytes(),
            secret,
            address: address.to_bytes(),
            detection_key: detection_key.to_bytes(),
            clues: clues.iter().map(Clue::to_bytes).collect(),
            digests,
        }
    })
}

pub fn clue() -> Decoder {
    // 23-bit and 24-bit values.
    Decoder::new("light clue", light().clues.clone(), Clue::from_bytes)
        .alloc(3.0, SLACK)
        .cases(500)
}

pub fn address() -> Decoder {
    Decoder::new(
        "light address",
        vec![light().address.clone()],
        Address::from_bytes,
    )
    .alloc(3.0, SLACK)
    .cases(500)
}

pub fn secret_key() -> Decoder {
    // Derives s (n), S (D) and S's NTT: fixed size, whatever the input.
    Decoder::new(
        "light secret key",
        vec![light().secret_key.clone()],
        SecretKey::from_bytes,
    )
    .alloc(0.0, 4 * OMR_LIGHT_V1.batch * 8 + SLACK)
    .cases(300)
}

pub fn detection_key() -> Decoder {
    // 62-bit residues: 33 MB per case, so a few cases of each property.
    Decoder::new(
        "light detection key",
        vec![light().detection_key.clone()],
        DetectionKey::from_bytes,
    )
    .alloc(1.1, SLACK)
    .cases(3)
}

pub fn detection_key_check() -> Decoder {
    // The server's check of an upload: the same bytes, nothing decoded into memory.
    Decoder::new(
        "light detection key, checked",
        vec![light().detection_key.clone()],
        DetectionKey::check_bytes,
    )
    .alloc(0.0, SLACK)
    .cases(3)
}

/// The batch count after the header, and the first batch's message count.
fn digest_fields(b: &[u8]) -> Vec<Field> {
    let mut f = vec![(6, 4)];
    if b.len() >= 22 {
        f.push((18, 4));
    }
    f
}

pub fn digest() -> Decoder {
    // 27- and 33-bit values.
    Decoder::new("light digest", light().digests.clone(), Digest::from_bytes)
        .fields(digest_fields)
        .alloc(2.5, SLACK)
        .cases(300)
}

pub fn digest_decoded() -> Decoder {
    Decoder::new(
        "light digest, decoded with the secret key",
        light().digests.clone(),
        |b| Ok::<_, omr_core::OmrError>(light().secret.pertinent(&Digest::from_bytes(b)?)),
    )
    .fields(digest_fields)
    .alloc(2.5, OMR_LIGHT_V1.batch * 8 + SLACK)
    .cases(100)
}

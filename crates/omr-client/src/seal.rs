//! Sealed payloads: a payload encrypted to its recipient, so that the public board shows only
//! ciphertext. OMR hides who a message is for; sealing hides what it says.
//!
//! Sealing is HPKE (RFC 9180) in base mode with DHKEM(X25519, HKDF-SHA256), HKDF-SHA256 and
//! ChaCha20-Poly1305, from the `hpke` crate, with `info` = [`SEAL_INFO`]. A sealed payload is
//!
//! ```text
//! 0xFF 0x01 ‖ enc (32 bytes: the sender's ephemeral X25519 key) ‖ ciphertext ‖ tag (16 bytes)
//! ```
//!
//! that is [`SEAL_OVERHEAD`] = 50 bytes more than the letter. A letter that comes with an
//! attachment starts `0xFF 0x02` instead, and its plaintext starts with an [`AttachmentRef`] (the
//! sealed attachment's length, u32 LE, and SHA-256): 86 bytes more than the letter. The two
//! magic bytes are HPKE's associated data, so changing them fails to open. The attachment is
//! sealed like a letter and stored beside the message; the reference in the letter tells the
//! recipient to fetch it and binds it to the letter, so neither the server nor anyone else can
//! swap it. `0xFF` never occurs in UTF-8
//! text, so a text payload posted unsealed (`omr send --plaintext`) is never taken for a sealed
//! one; an unsealed binary payload that happens to start with these two bytes is reported as
//! one that cannot be opened.
//!
//! What it gives: only the holder of the recipient's seal key reads the payload, and a payload
//! changed in any bit fails to open. What it does not: the sender is not authenticated (anyone
//! who has the address can seal to it), and the payload's length is public (pad before sealing
//! to hide it).

use hpke::aead::ChaCha20Poly1305;
use hpke::kdf::HkdfSha256;
use hpke::kem::X25519HkdfSha256;
use hpke::{Deserializable, Kem as _, OpModeR, OpModeS, Serializable};

/// The two bytes a sealed payload starts with.
pub const SEAL_MAGIC: [u8; 2] = [0xFF, 0x01];
/// The two bytes a sealed payload that names an attachment starts with.
pub const ATTACHED_MAGIC: [u8; 2] = [0xFF, 0x02];
/// Bytes a sealed payload adds to its letter: the magic, the encapsulated key, the tag.
pub const SEAL_OVERHEAD: usize = SEAL_MAGIC.len() + ENC_LEN + TAG_LEN;
/// Bytes an [`AttachmentRef`] takes in a letter.
pub const ATTACHMENT_REF_LEN: usize = 4 + 32;

/// The attachment a letter comes with: its length and SHA-256 as stored (sealed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttachmentRef {
    pub len: u32,
    pub sha256: [u8; 32],
}

impl AttachmentRef {
    /// The reference of a sealed attachment.
    pub fn of(sealed: &[u8]) -> AttachmentRef {
        use sha2::Digest;
        AttachmentRef {
            len: sealed.len() as u32,
            sha256: sha2::Sha256::digest(sealed).into(),
        }
    }
}

/// Why a fetched attachment was not opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttachmentError {
    #[error("it is not the attachment its letter names ({0}): another was stored or the fetch decoded wrong")]
    NotTheOne(&'static str),
    #[error("it does not open with this seal key")]
    Unopenable,
}
/// HPKE's `info`: binds a sealed payload to this use.
pub const SEAL_INFO: &[u8] = b"omr sealed payload v1";
/// Bytes of a seal key (private or public).
pub const SEAL_KEY_LEN: usize = 32;

const ENC_LEN: usize = 32;
const TAG_LEN: usize = 16;

type Kem = X25519HkdfSha256;
type PrivateKey = <Kem as hpke::Kem>::PrivateKey;
type PublicKey = <Kem as hpke::Kem>::PublicKey;

/// A recipient's seal key: its private half opens payloads sealed to its public half.
#[derive(Clone)]
pub struct SealKey {
    private: PrivateKey,
    public: SealPublicKey,
}

impl std::fmt::Debug for SealKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealKey")
            .field("public", &self.public)
            .finish_non_exhaustive()
    }
}

/// The public half of a [`SealKey`]: what senders seal to (part of the recipient's address).
#[derive(Clone, PartialEq, Eq)]
pub struct SealPublicKey(PublicKey);

impl std::fmt::Debug for SealPublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SealPublicKey({})", hex::encode(self.to_bytes()))
    }
}

/// Why bytes are not a seal key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a seal key is {SEAL_KEY_LEN} bytes (an X25519 key); this is {len} bytes{}", if *.len == SEAL_KEY_LEN { " but not a valid key" } else { "" })]
pub struct BadSealKey {
    pub len: usize,
}

/// What a retrieved payload holds for its recipient.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Letter {
    /// A sealed payload, opened: the plaintext.
    Opened(Vec<u8>),
    /// A payload posted unsealed (`--plaintext`), readable by anyone on the board.
    Plain(Vec<u8>),
    /// A sealed payload that this key cannot open: a false positive of detection (another
    /// recipient's message), or a forgery or corruption.
    Unopenable,
}

impl Letter {
    /// The readable bytes, if any.
    pub fn bytes(&self) -> Option<&[u8]> {
        match self {
            Letter::Opened(b) | Letter::Plain(b) => Some(b),
            Letter::Unopenable => None,
        }
    }

    /// Whether the payload was sealed (opened or not).
    pub fn was_sealed(&self) -> bool {
        !matches!(self, Letter::Plain(_))
    }
}

/// Whether `payload` is a sealed payload (by its first two bytes).
pub fn is_sealed(payload: &[u8]) -> bool {
    payload.starts_with(&SEAL_MAGIC) || payload.starts_with(&ATTACHED_MAGIC)
}

impl SealKey {
    /// A new random seal key (the operating system's generator).
    pub fn generate() -> SealKey {
        let (private, public) = Kem::gen_keypair(&mut rand::rngs::OsRng);
        SealKey {
            private,
            public: SealPublicKey(public),
        }
    }

    /// The key from its 32 bytes (as [`SealKey::to_bytes`] wrote them).
    pub fn from_bytes(bytes: &[u8]) -> Result<SealKey, BadSealKey> {
        let bad = BadSealKey { len: bytes.len() };
        if bytes.len() != SEAL_KEY_LEN {
            return Err(bad);
        }
        let private = PrivateKey::from_bytes(bytes).map_err(|_| bad.clone())?;
        let public = SealPublicKey(Kem::sk_to_pk(&private));
        Ok(SealKey { private, public })
    }

    /// The private key's 32 bytes: keep them secret (`seal.key`, mode 0600).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.private.to_bytes().to_vec()
    }

    pub fn public(&self) -> &SealPublicKey {
        &self.public
    }

    /// Open a retrieved payload: [`Letter::Plain`] when it was not sealed,
    /// [`Letter::Opened`] when this key opens it, [`Letter::Unopenable`] otherwise.
    pub fn open(&self, payload: &[u8]) -> Letter {
        self.open_letter(payload).0
    }

    /// [`SealKey::open`], and the attachment the letter comes with, if any.
    pub fn open_letter(&self, payload: &[u8]) -> (Letter, Option<AttachmentRef>) {
        if !is_sealed(payload) {
            return (Letter::Plain(payload.to_vec()), None);
        }
        let Some(plaintext) = self.open_sealed(payload) else {
            return (Letter::Unopenable, None);
        };
        if payload.starts_with(&SEAL_MAGIC) {
            return (Letter::Opened(plaintext), None);
        }
        if plaintext.len() < ATTACHMENT_REF_LEN {
            return (Letter::Unopenable, None);
        }
        let (r, letter) = plaintext.split_at(ATTACHMENT_REF_LEN);
        let attachment = AttachmentRef {
            len: u32::from_le_bytes(r[..4].try_into().expect("4 bytes")),
            sha256: r[4..].try_into().expect("32 bytes"),
        };
        (Letter::Opened(letter.to_vec()), Some(attachment))
    }

    /// A fetched attachment, checked against its letter's reference, opened.
    pub fn open_attachment(
        &self,
        sealed: &[u8],
        expected: &AttachmentRef,
    ) -> Result<Vec<u8>, AttachmentError> {
        let got = AttachmentRef::of(sealed);
        if got.len != expected.len {
            return Err(AttachmentError::NotTheOne("length"));
        }
        if got.sha256 != expected.sha256 {
            return Err(AttachmentError::NotTheOne("SHA-256"));
        }
        match self.open_letter(sealed) {
            (Letter::Opened(bytes), None) => Ok(bytes),
            _ => Err(AttachmentError::Unopenable),
        }
    }

    /// HPKE-open a sealed payload (either magic, bound as associated data): the plaintext, or
    /// `None`.
    fn open_sealed(&self, payload: &[u8]) -> Option<Vec<u8>> {
        let (magic, body) = payload.split_at_checked(SEAL_MAGIC.len())?;
        if body.len() < ENC_LEN + TAG_LEN {
            return None;
        }
        let (enc, ciphertext) = body.split_at(ENC_LEN);
        let enc = <Kem as hpke::Kem>::EncappedKey::from_bytes(enc).ok()?;
        hpke::single_shot_open::<ChaCha20Poly1305, HkdfSha256, Kem>(
            &OpModeR::Base,
            &self.private,
            &enc,
            SEAL_INFO,
            ciphertext,
            magic,
        )
        .ok()
    }
}

impl SealPublicKey {
    pub fn from_bytes(bytes: &[u8]) -> Result<SealPublicKey, BadSealKey> {
        let bad = BadSealKey { len: bytes.len() };
        if bytes.len() != SEAL_KEY_LEN {
            return Err(bad);
        }
        PublicKey::from_bytes(bytes)
            .map(SealPublicKey)
            .map_err(|_| bad)
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        self.0.to_bytes().to_vec()
    }

    /// `letter` sealed to this key: [`SEAL_OVERHEAD`] bytes longer.
    pub fn seal(&self, letter: &[u8]) -> Vec<u8> {
        self.seal_plaintext(SEAL_MAGIC, letter)
    }

    /// `letter` sealed to this key with the reference of `attachment` (sealed to this key too:
    /// see [`SealPublicKey::seal_attachment`]); [`SEAL_OVERHEAD`] + [`ATTACHMENT_REF_LEN`] bytes
    /// longer than `letter`.
    pub fn seal_with_attachment(&self, letter: &[u8], attachment: &AttachmentRef) -> Vec<u8> {
        let mut plaintext = Vec::with_capacity(letter.len() + ATTACHMENT_REF_LEN);
        plaintext.extend_from_slice(&attachment.len.to_le_bytes());
        plaintext.extend_from_slice(&attachment.sha256);
        plaintext.extend_from_slice(letter);
        self.seal_plaintext(ATTACHED_MAGIC, &plaintext)
    }

    /// `attachment` sealed to this key, and the reference its letter carries.
    pub fn seal_attachment(&self, attachment: &[u8]) -> (Vec<u8>, AttachmentRef) {
        let sealed = self.seal(attachment);
        let r = AttachmentRef::of(&sealed);
        (sealed, r)
    }

    fn seal_plaintext(&self, magic: [u8; 2], plaintext: &[u8]) -> Vec<u8> {
        let (enc, ciphertext) = hpke::single_shot_seal::<ChaCha20Poly1305, HkdfSha256, Kem, _>(
            &OpModeS::Base,
            &self.0,
            SEAL_INFO,
            plaintext,
            &magic,
            &mut rand::rngs::OsRng,
        )
        .expect("sealing to a valid X25519 public key cannot fail");
        let mut out = Vec::with_capacity(plaintext.len() + SEAL_OVERHEAD);
        out.extend_from_slice(&magic);
        out.extend_from_slice(&enc.to_bytes());
        out.extend_from_slice(&ciphertext);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_letter_names_its_attachment_which_opens_only_if_it_is_the_one() {
        let me = SealKey::generate();
        let other = SealKey::generate();
        let (sealed, r) = me.public().seal_attachment(b"the attachment");
        assert_eq!(sealed.len(), 14 + SEAL_OVERHEAD);
        let letter = me.public().seal_with_attachment(b"see attached", &r);
        assert_eq!(letter.len(), 12 + SEAL_OVERHEAD + ATTACHMENT_REF_LEN);
        assert!(is_sealed(&letter));
        let (opened, named) = me.open_letter(&letter);
        assert_eq!(opened, Letter::Opened(b"see attached".to_vec()));
        assert_eq!(named, Some(r));
        assert_eq!(me.open_attachment(&sealed, &r).unwrap(), b"the attachment");
        // A letter without one names none; another key opens neither.
        assert_eq!(me.open_letter(&me.public().seal(b"hi")).1, None);
        assert_eq!(other.open_letter(&letter), (Letter::Unopenable, None));
        assert_eq!(
            other.open_attachment(&sealed, &r),
            Err(AttachmentError::Unopenable)
        );
        // Changed, swapped or cut: not the one.
        let mut changed = sealed.clone();
        changed[40] ^= 1;
        assert_eq!(
            me.open_attachment(&changed, &r),
            Err(AttachmentError::NotTheOne("SHA-256"))
        );
        let (swapped, _) = me.public().seal_attachment(b"the attachment");
        assert_eq!(
            me.open_attachment(&swapped, &r),
            Err(AttachmentError::NotTheOne("SHA-256"))
        );
        assert_eq!(
            me.open_attachment(&sealed[..sealed.len() - 1], &r),
            Err(AttachmentError::NotTheOne("length"))
        );
        // The magic is bound: switched either way, the letter does not open. A short reference
        // does not open either.
        let mut switched = letter.clone();
        switched[1] = SEAL_MAGIC[1];
        assert_eq!(me.open_letter(&switched), (Letter::Unopenable, None));
        let mut switched = me
            .public()
            .seal(b"a plain letter, long enough to hold a reference");
        switched[1] = ATTACHED_MAGIC[1];
        assert_eq!(me.open_letter(&switched), (Letter::Unopenable, None));
        let short = me.public().seal_plaintext(ATTACHED_MAGIC, &[1, 2, 3]);
        assert_eq!(me.open_letter(&short), (Letter::Unopenable, None));
    }

    #[test]
    fn a_sealed_payload_opens_only_with_its_key_and_only_unchanged() {
        let (alice, bob) = (SealKey::generate(), SealKey::generate());
        let text = b"the keys are under the mat";
        let sealed = alice.public().seal(text);
        assert_eq!(sealed.len(), text.len() + SEAL_OVERHEAD);
        assert_eq!(SEAL_OVERHEAD, 50);
        assert!(is_sealed(&sealed));
        assert!(!sealed.windows(text.len()).any(|w| w == text));
        assert_eq!(alice.open(&sealed), Letter::Opened(text.to_vec()));
        assert_eq!(bob.open(&sealed), Letter::Unopenable);
        // Every single-byte change after the magic spoils it.
        for i in SEAL_MAGIC.len()..sealed.len() {
            let mut tampered = sealed.clone();
            tampered[i] ^= 0x01;
            assert_eq!(alice.open(&tampered), Letter::Unopenable, "byte {i}");
        }
        // Truncated, or only the magic.
        assert_eq!(alice.open(&sealed[..sealed.len() - 1]), Letter::Unopenable);
        assert_eq!(alice.open(&SEAL_MAGIC), Letter::Unopenable);
        // Two seals of one text differ (a fresh ephemeral key each).
        assert_ne!(alice.public().seal(text), sealed);
    }

    #[test]
    fn unsealed_payloads_pass_as_plain_and_empty_ones_seal() {
        let k = SealKey::generate();
        assert_eq!(k.open(b"hello"), Letter::Plain(b"hello".to_vec()));
        assert_eq!(k.open(b""), Letter::Plain(Vec::new()));
        assert_eq!(k.open(&k.public().seal(b"")), Letter::Opened(Vec::new()));
        assert!(!Letter::Plain(vec![]).was_sealed() && Letter::Unopenable.was_sealed());
    }

    #[test]
    fn keys_round_trip_and_bad_bytes_are_refused() {
        let k = SealKey::generate();
        let again = SealKey::from_bytes(&k.to_bytes()).unwrap();
        assert_eq!(again.public(), k.public());
        let public = SealPublicKey::from_bytes(&k.public().to_bytes()).unwrap();
        assert_eq!(&public, k.public());
        assert_eq!(
            SealKey::from_bytes(&[1; 31]).unwrap_err(),
            BadSealKey { len: 31 }
        );
        assert!(SealPublicKey::from_bytes(&[]).is_err());
        assert!(!format!("{k:?}").contains(&hex::encode(k.to_bytes())));
    }
}

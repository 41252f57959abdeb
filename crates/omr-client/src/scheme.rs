//! The two detection schemes as a recipient and a sender see them: TFHE (`omr-v1`, `omr-v2`,
//! omr-core) and linear (`omr-light-v1`, omr-light). Which one an encoding belongs to is read from
//! its header (byte 5, the parameter set's id: 3 is omr-light-v1), so a key file, an address or
//! a detection key says its scheme itself.
//!
//! - [`ClueKey`]: what a sender makes clues with (a TFHE clue key, or a light address).
//! - [`SecretKey`]: what a recipient decodes digests with; [`Secret`] borrows either.
//! - [`Keys`]: a freshly generated recipient, as [`crate::KeyDir::create_keys`] writes it.

use omr_core::codec::{HEADER_LEN, MAGIC};
use omr_core::OmrError;
use omr_light::{LightParams, OMR_LIGHT_V1};

/// The name of omr-light-v1, the linear scheme's parameter set.
pub const LIGHT_SET: &str = OMR_LIGHT_V1.name;

/// The light parameter set of an encoding, if its header names one.
fn light_params(bytes: &[u8]) -> Option<&'static LightParams> {
    if bytes.len() < HEADER_LEN || &bytes[..3] != MAGIC {
        return None;
    }
    LightParams::by_id(bytes[5])
}

/// The parameter set named `name`, of either scheme: its name, whether it is insecure, and
/// the largest k̄ a key of it may declare (omr-light-v1's digest holds no payloads: 1).
pub fn param_set(name: &str) -> Result<(&'static str, bool, usize), OmrError> {
    match LightParams::by_name(name) {
        Some(p) => Ok((p.name, !p.secure, 1)),
        None => omr_core::ParamSet::by_name(name).map(|p| (p.name, p.insecure, p.max_kbar)),
    }
}

/// A recipient's public clue key, of either scheme: what a sender makes clues with.
#[derive(Debug, Clone)]
pub enum ClueKey {
    Tfhe(omr_core::ClueKey),
    /// omr-light-v1's address (b = a·s + e).
    Light(omr_light::Address),
}

impl ClueKey {
    /// Decode a clue key of either scheme (its header says which).
    pub fn from_bytes(bytes: &[u8]) -> Result<ClueKey, OmrError> {
        match light_params(bytes) {
            Some(_) => omr_light::Address::from_bytes(bytes).map(ClueKey::Light),
            None => omr_core::ClueKey::from_bytes(bytes).map(ClueKey::Tfhe),
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            ClueKey::Tfhe(k) => k.to_bytes(),
            ClueKey::Light(a) => a.to_bytes(),
        }
    }

    /// Its parameter set's name.
    pub fn param_set(&self) -> &'static str {
        match self {
            ClueKey::Tfhe(k) => k.params().name,
            ClueKey::Light(a) => a.params().name,
        }
    }

    /// The largest payload a message to it carries.
    pub fn payload_bytes(&self) -> usize {
        match self {
            ClueKey::Tfhe(k) => k.params().payload_bytes,
            ClueKey::Light(a) => a.params().payload_bytes,
        }
    }

    /// Whether `payload` fits a message to this key.
    pub fn validate_payload(&self, payload: &[u8]) -> Result<(), OmrError> {
        match self {
            ClueKey::Tfhe(k) => omr_core::validate_payload(k.params(), payload),
            ClueKey::Light(a) if payload.len() > a.params().payload_bytes => {
                Err(OmrError::PayloadTooLarge {
                    got: payload.len(),
                    max: a.params().payload_bytes,
                })
            }
            ClueKey::Light(_) => Ok(()),
        }
    }
}

impl From<omr_core::ClueKey> for ClueKey {
    fn from(k: omr_core::ClueKey) -> Self {
        ClueKey::Tfhe(k)
    }
}

impl From<&omr_core::ClueKey> for ClueKey {
    fn from(k: &omr_core::ClueKey) -> Self {
        ClueKey::Tfhe(k.clone())
    }
}

impl From<omr_light::Address> for ClueKey {
    fn from(a: omr_light::Address) -> Self {
        ClueKey::Light(a)
    }
}

impl From<&omr_light::Address> for ClueKey {
    fn from(a: &omr_light::Address) -> Self {
        ClueKey::Light(a.clone())
    }
}

impl From<&ClueKey> for ClueKey {
    fn from(k: &ClueKey) -> Self {
        k.clone()
    }
}

/// A recipient's secret key, of either scheme.
#[derive(Debug, Clone)]
pub enum SecretKey {
    Tfhe(omr_core::SecretKey),
    Light(omr_light::SecretKey),
}

impl SecretKey {
    /// Decode a secret key of either scheme (its header says which).
    pub fn from_bytes(bytes: &[u8]) -> Result<SecretKey, OmrError> {
        match light_params(bytes) {
            Some(_) => omr_light::SecretKey::from_bytes(bytes).map(SecretKey::Light),
            None => omr_core::SecretKey::from_bytes(bytes).map(SecretKey::Tfhe),
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            SecretKey::Tfhe(k) => k.to_bytes(),
            SecretKey::Light(k) => k.to_bytes(),
        }
    }

    /// Borrowed, as [`crate::Client::retrieve`] takes it.
    pub fn as_secret(&self) -> Secret<'_> {
        match self {
            SecretKey::Tfhe(k) => Secret::Tfhe(k),
            SecretKey::Light(k) => Secret::Light(k),
        }
    }
}

/// A borrowed secret key of either scheme.
#[derive(Debug, Clone, Copy)]
pub enum Secret<'a> {
    Tfhe(&'a omr_core::SecretKey),
    Light(&'a omr_light::SecretKey),
}

impl<'a> From<&'a omr_core::SecretKey> for Secret<'a> {
    fn from(k: &'a omr_core::SecretKey) -> Self {
        Secret::Tfhe(k)
    }
}

impl<'a> From<&'a omr_light::SecretKey> for Secret<'a> {
    fn from(k: &'a omr_light::SecretKey) -> Self {
        Secret::Light(k)
    }
}

impl<'a> From<&'a SecretKey> for Secret<'a> {
    fn from(k: &'a SecretKey) -> Self {
        k.as_secret()
    }
}

/// The parameter set and k̄ an encoded detection key declares (its header; a TFHE key's
/// k̄ from its body), or why it is not a detection key.
pub fn detection_key_set(bytes: &[u8]) -> Result<(&'static str, usize), OmrError> {
    match light_params(bytes) {
        // The server decodes and checks the 32.5 MB key; the header names the set.
        Some(p) => Ok((p.name, 1)),
        None => {
            let key = omr_core::CompressedDetectionKey::from_bytes(bytes)?;
            Ok((key.params().name, key.kbar()))
        }
    }
}

/// A key's digest, of either scheme.
#[derive(Debug, Clone)]
pub enum Digest {
    Tfhe(omr_core::Digest),
    Light(omr_light::Digest),
}

impl Digest {
    /// Decode a digest of the parameter set `param_set`.
    pub fn from_bytes(param_set: &str, bytes: &[u8]) -> Result<Digest, OmrError> {
        match LightParams::by_name(param_set) {
            Some(_) => omr_light::Digest::from_bytes(bytes).map(Digest::Light),
            None => omr_core::Digest::from_bytes(bytes).map(Digest::Tfhe),
        }
    }

    /// The most bytes a digest of `param_set` and k̄ takes (a TFHE digest has one size; a
    /// light one at most `max_digest_messages`, in whole batches).
    pub fn max_encoded_len(param_set: &str, kbar: usize) -> Result<usize, OmrError> {
        match LightParams::by_name(param_set) {
            Some(p) => {
                let batches = (p.max_digest_messages as usize).div_ceil(p.batch) + 1;
                Ok(omr_light::Digest::encoded_len(p, &vec![p.batch; batches]))
            }
            None => Ok(omr_core::Digest::encoded_len(
                omr_core::ParamSet::by_name(param_set)?,
                kbar,
            )),
        }
    }

    /// The board range it covers; `None` for a light digest of no batch (an empty range).
    pub fn range(&self) -> Option<(u64, u64)> {
        match self {
            Digest::Tfhe(d) => Some((d.start(), d.end())),
            Digest::Light(d) => {
                let (first, last) = (d.parts.first()?, d.parts.last()?);
                Some((first.first, last.first + last.own.len() as u64))
            }
        }
    }
}

/// A freshly generated recipient: its secret key, clue key and encoded detection key.
#[derive(Debug, Clone)]
pub struct Keys {
    pub secret: SecretKey,
    pub clue_key: ClueKey,
    /// The encoded detection key, as uploaded (omr-v1 ≈ 107 MB, omr-light-v1 ≈ 32.5 MB).
    pub detection_key: Vec<u8>,
}

impl Keys {
    /// Generate keys for the parameter set `name` (either scheme) and k̄ (ignored by
    /// omr-light-v1, whose digest decodes every message of its range: k̄ is 1).
    pub fn generate(name: &str, kbar: usize) -> Result<Keys, OmrError> {
        match LightParams::by_name(name) {
            Some(p) => Ok(Keys::from(omr_light::SecretKey::generate(p))),
            None => {
                let params = omr_core::ParamSet::by_name(name)?;
                omr_core::keygen(params, kbar).map(|k| Keys::from(&k))
            }
        }
    }

    pub fn param_set(&self) -> &'static str {
        self.clue_key.param_set()
    }
}

impl From<&omr_core::KeySet> for Keys {
    fn from(k: &omr_core::KeySet) -> Self {
        Keys {
            secret: SecretKey::Tfhe(k.secret.clone()),
            clue_key: ClueKey::Tfhe(k.clue_key.clone()),
            detection_key: k.detection_key.to_bytes(),
        }
    }
}

impl From<omr_light::SecretKey> for Keys {
    fn from(secret: omr_light::SecretKey) -> Self {
        Keys {
            clue_key: ClueKey::Light(secret.address()),
            detection_key: secret.detection_key().to_bytes(),
            secret: SecretKey::Light(secret),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_say_their_scheme() {
        let light = Keys::from(omr_light::SecretKey::generate(&OMR_LIGHT_V1));
        let tfhe = Keys::from(&omr_core::keygen(&omr_core::INSECURE_TEST, 2).unwrap());
        for keys in [&light, &tfhe] {
            let clue_key = ClueKey::from_bytes(&keys.clue_key.to_bytes()).unwrap();
            assert_eq!(clue_key.param_set(), keys.param_set());
            let secret = SecretKey::from_bytes(&keys.secret.to_bytes()).unwrap();
            assert_eq!(secret.to_bytes(), keys.secret.to_bytes());
        }
        assert_eq!(
            detection_key_set(&light.detection_key).unwrap(),
            (LIGHT_SET, 1)
        );
        assert_eq!(
            detection_key_set(&tfhe.detection_key).unwrap(),
            ("insecure-test", 2)
        );
        // A light clue key is not a secret key, and a truncated one is refused.
        assert!(SecretKey::from_bytes(&light.clue_key.to_bytes()).is_err());
        let bytes = light.clue_key.to_bytes();
        assert!(ClueKey::from_bytes(&bytes[..bytes.len() - 1]).is_err());
        assert_eq!(param_set(LIGHT_SET).unwrap(), (LIGHT_SET, false, 1));
        assert!(param_set("omr-v9").is_err());
        let big = vec![0; OMR_LIGHT_V1.payload_bytes + 1];
        assert!(light.clue_key.validate_payload(&big).is_err());
        assert!(light.clue_key.validate_payload(&big[1..]).is_ok());
    }
}

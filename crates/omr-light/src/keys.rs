//! A recipient's keys: the secret key (a 32-byte seed), the address senders make clues with, and
//! the detection key the server detects with.
//!
//! - Clue secret s ∈ R_t = Z_t[X]/(X^n + 1), t = 2^24, coefficients from the centred binomial of
//!   η = 1. Address: a seed for a uniform a ∈ R_t and b = a·s + e.
//! - Digest secret S ∈ Z[X]/(X^D + 1), D = 4096, from the same distribution.
//! - Detection key: for every j < n an RLWE encryption of the constant s_j under S modulo Q,
//!   c_j = −a_j·S + e_j + Δ·s_j, where a_j is row j of the common reference string
//!   ([`crate::sample::crs_row`]); only the c_j travel (n polynomials of D residues).

use omr_core::codec::{pack_bits, Reader};
use omr_core::OmrError;
use rand::RngCore;

use crate::codec::{open, write_header, Kind, HEADER_LEN};
pub use crate::layout::ExpandedKey;
use crate::layout::{not_below_modulus, to_blocks};
use crate::params::LightParams;
use crate::ring::{add, centre_bits, lift, mul, sub, Ntt};
use crate::sample::{cbd1, crs_row, stream, uniform_bits};

/// A recipient's secret key.
#[derive(Clone)]
pub struct SecretKey {
    params: &'static LightParams,
    seed: [u8; 32],
    /// The clue secret s (n coefficients).
    pub(crate) s: Vec<i64>,
    /// The digest secret S in the NTT domain mod Q (D residues).
    pub(crate) s_big_ntt: Vec<u64>,
    a_seed: [u8; 32],
    e: Vec<i64>,
}

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretKey")
            .field("params", &self.params.name)
            .finish_non_exhaustive()
    }
}

/// What senders need to make a clue for a recipient: a and b = a·s + e in R_t.
#[derive(Clone, PartialEq, Eq)]
pub struct Address {
    params: &'static LightParams,
    a_seed: [u8; 32],
    /// b's coefficients (each below t).
    pub(crate) b: Vec<u32>,
}

impl std::fmt::Debug for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Address")
            .field("params", &self.params.name)
            .finish_non_exhaustive()
    }
}

/// The key a recipient registers: n polynomials, NTT domain mod Q, polynomial j at `j·D`.
#[derive(Clone, PartialEq, Eq)]
pub struct DetectionKey {
    params: &'static LightParams,
    pub(crate) c: Vec<u64>,
}

impl std::fmt::Debug for DetectionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DetectionKey")
            .field("params", &self.params.name)
            .finish_non_exhaustive()
    }
}

impl SecretKey {
    /// A fresh key from the operating system's generator.
    pub fn generate(params: &'static LightParams) -> SecretKey {
        let mut seed = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut seed);
        Self::from_seed(params, seed)
    }

    /// The key of a 32-byte seed (everything secret is derived from it).
    pub fn from_seed(params: &'static LightParams, seed: [u8; 32]) -> SecretKey {
        let mut rng = stream(&seed, 0);
        let s = cbd1(&mut rng, params.n);
        let big_s = cbd1(&mut rng, params.batch);
        let mut a_seed = [0u8; 32];
        rng.fill_bytes(&mut a_seed);
        let e = cbd1(&mut rng, params.n);
        let mut s_big_ntt: Vec<u64> = big_s.iter().map(|&v| lift(v)).collect();
        Ntt::of(params.batch).fwd(&mut s_big_ntt);
        SecretKey {
            params,
            seed,
            s,
            s_big_ntt,
            a_seed,
            e,
        }
    }

    /// The secret of this recipient's payload fetch (derived from the same seed).
    pub fn fetch_secret(&self) -> crate::fetch::FetchSecret {
        crate::fetch::FetchSecret::from_seed(&self.seed)
    }

    pub fn params(&self) -> &'static LightParams {
        self.params
    }

    /// The recipient's address: b = a·s + e mod t.
    pub fn address(&self) -> Address {
        let p = self.params;
        let a = expand_a(p, &self.a_seed);
        let t_mask = p.t() - 1;
        let prod = crate::ring::exact_product(&a, &self.s);
        let b = prod
            .iter()
            .zip(&self.e)
            .map(|(&x, &e)| ((x + e) as u64 & t_mask) as u32)
            .collect();
        Address {
            params: p,
            a_seed: self.a_seed,
            b,
        }
    }

    /// The detection key: n encryptions of the constants s_j under S (n forward NTTs).
    pub fn detection_key(&self) -> DetectionKey {
        let p = self.params;
        let d = p.batch;
        let ntt = Ntt::of(d);
        let delta = p.delta();
        let mut rng = stream(&self.seed, 1);
        let mut c = vec![0u64; p.n * d];
        let mut noise = vec![0u64; d];
        for (j, cj) in c.chunks_exact_mut(d).enumerate() {
            for (x, e) in noise.iter_mut().zip(cbd1(&mut rng, d)) {
                *x = lift(e);
            }
            noise[0] = add(noise[0], mul(delta, lift(self.s[j])));
            ntt.fwd(&mut noise);
            crs_row(j, cj);
            for ((cx, &sx), &ex) in cj.iter_mut().zip(&self.s_big_ntt).zip(&noise) {
                *cx = sub(ex, mul(*cx, sx));
            }
        }
        DetectionKey { params: p, c }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + 32);
        write_header(&mut out, Kind::SecretKey, self.params);
        out.extend_from_slice(&self.seed);
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<SecretKey, OmrError> {
        let (mut r, p) = open(bytes, Kind::SecretKey, HEADER_LEN + 32)?;
        let seed = r.array32()?;
        r.finish()?;
        Ok(Self::from_seed(p, seed))
    }
}

/// a ∈ R_t from its seed, as centred integers.
pub(crate) fn expand_a(p: &LightParams, seed: &[u8; 32]) -> Vec<i64> {
    let mut rng = stream(seed, 0);
    uniform_bits(&mut rng, p.n, p.log_t)
        .into_iter()
        .map(|v| centre_bits(i64::from(v), p.log_t))
        .collect()
}

impl Address {
    pub fn params(&self) -> &'static LightParams {
        self.params
    }

    pub(crate) fn a(&self) -> Vec<i64> {
        expand_a(self.params, &self.a_seed)
    }

    pub fn encoded_len(params: &LightParams) -> usize {
        HEADER_LEN + 32 + (params.n * params.log_t as usize).div_ceil(8)
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let p = self.params;
        let mut out = Vec::with_capacity(Self::encoded_len(p));
        write_header(&mut out, Kind::Address, p);
        out.extend_from_slice(&self.a_seed);
        pack_bits(&mut out, self.b.iter().map(|&v| u64::from(v)), p.log_t);
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Address, OmrError> {
        let limit = Self::encoded_len(&crate::params::OMR_LIGHT_V1);
        let (mut r, p) = open(bytes, Kind::Address, limit)?;
        let a_seed = r.array32()?;
        let b = r
            .packed(p.n, p.log_t)?
            .into_iter()
            .map(|v| v as u32)
            .collect();
        r.finish()?;
        Ok(Address {
            params: p,
            a_seed,
            b,
        })
    }
}

impl DetectionKey {
    pub fn params(&self) -> &'static LightParams {
        self.params
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let p = self.params;
        let mut out = Vec::with_capacity(p.detection_key_bytes());
        write_header(&mut out, Kind::DetectionKey, p);
        pack_bits(&mut out, self.c.iter().copied(), p.q_bits());
        out
    }

    /// Decode a key, refusing any residue ≥ Q; allocates only after the length is checked.
    pub fn from_bytes(bytes: &[u8]) -> Result<DetectionKey, OmrError> {
        let limit = crate::params::OMR_LIGHT_V1.detection_key_bytes();
        let (mut r, p) = open(bytes, Kind::DetectionKey, limit)?;
        let c = read_residues(&mut r, p.n * p.batch, p)?;
        r.finish()?;
        Ok(DetectionKey { params: p, c })
    }

    /// Check that `bytes` is a key as [`from_bytes`](Self::from_bytes) does, without decoding
    /// it into memory (what a server does when it only stores the key): its parameter set.
    pub fn check_bytes(bytes: &[u8]) -> Result<&'static LightParams, OmrError> {
        let limit = crate::params::OMR_LIGHT_V1.detection_key_bytes();
        let (mut r, p) = open(bytes, Kind::DetectionKey, limit)?;
        let values = r.packed_iter(p.n * p.batch, p.q_bits())?;
        below_modulus(&r, values, p)?;
        r.finish()?;
        Ok(p)
    }

    /// The key in the kernel's layout.
    pub fn expand(&self) -> ExpandedKey {
        ExpandedKey::new(
            self.params,
            to_blocks(&self.c, self.params.n, self.params.batch),
        )
    }
}

/// `count` packed residues of `q_bits` bits, each checked to be below Q.
pub(crate) fn read_residues(
    r: &mut Reader<'_>,
    count: usize,
    p: &LightParams,
) -> Result<Vec<u64>, OmrError> {
    let values = r.packed(count, p.q_bits())?;
    below_modulus(r, values.iter().copied(), p)?;
    Ok(values)
}

/// Refuse the first of `values` (read by `r`) that is not a residue below Q.
fn below_modulus(
    r: &Reader<'_>,
    mut values: impl Iterator<Item = u64>,
    p: &LightParams,
) -> Result<(), OmrError> {
    match values.position(|v| v >= p.q) {
        Some(i) => Err(not_below_modulus(r, i)),
        None => Ok(()),
    }
}

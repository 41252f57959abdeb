//! The recipient's secret key: every LWE/GLWE secret of the scheme and the digest PRF seed; its
//! encoding.

use tfhe::core_crypto::prelude::*;

use crate::codec::{pack_bits, write_header, Kind, Reader};
use crate::error::OmrError;
use crate::params::ParamSet;
use crate::prime::PrimeGlweKey;

/// Size limit when decoding a secret key (a little above the production size).
pub const SECRET_KEY_LIMIT: usize = 64 * 1024;

/// The recipient's secret key. Never leaves the recipient.
#[derive(Clone)]
pub struct SecretKey {
    pub(crate) params: &'static ParamSet,
    pub(crate) kbar: usize,
    pub(crate) prf_seed: [u8; 32],
    pub(crate) clue_sk: LweSecretKeyOwned<u64>,
    pub(crate) glwe1: GlweSecretKeyOwned<u64>,
    pub(crate) lwe2: LweSecretKeyOwned<u64>,
    pub(crate) glwe2: GlweSecretKeyOwned<u64>,
    pub(crate) glwe3: PrimeGlweKey,
}

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretKey")
            .field("params", &self.params.name)
            .field("kbar", &self.kbar)
            .finish_non_exhaustive()
    }
}

impl SecretKey {
    pub fn params(&self) -> &'static ParamSet {
        self.params
    }

    pub fn kbar(&self) -> usize {
        self.kbar
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        write_header(&mut out, Kind::SecretKey, self.params);
        out.extend_from_slice(&(self.kbar as u32).to_le_bytes());
        out.extend_from_slice(&self.prf_seed);
        for bits in [
            self.clue_sk.as_ref(),
            self.glwe1.as_ref(),
            self.lwe2.as_ref(),
            self.glwe2.as_ref(),
        ] {
            pack_bits(&mut out, bits.iter().copied(), 1);
        }
        for p in &self.glwe3.polys {
            pack_bits(&mut out, p.iter().copied(), 1);
        }
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, OmrError> {
        let (mut r, params) = Reader::open(bytes, Kind::SecretKey, SECRET_KEY_LIMIT)?;
        let kbar = r.kbar(params)?;
        let prf_seed = r.array32()?;
        let clue_sk = LweSecretKey::from_container(r.packed(params.clue_dim, 1)?);
        let glwe1 =
            GlweSecretKey::from_container(r.packed(params.n1, 1)?, PolynomialSize(params.n1));
        let lwe2 = LweSecretKey::from_container(r.packed(params.lwe2_dim, 1)?);
        let glwe2 =
            GlweSecretKey::from_container(r.packed(params.n2, 1)?, PolynomialSize(params.n2));
        let mut polys = Vec::with_capacity(params.k3);
        for _ in 0..params.k3 {
            polys.push(r.packed(params.n2, 1)?);
        }
        r.finish()?;
        if params.level1_uses_level2_key
            && (glwe1.as_ref() != glwe2.as_ref() || lwe2.as_ref() != clue_sk.as_ref())
        {
            return Err(OmrError::Malformed {
                what: "secret key",
                why: format!(
                    "{} uses one key for both levels, but the file's level-1 and level-2 \
                     secrets differ",
                    params.name
                ),
            });
        }
        Ok(SecretKey {
            params,
            kbar,
            prf_seed,
            clue_sk,
            glwe1,
            lwe2,
            glwe2,
            glwe3: PrimeGlweKey { polys },
        })
    }
}

//! The expanded detection key as a local file: a raw little-endian dump of its Fourier, LWE and
//! NTT-domain containers behind a checked header, ending in an XXH3-128 checksum, so that a
//! server can reload a key by copying bytes instead of expanding it again (`expand` regenerates
//! masks and runs the Fourier and NTT transforms).
//!
//! Layout (all integers little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 6 | `OMR`, kind 9 (expanded detection key), format version, parameter set id |
//! | 8 | domain fingerprint: the Fourier and NTT transforms of fixed inputs, hashed |
//! | 4 + 32 | k̄, PRF seed |
//! | 8 × (6 + trace keys) | element counts: bsk1, ksk, bsk2, up, number of trace keys, each trace key, down |
//! | … | bsk1 (c64 as two f64), ksk (u64), bsk2 (c64), up, trace keys, down (u64) |
//! | 16 | XXH3-128 of everything before |
//!
//! The format is for one machine's own cache, not for transport: the fingerprint ties a file to
//! the transforms that made it (a tfhe-rs, tfhe-ntt or CPU-dispatch change that moves a single
//! coefficient makes old files fail to load, and the key is expanded again). Every count is
//! checked against the parameter set before anything is allocated, and the checksum covers
//! every byte, so a truncated or corrupted file is a typed error, never a panic or a wrong key.

use std::io::{self, Read, Write};

use tfhe::core_crypto::prelude::*;
use xxhash_rust::xxh3::Xxh3;

use super::expanded::DetectionKey;
use super::lwe_ksk::LweKsk;
use super::seeded::native;
use crate::codec::{Kind, MAGIC};
use crate::error::OmrError;
use crate::params::{ParamSet, PRIME_P};
use crate::prime::{trace_elements, Decomposer, Ntt, PrimeKeyswitchKey};

/// The format version (the header's version byte for this kind). Bump it whenever the layout
/// above or the meaning of a container changes.
pub const EXPANDED_KEY_VERSION: u8 = 1;

const WHAT: &str = "expanded detection key";
/// Bytes moved per read or write call (each is hashed while it is still in cache).
const CHUNK: usize = 1 << 20;

impl DetectionKey {
    /// Write the expanded key in the format [`read_expanded`](Self::read_expanded) reads.
    pub fn write_expanded(&self, w: &mut impl Write) -> io::Result<()> {
        let mut w = Hashing {
            inner: w,
            hash: Xxh3::new(),
        };
        let p = self.params;
        w.put(&[
            MAGIC[0],
            MAGIC[1],
            MAGIC[2],
            Kind::ExpandedDetectionKey as u8,
        ])?;
        w.put(&[EXPANDED_KEY_VERSION, p.id])?;
        w.put(&fingerprint(p).to_le_bytes())?;
        w.put(&(self.kbar as u32).to_le_bytes())?;
        w.put(&self.prf_seed)?;
        for n in self.counts() {
            w.put(&(n as u64).to_le_bytes())?;
        }
        w.put_words(bytemuck::cast_slice(self.bsk1.as_view().data()), 8)?;
        match &self.ksk {
            LweKsk::Native(k) => w.put_words(bytemuck::cast_slice(k.as_ref()), 8)?,
            LweKsk::Half(k) => w.put_words(bytemuck::cast_slice(k.as_ref()), 4)?,
        }
        w.put_words(bytemuck::cast_slice(self.bsk2.as_view().data()), 8)?;
        for k in self.prime_keys() {
            w.put_words(bytemuck::cast_slice(&k.rows), 8)?;
        }
        let sum = w.hash.digest128().to_le_bytes();
        w.inner.write_all(&sum)
    }

    /// Read an expanded key written by [`write_expanded`](Self::write_expanded) on this machine
    /// for `params`. Reads to the end of `r`: trailing bytes are an error.
    pub fn read_expanded(
        r: &mut impl Read,
        params: &'static ParamSet,
    ) -> Result<DetectionKey, OmrError> {
        let mut r = Hashing {
            inner: r,
            hash: Xxh3::new(),
        };
        let mut head = [0u8; 6];
        r.get(&mut head)?;
        if head[..3] != MAGIC[..] || head[3] != Kind::ExpandedDetectionKey as u8 {
            return Err(malformed(
                "not an expanded detection key (bad magic or kind)",
            ));
        }
        if head[4] != EXPANDED_KEY_VERSION {
            return Err(malformed(format!(
                "format version {} (this build reads {EXPANDED_KEY_VERSION})",
                head[4]
            )));
        }
        let got = ParamSet::by_id(head[5])?;
        if got.id != params.id {
            return Err(OmrError::ParamMismatch {
                what: WHAT,
                got: got.name,
                expected: params.name,
            });
        }
        if r.u64()? != fingerprint(params) {
            return Err(malformed(
                "laid out by other FFT/NTT plans (another process that did not pin the same plans, another build or machine)",
            ));
        }
        let kbar = r.u32()? as usize;
        if kbar == 0 || kbar > params.max_kbar {
            return Err(OmrError::BadKbar {
                got: kbar,
                max: params.max_kbar,
            });
        }
        let mut prf_seed = [0u8; 32];
        r.get(&mut prf_seed)?;
        let shape = Shape(params);
        for (i, want) in shape.counts().into_iter().enumerate() {
            let got = r.u64()?;
            if got != want as u64 {
                return Err(malformed(format!(
                    "container {i} holds {got} elements, the parameter set has {want}"
                )));
            }
        }
        // The counts match the parameter set: allocating them is bounded.
        let [spec1, spec2] = shape.bsks();
        let mut bsk1 = Shape::fourier(spec1);
        r.get_words(bytemuck::cast_slice_mut(bsk1.as_mut_view().data()), 8)?;
        let mut ksk = LweKsk::zeroed(params);
        match &mut ksk {
            LweKsk::Native(k) => r.get_words(bytemuck::cast_slice_mut(k.as_mut()), 8)?,
            LweKsk::Half(k) => r.get_words(bytemuck::cast_slice_mut(k.as_mut()), 4)?,
        }
        let mut bsk2 = Shape::fourier(spec2);
        r.get_words(bytemuck::cast_slice_mut(bsk2.as_mut_view().data()), 8)?;
        let mut primes = Vec::new();
        for spec in shape.primes() {
            let mut k = shape.prime(spec);
            r.get_words(bytemuck::cast_slice_mut(&mut k.rows), 8)?;
            primes.push(k);
        }
        let want = r.hash.digest128();
        let mut sum = [0u8; 16];
        r.inner.read_exact(&mut sum).map_err(read_error)?;
        if u128::from_le_bytes(sum) != want {
            return Err(malformed("checksum mismatch (the file is corrupted)"));
        }
        if r.inner.read(&mut [0u8; 1]).map_err(read_error)? != 0 {
            return Err(malformed("trailing bytes after the checksum"));
        }
        let fourier = [bsk1, bsk2];
        Ok(DetectionKey::from_parts(
            params, kbar, prf_seed, fourier, ksk, primes,
        ))
    }

    /// [`read_expanded`](Self::read_expanded) from a byte slice.
    pub fn from_expanded_bytes(
        mut bytes: &[u8],
        params: &'static ParamSet,
    ) -> Result<DetectionKey, OmrError> {
        Self::read_expanded(&mut bytes, params)
    }

    /// Bytes [`write_expanded`](Self::write_expanded) writes.
    pub fn expanded_len(&self) -> u64 {
        let words = 2 * (self.bsk1.as_view().data().len() + self.bsk2.as_view().data().len())
            + self.prime_keys().map(|k| k.rows.len()).sum::<usize>();
        let header = 6 + 8 + 4 + 32 + 8 * self.counts().len();
        (header + 8 * words + self.ksk.memory_bytes() + 16) as u64
    }

    /// Element counts of the containers, in file order.
    fn counts(&self) -> Vec<usize> {
        let mut v = vec![
            self.bsk1.as_view().data().len(),
            self.ksk.len(),
            self.bsk2.as_view().data().len(),
            self.up.rows.len(),
            self.trace.len(),
        ];
        v.extend(self.trace.iter().map(|t| t.rows.len()));
        v.push(self.down.rows.len());
        v
    }

    fn prime_keys(&self) -> impl Iterator<Item = &PrimeKeyswitchKey> {
        std::iter::once(&self.up)
            .chain(&self.trace)
            .chain([&self.down])
    }
}

/// The containers a parameter set implies, and their element counts.
struct Shape(&'static ParamSet);

/// (input dimension, polynomial size, base log, levels) of a Fourier bootstrapping key.
type FourierSpec = (usize, usize, usize, usize);
/// (k_in, k_out, base log, levels) of a prime-modulus keyswitching key.
type PrimeSpec = (usize, usize, usize, usize);

impl Shape {
    fn bsks(&self) -> [FourierSpec; 2] {
        let p = self.0;
        [
            (p.level1_key_dim(), p.n1, p.bsk1_base_log, p.bsk1_levels),
            (p.lwe2_dim, p.n2, p.bsk2_base_log, p.bsk2_levels),
        ]
    }

    /// Up, then one per trace element, then down.
    fn primes(&self) -> Vec<PrimeSpec> {
        let p = self.0;
        let mut v = vec![(1, p.k3, p.up_base_log, p.up_levels)];
        v.extend(
            trace_elements(p.n2)
                .iter()
                .map(|_| (p.k3, p.k3, p.trace_base_log, p.trace_levels)),
        );
        v.push((p.k3, 1, p.down_base_log, p.down_levels));
        v
    }

    fn counts(&self) -> Vec<usize> {
        let p = self.0;
        // A Fourier GGSW with k = 1: (k+1)² · levels polynomials of N/2 complex coefficients.
        let [b1, b2] = self
            .bsks()
            .map(|(dim, n, _, levels)| dim * 4 * levels * n / 2);
        let primes = self.primes();
        let mut v = vec![b1, p.n1 * p.ksk_levels * (p.lwe2_dim + 1), b2];
        let prime_len = |&(k_in, k_out, _, levels): &PrimeSpec| k_in * levels * (k_out + 1) * p.n2;
        v.push(prime_len(&primes[0]));
        v.push(primes.len() - 2);
        v.extend(primes[1..].iter().map(prime_len));
        v
    }

    fn fourier((dim, n, base_log, levels): FourierSpec) -> FourierLweBootstrapKeyOwned {
        FourierLweBootstrapKey::new(
            LweDimension(dim),
            GlweSize(2),
            PolynomialSize(n),
            DecompositionBaseLog(base_log),
            DecompositionLevelCount(levels),
        )
    }

    fn prime(&self, (k_in, k_out, base_log, levels): PrimeSpec) -> PrimeKeyswitchKey {
        PrimeKeyswitchKey {
            k_in,
            k_out,
            decomposer: Decomposer { base_log, levels },
            rows: vec![0u64; k_in * levels * (k_out + 1) * self.0.n2],
        }
    }
}

/// A hash of the Fourier transform (at N1 and N2) and the NTT (at N2) of fixed inputs: equal
/// only where the transforms lay out and round coefficients exactly as when the file was made.
fn fingerprint(p: &ParamSet) -> u64 {
    let mut h = Xxh3::new();
    let fill = |i: usize| (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for n in [p.n1, p.n2] {
        let mut bsk = LweBootstrapKey::new(
            0u64,
            GlweSize(2),
            PolynomialSize(n),
            DecompositionBaseLog(1),
            DecompositionLevelCount(1),
            LweDimension(1),
            native(),
        );
        for (i, x) in bsk.as_mut().iter_mut().enumerate() {
            *x = fill(i);
        }
        let mut f = Shape::fourier((1, n, 1, 1));
        convert_standard_lwe_bootstrap_key_to_fourier(&bsk, &mut f);
        for c in f.as_view().data() {
            h.update(&c.re.to_bits().to_le_bytes());
            h.update(&c.im.to_bits().to_le_bytes());
        }
    }
    let mut poly: Vec<u64> = (0..p.n2).map(|i| fill(i) % PRIME_P).collect();
    Ntt::new(p.n2).fwd(&mut poly);
    for x in poly {
        h.update(&x.to_le_bytes());
    }
    h.digest()
}

fn malformed(why: impl Into<String>) -> OmrError {
    OmrError::malformed(WHAT, why)
}

fn read_error(e: io::Error) -> OmrError {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        malformed("truncated")
    } else {
        OmrError::Read {
            what: WHAT,
            why: e.to_string(),
        }
    }
}

/// A reader or writer that hashes every byte it moves.
struct Hashing<T> {
    inner: T,
    hash: Xxh3,
}

impl<W: Write> Hashing<W> {
    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.hash.update(bytes);
        self.inner.write_all(bytes)
    }

    /// Write 8-byte words (u64 or f64) in little-endian order.
    /// Write words of `width` bytes (8 or 4), little-endian.
    fn put_words(&mut self, bytes: &[u8], width: usize) -> io::Result<()> {
        for chunk in bytes.chunks(CHUNK) {
            if cfg!(target_endian = "little") {
                self.put(chunk)?;
            } else {
                let mut le = chunk.to_vec();
                le.chunks_exact_mut(width).for_each(|w| w.reverse());
                self.put(&le)?;
            }
        }
        Ok(())
    }
}

impl<R: Read> Hashing<R> {
    fn get(&mut self, buf: &mut [u8]) -> Result<(), OmrError> {
        self.inner.read_exact(buf).map_err(read_error)?;
        self.hash.update(buf);
        Ok(())
    }

    fn u32(&mut self) -> Result<u32, OmrError> {
        let mut b = [0u8; 4];
        self.get(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    fn u64(&mut self) -> Result<u64, OmrError> {
        let mut b = [0u8; 8];
        self.get(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Fill `bytes` with 8-byte little-endian words (u64 or f64) in native order.
    /// Read words of `width` bytes (8 or 4), little-endian.
    fn get_words(&mut self, bytes: &mut [u8], width: usize) -> Result<(), OmrError> {
        for chunk in bytes.chunks_mut(CHUNK) {
            self.get(chunk)?;
            if cfg!(target_endian = "big") {
                chunk.chunks_exact_mut(width).for_each(|w| w.reverse());
            }
        }
        Ok(())
    }
}

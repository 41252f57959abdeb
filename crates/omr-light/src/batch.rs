//! Detection of one batch of up to D = 4096 messages: the work shared by every key, done once
//! ([`Batch::prepare`]), then each key's pass ([`Batch::detect`]).
//!
//! Message i of the batch sits in coefficient i. For output k < ℓ the recipient needs
//! b′_k − (a′·s)_k = b′_k − Σ_j P_{k,j}[i]·s_j, where P_{0,j}[i] = ±a′_i[(n − j) mod n] (+ for
//! j = 0) and P_{k,j} = P_{0,j−k} (negated when j < k). So only n + ℓ − 1 distinct plaintext
//! polynomials exist per batch: their NTTs are the shared work. A key's pass is then
//! Σ_j P̂_{k,j} ⊙ ĉ_j for every k: n·ℓ products per coefficient, one stream over the key. The
//! ciphertexts' other half, Σ_j P̂_{k,j} ⊙ â_j with the common reference string, is the same
//! for every key and is also computed once.

use crate::clue::{centre, Clue};
use crate::digest::{BatchDigest, SharedHalf};
use crate::fresh_id;
use crate::keys::ExpandedKey;
use crate::layout::{scatter, to_blocks, LANES};
use crate::params::LightParams;
use crate::ring::{lift, reduce128, sub, switch, switch_scale, Ntt};
use crate::sample::crs_row;
use rayon::prelude::*;

/// The shared work of one batch.
pub struct Batch {
    params: &'static LightParams,
    /// Messages in the batch (≤ D).
    count: usize,
    /// The n + ℓ − 1 NTT-domain plaintexts, in blocks of [`LANES`]: E[m] = P̂_{0, m−ℓ+1}, with
    /// E[m] = −P̂_{0, n+m−ℓ+1} for m < ℓ − 1, so that P̂_{k,j} = E[j + ℓ − 1 − k].
    plaintexts: Vec<u64>,
    /// Δ·b′_k per coefficient, mod Q (ℓ rows of D).
    scaled_b: Vec<u64>,
    shared: SharedHalf,
    /// Unique in the process, never reused (a reusing preparation gets a new one): what a
    /// device that holds the plaintexts knows them by.
    id: u64,
}

impl std::fmt::Debug for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("params", &self.params.name)
            .field("count", &self.count)
            .finish_non_exhaustive()
    }
}

/// The common reference string in the kernel's layout (32 MiB, built once per process).
fn crs_blocks(p: &LightParams) -> &'static [u64] {
    static CRS: std::sync::OnceLock<Vec<u64>> = std::sync::OnceLock::new();
    CRS.get_or_init(|| {
        let d = p.batch;
        let mut rows = vec![0u64; p.n * d];
        for (j, row) in rows.chunks_exact_mut(d).enumerate() {
            crs_row(j, row);
        }
        to_blocks(&rows, p.n, d)
    })
}

impl Batch {
    /// The shared work for `clues` (at most D of them; message i is `clues[i]`).
    pub fn prepare(params: &'static LightParams, clues: &[&Clue]) -> Batch {
        Batch::prepare_into(params, clues, Vec::new(), Vec::new())
    }

    /// [`prepare`](Self::prepare), written into the buffers of `spent`, a batch whose keys'
    /// passes are done: a worker that prepares batch after batch (or the open batch again as
    /// messages arrive) skips the page faults of a fresh 32 MiB array. Every word of the reused
    /// buffers is written again, so nothing of `spent` shows in the result.
    pub fn prepare_reusing(params: &'static LightParams, clues: &[&Clue], spent: Batch) -> Batch {
        Batch::prepare_into(params, clues, spent.plaintexts, spent.scaled_b)
    }

    fn prepare_into(
        params: &'static LightParams,
        clues: &[&Clue],
        mut plaintexts: Vec<u64>,
        mut scaled_b: Vec<u64>,
    ) -> Batch {
        assert!(clues.len() <= params.batch, "a batch holds at most D clues");
        assert!(
            clues.iter().all(|c| c.params().id == params.id),
            "every clue of a batch is of the batch's set"
        );
        let (n, d, ell) = (params.n, params.batch, params.ell);
        let ntt = Ntt::of(d);
        let rows = n + ell - 1;
        // Straight into the kernel's layout: 64 rows at a time are gathered from the clues (each
        // clue's 64 values land in 64 rows at the same position, so the rows' lines stay in
        // cache), transformed, and scattered into their blocks. Building the natural layout
        // first and then reordering it would cost a second 32 MiB of page faults. Every word is
        // written below (rows ℓ−1.. by the scatter, rows ..ℓ−1 by the negation), so a reused
        // buffer needs no clearing.
        plaintexts.resize(rows * d, 0);
        let mut tile = vec![0u64; TILE * d];
        // Spread over the rayon pool this runs in, so that one batch fills the worker's pool:
        // the clues split into one range per thread (each thread gathers its clues' columns of
        // the tile), then the rows' NTTs, then the scatter block by block. A pool of one takes
        // the rows in order instead, transformed and scattered one at a time: on one thread the
        // parallel form costs more than the ordered one (`omr bench` with one thread shows it).
        let threads = rayon::current_num_threads();
        let per_thread = clues.len().div_ceil(threads).max(1);
        for j0 in (0..n).step_by(TILE) {
            let height = TILE.min(n - j0);
            tile.fill(0);
            let mut columns: Vec<Vec<&mut [u64]>> = Vec::new();
            for row in tile.chunks_exact_mut(d).take(height) {
                for (t, part) in row[..clues.len()].chunks_mut(per_thread).enumerate() {
                    match columns.get_mut(t) {
                        Some(c) => c.push(part),
                        None => columns.push(vec![part]),
                    }
                }
            }
            columns
                .into_par_iter()
                .enumerate()
                .for_each(|(t, mut parts)| {
                    let first = t * per_thread;
                    for (x, clue) in clues[first..].iter().take(per_thread).enumerate() {
                        for (r, part) in parts.iter_mut().enumerate() {
                            let j = j0 + r;
                            let sign = if j == 0 { 1 } else { -1 };
                            part[x] = lift(sign * clue.a_coeff((n - j) % n));
                        }
                    }
                });
            let tile_rows = &mut tile[..height * d];
            if threads > 1 {
                tile_rows.par_chunks_mut(d).for_each(|row| ntt.fwd(row));
                let tile_rows = &tile[..height * d];
                let blocks = plaintexts.par_chunks_exact_mut(rows * LANES);
                blocks.enumerate().for_each(|(b, block)| {
                    for (r, row) in tile_rows.chunks_exact(d).enumerate() {
                        let m = j0 + r + ell - 1;
                        block[m * LANES..][..LANES].copy_from_slice(&row[b * LANES..][..LANES]);
                    }
                });
            } else {
                for (r, row) in tile_rows.chunks_exact_mut(d).enumerate() {
                    ntt.fwd(row);
                    scatter(&mut plaintexts, rows, j0 + r + ell - 1, row);
                }
            }
        }
        for m in 0..ell - 1 {
            for block in plaintexts.chunks_exact_mut(rows * LANES) {
                let (head, tail) = block.split_at_mut((m + 1) * LANES);
                let from = &tail[(n - 1) * LANES..][..LANES];
                for (x, &y) in head[m * LANES..].iter_mut().zip(from) {
                    *x = sub(0, y);
                }
            }
        }
        let delta = params.delta();
        scaled_b.clear();
        scaled_b.resize(ell * d, 0);
        for (i, clue) in clues.iter().enumerate() {
            for k in 0..ell {
                scaled_b[k * d + i] =
                    crate::ring::mul(delta, lift(centre(i64::from(clue.b[k]), params)));
            }
        }
        // The ciphertexts' second half: −Σ_j P_{k,j}·a_j, switched to q1.
        let sums = products(params, &plaintexts, &[crs_blocks(params)]);
        let shared = SharedHalf::from_values(
            params,
            (sums[0].iter())
                .map(|&x| switch(sub(0, x), params.log_q1))
                .collect(),
        );
        Batch {
            params,
            count: clues.len(),
            plaintexts,
            scaled_b,
            shared,
            id: fresh_id(),
        }
    }

    pub fn params(&self) -> &'static LightParams {
        self.params
    }

    /// Messages in the batch.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The digest half every key shares.
    pub fn shared(&self) -> &SharedHalf {
        &self.shared
    }

    /// One key's pass: its half of the digest of this batch.
    pub fn detect(&self, key: &ExpandedKey) -> BatchDigest {
        self.detect_many(&[key]).pop().expect("one key, one digest")
    }

    /// Several keys' passes, block by block, so that a block of the shared plaintexts is read
    /// from memory once for all of them (it stays in L2 while their key blocks stream).
    pub fn detect_many(&self, keys: &[&ExpandedKey]) -> Vec<BatchDigest> {
        let p = self.params;
        assert!(
            keys.iter().all(|k| k.params.id == p.id),
            "every key is of the batch's set"
        );
        let blocks: Vec<&[u64]> = keys.iter().map(|k| k.blocks.as_slice()).collect();
        products(p, &self.plaintexts, &blocks)
            .into_iter()
            .map(|s| self.digest_of(&s, p.batch))
            .collect()
    }

    /// The shared plaintexts in the kernel's layout: block b of [`ExpandedKey::LANES`] NTT
    /// positions holds rows E[0..n + ℓ − 1], and key j's products for output k read
    /// E[j + ℓ − 1 − k]. For a device pass (omr-light-cuda).
    pub fn plaintexts(&self) -> &[u64] {
        &self.plaintexts
    }

    /// This preparation's number, unique in the process and never reused.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// A key's half of the digest from its products as a device computed them: `sums` holds
    /// ℓ rows of D residues, row k at NTT position x being Σ_j E[j + ℓ − 1 − k][x] · c_j[x]
    /// mod Q (what the CPU kernel computes before its inverse transforms). The rows are
    /// transformed in place.
    pub fn finish_products(&self, sums: &mut [u64]) -> BatchDigest {
        let (d, ell) = (self.params.batch, self.params.ell);
        assert_eq!(sums.len(), ell * d, "ℓ rows of D products");
        let ntt = Ntt::of(d);
        for row in sums.chunks_exact_mut(d) {
            ntt.inv(row);
        }
        self.digest_of(sums, d)
    }

    /// What a device needs to finish a key's half itself, so that only the switched values
    /// travel back: Δ·b′_k mod Q (ℓ rows of D; the batch's [`len`](Self::len) first of each
    /// row are its messages'), the factor of the switch to q0 (value i of row k is
    /// round((Δ·b′_k[i] − c_k[i] mod Q) · factor) mod 2^log_q0, the rounding of an f64 product,
    /// half away from zero) and log_q0.
    pub fn switch_inputs(&self) -> (&[u64], f64, u32) {
        let log_q0 = self.params.log_q0;
        (&self.scaled_b, switch_scale(log_q0), log_q0)
    }

    /// A key's half of the digest from values a device switched as
    /// [`switch_inputs`](Self::switch_inputs) says: ℓ rows of the batch's length.
    ///
    /// # Panics
    /// When a value is not below 2^log_q0 or the length is not ℓ rows of the batch's length.
    pub fn finish_switched(&self, values: &[u32]) -> BatchDigest {
        let p = self.params;
        assert_eq!(
            values.len(),
            p.ell * self.count,
            "ℓ rows of the batch's length"
        );
        let bound = 1u64 << p.log_q0;
        let values: Vec<u64> = values.iter().map(|&v| u64::from(v)).collect();
        assert!(values.iter().all(|&v| v < bound), "values below 2^log_q0");
        BatchDigest::from_values(p, self.count, values)
    }

    /// The digest half from a key's products in coefficients: ℓ rows of `stride` (at least
    /// the batch's length; D as the CPU pass computes them).
    fn digest_of(&self, s: &[u64], stride: usize) -> BatchDigest {
        let p = self.params;
        let (d, ell) = (p.batch, p.ell);
        let mut values = Vec::with_capacity(ell * self.count);
        for k in 0..ell {
            let c = &s[k * stride..][..self.count];
            let b = &self.scaled_b[k * d..][..d];
            // c0 = Δ·b′ − Σ_j P_{k,j}·c_j; only the batch's coefficients are kept.
            values.extend((0..self.count).map(|i| switch(sub(b[i], c[i]), p.log_q0)));
        }
        BatchDigest::from_values(p, self.count, values)
    }
}

/// Σ_j P_{k,j}·rows_j for every k, in coefficients (ℓ rows of D), for each of `sets` (n rows in
/// the kernel's layout: a key, or the common reference string). Block by block, so that a block
/// of the shared plaintexts is read from memory once for all the sets (it stays in L2 while
/// their blocks stream). The blocks are independent, so they are spread over the threads of the
/// rayon pool this runs in (one thread outside a pool of several), and so are the inverse NTTs:
/// one key's pass fills the pool.
fn products(p: &LightParams, plaintexts: &[u64], sets: &[&[u64]]) -> Vec<Vec<u64>> {
    let (d, ell) = (p.batch, p.ell);
    let rows = p.n + ell - 1;
    // Block-major first (each block's outputs contiguous, so the threads write apart), then
    // into each set's ℓ rows of D.
    let per_block = sets.len() * ell * LANES;
    let mut by_block = vec![0u64; d / LANES * per_block];
    let pass = |(b, out): (usize, &mut [u64])| {
        let plain = &plaintexts[b * rows * LANES..][..rows * LANES];
        for (set, out) in sets.iter().zip(out.chunks_exact_mut(ell * LANES)) {
            let block = &set[b * p.n * LANES..][..p.n * LANES];
            kernel(plain, block, p.n, ell, out);
        }
    };
    // A pool of one runs the blocks in order: rayon's split of 128 blocks only costs it time.
    if rayon::current_num_threads() > 1 {
        (by_block.par_chunks_mut(per_block).enumerate()).for_each(pass);
    } else {
        by_block.chunks_mut(per_block).enumerate().for_each(pass);
    }
    let mut sums = vec![vec![0u64; ell * d]; sets.len()];
    for (b, out) in by_block.chunks_exact(per_block).enumerate() {
        for (s, lanes) in sums.iter_mut().zip(out.chunks_exact(ell * LANES)) {
            for (k, lanes) in lanes.chunks_exact(LANES).enumerate() {
                s[k * d + b * LANES..][..LANES].copy_from_slice(lanes);
            }
        }
    }
    let ntt = Ntt::of(d);
    let mut rows_out: Vec<&mut [u64]> = sums
        .iter_mut()
        .flat_map(|s| s.chunks_exact_mut(d))
        .collect();
    rows_out.par_iter_mut().for_each(|c| ntt.inv(c));
    sums
}

/// The products of one block: out[k·W + w] = Σ_j E[j+ℓ−1−k][w] · key[j][w] mod Q.
///
/// Sixteen j at a time over all W lanes: the 2·W sums are `u128` (16 products of residues
/// below 2^62 and a reduced sum stay below 2^128), reduced once per sixteen.
fn kernel(plain: &[u64], key: &[u64], n: usize, ell: usize, out: &mut [u64]) {
    assert_eq!(ell, 2, "the kernel is written for ℓ = 2");
    assert_eq!(n % STEP, 0);
    let (out0, out1) = out.split_at_mut(LANES);
    let mut acc0 = [0u128; LANES];
    let mut acc1 = [0u128; LANES];
    for j0 in (0..n).step_by(STEP) {
        for j in j0..j0 + STEP {
            let c: &[u64; LANES] = key[j * LANES..][..LANES].try_into().expect("lanes");
            let e1: &[u64; LANES] = plain[j * LANES..][..LANES].try_into().expect("lanes");
            let e0: &[u64; LANES] = plain[(j + 1) * LANES..][..LANES].try_into().expect("lanes");
            for w in 0..LANES {
                acc0[w] += e0[w] as u128 * c[w] as u128;
                acc1[w] += e1[w] as u128 * c[w] as u128;
            }
        }
        for w in 0..LANES {
            acc0[w] = reduce128(acc0[w]) as u128;
            acc1[w] = reduce128(acc1[w]) as u128;
        }
    }
    for w in 0..LANES {
        out0[w] = acc0[w] as u64;
        out1[w] = acc1[w] as u64;
    }
}

/// Rows gathered and transformed together by [`Batch::prepare`].
const TILE: usize = 64;

/// Products added before a reduction.
const STEP: usize = 16;

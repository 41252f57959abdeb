//! The sizes of the payload fetch docs/light/STUDY.md chooses for omr-light-v1 (§ "Payloads"):
//! batch PIR by cuckoo hashing (3 hash functions, ⌈1.5·k⌉ buckets, every record in its three
//! candidate buckets), one RLWE query expanded for every bucket, the first dimension by the
//! expanded selectors, then a fold and a rotation by encrypted bits (RGSW) and a trace that
//! isolate the wanted record, and eight buckets' records packed per answer ciphertext.
//!
//! It is a model of a design, not an implementation: the service builds it (the next issue).
//! `omr bench` adds it to the digest's bytes for the figure "k = 50 among 2^16".

use crate::params::LightParams;

/// Records a plaintext of D coefficients holds (612-byte payloads at 10 bits per coefficient,
/// strided in the 8 residue classes mod 8).
pub const RECORDS_PER_PLAINTEXT: usize = 8;
/// Encrypted bits of the fold (8 → 1) and of the rotation (8 classes), 3 each.
pub const RGSW_BITS: usize = 6;
/// Gadget rows of one encrypted bit in the query.
pub const RGSW_ROWS: usize = 8;
/// Bits of each of an answer's two polynomials after the modulus switch.
pub const ANSWER_BITS: usize = 16;
/// Buckets whose records share one answer ciphertext.
pub const BUCKETS_PER_ANSWER: usize = 8;

/// Buckets for `k` records.
pub fn buckets(k: usize) -> usize {
    (3 * k).div_ceil(2)
}

/// Records one bucket holds: each of `records` sits in 3 buckets; the mean plus four standard
/// deviations, so that no bucket overflows in practice.
pub fn bucket_capacity(records: usize, k: usize) -> usize {
    let mean = 3.0 * records as f64 / buckets(k) as f64;
    (mean + 4.0 * mean.sqrt()).ceil() as usize
}

/// Bytes up (the query, seeded ciphertexts of `q_bits` residues) and down (the answers) for one
/// recipient fetching `k` of `records` payloads.
pub fn fetch_bytes_up_down(p: &LightParams, records: usize, k: usize) -> (u64, u64) {
    let b = buckets(k);
    let plaintexts = bucket_capacity(records, k).div_ceil(RECORDS_PER_PLAINTEXT);
    let first_dimension = plaintexts.div_ceil(RECORDS_PER_PLAINTEXT);
    let coefficients = b * (first_dimension + RGSW_BITS * RGSW_ROWS);
    let query_cts = coefficients.div_ceil(p.batch);
    let up = query_cts * ((p.batch * p.q_bits() as usize).div_ceil(8) + 32);
    let down = b.div_ceil(BUCKETS_PER_ANSWER) * p.batch * 2 * ANSWER_BITS / 8;
    (up as u64, down as u64)
}

/// [`fetch_bytes_up_down`], both ways together.
pub fn fetch_bytes(p: &LightParams, records: usize, k: usize) -> u64 {
    let (up, down) = fetch_bytes_up_down(p, records, k);
    up + down
}

/// The one-time key a recipient uploads for it: 12 expansion keys of 7 gadget rows (seeded) and
/// the conversion key to RGSW.
pub fn one_time_key_bytes(p: &LightParams) -> u64 {
    let seeded = (p.batch * p.q_bits() as usize).div_ceil(8) + 32;
    (12 * 7 * seeded + 14 * seeded) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::OMR_LIGHT_V1;

    #[test]
    fn fifty_among_two_to_the_sixteen_is_the_studys_figure() {
        let (up, down) = fetch_bytes_up_down(&OMR_LIGHT_V1, 1 << 16, 50);
        // STUDY.md: 2 query ciphertexts (63.5 KB), 10 answers of 16 KiB.
        assert_eq!(buckets(50), 75);
        assert_eq!(up, 2 * (31_744 + 32));
        assert_eq!(down, 10 * 16_384);
    }
}

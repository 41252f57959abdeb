//! Where a record sits: its 640 bytes as 512 coefficients of 10 bits in one residue class mod 8
//! of a plaintext, plaintexts in a grid of `rows` × 8 per bucket, and the buckets by cuckoo
//! hashing (three candidate buckets per board index, public).

/// Bytes of one record: 512 coefficients of 10 bits.
pub const RECORD_BYTES: usize = 640;
/// Bits of data per coefficient (the plaintext modulus t = 2^10).
pub const PLAIN_BITS: u32 = 10;
/// Records per plaintext, one per residue class mod 8.
pub const CLASSES: usize = 8;
/// Plaintexts folded into one by three encrypted bits.
pub const FOLD: usize = 8;
/// Coefficients of one record.
pub const RECORD_COEFFICIENTS: usize = RECORD_BYTES * 8 / PLAIN_BITS as usize;
/// Records of one grid row: FOLD plaintexts of CLASSES records.
pub const RECORDS_PER_ROW: usize = FOLD * CLASSES;
/// Candidate buckets of every record.
pub const HASHES: usize = 3;
/// Encrypted bits per bucket: 3 pick the plaintext of the row (FOLD = 8), 3 the residue class
/// (CLASSES = 8).
pub const ENCRYPTED_BITS: usize = 6;
// A position's three column bits and three class bits (`Position`, the client's query).
const _: () = assert!(FOLD == 8 && CLASSES == 8 && FOLD * CLASSES == 1 << ENCRYPTED_BITS);
/// The gadget of the encrypted fold and rotation bits.
pub const BIT_GADGET: crate::switch::Gadget = crate::switch::MEDIUM;

/// A record's bytes (at most [`RECORD_BYTES`], zero-padded) as 10-bit coefficients, little
/// endian.
pub fn encode_record(bytes: &[u8]) -> Vec<u16> {
    assert!(
        bytes.len() <= RECORD_BYTES,
        "a record holds {RECORD_BYTES} bytes"
    );
    let mut out = vec![0u16; RECORD_COEFFICIENTS];
    for (bit, o) in (0..RECORD_COEFFICIENTS * 10)
        .step_by(10)
        .zip(out.iter_mut())
    {
        let mut v = 0u16;
        for b in 0..10 {
            let at = bit + b;
            let byte = bytes.get(at / 8).copied().unwrap_or(0);
            v |= u16::from((byte >> (at % 8)) & 1) << b;
        }
        *o = v;
    }
    out
}

/// The inverse of [`encode_record`] (every coefficient below 2^10).
pub fn decode_record(coefficients: &[u16]) -> Vec<u8> {
    let mut out = vec![0u8; RECORD_BYTES];
    for (u, &v) in coefficients.iter().enumerate() {
        for b in 0..10 {
            let at = u * 10 + b;
            out[at / 8] |= (((v >> b) & 1) as u8) << (at % 8);
        }
    }
    out
}

/// The three distinct candidate buckets of board index `index` among `buckets` (≥ 3).
pub fn candidate_buckets(index: u64, buckets: usize) -> [usize; HASHES] {
    let mut hasher = blake3::Hasher::new_derive_key("omr-light-v1 2026-11 payload fetch buckets");
    hasher.update(&index.to_le_bytes());
    let mut stream = hasher.finalize_xof();
    let mut out = [usize::MAX; HASHES];
    let mut filled = 0;
    while filled < HASHES {
        let mut word = [0u8; 8];
        stream.fill(&mut word);
        let b = (u64::from_le_bytes(word) % buckets as u64) as usize;
        if !out[..filled].contains(&b) {
            out[filled] = b;
            filled += 1;
        }
    }
    out
}

/// Where a record sits in its bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// The grid row the first dimension selects.
    pub row: usize,
    /// The plaintext of the row the fold selects (3 bits).
    pub column: usize,
    /// The residue class the rotation moves to 0 (3 bits).
    pub class: usize,
}

impl Position {
    /// Position `p` of a bucket.
    pub fn of(p: usize) -> Position {
        Position {
            row: p / RECORDS_PER_ROW,
            column: (p / CLASSES) % FOLD,
            class: p % CLASSES,
        }
    }
}

/// The buckets of one snapshot: every record (by board index, ascending) in each of its
/// candidate buckets, and the grid rows every bucket is padded to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Geometry {
    pub buckets: Vec<Vec<u64>>,
    pub rows: usize,
    /// The board indices it holds: from the first to past the last.
    pub range: (u64, u64),
}

impl Geometry {
    /// The geometry of the records with these board indices (ascending) in `buckets` buckets.
    pub fn new(indices: impl IntoIterator<Item = u64>, buckets: usize) -> Geometry {
        let mut out = vec![Vec::new(); buckets];
        let mut range = (u64::MAX, 0);
        for index in indices {
            range = (range.0.min(index), range.1.max(index + 1));
            for b in candidate_buckets(index, buckets) {
                out[b].push(index);
            }
        }
        let largest = out.iter().map(Vec::len).max().unwrap_or(0);
        Geometry {
            buckets: out,
            rows: largest.div_ceil(RECORDS_PER_ROW).max(1),
            range: if range.1 == 0 { (0, 0) } else { range },
        }
    }

    /// The position of board index `index` in bucket `bucket`, if it is there.
    pub fn position(&self, bucket: usize, index: u64) -> Option<Position> {
        let p = self.buckets[bucket].binary_search(&index).ok()?;
        Some(Position::of(p))
    }

    /// Expanded values of one bucket's query ([`values_per_bucket`]).
    pub fn values_per_bucket(&self) -> usize {
        values_per_bucket(self.rows)
    }
}

/// Expanded values of one bucket's query in buckets of `rows` grid rows: a selector per row,
/// then the gadget rows of each encrypted bit.
pub fn values_per_bucket(rows: usize) -> usize {
    rows + ENCRYPTED_BITS * BIT_GADGET.digits
}

/// Cuckoo hashing of `wanted` (distinct board indices) into distinct buckets: each goes to one
/// of its candidates, evicting by a random walk; returns (bucket, index) pairs and the indices
/// that did not fit (to be fetched in a later round).
pub fn assign(wanted: &[u64], buckets: usize) -> (Vec<(usize, u64)>, Vec<u64>) {
    let mut table: Vec<Option<u64>> = vec![None; buckets];
    let mut left = Vec::new();
    // The walk's choices need no secrecy, only variety: a fixed generator keeps it repeatable.
    let mut walk = crate::sample::stream(&[0; 32], wanted.len() as u64);
    for &w in wanted {
        let mut item = w;
        let mut from = usize::MAX;
        let mut homeless = true;
        for _ in 0..MAX_KICKS {
            let cands = candidate_buckets(item, buckets);
            if let Some(&free) = cands.iter().find(|&&b| table[b].is_none()) {
                table[free] = Some(item);
                homeless = false;
                break;
            }
            let choices: Vec<usize> = cands.into_iter().filter(|&b| b != from).collect();
            let b = choices[(rand::RngCore::next_u32(&mut walk) as usize) % choices.len()];
            item = table[b].replace(item).expect("occupied");
            from = b;
        }
        if homeless {
            left.push(item);
        }
    }
    let placed = (table.into_iter().enumerate())
        .filter_map(|(b, v)| v.map(|v| (b, v)))
        .collect();
    (placed, left)
}

/// Evictions before an insertion gives up.
const MAX_KICKS: usize = 500;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_coefficients() {
        let bytes: Vec<u8> = (0..RECORD_BYTES).map(|i| (i * 31 + 7) as u8).collect();
        let coefficients = encode_record(&bytes);
        assert!(coefficients.iter().all(|&c| c < 1 << PLAIN_BITS));
        assert_eq!(decode_record(&coefficients), bytes);
        let short = decode_record(&encode_record(b"hello"));
        assert_eq!(&short[..5], b"hello");
        assert!(short[5..].iter().all(|&b| b == 0));
    }

    #[test]
    fn cuckoo_places_fifty_among_seventy_five_buckets() {
        for round in 0..2000u64 {
            let wanted: Vec<u64> = (0..50).map(|i| round * 1_000_003 + i * 1311).collect();
            let (placed, left) = assign(&wanted, 75);
            assert!(left.is_empty(), "round {round}: {left:?}");
            let mut buckets: Vec<usize> = placed.iter().map(|p| p.0).collect();
            buckets.sort_unstable();
            buckets.dedup();
            assert_eq!(buckets.len(), 50);
            for (b, index) in placed {
                assert!(candidate_buckets(index, 75).contains(&b));
            }
        }
    }

    #[test]
    fn every_record_is_in_its_three_buckets() {
        let g = Geometry::new(0..5000, 75);
        assert_eq!(g.buckets.iter().map(Vec::len).sum::<usize>(), 3 * 5000);
        for index in [0, 17, 4999] {
            for b in candidate_buckets(index, 75) {
                assert!(g.position(b, index).is_some());
            }
        }
        assert!(g.rows * RECORDS_PER_ROW >= g.buckets.iter().map(Vec::len).max().unwrap());
    }
}

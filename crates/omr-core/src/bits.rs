//! Bit packing, LSB first: the wire form of every vector of residues narrower than a word
//! (`codec` re-exports it). Whole 64-bit words move at once.

/// Append `values` (each < 2^bits) packed LSB-first. Whole 64-bit words leave the accumulator at
/// once (a 32.5 MB light key is 4 million values: byte by byte, packing and unpacking would be
/// a large share of the CPU a registration and a key's first load cost).
pub fn pack_bits(out: &mut Vec<u8>, values: impl IntoIterator<Item = u64>, bits: u32) {
    debug_assert!((1..=64).contains(&bits));
    let mut acc: u128 = 0;
    let mut filled = 0u32;
    for v in values {
        debug_assert!(bits == 64 || v >> bits == 0);
        acc |= (v as u128) << filled;
        filled += bits;
        if filled >= 64 {
            out.extend_from_slice(&(acc as u64).to_le_bytes());
            acc >>= 64;
            filled -= 64;
        }
    }
    while filled > 0 {
        out.push(acc as u8);
        acc >>= 8;
        filled = filled.saturating_sub(8);
    }
}

/// `count` values of `bits` bits packed LSB-first by [`pack_bits`] (the caller checked that
/// `bytes` holds them). Reads 64-bit words while at least eight bytes remain.
pub fn unpack_bits(bytes: &[u8], count: usize, bits: u32) -> Vec<u64> {
    Unpacked::new(bytes, count, bits).collect()
}

/// The values [`unpack_bits`] returns, one at a time: for checking them without holding them all.
#[derive(Debug, Clone)]
pub struct Unpacked<'a> {
    rest: &'a [u8],
    left: usize,
    bits: u32,
    mask: u128,
    acc: u128,
    filled: u32,
}

impl<'a> Unpacked<'a> {
    /// `count` values of `bits` bits from `bytes`, which must hold them (checked by the caller).
    pub fn new(bytes: &'a [u8], count: usize, bits: u32) -> Self {
        let mask: u128 = if bits == 64 {
            u64::MAX as u128
        } else {
            (1u128 << bits) - 1
        };
        Unpacked {
            rest: bytes,
            left: count,
            bits,
            mask,
            acc: 0,
            filled: 0,
        }
    }
}

impl Iterator for Unpacked<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let bits = self.bits;
        if self.filled < bits {
            // filled < bits ≤ 64, so a word shifted by `filled` fits in the accumulator.
            if let Some((word, tail)) = self.rest.split_first_chunk::<8>() {
                self.acc |= (u64::from_le_bytes(*word) as u128) << self.filled;
                self.filled += 64;
                self.rest = tail;
            } else {
                while self.filled < bits {
                    let (byte, tail) = self.rest.split_first().expect("length checked by caller");
                    self.acc |= (*byte as u128) << self.filled;
                    self.filled += 8;
                    self.rest = tail;
                }
            }
        }
        let v = (self.acc & self.mask) as u64;
        self.acc >>= bits;
        self.filled -= bits;
        Some(v)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Unpacked<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packing bit by bit, LSB first: the wire format the word-wise code must keep.
    fn pack_reference(values: &[u64], bits: u32) -> Vec<u8> {
        let mut out = vec![0u8; (values.len() * bits as usize).div_ceil(8)];
        for (i, v) in values.iter().enumerate() {
            for b in 0..bits as usize {
                let at = i * bits as usize + b;
                out[at / 8] |= (((v >> b) & 1) as u8) << (at % 8);
            }
        }
        out
    }

    #[test]
    fn word_wise_packing_keeps_the_bit_by_bit_format_at_every_width_and_length() {
        for bits in 1u32..=64 {
            let mask = if bits == 64 {
                u64::MAX
            } else {
                (1u64 << bits) - 1
            };
            for count in 0..24usize {
                let values: Vec<u64> = (0..count as u64)
                    .map(|i| {
                        (i + 1)
                            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                            .rotate_left(bits)
                            & mask
                    })
                    .collect();
                let mut out = Vec::new();
                pack_bits(&mut out, values.iter().copied(), bits);
                assert_eq!(
                    out,
                    pack_reference(&values, bits),
                    "{bits} bits, {count} values"
                );
                // Bytes after the packed ones are not read into the values.
                out.extend_from_slice(&[0xff; 9]);
                assert_eq!(
                    unpack_bits(&out, count, bits),
                    values,
                    "{bits} bits, {count}"
                );
            }
        }
    }

    #[test]
    fn bit_packing_round_trips_at_odd_widths() {
        for bits in [1u32, 7, 12, 19, 50, 64] {
            let mask = if bits == 64 {
                u64::MAX
            } else {
                (1u64 << bits) - 1
            };
            let values: Vec<u64> = (0..97u64)
                .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) & mask)
                .collect();
            let mut out = Vec::new();
            pack_bits(&mut out, values.iter().copied(), bits);
            assert_eq!(out.len(), (values.len() * bits as usize).div_ceil(8));
            assert_eq!(unpack_bits(&out, values.len(), bits), values);
        }
    }
}

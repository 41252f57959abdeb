//! What crosses the network: the hint (server → every client of a database, once), a query
//! (client → server) and its answer. Each encoding starts with a three-byte magic and a version
//! byte and has exactly one valid length for its header; decoding checks everything before it
//! allocates, so a malformed or oversized input is an error, never a panic or a huge allocation.
//!
//! | message | header | body |
//! |---|---|---|
//! | hint   | `OPH` 1, set id, records, record bytes, chunks (u32 LE), seed (32 B) | W·n values of `hint_bits`, packed LE |
//! | query  | `OPQ` 1, set id, records, record bytes, chunks, count (u32 LE)       | count·R values, u32 LE |
//! | answer | `OPA` 1, set id, rows, count (u32 LE)                                | count·W values of `answer_bits`, packed LE |

use crate::error::PirError;
use crate::matrix::Seed;
use crate::params::{Params, Shape, ANSWER_HEADER, HINT_HEADER, QUERY_HEADER};

/// The most queries one request may carry (four fetches of a 16-chunk record).
pub const MAX_QUERIES: usize = 64;

/// The public hint of a database: its shape, the seed of A and round(D·A) to `hint_bits`.
#[derive(Clone, PartialEq)]
pub struct Hint {
    pub(crate) params: &'static Params,
    pub(crate) shape: Shape,
    pub(crate) seed: Seed,
    /// W × n, row-major, each below 2^hint_bits.
    pub(crate) values: Vec<u32>,
}

/// One or more LWE queries (one per chunk of the record fetched).
#[derive(Clone, PartialEq)]
pub struct Query {
    pub(crate) params: &'static Params,
    pub(crate) shape: Shape,
    /// count × R, query by query.
    pub(crate) values: Vec<u32>,
}

/// The server's answer to a [`Query`]: count × W values rounded to `answer_bits`.
#[derive(Clone, PartialEq)]
pub struct Answer {
    pub(crate) params: &'static Params,
    pub(crate) rows: usize,
    pub(crate) values: Vec<u32>,
}

macro_rules! brief_debug {
    ($($ty:ident),*) => {$(
        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}({}, {} values)", stringify!($ty), self.params.name, self.values.len())
            }
        }
    )*};
}
brief_debug!(Hint, Query, Answer);

/// Appends `values`, each below 2^bits, as a little-endian bit stream.
fn pack(values: &[u32], bits: u32, out: &mut Vec<u8>) {
    let mut acc: u64 = 0;
    let mut held = 0;
    for &v in values {
        acc |= u64::from(v) << held;
        held += bits;
        while held >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            held -= 8;
        }
    }
    if held > 0 {
        out.push(acc as u8);
    }
}

fn unpack(bytes: &[u8], bits: u32, count: usize) -> Vec<u32> {
    let mask = (1u64 << bits) - 1;
    let mut out = Vec::with_capacity(count);
    let mut acc: u64 = 0;
    let mut held = 0;
    let mut bytes = bytes.iter();
    while out.len() < count {
        while held < bits {
            acc |= u64::from(*bytes.next().unwrap_or(&0)) << held;
            held += 8;
        }
        out.push((acc & mask) as u32);
        acc >>= bits;
        held -= bits;
    }
    out
}

fn header(magic: &[u8; 3], params: &Params, fields: &[usize]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(magic);
    out.push(1);
    out.push(params.id);
    for &f in fields {
        out.extend_from_slice(&(f as u32).to_le_bytes());
    }
    out
}

/// Reads a header: the set and `N` u32 fields.
fn read_header<const N: usize>(
    what: &'static str,
    magic: &[u8; 3],
    bytes: &[u8],
) -> Result<(&'static Params, [usize; N]), PirError> {
    let len = 5 + 4 * N;
    if bytes.len() < len {
        return Err(PirError::malformed(
            what,
            format!("{} bytes is shorter than its header", bytes.len()),
        ));
    }
    if &bytes[..3] != magic {
        return Err(PirError::malformed(
            what,
            "not this kind of message (wrong magic)",
        ));
    }
    if bytes[3] != 1 {
        return Err(PirError::malformed(
            what,
            format!("unknown version {}", bytes[3]),
        ));
    }
    let params = Params::by_id(bytes[4])?;
    let mut fields = [0usize; N];
    for (i, f) in fields.iter_mut().enumerate() {
        let at = 5 + 4 * i;
        *f = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes")) as usize;
    }
    Ok((params, fields))
}

fn expect_len(what: &'static str, got: usize, want: usize) -> Result<(), PirError> {
    if got == want {
        Ok(())
    } else {
        Err(PirError::malformed(
            what,
            format!("{got} bytes where its header says {want}"),
        ))
    }
}

impl Hint {
    pub fn params(&self) -> &'static Params {
        self.params
    }

    pub fn shape(&self) -> Shape {
        self.shape
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let s = self.shape;
        let mut out = header(b"OPH", self.params, &[s.records, s.record_bytes, s.chunks]);
        out.extend_from_slice(&self.seed);
        out.reserve(s.hint_bytes(self.params) - out.len());
        pack(&self.values, self.params.hint_bits, &mut out);
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Hint, PirError> {
        let (params, [records, record_bytes, chunks]) = read_header("hint", b"OPH", bytes)?;
        let shape = Shape {
            records,
            record_bytes,
            chunks,
        };
        shape.check()?;
        expect_len("hint", bytes.len(), shape.hint_bytes(params))?;
        let seed: Seed = bytes[17..HINT_HEADER].try_into().expect("32 bytes");
        let values = unpack(
            &bytes[HINT_HEADER..],
            params.hint_bits,
            shape.rows() * params.lwe_dimension,
        );
        Ok(Hint {
            params,
            shape,
            seed,
            values,
        })
    }
}

impl Query {
    /// How many queries this carries.
    pub fn count(&self) -> usize {
        self.values.len() / self.shape.columns()
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let s = self.shape;
        let mut out = header(
            b"OPQ",
            self.params,
            &[s.records, s.record_bytes, s.chunks, self.count()],
        );
        out.reserve(self.values.len() * 4);
        for v in &self.values {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Query, PirError> {
        let (params, [records, record_bytes, chunks, count]) = read_header("query", b"OPQ", bytes)?;
        let shape = Shape {
            records,
            record_bytes,
            chunks,
        };
        shape.check()?;
        if count == 0 || count > MAX_QUERIES {
            return Err(PirError::malformed(
                "query",
                format!("{count} queries (1 to {MAX_QUERIES})"),
            ));
        }
        expect_len(
            "query",
            bytes.len(),
            QUERY_HEADER + count * shape.columns() * 4,
        )?;
        let values = bytes[QUERY_HEADER..]
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("four bytes")))
            .collect();
        Ok(Query {
            params,
            shape,
            values,
        })
    }
}

impl Answer {
    /// How many queries this answers.
    pub fn count(&self) -> usize {
        self.values.len() / self.rows
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = header(b"OPA", self.params, &[self.rows, self.count()]);
        pack(&self.values, self.params.answer_bits, &mut out);
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Answer, PirError> {
        let (params, [rows, count]) = read_header("answer", b"OPA", bytes)?;
        if rows == 0 || count == 0 || count > MAX_QUERIES {
            return Err(PirError::malformed(
                "answer",
                format!("{count} answers of {rows} rows"),
            ));
        }
        let want = ANSWER_HEADER + (count * rows * params.answer_bits as usize).div_ceil(8);
        expect_len("answer", bytes.len(), want)?;
        let values = unpack(&bytes[ANSWER_HEADER..], params.answer_bits, count * rows);
        Ok(Answer {
            params,
            rows,
            values,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_round_trips_every_width() {
        for bits in [1, 7, 16, 20, 31, 32] {
            let values: Vec<u32> = (0..101u64)
                .map(|i| {
                    (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20) as u32
                        & ((1u64 << bits) - 1) as u32
                })
                .collect();
            let mut out = Vec::new();
            pack(&values, bits, &mut out);
            assert_eq!(out.len(), (101 * bits as usize).div_ceil(8));
            assert_eq!(unpack(&out, bits, 101), values, "{bits} bits");
        }
    }
}

//! The LWE parameters, the database shape, and the correctness bound that ties them together.
//!
//! Arithmetic is modulo q = 2^32 (native `u32` wrapping). A database byte is one element of
//! Z_p, p = 2^`plaintext_bits`, scaled by Δ = q / p in a query; answers keep their top
//! `answer_bits` and the hint its top `hint_bits` (public rounding: it costs no security).

use crate::error::PirError;

/// LWE parameters of a PIR scheme instance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// Name, carried in every encoding (`pir-v1`).
    pub name: &'static str,
    /// One byte identifying the set on the wire.
    pub id: u8,
    /// LWE dimension n (the length of a query's secret).
    pub lwe_dimension: usize,
    /// Standard deviation of the discrete Gaussian that both the secret and the error come from.
    pub sigma: f64,
    /// log2 p: one database byte per Z_p element, so 8.
    pub plaintext_bits: u32,
    /// Bits of each hint element that are kept (the rest is rounded away before it is sent).
    pub hint_bits: u32,
    /// Bits of each answer element that are kept.
    pub answer_bits: u32,
}

/// The parameter set of `docs/pir/STUDY.md` §3 (YPIR's SimplePIR layer: n = 1024, q = 2^32,
/// Gaussian secret and error of standard deviation 11), with the hint rounded to 20 bits and
/// answers to 16. `docs/PARAMETERS.md` ("PIR for attachments") gives the security argument.
pub const PIR_V1: Params = Params {
    name: "pir-v1",
    id: 1,
    lwe_dimension: 1024,
    sigma: 11.0,
    plaintext_bits: 8,
    hint_bits: 20,
    answer_bits: 16,
};

/// Every parameter set this crate knows, by id.
pub const ALL: &[&Params] = &[&PIR_V1];

impl Params {
    /// The set with this wire id.
    pub fn by_id(id: u8) -> Result<&'static Params, PirError> {
        ALL.iter()
            .copied()
            .find(|p| p.id == id)
            .ok_or(PirError::UnknownParams(id))
    }

    /// Δ = q / p, the scale of the selected column in a query.
    pub fn delta(&self) -> u32 {
        1u32 << (32 - self.plaintext_bits)
    }

    /// log2 of the probability that one decoded byte is wrong in a database of `columns`
    /// columns (sub-Gaussian tail, as in SimplePIR §4): the error is D·e (|D| ≤ p/2, `columns`
    /// terms) plus the hint's rounding error times the secret (n terms) plus the answer's
    /// rounding; a byte is wrong when it exceeds Δ/2.
    pub fn log2_byte_failure(&self, columns: usize) -> f64 {
        let half_delta = f64::from(self.delta()) / 2.0;
        let answer_rounding = f64::powi(2.0, 32 - self.answer_bits as i32 - 1);
        let hint_rounding = f64::powi(2.0, 32 - self.hint_bits as i32 - 1);
        let half_p = f64::powi(2.0, self.plaintext_bits as i32 - 1);
        let spread = self.sigma
            * (columns as f64 * half_p * half_p
                + self.lwe_dimension as f64 * hint_rounding * hint_rounding)
                .sqrt();
        let z = (half_delta - answer_rounding) / spread;
        // 2·exp(-z²/2), in log2.
        1.0 - z * z / 2.0 * std::f64::consts::LOG2_E
    }

    /// log2 of the probability that some byte of one record is wrong.
    pub fn log2_record_failure(&self, shape: &Shape) -> f64 {
        self.log2_byte_failure(shape.columns()) + (shape.record_bytes as f64).log2()
    }
}

/// How records are laid out in the database matrix D (W rows × R columns, column-major):
/// record i is cut into `chunks` pieces of W = `record_bytes / chunks` bytes, piece j is column
/// `chunks·i + j`. Column-major D is the padded records laid end to end. A fetch of one record
/// is `chunks` queries, each answered with W elements: the hint is n·W elements and the upload
/// `chunks`·R elements, so `chunks` trades the one against the other (`docs/pir/STUDY.md` §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Records in the database (messages of the epoch).
    pub records: usize,
    /// Bytes of every record (shorter ones are zero-padded to it).
    pub record_bytes: usize,
    /// Columns per record.
    pub chunks: usize,
}

/// Header bytes of each encoding (`wire`): magic and version, set id, then u32 fields (and the
/// hint's seed).
pub(crate) const HINT_HEADER: usize = 4 + 1 + 12 + 32;
pub(crate) const QUERY_HEADER: usize = 4 + 1 + 12 + 4;
pub(crate) const ANSWER_HEADER: usize = 4 + 1 + 8;

/// The largest database this crate accepts (2^32 bytes): indices and lengths stay in `u32` on
/// the wire.
pub const MAX_DATABASE_BYTES: usize = 1 << 32;

impl Shape {
    /// The shape for `records` records of at least `record_bytes`: columns of W bytes, W the
    /// power of two nearest above `record_bytes / 16` within 256..=4096, and as many chunks as
    /// that takes. A 64 KiB record is 16 chunks of 4 KiB (`docs/pir/STUDY.md` §3); a record size
    /// that W does not divide is rounded up to the next multiple of W (the padding is zeros).
    pub fn for_records(records: usize, record_bytes: usize) -> Result<Shape, PirError> {
        let rows = record_bytes
            .div_ceil(16)
            .next_power_of_two()
            .clamp(256, 4096);
        let chunks = record_bytes.div_ceil(rows);
        let shape = Shape {
            records,
            record_bytes: chunks * rows,
            chunks,
        };
        shape.check()?;
        Ok(shape)
    }

    /// W: elements per column, and per answer.
    pub fn rows(&self) -> usize {
        self.record_bytes / self.chunks
    }

    /// R: columns, and elements per query.
    pub fn columns(&self) -> usize {
        self.records * self.chunks
    }

    /// The database's size in bytes.
    pub fn database_bytes(&self) -> usize {
        self.records * self.record_bytes
    }

    /// Refuses shapes the scheme cannot serve.
    pub fn check(&self) -> Result<(), PirError> {
        let bad = |why: &str| Err(PirError::BadShape(format!("{self:?}: {why}")));
        if self.records == 0 || self.record_bytes == 0 || self.chunks == 0 {
            return bad("records, record bytes and chunks must all be positive");
        }
        if !self.record_bytes.is_multiple_of(self.chunks) {
            return bad("the record size must be a multiple of the chunk count");
        }
        match self.records.checked_mul(self.record_bytes) {
            Some(n) if n <= MAX_DATABASE_BYTES => Ok(()),
            _ => bad("the database would exceed 4 GiB"),
        }
    }

    /// Bytes of one fetch (the `chunks` queries of one record) as encoded.
    pub fn query_bytes(&self) -> usize {
        QUERY_HEADER + self.chunks * self.columns() * 4
    }

    /// Bytes of the answer to one fetch as encoded.
    pub fn answer_bytes(&self, params: &Params) -> usize {
        ANSWER_HEADER + (self.chunks * self.rows() * params.answer_bits as usize).div_ceil(8)
    }

    /// Bytes of the hint as encoded.
    pub fn hint_bytes(&self, params: &Params) -> usize {
        HINT_HEADER + (self.rows() * params.lwe_dimension * params.hint_bits as usize).div_ceil(8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_epoch_shape_is_the_studied_one() {
        let shape = Shape::for_records(4096, 64 << 10).unwrap();
        assert_eq!(shape.chunks, 16);
        assert_eq!(shape.rows(), 4096);
        assert_eq!(shape.columns(), 65536);
        // docs/pir/STUDY.md §3: 10 MiB hint + 4 MiB upload + 128 KiB download.
        let hint = shape.hint_bytes(&PIR_V1) - HINT_HEADER;
        let up = shape.query_bytes() - QUERY_HEADER;
        let down = shape.answer_bytes(&PIR_V1) - ANSWER_HEADER;
        assert_eq!((hint, up, down), (10 << 20, 4 << 20, 128 << 10));
        assert!(hint + up + down <= 16 << 20);
    }

    #[test]
    fn the_failure_bound_matches_the_study() {
        // docs/pir/STUDY.md §3: z = 10.4, 2^-77 per byte, 2^-61 per 64 KiB record.
        let shape = Shape::for_records(4096, 64 << 10).unwrap();
        let byte = PIR_V1.log2_byte_failure(shape.columns());
        let record = PIR_V1.log2_record_failure(&shape);
        assert!((-78.0..-76.0).contains(&byte), "{byte}");
        assert!((-62.0..-60.0).contains(&record), "{record}");
        assert!(record < -40.0);
    }

    #[test]
    fn small_records_take_fewer_chunks_and_odd_sizes_round_up() {
        let shape = |bytes| {
            let s = Shape::for_records(10, bytes).unwrap();
            (s.chunks, s.rows(), s.record_bytes)
        };
        assert_eq!(shape(1000), (4, 256, 1024));
        assert_eq!(shape(100), (1, 256, 256));
        assert_eq!(shape(4096), (16, 256, 4096));
        // An attachment of 64 KiB with its 4-byte length: one more chunk of the same width.
        assert_eq!(shape(65536 + 4), (17, 4096, 69632));
        assert_eq!(shape(1 << 20), (256, 4096, 1 << 20));
    }

    #[test]
    fn bad_shapes_are_refused() {
        assert!(Shape::for_records(0, 4096).is_err());
        assert!(Shape::for_records(4096, 0).is_err());
        assert!(Shape::for_records(1 << 20, 1 << 13).is_err());
        let uneven = Shape {
            records: 4,
            record_bytes: 100,
            chunks: 3,
        };
        assert!(uneven.check().is_err());
    }
}

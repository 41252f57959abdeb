//! The server's side: a database of records, its hint, and answers to queries.

use crate::error::PirError;
use crate::matrix::{self, Seed};
use crate::params::{Params, Shape};
use crate::wire::{Answer, Hint, Query};

/// A database of equal-size records (shorter ones zero-padded), laid out column-major for the
/// scheme: the records end to end.
#[derive(Clone)]
pub struct Database {
    params: &'static Params,
    shape: Shape,
    data: Vec<u8>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("params", &self.params.name)
            .field("shape", &self.shape)
            .finish_non_exhaustive()
    }
}

impl Database {
    /// A database of `shape.records` empty (all-zero) records.
    pub fn new(params: &'static Params, shape: Shape) -> Result<Database, PirError> {
        shape.check()?;
        Ok(Database {
            params,
            shape,
            data: vec![0; shape.database_bytes()],
        })
    }

    /// A database holding `records` in order; the rest of its records are empty.
    pub fn from_records<'a>(
        params: &'static Params,
        shape: Shape,
        records: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<Database, PirError> {
        let mut db = Database::new(params, shape)?;
        for (i, record) in records.into_iter().enumerate() {
            db.set_record(i, record)?;
        }
        Ok(db)
    }

    pub fn params(&self) -> &'static Params {
        self.params
    }

    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// Record `index` as stored (zero-padded); panics past the last record.
    pub fn record(&self, index: usize) -> &[u8] {
        let size = self.shape.record_bytes;
        &self.data[index * size..(index + 1) * size]
    }

    /// Stores `bytes` as record `index`, zero-padded to the record size.
    pub fn set_record(&mut self, index: usize, bytes: &[u8]) -> Result<(), PirError> {
        let (records, size) = (self.shape.records, self.shape.record_bytes);
        if index >= records {
            return Err(PirError::NoSuchRecord { index, records });
        }
        if bytes.len() > size {
            return Err(PirError::RecordTooLarge {
                index,
                len: bytes.len(),
                max: size,
            });
        }
        let record = &mut self.data[index * size..(index + 1) * size];
        record[..bytes.len()].copy_from_slice(bytes);
        record[bytes.len()..].fill(0);
        Ok(())
    }

    /// The hint for A expanded from `seed` (a fresh random seed per database): the one
    /// expensive step, W·R·n multiply-adds on every core.
    pub fn preprocess(&self, seed: Seed) -> Hint {
        let n = self.params.lwe_dimension;
        let h = matrix::hint_product(
            &self.data,
            self.shape.rows(),
            self.shape.columns(),
            n,
            &seed,
        );
        let drop = 32 - self.params.hint_bits;
        let half = 1u32 << (drop - 1);
        Hint {
            params: self.params,
            shape: self.shape,
            seed,
            values: h
                .into_iter()
                .map(|x| x.wrapping_add(half) >> drop)
                .collect(),
        }
    }

    /// Answers every query of `query`: count·W·R multiply-adds, in one pass over the database.
    pub fn answer(&self, query: &Query) -> Result<Answer, PirError> {
        if query.params != self.params || query.shape != self.shape {
            return Err(PirError::Mismatch {
                what: "query",
                why: format!(
                    "{} {:?}, the database is {} {:?}",
                    query.params.name, query.shape, self.params.name, self.shape
                ),
            });
        }
        let rows = self.shape.rows();
        let a = matrix::answer_product(
            &self.data,
            rows,
            self.shape.columns(),
            &query.values,
            query.count(),
        );
        let drop = 32 - self.params.answer_bits;
        let half = 1u32 << (drop - 1);
        Ok(Answer {
            params: self.params,
            rows,
            values: a
                .into_iter()
                .map(|x| x.wrapping_add(half) >> drop)
                .collect(),
        })
    }
}

//! The one error type of the crate.

/// What can go wrong building, querying or decoding.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PirError {
    #[error("unknown PIR parameter set id {0}")]
    UnknownParams(u8),
    #[error("bad database shape: {0}")]
    BadShape(String),
    #[error("record {index} does not exist: the database holds {records} records")]
    NoSuchRecord { index: usize, records: usize },
    #[error("record {index} is {len} bytes, over the {max} a record may hold")]
    RecordTooLarge {
        index: usize,
        len: usize,
        max: usize,
    },
    #[error("malformed {what}: {why}")]
    Malformed { what: &'static str, why: String },
    #[error("the {what} is for another database ({why})")]
    Mismatch { what: &'static str, why: String },
}

impl PirError {
    pub(crate) fn malformed(what: &'static str, why: impl Into<String>) -> PirError {
        PirError::Malformed {
            what,
            why: why.into(),
        }
    }
}

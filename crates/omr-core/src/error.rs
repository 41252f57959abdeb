//! The one error type of the scheme: typed, never a panic on bad input.

use thiserror::Error;

/// Everything that can go wrong in omr-core.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum OmrError {
    #[error("reading {what}: {why}")]
    Read { what: &'static str, why: String },
    #[error("unknown parameter set {0}")]
    UnknownParamSet(String),
    #[error("parameter set {0} is insecure and was not explicitly allowed")]
    InsecureParamSet(&'static str),
    #[error("malformed {what}: {why}")]
    Malformed { what: &'static str, why: String },
    #[error("{what} is {got} bytes, over the limit of {limit}")]
    TooLarge {
        what: &'static str,
        got: usize,
        limit: usize,
    },
    #[error("parameter set mismatch: {what} uses {got}, expected {expected}")]
    ParamMismatch {
        what: &'static str,
        got: &'static str,
        expected: &'static str,
    },
    #[error("payload is {got} bytes, the parameter set allows at most {max}")]
    PayloadTooLarge { got: usize, max: usize },
    #[error("k̄ = {got} is out of range 1..={max}")]
    BadKbar { got: usize, max: usize },
    #[error("message {index} cannot be folded into an accumulator covering [{start}, {end})")]
    OutOfOrder { index: u64, start: u64, end: u64 },
    #[error("range of {got} messages exceeds the maximum of {max} per accumulator")]
    RangeTooLong { got: u64, max: u64 },
    #[error("accumulators are not adjacent or not for the same key: {0}")]
    NotAdjacent(String),
    #[error("this server requires postage: a stamp with at least {bits} leading zero bits")]
    PostageRequired { bits: u32 },
    #[error("the stamp's hash has {got} leading zero bits; this server requires {need}")]
    PostageInsufficient { got: u32, need: u32 },
    #[error("digest overflow: the range holds more pertinent messages than k̄ = {kbar} (found at least {found}); split the range")]
    Overflow { kbar: usize, found: usize },
}

impl OmrError {
    pub fn malformed(what: &'static str, why: impl Into<String>) -> Self {
        OmrError::Malformed {
            what,
            why: why.into(),
        }
    }
}

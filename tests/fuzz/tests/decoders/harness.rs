//! The harness: a [`Decoder`] under test (a name, valid encodings, the decode function, its
//! allocation bound, where its encodings declare lengths) and [`fuzz`], which runs four
//! properties on it with proptest — random bytes, truncations, bit flips, huge declared lengths —
//! and checks every case: decoding returns a value or an error with a message, never panics
//! (proptest reports a panic as a failure, shrunk to a small input), and never makes a single
//! allocation larger than the bound for the input's length.
//!
//! Cases per property come from the decoder (`cases`), times `OMR_FUZZ_SCALE` when it is set
//! (`OMR_FUZZ_SCALE=100` for a long run); the generator is seeded from `OMR_TEST_SEED` (or a
//! fresh seed, printed), so a failure replays.

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt::Display;
use std::io::Write;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use rand::RngCore;

use crate::alloc::largest_allocation;

/// Allocations any decoding may make whatever its input: error messages, small tables, a
/// reader's 64 KiB buffer.
pub const SLACK: usize = 128 << 10;

/// A field of an encoding that declares a length or a count: (offset, width in bytes).
pub type Field = (usize, usize);

type DecodeFn = Box<dyn Fn(&[u8]) -> Result<(), String> + Send + Sync>;
type FieldsFn = Box<dyn Fn(&[u8]) -> Vec<Field> + Send + Sync>;

/// One decoder under test.
pub struct Decoder {
    name: &'static str,
    valid: Vec<Vec<u8>>,
    decode: DecodeFn,
    per_byte: f64,
    fixed: usize,
    fields: FieldsFn,
    prefixes_decode: bool,
    crafted: Vec<Vec<u8>>,
    cases: u32,
}

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder")
            .field("name", &self.name)
            .field("valid", &self.valid.len())
            .finish_non_exhaustive()
    }
}

/// What a case's decoding must return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// A value or an error.
    Any,
    /// An error (a truncated encoding, a huge declared length).
    Error,
}

impl Decoder {
    /// `decode` over `valid` encodings (each must decode). By default: 500 cases per property,
    /// a single allocation of at most 8 bytes per input byte plus [`SLACK`], no declared
    /// lengths, and no prefix of a valid encoding decodes.
    pub fn new<T, E: Display>(
        name: &'static str,
        valid: Vec<Vec<u8>>,
        decode: impl Fn(&[u8]) -> Result<T, E> + Send + Sync + 'static,
    ) -> Self {
        assert!(
            !valid.is_empty(),
            "{name}: no valid encodings to start from"
        );
        Decoder {
            name,
            valid,
            decode: Box::new(move |b| decode(b).map(drop).map_err(|e| e.to_string())),
            per_byte: 8.0,
            fixed: SLACK,
            fields: Box::new(|_| Vec::new()),
            prefixes_decode: false,
            crafted: Vec::new(),
            cases: 500,
        }
    }

    /// Bound the largest single allocation to `per_byte` × the input's length + `fixed`.
    pub fn alloc(mut self, per_byte: f64, fixed: usize) -> Self {
        self.per_byte = per_byte;
        self.fixed = fixed;
        self
    }

    /// Where an encoding declares lengths or counts: a huge value there must be an error.
    pub fn fields(mut self, f: impl Fn(&[u8]) -> Vec<Field> + Send + Sync + 'static) -> Self {
        self.fields = Box::new(f);
        self
    }

    /// Some prefixes of a valid encoding are valid too (framing, JSON with trailing space).
    pub fn prefixes_decode(mut self) -> Self {
        self.prefixes_decode = true;
        self
    }

    /// Inputs made by hand (huge lengths where no fixed field holds them): decoded once each,
    /// must be refused.
    pub fn crafted(mut self, inputs: Vec<Vec<u8>>) -> Self {
        self.crafted = inputs;
        self
    }

    /// Cases per property (four properties).
    pub fn cases(mut self, n: u32) -> Self {
        self.cases = n;
        self
    }

    fn bound(&self, len: usize) -> usize {
        (self.per_byte * len as f64) as usize + self.fixed
    }

    fn pick(&self, which: Index) -> &[u8] {
        &self.valid[which.index(self.valid.len())]
    }

    /// Decode `input` once and check the outcome and the allocation; true when it decoded.
    fn check(&self, input: &[u8], expect: Expect) -> Result<bool, TestCaseError> {
        let (result, largest) = largest_allocation(|| (self.decode)(input));
        let bound = self.bound(input.len());
        let what = || format!("{} bytes {}", input.len(), preview(input));
        if largest > bound {
            return Err(TestCaseError::fail(format!(
                "decoding {} allocated {largest} bytes at once (bound {bound})",
                what()
            )));
        }
        match result {
            Ok(()) if expect == Expect::Error => Err(TestCaseError::fail(format!(
                "accepted {}, which must be refused",
                what()
            ))),
            Ok(()) => Ok(true),
            Err(m) if m.trim().is_empty() => Err(TestCaseError::fail(format!(
                "refused {} with an empty message",
                what()
            ))),
            Err(_) => Ok(false),
        }
    }
}

/// The first bytes of an input, in hex, for failure messages.
fn preview(input: &[u8]) -> String {
    let head: String = input.iter().take(48).map(|b| format!("{b:02x}")).collect();
    let more = if input.len() > 48 { "…" } else { "" };
    format!("[{head}{more}]")
}

/// A value of `width` bytes that is huge for it: near its maximum or with its top bit set.
fn huge(width: usize, choice: usize) -> u64 {
    let max = if width >= 8 {
        u64::MAX
    } else {
        (1u64 << (8 * width)) - 1
    };
    let top = max / 2 + 1;
    [max, max - 1, max - 255, top, top + 1, top - 1 + top / 2][choice % 6]
}

fn scale() -> f64 {
    std::env::var("OMR_FUZZ_SCALE")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1.0)
}

/// Cases run by [`fuzz`] for each property and in all.
#[derive(Debug, Default)]
struct Tally {
    cases: u32,
    decoded: Cell<u32>,
}

/// Run every property on `d`; panics naming the decoder, the property and a minimal input when
/// a case fails. Returns the number of cases run.
pub fn fuzz(d: Decoder) -> u32 {
    for (i, v) in d.valid.iter().enumerate() {
        match d.check(v, Expect::Any) {
            Ok(true) => {}
            Ok(false) => panic!(
                "{}: valid encoding {i} refused: {}",
                d.name,
                (d.decode)(v).unwrap_err()
            ),
            Err(e) => panic!("{}: valid encoding {i}: {e}", d.name),
        }
    }
    for (i, c) in d.crafted.iter().enumerate() {
        if let Err(e) = d.check(c, Expect::Error) {
            panic!("{}: crafted input {i}: {e}", d.name);
        }
    }
    let started = std::time::Instant::now();
    let cases = ((d.cases as f64 * scale()) as u32).max(1);
    let mut seeds = omr_test_support::seeded_rng(&format!("fuzz {}", d.name));
    let mut runner = || {
        let mut seed = [0u8; 32];
        seeds.fill_bytes(&mut seed);
        let config = Config {
            cases,
            failure_persistence: None,
            max_shrink_iters: 2048,
            ..Config::default()
        };
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed))
    };
    let longest = d.valid.iter().map(Vec::len).max().unwrap_or(0);
    let max_tail = (2 * longest).clamp(64, 4096);
    let tally = Tally {
        cases: 4 * cases,
        ..Tally::default()
    };
    let count = |ok: bool| tally.decoded.set(tally.decoded.get() + ok as u32);

    // 1. Random bytes, alone or behind a prefix (often just the header) of a valid encoding.
    let random = (
        any::<Index>(),
        0u8..3,
        any::<Index>(),
        vec(any::<u8>(), 0..=max_tail),
    );
    let r = runner().run(&random, |(which, prefix, cut, tail)| {
        let v = d.pick(which);
        let keep = match prefix {
            0 => 0,
            1 => cut.index(v.len().min(64) + 1),
            _ => cut.index(v.len() + 1),
        };
        let input = [&v[..keep], &tail[..]].concat();
        d.check(&input, Expect::Any).map(count)
    });
    report(&d, "random bytes", r);

    // 2. Truncations of valid encodings.
    let truncate = (any::<Index>(), any::<Index>());
    let r = runner().run(&truncate, |(which, cut)| {
        let v = d.pick(which);
        let expect = if d.prefixes_decode {
            Expect::Any
        } else {
            Expect::Error
        };
        d.check(&v[..cut.index(v.len())], expect).map(count)
    });
    report(&d, "truncations", r);

    // 3. One to eight flipped bits, half of them in the first 64 bytes (header and lengths).
    let flips = (
        any::<Index>(),
        vec((any::<bool>(), any::<Index>(), 0u8..8), 1..=8),
    );
    let r = runner().run(&flips, |(which, flips)| {
        let mut input = d.pick(which).to_vec();
        for (front, at, bit) in flips {
            let span = if front {
                input.len().min(64)
            } else {
                input.len()
            };
            if span > 0 {
                input[at.index(span)] ^= 1 << bit;
            }
        }
        d.check(&input, Expect::Any).map(count)
    });
    report(&d, "bit flips", r);

    // 4. Huge values in declared lengths (must be refused) or anywhere in the first 128 bytes.
    let lengths = (
        any::<Index>(),
        any::<bool>(),
        any::<Index>(),
        0usize..3,
        0usize..6,
    );
    let r = runner().run(&lengths, |(which, on_field, at, width, choice)| {
        let v = d.pick(which);
        let fields = (d.fields)(v);
        let (offset, width, expect) = if on_field && !fields.is_empty() {
            let (offset, width) = fields[at.index(fields.len())];
            (offset, width, Expect::Error)
        } else {
            let width = [2, 4, 8][width];
            let span = v.len().min(128).saturating_sub(width) + 1;
            (at.index(span), width, Expect::Any)
        };
        let mut input = Cow::Borrowed(v);
        if offset + width <= v.len() {
            let value = huge(width, choice).to_le_bytes();
            input.to_mut()[offset..offset + width].copy_from_slice(&value[..width]);
        }
        d.check(&input, expect).map(count)
    });
    report(&d, "huge lengths", r);

    let _ = writeln!(
        std::io::stderr(),
        "FUZZ: {}: {} cases ({cases} per property), {} decoded, the rest refused, in {:.1} s",
        d.name,
        tally.cases,
        tally.decoded.get(),
        started.elapsed().as_secs_f64()
    );
    tally.cases
}

fn report<T: std::fmt::Debug>(
    d: &Decoder,
    property: &str,
    result: Result<(), proptest::test_runner::TestError<T>>,
) {
    if let Err(e) = result {
        panic!("{}: {property}: {e}", d.name);
    }
}

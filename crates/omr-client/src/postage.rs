//! Solving postage: the smallest nonce whose stamp hash has the server's leading zero bits,
//! searched on many threads (rayon) in chunks, with a hash counter for progress and a flag that
//! stops it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use omr_core::{Postage, MAX_POSTAGE_BITS};

/// Nonces one thread claims at a time (about a millisecond of hashing).
const CHUNK: u64 = 1 << 13;

/// A solved stamp and what it cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// The leading zero bits asked for.
    pub bits: u32,
    /// The nonce: the smallest one that has them.
    pub nonce: u64,
    /// Hashes computed (at least `nonce + 1`; threads finish the chunk they are in).
    pub hashes: u64,
    /// Threads that searched.
    pub threads: usize,
    /// Wall time of the search.
    pub elapsed: Duration,
}

/// Why a search ended without a stamp.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SolveError {
    /// More bits than any server may ask for ([`MAX_POSTAGE_BITS`]).
    #[error("the server asks for postage of {0} bits; at most {MAX_POSTAGE_BITS} can be solved")]
    TooManyBits(u32),
    /// `stop` was set.
    #[error("the postage search was stopped")]
    Stopped,
    /// A thread pool could not be built.
    #[error("starting postage threads: {0}")]
    Threads(String),
}

/// Find the smallest nonce with `bits` leading zero bits on `threads` threads (0: every thread
/// of rayon's global pool), adding each chunk's hashes to `hashes` as it goes and giving up
/// when `stop` is set. Blocking: call it off an async runtime. The nonce found does not depend
/// on the number of threads.
pub fn solve(
    postage: &Postage,
    bits: u32,
    threads: usize,
    hashes: &AtomicU64,
    stop: &AtomicBool,
) -> Result<Stamp, SolveError> {
    if bits > MAX_POSTAGE_BITS {
        return Err(SolveError::TooManyBits(bits));
    }
    let started = Instant::now();
    let before = hashes.load(Ordering::Relaxed);
    let (nonce, threads) = if threads == 0 {
        let n = rayon::current_num_threads();
        (search(postage, bits, n, hashes, stop), n)
    } else {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("omr-postage-{i}"))
            .build()
            .map_err(|e| SolveError::Threads(e.to_string()))?;
        (
            pool.install(|| search(postage, bits, threads, hashes, stop)),
            threads,
        )
    };
    let nonce = nonce.ok_or(SolveError::Stopped)?;
    Ok(Stamp {
        bits,
        nonce,
        hashes: hashes.load(Ordering::Relaxed) - before,
        threads,
        elapsed: started.elapsed(),
    })
}

/// `tasks` searchers on the current rayon pool claim chunks in increasing order; each stops at
/// its first find or once the next chunk starts above the best nonce found, so every chunk below
/// the result was searched whole and the result is the smallest nonce.
fn search(
    postage: &Postage,
    bits: u32,
    tasks: usize,
    hashes: &AtomicU64,
    stop: &AtomicBool,
) -> Option<u64> {
    let next = AtomicU64::new(0);
    let best = AtomicU64::new(u64::MAX);
    rayon::scope(|s| {
        for _ in 0..tasks.max(1) {
            s.spawn(|_| loop {
                let start = next.fetch_add(CHUNK, Ordering::Relaxed);
                if start >= best.load(Ordering::Relaxed) || stop.load(Ordering::Relaxed) {
                    break;
                }
                let found = postage.search(bits, start..start.saturating_add(CHUNK));
                hashes.fetch_add(found.map_or(CHUNK, |n| n - start + 1), Ordering::Relaxed);
                if let Some(n) = found {
                    best.fetch_min(n, Ordering::Relaxed);
                    break;
                }
            });
        }
    });
    match best.into_inner() {
        u64::MAX => None,
        n => Some(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use omr_core::INSECURE_TEST;

    #[test]
    fn every_thread_count_finds_the_smallest_nonce() {
        let p = Postage::new(&INSECURE_TEST, b"a clue", b"a payload");
        let want = p.search(14, 0..u64::MAX).unwrap();
        let stop = AtomicBool::new(false);
        for threads in [1, 3, 0] {
            let hashes = AtomicU64::new(0);
            let s = solve(&p, 14, threads, &hashes, &stop).unwrap();
            assert_eq!(s.nonce, want, "{threads} threads");
            assert!(
                s.hashes > want,
                "{threads} threads counted {} hashes",
                s.hashes
            );
            assert_eq!(p.check(14, Some(s.nonce)), Ok(()));
        }
    }

    #[test]
    fn a_stopped_search_and_too_many_bits_are_errors() {
        let p = Postage::new(&INSECURE_TEST, b"c", b"p");
        let hashes = AtomicU64::new(0);
        let stop = AtomicBool::new(true);
        assert_eq!(solve(&p, 30, 2, &hashes, &stop), Err(SolveError::Stopped));
        assert_eq!(
            solve(
                &p,
                MAX_POSTAGE_BITS + 1,
                1,
                &hashes,
                &AtomicBool::new(false)
            ),
            Err(SolveError::TooManyBits(MAX_POSTAGE_BITS + 1))
        );
    }
}

//! The bytes of the payload fetch as built (`crate::fetch`, docs/light/STUDY.md §7.1), for
//! `omr bench`'s figure "k = 50 among 2^16": one round's query and answers as encoded, and the
//! one-time fetch key.

use crate::fetch::wire::answers_len;
use crate::fetch::{FetchKey, FetchQuery, Geometry, BUCKETS};

/// Bytes up (the query) and down (the answers) of one round among `records` consecutive board
/// indices; a round fetches up to [`crate::fetch::RECORDS_PER_FETCH`] records.
pub fn fetch_bytes_up_down(records: u64) -> (u64, u64) {
    let g = Geometry::new(0..records, BUCKETS);
    let up = FetchQuery::max_encoded_len(g.rows, BUCKETS) as u64;
    (up, answers_len(BUCKETS) as u64)
}

/// [`fetch_bytes_up_down`], both ways together.
pub fn fetch_bytes(records: u64) -> u64 {
    let (up, down) = fetch_bytes_up_down(records);
    up + down
}

/// The one-time key a recipient uploads for it.
pub fn one_time_key_bytes() -> u64 {
    FetchKey::encoded_len() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifty_among_two_to_the_sixteen_is_what_the_service_measured() {
        // 63,585 B up and 163,847 B down through omrd (docs/benchmarks.md, "The payload fetch"): the
        // encodings' sizes plus nothing.
        let (up, down) = fetch_bytes_up_down(1 << 16);
        assert_eq!((up, down), (63_585, 163_847));
        assert!(one_time_key_bytes() < 3_500_000);
    }
}

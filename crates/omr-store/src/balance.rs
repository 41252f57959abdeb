//! The fleet's fair share: how many keys one worker should take or give back at a renewal, from
//! what every live worker holds. A pure function, so the policy is tested apart from SQL.
//!
//! With `K` keys and `W` live workers every worker should hold between ⌊K/W⌋ and ⌈K/W⌉ keys. A
//! worker above ⌈K/W⌉ gives the surplus back; a worker at ⌈K/W⌉ gives one back (down to ⌊K/W⌋)
//! only while another worker is below ⌊K/W⌋ and there are not enough free keys for it. A
//! worker takes free keys up to ⌈K/W⌉, but only up to ⌊K/W⌋ while another worker is below
//! ⌊K/W⌋, so the keys given back go to the worker that needs them instead of bouncing between
//! two that do not. Once every worker is within [⌊K/W⌋, ⌈K/W⌉] and no key is free, nothing
//! moves: renewals change nothing. A key is free only while some worker is below ⌈K/W⌉ (K ≤
//! W·⌈K/W⌉), and that worker takes it at its next renewal.

/// What one worker does at a renewal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Move {
    /// Take up to this many free keys.
    Take(u64),
    /// Give this many of its keys back.
    Shed(u64),
    Stay,
}

/// The fleet as one worker sees it at a renewal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fleet<'a> {
    /// Registered keys.
    pub keys: u64,
    /// Keys no live lease holds (released, expired, or never leased).
    pub free: u64,
    /// Keys this worker holds.
    pub held: u64,
    /// Keys each other live worker holds.
    pub others: &'a [u64],
}

impl Fleet<'_> {
    /// Live workers, this one included.
    pub(crate) fn workers(&self) -> u64 {
        self.others.len() as u64 + 1
    }

    /// The most keys one worker holds: ⌈keys / live workers⌉.
    pub(crate) fn share(&self) -> u64 {
        self.keys.div_ceil(self.workers())
    }

    /// What this worker should do.
    pub(crate) fn rebalance(&self) -> Move {
        let (floor, ceil) = (self.keys / self.workers(), self.share());
        if self.held > ceil {
            return Move::Shed(self.held - ceil);
        }
        // What the workers below ⌊K/W⌋ still need.
        let deficit: u64 = self
            .others
            .iter()
            .filter(|&&h| h < floor)
            .map(|h| floor - h)
            .sum();
        if deficit > 0 {
            if self.held > floor && self.free < deficit {
                return Move::Shed((self.held - floor).min(deficit - self.free));
            }
            return take(self.held, floor, self.free);
        }
        take(self.held, ceil, self.free)
    }
}

/// Take free keys up to `limit` held.
fn take(held: u64, limit: u64, free: u64) -> Move {
    match limit.saturating_sub(held).min(free) {
        0 => Move::Stay,
        n => Move::Take(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fleet(keys: u64, free: u64, held: u64, others: &[u64]) -> Move {
        Fleet {
            keys,
            free,
            held,
            others,
        }
        .rebalance()
    }

    #[test]
    fn a_lone_worker_takes_every_key() {
        assert_eq!(fleet(8, 8, 0, &[]), Move::Take(8));
        assert_eq!(fleet(8, 0, 8, &[]), Move::Stay);
        assert_eq!(fleet(0, 0, 0, &[]), Move::Stay);
    }

    #[test]
    fn a_joining_worker_gets_half_of_what_the_first_held() {
        // B has joined: nothing is free, so it waits; A gives back four; B takes them.
        assert_eq!(fleet(8, 0, 0, &[8]), Move::Stay);
        assert_eq!(fleet(8, 0, 8, &[0]), Move::Shed(4));
        assert_eq!(fleet(8, 4, 0, &[4]), Move::Take(4));
        assert_eq!(fleet(8, 0, 4, &[4]), Move::Stay);
    }

    #[test]
    fn keys_left_over_by_rounding_go_to_any_worker_below_the_share() {
        // 9 keys, 4 workers: shares of 2 or 3.
        assert_eq!(fleet(9, 1, 2, &[3, 3]), Move::Take(1));
        assert_eq!(fleet(9, 0, 3, &[2, 2, 2]), Move::Stay);
        assert_eq!(fleet(9, 0, 2, &[3, 2, 2]), Move::Stay);
    }

    #[test]
    fn a_starved_worker_gets_keys_from_workers_at_the_share() {
        // 9 keys, 4 workers, D holds none: each of A..C at 3 gives one back, one at a time
        // while D still lacks keys and not enough are free.
        assert_eq!(fleet(9, 0, 3, &[3, 3, 0]), Move::Shed(1));
        assert_eq!(fleet(9, 1, 3, &[2, 3, 0]), Move::Shed(1));
        assert_eq!(fleet(9, 2, 3, &[2, 2, 0]), Move::Stay);
        // Meanwhile no worker at ⌊K/W⌋ takes what D needs; D takes it.
        assert_eq!(fleet(9, 2, 2, &[2, 3, 0]), Move::Stay);
        assert_eq!(fleet(9, 2, 0, &[2, 2, 3]), Move::Take(2));
    }

    #[test]
    fn every_renewal_order_converges_and_then_nothing_moves() {
        for (keys, workers) in [(8, 2), (9, 4), (7, 3), (4, 3), (10, 4), (1, 3), (16, 5)] {
            for order in [0, 1] {
                // Worker 0 starts with every key; the others join empty.
                let mut held = vec![0u64; workers];
                held[0] = keys;
                let mut moves = 0;
                for round in 0..20 {
                    let mut changed = false;
                    for step in 0..workers {
                        let w = if order == 0 { step } else { workers - 1 - step };
                        let others: Vec<u64> =
                            (0..workers).filter(|&o| o != w).map(|o| held[o]).collect();
                        let free = keys - held.iter().sum::<u64>();
                        match fleet(keys, free, held[w], &others) {
                            Move::Take(n) => held[w] += n,
                            Move::Shed(n) => held[w] -= n,
                            Move::Stay => continue,
                        }
                        changed = true;
                        moves += 1;
                    }
                    if !changed {
                        break;
                    }
                    assert!(round < 19, "{keys} keys, {workers} workers: no fixed point");
                }
                let (floor, ceil) = (keys / workers as u64, keys.div_ceil(workers as u64));
                assert!(
                    held.iter().all(|&h| (floor..=ceil).contains(&h)),
                    "{keys} keys, {workers} workers: {held:?}"
                );
                assert_eq!(held.iter().sum::<u64>(), keys, "a key was left free");
                assert!(moves <= 2 * workers, "{keys}/{workers}: {moves} moves");
            }
        }
    }
}

//! What the benchmarks (`crates/omr-server/examples`) read of a process and the machine: a
//! process's CPU time and memory from /proc, the CPU's model name, and percentiles; and the pace
//! at which they post.

use std::time::{Duration, Instant};

/// CPU seconds process `pid` has used so far (user + system), from /proc (10 ms ticks).
pub fn cpu_secs(pid: u32) -> f64 {
    omr_bench::host::cpu_secs_of(&pid.to_string()).expect("the process's stat")
}

/// A field of /proc/pid/status in bytes (VmRSS, VmHWM).
pub fn status_bytes(pid: u32, field: &str) -> u64 {
    omr_bench::host::status_bytes_of(&pid.to_string(), field).expect("the process's status field")
}

pub use omr_bench::host::{cpu_model, percentile};

/// Posting at a rate for a time: a tick every 100 ms (every message below 10 a second), each of
/// [`Pace::per_tick`] messages. `while pace.running() { post pace.per_tick(); pace.tick().await }`.
#[derive(Debug)]
pub struct Pace {
    tick: Duration,
    per_tick: usize,
    start: Instant,
    next: Instant,
    seconds: f64,
    count: u64,
}

impl Pace {
    /// `rate` messages a second for `seconds`, starting now.
    pub fn new(rate: f64, seconds: f64) -> Pace {
        let tick = Duration::from_secs_f64((1.0 / rate).max(0.1));
        let start = Instant::now();
        Pace {
            tick,
            per_tick: ((rate * tick.as_secs_f64()).round() as usize).max(1),
            start,
            next: start,
            seconds,
            count: 0,
        }
    }

    /// Messages each tick posts.
    pub fn per_tick(&self) -> usize {
        self.per_tick
    }

    /// Messages of the ticks so far (the number of this tick's first).
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Whether the time is not up.
    pub fn running(&self) -> bool {
        self.start.elapsed().as_secs_f64() < self.seconds
    }

    /// This tick's messages are posted: wait for the next tick.
    pub async fn tick(&mut self) {
        self.count += self.per_tick as u64;
        self.next += self.tick;
        tokio::time::sleep_until(self.next.into()).await;
    }
}

//! What the benchmarks (`crates/omr-server/examples`) read of a process and the machine: a
//! process's CPU time and memory from /proc, the CPU's model name, and percentiles.

/// CPU seconds process `pid` has used so far (user + system), from /proc (10 ms ticks).
pub fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the process's stat");
    let after = &stat[stat.rfind(')').expect("comm") + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / 100.0
}

/// A field of /proc/pid/status in bytes (VmRSS, VmHWM).
pub fn status_bytes(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the process's status");
    let line = s.lines().find(|l| l.starts_with(field)).expect("field");
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 1024
}

/// The CPU's model name (/proc/cpuinfo), or "" where it cannot be read.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            let l = s.lines().find(|l| l.starts_with("model name"))?;
            Some(l.split(':').nth(1)?.trim().to_string())
        })
        .unwrap_or_default()
}

/// The `p`-quantile (0 ..= 1) of `v`, nearest rank; sorts `v`. NaN for no values.
pub fn percentile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

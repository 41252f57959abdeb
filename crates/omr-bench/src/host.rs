//! What a benchmark report says of the machine and a process, read from /proc: the CPU's model
//! name, a process's CPU time and memory, and the quantiles of a sample. One reader for the
//! `omr bench*` commands, the capacity run and the service's benchmark examples.

/// The CPU's model name (/proc/cpuinfo), or "unknown" where it cannot be read.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            let l = s.lines().find(|l| l.starts_with("model name"))?;
            Some(l.split(':').nth(1)?.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// CPU seconds process `pid` (a number, or `self`) has used so far (user + system, 10 ms
/// ticks); `None` without /proc or the process.
pub fn cpu_secs_of(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name (which may hold spaces) in parentheses: utime and
    // stime are the 12th and 13th.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace().skip(11);
    let utime: f64 = fields.next()?.parse().ok()?;
    let stime: f64 = fields.next()?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// CPU seconds this process has used so far; `None` without /proc.
pub fn process_cpu_secs() -> Option<f64> {
    cpu_secs_of("self")
}

/// A field of process `pid`'s (a number, or `self`) /proc status in bytes (`VmRSS`, `VmHWM`);
/// `None` without /proc, the process or the field.
pub fn status_bytes_of(pid: &str, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status
        .lines()
        .find(|l| l.strip_prefix(field).is_some_and(|r| r.starts_with(':')))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// This process's peak resident memory so far (VmHWM), in MiB; `None` without /proc.
pub fn peak_rss_mib() -> Option<f64> {
    status_bytes_of("self", "VmHWM").map(|b| b as f64 / (1u64 << 20) as f64)
}

/// The `p`-quantile (0 ..= 1) of `v`, nearest rank; sorts `v`. NaN for no values.
pub fn percentile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let mut v = vec![5.0, 1.0, 4.0, 2.0, 3.0];
        assert_eq!(percentile(&mut v, 0.0), 1.0);
        assert_eq!(percentile(&mut v, 0.5), 3.0);
        assert_eq!(percentile(&mut v, 1.0), 5.0);
        assert!(percentile(&mut [], 0.5).is_nan());
    }

    #[test]
    fn proc_is_read() {
        assert!(process_cpu_secs().is_some_and(|s| s >= 0.0));
        let (rss, hwm) = (
            status_bytes_of("self", "VmRSS"),
            status_bytes_of("self", "VmHWM"),
        );
        assert!(rss.is_some_and(|r| r > 0) && hwm >= rss, "{rss:?} {hwm:?}");
        assert_ne!(cpu_model(), "unknown");
    }
}

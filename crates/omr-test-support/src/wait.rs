//! Polling instead of sleeping: wait until a condition holds, or panic naming what never
//! happened.

use std::fmt::Display;
use std::future::Future;
use std::time::{Duration, Instant};

/// How often the helpers here check again.
pub const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// Poll `probe` until it returns `Some`, and return that; panic with `what` if `timeout`
/// passes first.
pub async fn wait_for<T, F, Fut>(timeout: Duration, what: impl Display, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting until {what}"
        );
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Poll `condition` until it holds; panic with `what` if `timeout` passes first.
pub async fn wait_until<F, Fut>(timeout: Duration, what: impl Display, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    wait_for(timeout, what, || {
        let holds = condition();
        async move { holds.await.then_some(()) }
    })
    .await
}

/// [`wait_for`] for code outside a runtime (it blocks the thread between polls). A timeout is
/// reported at the caller's line.
#[track_caller]
pub fn wait_for_blocking<T>(
    timeout: Duration,
    what: impl Display,
    mut probe: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting until {what}"
        );
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// [`wait_until`] for code outside a runtime (it blocks the thread between polls). A timeout is
/// reported at the caller's line.
#[track_caller]
pub fn wait_until_blocking(
    timeout: Duration,
    what: impl Display,
    mut condition: impl FnMut() -> bool,
) {
    wait_for_blocking(timeout, what, || condition().then_some(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn wait_for_returns_the_first_value_seen() {
        let mut polls = 0;
        let got = wait_for(Duration::from_secs(5), "the third poll", || {
            polls += 1;
            let now = polls;
            async move { (now == 3).then_some(now) }
        })
        .await;
        assert_eq!(got, 3);
    }

    #[tokio::test]
    #[should_panic(expected = "waiting until the moon turns blue")]
    async fn wait_until_names_what_never_happened() {
        wait_until(
            Duration::from_millis(120),
            "the moon turns blue",
            || async { false },
        )
        .await;
    }

    #[test]
    #[should_panic(expected = "waiting until pigs fly")]
    fn wait_until_blocking_names_what_never_happened() {
        wait_until_blocking(Duration::from_millis(120), "pigs fly", || false);
    }

    #[test]
    fn wait_for_blocking_returns_at_once_when_it_already_holds() {
        let started = Instant::now();
        assert_eq!(
            wait_for_blocking(Duration::from_secs(5), "at once", || Some(7)),
            7
        );
        assert!(started.elapsed() < POLL_INTERVAL);
    }
}

//! Changes to the keys a worker serves that it cannot see in its own work: a key registered or
//! deleted through this process, or a key whose cursor another worker moved. The detection
//! worker lists its keys from the store only every second or so (at 10,000 keys a listing and
//! a lease renewal cost tens of milliseconds, more than a turn's planning should); after such a
//! change it renews its leases and lists them again at its next plan. Changes made through
//! another process reach it by its periodic listing.

use std::sync::atomic::{AtomicBool, Ordering};

/// Whether this process changed the set of keys since the worker last listed them.
#[derive(Debug, Default)]
pub struct RosterChanges(AtomicBool);

impl RosterChanges {
    /// A key was registered or deleted here, or a worker found its list stale.
    pub fn changed(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Whether something changed since the last call (and reset).
    pub fn take(&self) -> bool {
        self.0.swap(false, Ordering::AcqRel)
    }
}

//! omr-store: the bulletin board, the detection-key registry and detection state, on PostgreSQL
//! (production) or SQLite (the embedded default, a file under the data directory).
//!
//! One [`Store`] type over sqlx's `Any` driver; where the dialects differ (migrations, SQLite
//! pragmas) the backend is chosen at connection time. Migrations are embedded from the top-level
//! `migrations/` directory and applied by [`Store::connect`].
//!
//! The board is gapless and ordered: every append runs in one transaction that first bumps the
//! single `board_head` row, whose lock (PostgreSQL) or the single writer (SQLite) serialises
//! appenders until commit. So indices are assigned and become visible in order: a reader that
//! sees index i has already been able to see every index below it.
//!
//! One module per concept, each adding its methods to [`Store`]: `backend` (connecting,
//! migrations, the SQLite writer lock), `board`, `keys` (with `invites`, the codes a
//! registration may need), `detection`, `leases` (with `balance`,
//! the fair share of keys per live worker), `retention`, `notify` (board and progress
//! notifications across processes), `overview` (detection over all keys), `presence` (when each
//! key's recipient was last seen), `schedule` (what workers say about their keys), and, behind
//! the `testing` feature,
//! `testing` (a fresh database per test).

mod attachments;
mod backend;
mod balance;
mod board;
mod detection;
mod error;
mod invites;
mod keys;
mod leases;
mod notify;
mod overview;
mod presence;
mod retention;
mod schedule;
#[cfg(feature = "testing")]
pub mod testing;

pub use backend::{Backend, Store};
pub use board::{Appended, NewMessage, StoredMessage};
pub use detection::{ActiveKey, StoredAccumulator};
pub use error::StoreError;
pub use invites::{InviteRefusal, StoredInvite, MAX_INVITE_USES};
pub use keys::{KeyMeta, NewKey, StartAt, KEY_CHUNK_BYTES};
pub use leases::LeaseGrant;
pub use notify::{BOARD_CHANNEL, PROGRESS_CHANNEL};
pub use overview::DetectionOverview;
pub use schedule::KeySchedule;

//! Board notifications: learning that another process appended to the board, so a detection
//! worker wakes without waiting for its next poll.

use std::time::Duration;

use crate::{Store, StoreError};

/// The PostgreSQL channel `append` notifies after each commit.
pub const BOARD_CHANNEL: &str = "omr_board";

/// How long to wait before listening again after the connection was lost.
const RECONNECT_DELAY: Duration = Duration::from_secs(1);

impl Store {
    /// Call `on_notify` each time another process commits an append.
    ///
    /// On PostgreSQL this LISTENs on [`BOARD_CHANNEL`] over a connection of its own and runs
    /// until dropped: when the connection is lost it logs a warning and listens again after
    /// 1 s, so callers keep polling the board meanwhile. Notifications can be missed while it
    /// connects; one notification may stand for several appends.
    ///
    /// On SQLite ([`Store::is_embedded`]) it returns at once: one process owns the database,
    /// and its own appends are already known to it.
    pub async fn board_notifications(&self, mut on_notify: impl FnMut()) {
        let Some(url) = self.listen_url() else {
            return;
        };
        loop {
            if let Err(e) = listen_board(url.as_str(), &mut on_notify).await {
                tracing::warn!(error = %e, "board notifications lost; polling until reconnected");
            }
            tokio::time::sleep(RECONNECT_DELAY).await;
        }
    }
}

/// Listen on one connection until it fails.
async fn listen_board(url: &str, on_notify: &mut impl FnMut()) -> Result<(), StoreError> {
    let mut listener = sqlx::postgres::PgListener::connect(url).await?;
    listener.listen(BOARD_CHANNEL).await?;
    loop {
        listener.recv().await?;
        on_notify();
    }
}

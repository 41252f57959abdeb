//! Notifications across processes: learning that another process appended to the board (so a
//! detection worker wakes without waiting for its next poll), or moved a key's cursor (so a
//! recipient waiting for its next message is answered at once).

use std::time::Duration;

use crate::backend::WriteTx;
use crate::{Backend, Store, StoreError};

/// The PostgreSQL channel `append` notifies after each commit.
pub const BOARD_CHANNEL: &str = "omr_board";

/// The PostgreSQL channel `commit_progress` notifies after each commit, with the payload
/// `<key id> <new cursor>`.
pub const PROGRESS_CHANNEL: &str = "omr_progress";

/// How long to wait before listening again after the connection was lost.
const RECONNECT_DELAY: Duration = Duration::from_secs(1);

impl Store {
    /// Notify `channel` with `payload` when `tx` commits: on PostgreSQL every process listening
    /// on it hears it then (and nothing if it rolls back); SQLite has one process, which knows
    /// its own commits.
    pub(crate) async fn notify_at_commit(
        &self,
        tx: &mut WriteTx<'_>,
        channel: &str,
        payload: &str,
    ) -> Result<(), sqlx::Error> {
        match self.backend() {
            Backend::Postgres => {
                sqlx::query("SELECT pg_notify($1, $2)")
                    .bind(channel)
                    .bind(payload)
                    .execute(&mut **tx)
                    .await?;
            }
            Backend::Sqlite => {}
        }
        Ok(())
    }

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
        self.notifications(BOARD_CHANNEL, "board", |_| on_notify())
            .await
    }

    /// Call `on_progress(key_id, cursor)` each time a process (this one included) commits
    /// detection progress for a key.
    ///
    /// Like [`Store::board_notifications`]: on PostgreSQL a LISTEN on [`PROGRESS_CHANNEL`]
    /// over a connection of its own, listening again 1 s after a lost connection (callers
    /// poll meanwhile; notifications can be missed while it connects); on SQLite it returns at
    /// once (the one process knows its own commits).
    pub async fn progress_notifications(&self, mut on_progress: impl FnMut(&str, u64)) {
        self.notifications(
            PROGRESS_CHANNEL,
            "progress",
            |payload| match parse_progress(payload) {
                Some((key_id, cursor)) => on_progress(key_id, cursor),
                None => tracing::warn!(payload, "ignoring a malformed progress notification"),
            },
        )
        .await
    }

    /// LISTEN on `channel` (PostgreSQL) and call `on_payload` with each payload, reconnecting
    /// forever; return at once on SQLite.
    async fn notifications(&self, channel: &str, what: &str, mut on_payload: impl FnMut(&str)) {
        let Some(url) = self.listen_url() else {
            return;
        };
        loop {
            if let Err(e) = listen(url.as_str(), channel, &mut on_payload).await {
                tracing::warn!(error = %e, "{what} notifications lost; polling until reconnected");
            }
            tokio::time::sleep(RECONNECT_DELAY).await;
        }
    }
}

/// `<key id> <cursor>`, as `commit_progress` sends it.
fn parse_progress(payload: &str) -> Option<(&str, u64)> {
    let (key_id, cursor) = payload.rsplit_once(' ')?;
    Some((key_id, cursor.parse().ok()?))
}

/// Listen on one connection until it fails.
async fn listen(
    url: &str,
    channel: &str,
    on_payload: &mut impl FnMut(&str),
) -> Result<(), StoreError> {
    let mut listener = sqlx::postgres::PgListener::connect(url).await?;
    listener.listen(channel).await?;
    loop {
        let n = listener.recv().await?;
        on_payload(n.payload());
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn progress_payloads_parse() {
        assert_eq!(super::parse_progress("k-1 42"), Some(("k-1", 42)));
        assert_eq!(super::parse_progress("k 1 2"), Some(("k 1", 2)));
        assert_eq!(super::parse_progress("k"), None);
        assert_eq!(super::parse_progress("k x"), None);
    }

    proptest::proptest! {
        // A notification payload is read from the database: anything parses or is ignored,
        // and what `commit_progress` sends comes back.
        #[test]
        fn any_payload_parses_or_is_ignored(payload: String, key: String, cursor: u64) {
            let _ = super::parse_progress(&payload);
            let sent = format!("{key} {cursor}");
            proptest::prop_assert_eq!(super::parse_progress(&sent), Some((key.as_str(), cursor)));
        }
    }
}

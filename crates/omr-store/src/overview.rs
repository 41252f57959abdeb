//! The deployment's detection at a glance, for the lag and capacity metrics: how many keys are
//! behind the board head and by how much, how many no live worker leases, and how old the oldest
//! message some key has not detected is. Read over every registered key, whoever serves it.

use sqlx::Row;

use crate::backend::{now_ms, to_u64};
use crate::{Store, StoreError};

/// Detection over every registered key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DetectionOverview {
    /// Next board index to be assigned.
    pub head: u64,
    /// Registered keys.
    pub keys: u64,
    /// Keys whose cursor is below the head.
    pub keys_behind: u64,
    /// Keys without a live lease: no worker is detecting for them.
    pub keys_unassigned: u64,
    /// The largest number of messages a key is behind.
    pub max_lag: u64,
    /// When the oldest message some key has not detected was received (ms since the epoch).
    pub oldest_undetected_ms: Option<i64>,
}

impl Store {
    /// The detection overview, as of now.
    pub async fn detection_overview(&self) -> Result<DetectionOverview, StoreError> {
        let head = self.board_head().await?;
        let row = sqlx::query(
            "SELECT COUNT(*), COUNT(CASE WHEN next_index < $1 THEN 1 END), MIN(next_index) \
             FROM key_cursors",
        )
        .bind(head as i64)
        .fetch_one(self.pool())
        .await?;
        let keys = to_u64(row.try_get::<i64, _>(0)?, "key count")?;
        let keys_behind = to_u64(row.try_get::<i64, _>(1)?, "key count")?;
        let min_cursor = row
            .try_get::<Option<i64>, _>(2)?
            .map(|c| to_u64(c, "cursor"))
            .transpose()?;
        let row = sqlx::query(
            "SELECT COUNT(*) FROM detection_keys k WHERE NOT EXISTS \
             (SELECT 1 FROM worker_leases l WHERE l.key_id = k.key_id AND l.owner <> '' \
              AND l.expires_ms > $1)",
        )
        .bind(now_ms())
        .fetch_one(self.pool())
        .await?;
        let keys_unassigned = to_u64(row.try_get::<i64, _>(0)?, "key count")?;
        let (max_lag, oldest_undetected_ms) = match min_cursor {
            Some(c) if c < head => {
                // Indices are assigned in commit order, so the first message at or after the
                // lowest cursor is the oldest one not detected.
                let received = sqlx::query(
                    "SELECT received_ms FROM board WHERE idx >= $1 ORDER BY idx LIMIT 1",
                )
                .bind(c as i64)
                .fetch_optional(self.pool())
                .await?
                .map(|r| r.try_get::<i64, _>(0))
                .transpose()?;
                (head - c, received)
            }
            _ => (0, None),
        };
        Ok(DetectionOverview {
            head,
            keys,
            keys_behind,
            keys_unassigned,
            max_lag,
            oldest_undetected_ms,
        })
    }
}

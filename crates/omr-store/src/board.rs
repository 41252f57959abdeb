//! The board: gapless, ordered appends (`append`), reads in index order (`read`) and the head
//! (`board_head`).

use sqlx::Row;

use crate::backend::{now_ms, to_u64};
use crate::notify::BOARD_CHANNEL;
use crate::{Store, StoreError};

/// Rows per multi-row INSERT (well under both databases' bind-parameter limits).
const INSERT_ROWS: usize = 1000;

/// A message to append to the board (already validated by the caller).
#[derive(Debug, Clone)]
pub struct NewMessage {
    pub clue: Vec<u8>,
    pub payload: Vec<u8>,
    /// Its attachment, stored apart from the board (`attachments`); empty: none.
    pub attachment: Vec<u8>,
}

/// A message read back from the board.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMessage {
    pub index: u64,
    pub clue: Vec<u8>,
    pub payload: Vec<u8>,
    pub received_ms: i64,
}

impl Store {
    /// Append `messages` in one transaction; returns the index of the first. All or nothing.
    pub async fn append(&self, messages: &[NewMessage]) -> Result<u64, StoreError> {
        if messages.is_empty() {
            return self.board_head().await;
        }
        let n = messages.len() as i64;
        let mut tx = self.begin_write().await?;
        let row = sqlx::query(
            "UPDATE board_head SET next_index = next_index + $1 WHERE id = 1 RETURNING next_index",
        )
        .bind(n)
        .fetch_one(&mut *tx)
        .await?;
        let first = row.try_get::<i64, _>(0)? - n;
        let received = now_ms();
        for (c, chunk) in messages.chunks(INSERT_ROWS).enumerate() {
            let base = first + (c * INSERT_ROWS) as i64;
            // Numbered placeholders: both PostgreSQL and SQLite accept $N (QueryBuilder on the
            // Any driver would emit `?`, which PostgreSQL rejects).
            let mut sql =
                String::from("INSERT INTO board (idx, clue, payload, received_ms) VALUES ");
            for k in 0..chunk.len() {
                if k > 0 {
                    sql.push_str(", ");
                }
                let b = 4 * k;
                sql.push_str(&format!("(${}, ${}, ${}, ${})", b + 1, b + 2, b + 3, b + 4));
            }
            let mut q = sqlx::query(&sql);
            for (k, m) in chunk.iter().enumerate() {
                q = q
                    .bind(base + k as i64)
                    .bind(m.clue.clone())
                    .bind(m.payload.clone())
                    .bind(received);
            }
            q.execute(&mut *tx).await?;
        }
        for (k, m) in messages.iter().enumerate() {
            if !m.attachment.is_empty() {
                sqlx::query("INSERT INTO attachments (idx, bytes) VALUES ($1, $2)")
                    .bind(first + k as i64)
                    .bind(m.attachment.clone())
                    .execute(&mut *tx)
                    .await?;
            }
        }
        // Other processes' detection workers wake.
        self.notify_at_commit(&mut tx, BOARD_CHANNEL, "").await?;
        tx.commit().await?;
        to_u64(first, "board index")
    }

    /// The next index to be assigned (= number of messages ever appended).
    pub async fn board_head(&self) -> Result<u64, StoreError> {
        let row = sqlx::query("SELECT next_index FROM board_head WHERE id = 1")
            .fetch_one(self.pool())
            .await?;
        to_u64(row.try_get::<i64, _>(0)?, "board head")
    }

    /// Up to `limit` messages with index ≥ `from`, in index order.
    pub async fn read(&self, from: u64, limit: u32) -> Result<Vec<StoredMessage>, StoreError> {
        let from = i64::try_from(from).unwrap_or(i64::MAX);
        let rows = sqlx::query(
            "SELECT idx, clue, payload, received_ms FROM board WHERE idx >= $1 ORDER BY idx LIMIT $2",
        )
        .bind(from)
        .bind(limit as i64)
        .fetch_all(self.pool())
        .await?;
        rows.into_iter()
            .map(|r| {
                Ok(StoredMessage {
                    index: to_u64(r.try_get::<i64, _>(0)?, "board index")?,
                    clue: r.try_get(1)?,
                    payload: r.try_get(2)?,
                    received_ms: r.try_get(3)?,
                })
            })
            .collect()
    }
}

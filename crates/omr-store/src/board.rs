//! The board: gapless, ordered appends (`append`), reads in index order (`read`) and the head
//! (`board_head`).

use std::collections::HashMap;

use sqlx::Row;

use crate::backend::{now_ms, numbered_rows, to_u64};
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

/// What an append did with one group of messages (one submitter's post or batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    /// Appended: the index of its first message (the rest follow in order).
    Stored { first: u64 },
    /// Not appended: the message at `position` in the group is already on the board, at
    /// `index` (an earlier post of the same bytes, or one committed earlier in this group).
    Duplicate { position: usize, index: u64 },
    /// Not appended: the message at `position` repeats the one at `of` in the same group.
    Repeated { position: usize, of: usize },
}

impl NewMessage {
    /// BLAKE3 of the clue, the payload and the attachment, each after its length: two posts of
    /// the same bytes have the same fingerprint, and nothing else does.
    pub fn fingerprint(&self) -> [u8; 32] {
        let mut h = blake3::Hasher::new_derive_key("omr board message fingerprint v1");
        for part in [&self.clue, &self.payload, &self.attachment] {
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part);
        }
        *h.finalize().as_bytes()
    }
}

impl Store {
    /// Append `messages` in one transaction; returns the index of the first. All or nothing: a
    /// message already on the board (or repeated in `messages`) refuses them all
    /// ([`StoreError::Duplicate`]).
    pub async fn append(&self, messages: &[NewMessage]) -> Result<u64, StoreError> {
        match self.append_groups(&[messages]).await?[0] {
            Appended::Stored { first } => Ok(first),
            Appended::Duplicate { position, index } => {
                Err(StoreError::Duplicate { position, index })
            }
            Appended::Repeated { position, of } => Err(StoreError::Corrupt(format!(
                "message {position} repeats message {of} of the same append"
            ))),
        }
    }

    /// Append several groups in one transaction, each all or nothing: a group with a message
    /// already on the board, or committed by an earlier group of this call, or repeated within
    /// the group, is not appended; the others are, in order. The duplicate check runs after the
    /// board head's row is locked, so concurrent appends of the same bytes (from any process)
    /// store one of them.
    pub async fn append_groups(
        &self,
        groups: &[&[NewMessage]],
    ) -> Result<Vec<Appended>, StoreError> {
        let mut tx = self.begin_write().await?;
        // The write lock first (PostgreSQL: this row; SQLite: the database), then the lookup.
        let row = sqlx::query(
            "UPDATE board_head SET next_index = next_index WHERE id = 1 RETURNING next_index",
        )
        .fetch_one(&mut *tx)
        .await?;
        let head = row.try_get::<i64, _>(0)?;
        let prints: Vec<Vec<[u8; 32]>> = groups
            .iter()
            .map(|g| g.iter().map(NewMessage::fingerprint).collect())
            .collect();
        let all: Vec<&[u8; 32]> = prints.iter().flatten().collect();
        let mut known: HashMap<[u8; 32], i64> = HashMap::new();
        for chunk in all.chunks(INSERT_ROWS) {
            let placeholders: Vec<String> = (1..=chunk.len()).map(|i| format!("${i}")).collect();
            let sql = format!(
                "SELECT fingerprint, idx FROM board_fingerprints WHERE fingerprint IN ({})",
                placeholders.join(", ")
            );
            let mut q = sqlx::query(&sql);
            for f in chunk {
                q = q.bind(f.to_vec());
            }
            for r in q.fetch_all(&mut *tx).await? {
                let f: Vec<u8> = r.try_get(0)?;
                let f: [u8; 32] = f
                    .try_into()
                    .map_err(|_| StoreError::Corrupt("a fingerprint is not 32 bytes".into()))?;
                known.insert(f, r.try_get(1)?);
            }
        }
        let mut outcomes = Vec::with_capacity(groups.len());
        let mut accepted: Vec<(i64, &NewMessage, [u8; 32])> = Vec::new();
        let mut next = head;
        for (group, prints) in groups.iter().zip(&prints) {
            let mut outcome = None;
            let mut seen: HashMap<&[u8; 32], usize> = HashMap::new();
            for (position, f) in prints.iter().enumerate() {
                if let Some(&index) = known.get(f) {
                    let index = to_u64(index, "board index")?;
                    outcome = Some(Appended::Duplicate { position, index });
                    break;
                }
                if let Some(of) = seen.insert(f, position) {
                    outcome = Some(Appended::Repeated { position, of });
                    break;
                }
            }
            if let Some(o) = outcome {
                outcomes.push(o);
                continue;
            }
            let first = to_u64(next, "board index")?;
            for (m, f) in group.iter().zip(prints) {
                known.insert(*f, next);
                accepted.push((next, m, *f));
                next += 1;
            }
            outcomes.push(Appended::Stored { first });
        }
        if accepted.is_empty() {
            tx.commit().await?;
            return Ok(outcomes);
        }
        sqlx::query("UPDATE board_head SET next_index = $1 WHERE id = 1")
            .bind(next)
            .execute(&mut *tx)
            .await?;
        let received = now_ms();
        for chunk in accepted.chunks(INSERT_ROWS) {
            let board = format!(
                "INSERT INTO board (idx, clue, payload, received_ms) VALUES {}",
                numbered_rows(chunk.len(), 4)
            );
            let fingerprints = format!(
                "INSERT INTO board_fingerprints (fingerprint, idx) VALUES {}",
                numbered_rows(chunk.len(), 2)
            );
            let mut q = sqlx::query(&board);
            let mut f = sqlx::query(&fingerprints);
            for (index, m, print) in chunk {
                q = q
                    .bind(*index)
                    .bind(m.clue.clone())
                    .bind(m.payload.clone())
                    .bind(received);
                f = f.bind(print.to_vec()).bind(*index);
            }
            q.execute(&mut *tx).await?;
            f.execute(&mut *tx).await?;
        }
        for (index, m, _) in &accepted {
            if !m.attachment.is_empty() {
                sqlx::query("INSERT INTO attachments (idx, bytes) VALUES ($1, $2)")
                    .bind(*index)
                    .bind(m.attachment.clone())
                    .execute(&mut *tx)
                    .await?;
            }
        }
        // Other processes' detection workers wake.
        self.notify_at_commit(&mut tx, BOARD_CHANNEL, "").await?;
        tx.commit().await?;
        Ok(outcomes)
    }

    /// The next index to be assigned (= number of messages ever appended).
    pub async fn board_head(&self) -> Result<u64, StoreError> {
        let row = sqlx::query("SELECT next_index FROM board_head WHERE id = 1")
            .fetch_one(self.pool())
            .await?;
        to_u64(row.try_get::<i64, _>(0)?, "board head")
    }

    /// The board head and up to `limit` messages with index ≥ `from`, in index order, in one
    /// statement (one round trip to the store: a recipient's poll of the board is one read).
    pub async fn read_page(
        &self,
        from: u64,
        limit: u32,
    ) -> Result<(u64, Vec<StoredMessage>), StoreError> {
        let from = i64::try_from(from).unwrap_or(i64::MAX);
        let rows = sqlx::query(
            "SELECT h.next_index, b.idx, b.clue, b.payload, b.received_ms FROM board_head h \
             LEFT JOIN (SELECT idx, clue, payload, received_ms FROM board WHERE idx >= $1 \
             ORDER BY idx LIMIT $2) b ON 1 = 1 WHERE h.id = 1 ORDER BY b.idx",
        )
        .bind(from)
        .bind(limit as i64)
        .fetch_all(self.pool())
        .await?;
        let head = match rows.first() {
            Some(r) => to_u64(r.try_get::<i64, _>(0)?, "board head")?,
            None => return Err(StoreError::Corrupt("the board head row is missing".into())),
        };
        let mut messages = Vec::with_capacity(rows.len());
        for r in &rows {
            // With no message at or past `from`, the head's row alone, its message columns NULL.
            if r.try_get::<Option<i64>, _>(1)?.is_some() {
                messages.push(stored_message(r, 1)?);
            }
        }
        Ok((head, messages))
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
        rows.iter().map(|r| stored_message(r, 0)).collect()
    }
}

/// The message in `row`'s columns `at..at + 4` (index, clue, payload, received_ms).
fn stored_message(row: &sqlx::any::AnyRow, at: usize) -> Result<StoredMessage, StoreError> {
    Ok(StoredMessage {
        index: to_u64(row.try_get::<i64, _>(at)?, "board index")?,
        clue: row.try_get(at + 1)?,
        payload: row.try_get(at + 2)?,
        received_ms: row.try_get(at + 3)?,
    })
}

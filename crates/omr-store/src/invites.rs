//! Invite codes (`registration = "invite"`): minted with a number of uses and an optional
//! expiry, stored only as the SHA-256 of the code. A registration takes one use in the
//! transaction that stores its key ([`take_invite_use`], called by `keys.rs`), so a refused or
//! failed registration consumes nothing.

use std::num::NonZeroU32;

use sqlx::{AnyConnection, Row};

use crate::backend::{now_ms, to_u64};
use crate::{Store, StoreError};

/// A stored invite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredInvite {
    /// Registrations it admitted when minted.
    pub uses: u32,
    /// Registrations it still admits.
    pub uses_left: u32,
    /// When it expires (milliseconds since the Unix epoch); `None`: never.
    pub expires_ms: Option<i64>,
    pub created_ms: i64,
}

/// Why an invite code admits no registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InviteRefusal {
    /// No invite has this code's hash.
    Unknown,
    /// Every one of its `uses` was taken.
    UsedUp { uses: u32 },
    /// It expired at `expires_ms` (milliseconds since the Unix epoch).
    Expired { expires_ms: i64 },
}

impl std::fmt::Display for InviteRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InviteRefusal::Unknown => f.write_str("unknown invite code"),
            InviteRefusal::UsedUp { uses } => write!(f, "invite code used up ({uses} of {uses})"),
            InviteRefusal::Expired { expires_ms } => {
                write!(f, "invite code expired at {expires_ms} ms")
            }
        }
    }
}

impl StoredInvite {
    /// Whether it admits a registration at `now_ms`, and if not, why.
    pub fn admits(&self, now_ms: i64) -> Result<(), InviteRefusal> {
        match self.expires_ms {
            Some(expires_ms) if now_ms >= expires_ms => Err(InviteRefusal::Expired { expires_ms }),
            _ if self.uses_left == 0 => Err(InviteRefusal::UsedUp { uses: self.uses }),
            _ => Ok(()),
        }
    }
}

/// The most uses one invite can have (the column is a 32-bit integer on both backends).
pub const MAX_INVITE_USES: u32 = i32::MAX as u32;

impl Store {
    /// Store an invite admitting `uses` registrations (at most [`MAX_INVITE_USES`]; more are
    /// stored as that) until `expires_ms` (`None`: for ever), under the SHA-256 `code_hash` of
    /// its code.
    pub async fn create_invite(
        &self,
        code_hash: &[u8; 32],
        uses: NonZeroU32,
        expires_ms: Option<i64>,
    ) -> Result<(), StoreError> {
        let uses = i32::try_from(uses.get()).unwrap_or(i32::MAX);
        let _w = self.write_lock().await;
        sqlx::query(
            "INSERT INTO invites (code_hash, uses, uses_left, expires_ms, created_ms) \
             VALUES ($1, $2, $2, $3, $4)",
        )
        .bind(code_hash.to_vec())
        .bind(uses)
        .bind(expires_ms)
        .bind(now_ms())
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// The invite stored under `code_hash`, if any.
    pub async fn invite(&self, code_hash: &[u8; 32]) -> Result<Option<StoredInvite>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        read_invite(&mut conn, code_hash).await
    }

    /// Whether the invite under `code_hash` admits a registration now: `Ok`, or
    /// [`StoreError::InviteRefused`] saying why not. Takes nothing: the registration's insert
    /// takes the use (and checks again).
    pub async fn check_invite(&self, code_hash: &[u8; 32]) -> Result<(), StoreError> {
        let invite = self.invite(code_hash).await?;
        let invite = invite.ok_or(StoreError::InviteRefused(InviteRefusal::Unknown))?;
        invite.admits(now_ms()).map_err(StoreError::InviteRefused)
    }
}

/// Take one use of the invite under `code_hash` in the caller's transaction (rolled back with
/// it), or refuse with [`StoreError::InviteRefused`]. The conditional UPDATE is the check:
/// concurrent registrations with the last use cannot both take it (the row lock on PostgreSQL,
/// the writer lock on SQLite).
pub(crate) async fn take_invite_use(
    conn: &mut AnyConnection,
    code_hash: &[u8; 32],
) -> Result<(), StoreError> {
    let now = now_ms();
    let taken = sqlx::query(
        "UPDATE invites SET uses_left = uses_left - 1 \
         WHERE code_hash = $1 AND uses_left > 0 AND (expires_ms IS NULL OR expires_ms > $2)",
    )
    .bind(code_hash.to_vec())
    .bind(now)
    .execute(&mut *conn)
    .await?;
    if taken.rows_affected() == 1 {
        return Ok(());
    }
    let refusal = match read_invite(conn, code_hash).await? {
        None => InviteRefusal::Unknown,
        Some(invite) => invite.admits(now).err().unwrap_or(InviteRefusal::Unknown),
    };
    Err(StoreError::InviteRefused(refusal))
}

async fn read_invite(
    conn: &mut AnyConnection,
    code_hash: &[u8; 32],
) -> Result<Option<StoredInvite>, StoreError> {
    let row = sqlx::query(
        "SELECT uses, uses_left, expires_ms, created_ms FROM invites WHERE code_hash = $1",
    )
    .bind(code_hash.to_vec())
    .fetch_optional(&mut *conn)
    .await?;
    row.map(|r| {
        let count = |i: usize, what: &str| -> Result<u32, StoreError> {
            let v = to_u64(i64::from(r.try_get::<i32, _>(i)?), what)?;
            u32::try_from(v).map_err(|_| StoreError::Corrupt(format!("{what} {v}")))
        };
        Ok(StoredInvite {
            uses: count(0, "invite uses")?,
            uses_left: count(1, "invite uses left")?,
            expires_ms: r.try_get(2)?,
            created_ms: r.try_get(3)?,
        })
    })
    .transpose()
}

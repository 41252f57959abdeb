//! Worker leases: which worker process detects for which key, until when, shared fairly among
//! the live workers. A worker is live while its heartbeat row (renewed with its leases) has not
//! expired; the share each takes or gives back is decided in `balance`.

use std::time::Duration;

use sqlx::Row;

use crate::backend::{now_ms, to_u64};
use crate::balance::{Fleet, Move};
use crate::{Backend, Store, StoreError};

/// The PostgreSQL advisory lock that serialises lease renewals ("omr_leas" in ASCII), so each
/// worker decides its share from the fleet as it is, not from a view another renewal is
/// changing.
const LEASE_LOCK: i64 = 0x6f6d_725f_6c65_6173;

/// What one renewal left a worker with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseGrant {
    /// The keys this worker holds, in key order.
    pub keys: Vec<String>,
    /// The keys it gave back in this renewal towards its share (others take them), in key
    /// order.
    pub given_back: Vec<String>,
    /// Live workers (unexpired heartbeats), this one included.
    pub live_workers: u64,
    /// The most keys one worker holds now: ⌈registered keys / live workers⌉.
    pub share: u64,
}

impl Store {
    /// Renew `owner`'s heartbeat and leases for `lease`, then take or give back keys so that
    /// every live worker holds its fair share (the policy is in `balance.rs`); return what `owner`
    /// holds. A worker that stops renewing is dead after `lease`: its heartbeat and leases
    /// expire together and its keys go to the others. One transaction: on SQLite under the
    /// writer lock, on PostgreSQL under an advisory lock that serialises renewals, and the keys
    /// taken are locked `FOR UPDATE SKIP LOCKED` (a key being deleted is skipped, not waited for).
    pub async fn acquire_leases(
        &self,
        owner: &str,
        lease: Duration,
    ) -> Result<LeaseGrant, StoreError> {
        let now = now_ms();
        let expires = now + lease.as_millis() as i64;
        let owner = owner.to_string();
        let mut tx = self.begin_write().await?;
        tx.serialise(LEASE_LOCK).await?;
        sqlx::query(
            "INSERT INTO worker_heartbeats (worker_id, renewed_ms, expires_ms) VALUES ($1, $2, $3) \
             ON CONFLICT (worker_id) \
             DO UPDATE SET renewed_ms = excluded.renewed_ms, expires_ms = excluded.expires_ms",
        )
        .bind(owner.clone())
        .bind(now)
        .bind(expires)
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM worker_heartbeats WHERE expires_ms < $1")
            .bind(now)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE worker_leases SET expires_ms = $1 WHERE owner = $2")
            .bind(expires)
            .bind(owner.clone())
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO worker_leases (key_id, owner, expires_ms) \
             SELECT key_id, '', 0 FROM detection_keys k \
             WHERE NOT EXISTS (SELECT 1 FROM worker_leases l WHERE l.key_id = k.key_id) \
             ON CONFLICT (key_id) DO NOTHING",
        )
        .execute(&mut *tx)
        .await?;

        let workers: Vec<String> = sqlx::query("SELECT worker_id FROM worker_heartbeats")
            .fetch_all(&mut *tx)
            .await?
            .into_iter()
            .map(|r| r.try_get(0))
            .collect::<Result<_, _>>()?;
        let holdings: Vec<(String, u64)> = sqlx::query(
            "SELECT owner, COUNT(*) FROM worker_leases WHERE expires_ms >= $1 GROUP BY owner",
        )
        .bind(now)
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .map(|r| {
            Ok((
                r.try_get(0)?,
                to_u64(r.try_get::<i64, _>(1)?, "lease count")?,
            ))
        })
        .collect::<Result<_, StoreError>>()?;
        let keys: i64 = sqlx::query("SELECT COUNT(*) FROM worker_leases")
            .fetch_one(&mut *tx)
            .await?
            .try_get(0)?;
        let keys = to_u64(keys, "key count")?;
        let held_by = |w: &str| holdings.iter().find(|(o, _)| o == w).map_or(0, |(_, n)| *n);
        // Live leases of owners without a heartbeat (none, unless a worker of an older version
        // runs beside this one) count as held, not as workers.
        let leased: u64 = holdings.iter().map(|(_, n)| n).sum();
        let others: Vec<u64> = workers
            .iter()
            .filter(|w| **w != owner)
            .map(|w| held_by(w))
            .collect();
        let fleet = Fleet {
            keys,
            free: keys.saturating_sub(leased),
            held: held_by(&owner),
            others: &others,
        };
        let lock = match self.backend() {
            Backend::Postgres => " FOR UPDATE SKIP LOCKED",
            Backend::Sqlite => "",
        };
        let mut given_back = Vec::new();
        match fleet.rebalance() {
            // Keys given back are free at once (expiry 0): the worker that needs them takes
            // them at its next renewal, without waiting for a lease to run out.
            Move::Shed(n) => {
                given_back = sqlx::query(&format!(
                    "UPDATE worker_leases SET owner = '', expires_ms = 0 WHERE key_id IN \
                     (SELECT key_id FROM worker_leases WHERE owner = $1 \
                      ORDER BY key_id DESC LIMIT $2{lock}) RETURNING key_id"
                ))
                .bind(owner.clone())
                .bind(n as i64)
                .fetch_all(&mut *tx)
                .await?
                .into_iter()
                .map(|r| r.try_get(0))
                .collect::<Result<_, _>>()?;
                given_back.sort_unstable();
            }
            Move::Take(n) => {
                sqlx::query(&format!(
                    "UPDATE worker_leases SET owner = $1, expires_ms = $2 WHERE key_id IN \
                     (SELECT key_id FROM worker_leases WHERE expires_ms < $3 \
                      ORDER BY expires_ms, key_id LIMIT $4{lock})"
                ))
                .bind(owner.clone())
                .bind(expires)
                .bind(now)
                .bind(n as i64)
                .execute(&mut *tx)
                .await?;
            }
            Move::Stay => {}
        }
        let rows = sqlx::query("SELECT key_id FROM worker_leases WHERE owner = $1 ORDER BY key_id")
            .bind(owner)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(LeaseGrant {
            keys: rows
                .into_iter()
                .map(|r| r.try_get(0))
                .collect::<Result<_, _>>()?,
            given_back,
            live_workers: fleet.workers(),
            share: fleet.share(),
        })
    }

    /// Give up `owner`'s leases and heartbeat (graceful shutdown): its keys are free at once,
    /// and the other workers' share grows at their next renewal.
    pub async fn release_leases(&self, owner: &str) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        sqlx::query("UPDATE worker_leases SET owner = '', expires_ms = 0 WHERE owner = $1")
            .bind(owner.to_string())
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM worker_heartbeats WHERE worker_id = $1")
            .bind(owner.to_string())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Workers whose heartbeat has not expired.
    pub async fn live_workers(&self) -> Result<u64, StoreError> {
        let n: i64 = sqlx::query("SELECT COUNT(*) FROM worker_heartbeats WHERE expires_ms >= $1")
            .bind(now_ms())
            .fetch_one(self.pool())
            .await?
            .try_get(0)?;
        to_u64(n, "worker count")
    }
}

//! The scheduling policy: which keys this worker serves and in what order. It serves the keys
//! it leases (its share of the fleet's) among the registered keys round-robin, in
//! the store's order, one batch each per round, so a key with a long backlog does not starve
//! the others.

use omr_store::{ActiveKey, StoreError};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::leases::Leases;
use super::{step, Worker};
use crate::state::AppState;

/// The registered keys this worker holds, in the order a round serves them.
async fn keys_to_serve(state: &AppState, leases: &Leases) -> Result<Vec<ActiveKey>, StoreError> {
    let keys = state.store.active_keys().await?;
    // All registered keys (what the fleet must serve), then the ones held here.
    state.metrics.active_keys.set(keys.len() as i64);
    Ok(keys
        .into_iter()
        .filter(|k| leases.holds(&k.key_id))
        .collect())
}

impl Worker {
    /// Renew the leases and list this round's keys, dropping cached keys no longer among them;
    /// `None` (logged) when the store fails.
    pub(super) async fn plan_round(&mut self) -> Option<Vec<ActiveKey>> {
        if let Err(e) = self.leases.renew(&self.state).await {
            tracing::error!(error = %e, "renewing leases failed; retrying");
            return None;
        }
        let keys = match keys_to_serve(&self.state, &self.leases).await {
            Ok(keys) => keys,
            Err(e) => {
                tracing::error!(error = %e, "listing keys failed; retrying");
                return None;
            }
        };
        self.cache.retain_only(&keys);
        Some(keys)
    }

    /// One batch for each of `keys` in order, renewing the leases when the round runs long and
    /// skipping keys lost meanwhile; whether any batch folded messages.
    pub(super) async fn serve_round(
        &mut self,
        keys: &[ActiveKey],
        cancel: &CancellationToken,
    ) -> bool {
        let mut progressed = false;
        for key in keys {
            if cancel.is_cancelled() {
                break;
            }
            self.leases.renew_if_due(&self.state).await;
            if !self.leases.holds(&key.key_id) {
                continue;
            }
            let span =
                tracing::info_span!("detect_batch", key_id = %key.key_id, cursor = key.cursor);
            let batch = step::step(&self.state, &self.pool, &mut self.cache, key);
            match batch.instrument(span).await {
                Ok(n) => progressed |= n > 0,
                Err(e) => {
                    tracing::error!(key_id = %key.key_id, error = %e, "detection step failed")
                }
            }
        }
        progressed
    }
}

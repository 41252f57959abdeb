//! Where a key stands in detection, for GetKeyStatus and `omr status`: caught up, being detected
//! now, waiting its turn (with roughly how long until it is caught up, as its worker estimates
//! it), or unassigned (no live worker leases it: nothing detects it until one does).

use omr_store::StoreError;

use super::Service;

/// A key's detection state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyState {
    /// Every message on the board is detected.
    CaughtUp,
    /// A worker is detecting it now.
    Detecting,
    /// A worker holds it and will serve it in turn.
    Waiting,
    /// No live worker holds it.
    Unassigned,
}

impl KeyState {
    /// The stable name on the wire: `caught_up`, `detecting`, `waiting`, `unassigned`.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyState::CaughtUp => "caught_up",
            KeyState::Detecting => "detecting",
            KeyState::Waiting => "waiting",
            KeyState::Unassigned => "unassigned",
        }
    }
}

/// `key_id`'s state with its cursor at `cursor` and the board head at `head`, and, when its
/// worker estimated it, the seconds until it is caught up.
pub async fn key_state(
    svc: &Service,
    key_id: &str,
    cursor: u64,
    head: u64,
) -> Result<(KeyState, Option<u64>), StoreError> {
    if cursor >= head {
        return Ok((KeyState::CaughtUp, None));
    }
    if !svc.store.key_is_leased(key_id).await? {
        return Ok((KeyState::Unassigned, None));
    }
    let now = chrono::Utc::now().timestamp_millis();
    let fresh = (svc.config.lease_secs.max(1) * 1000) as i64;
    Ok(match svc.store.key_schedule(key_id).await? {
        Some(s) if now - s.updated_ms <= fresh => {
            let eta = s.eta_ms.map(|t| ((t - now).max(0) as u64).div_ceil(1000));
            let st = if s.state == "detecting" {
                KeyState::Detecting
            } else {
                KeyState::Waiting
            };
            (st, eta)
        }
        _ => (KeyState::Waiting, None),
    })
}

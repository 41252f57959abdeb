//! The key registry: a registration is admitted from its header before any key byte is read
//! ([`admit`]: the parameters — [`check_header`], which the decoder fuzz tests call as omrd
//! does —, the invite code when one is needed, room under `max_keys` and above retention), then
//! the whole key is validated by the scheme and stored with its token in one transaction
//! ([`register`]); [`delete`] removes a key. [`upload`] runs a registration as both transports
//! do (a permit, the deadline, the outcomes counted), and [`KeyBytes`] takes the key's bytes as
//! they arrive; the upload's framing is the transport's (a gRPC stream, an HTTP body).

use std::future::Future;
use std::time::Duration;

use omr_api::{ErrorCode, StartAt};
use omr_proto::v1::registration_header::Start;
use omr_proto::v1::RegistrationHeader;
use omr_store::{NewKey, StoreError};

use super::Service;
use crate::config::Registration;
use crate::error::ServiceError;
use crate::set::Set;

/// A stored registration: what the recipient is told once.
#[derive(Debug)]
pub struct Registered {
    pub key_id: String,
    pub access_token: String,
    pub start_index: u64,
}

/// Count a registration's outcome (`registered`, `refused`, `invalid`, `busy`, `timeout`).
pub fn count(svc: &Service, outcome: &str) {
    (svc.metrics.registrations)
        .with_label_values(&[outcome])
        .inc();
}

/// A registration as either transport runs it: one of the `max_concurrent_uploads` permits
/// (none free: `busy`, at once), then `receive` (the header admitted with [`admit`], then the
/// key's bytes) within `key_upload_timeout_secs`, then [`register`]. Refusals and timeouts are
/// counted; nothing is stored for them.
pub async fn upload<E: From<ServiceError>>(
    svc: &Service,
    receive: impl Future<Output = Result<(RegistrationHeader, Option<[u8; 32]>, Vec<u8>), E>>,
) -> Result<Registered, E> {
    let _permit = svc.uploads.clone().try_acquire_owned().map_err(|_| {
        count(svc, "busy");
        ServiceError::new(
            ErrorCode::Busy,
            "too many key uploads in progress; retry shortly",
        )
    })?;
    let deadline = Duration::from_secs(svc.config.key_upload_timeout_secs);
    let (header, invite_hash, key) = match tokio::time::timeout(deadline, receive).await {
        Ok(Ok(received)) => received,
        Ok(Err(e)) => {
            count(svc, "refused");
            return Err(e);
        }
        Err(_) => {
            count(svc, "timeout");
            return Err(ServiceError::new(
                ErrorCode::UploadTimeout,
                format!("key upload took longer than {} s", deadline.as_secs()),
            )
            .into());
        }
    };
    Ok(register(svc, &header, invite_hash, key).await?)
}

/// A key's bytes as an upload delivers them: at most the header's `total_bytes`, and all of
/// them by the upload's end.
#[derive(Debug)]
pub struct KeyBytes {
    total: usize,
    key: Vec<u8>,
}

impl KeyBytes {
    /// For the admitted header `h` (its `total_bytes` is within `max_key_bytes`).
    pub fn new(h: &RegistrationHeader) -> KeyBytes {
        let total = h.total_bytes as usize;
        KeyBytes {
            total,
            key: Vec::with_capacity(total),
        }
    }

    /// The next `chunk`; `key_too_large` when the upload carries more than declared.
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), ServiceError> {
        if self.key.len() + chunk.len() > self.total {
            return Err(ServiceError::new(
                ErrorCode::KeyTooLarge,
                format!(
                    "the upload carries more than the declared {} bytes",
                    self.total
                ),
            ));
        }
        self.key.extend_from_slice(chunk);
        Ok(())
    }

    /// The key, once the upload ended; `malformed_upload` when it is short of the declared size.
    pub fn finish(self) -> Result<Vec<u8>, ServiceError> {
        if self.key.len() != self.total {
            return Err(ServiceError::new(
                ErrorCode::MalformedUpload,
                format!(
                    "truncated upload: received {} of {} bytes",
                    self.key.len(),
                    self.total
                ),
            ));
        }
        Ok(self.key)
    }
}

/// Admit a registration from its header alone: the parameters, the invite code when
/// `registration = "invite"` (its hash, which the insert takes a use of), and room for one more
/// key. Nothing is stored.
pub async fn admit(
    svc: &Service,
    h: &RegistrationHeader,
) -> Result<Option<[u8; 32]>, ServiceError> {
    check_header(h, svc.set, svc.config.max_key_bytes)?;
    // An open server ignores any code.
    let invite = match svc.config.registration {
        Registration::Open => None,
        Registration::Invite => Some(super::invites::admit(&svc.store, &h.invite_code).await?),
    };
    check_room(svc, h).await?;
    Ok(invite)
}

/// Refuse a registration when `max_keys` keys are registered already, or when it starts below
/// the oldest board message retention kept (the insert checks both again, atomically, for
/// uploads racing), or past the board head (the head only grows, so a start on the board now
/// stays on it).
async fn check_room(svc: &Service, h: &RegistrationHeader) -> Result<(), ServiceError> {
    let store = &svc.store;
    let keys = (store.key_count().await).map_err(|e| ServiceError::internal("counting keys", e))?;
    let cap = svc.config.max_keys;
    if keys >= cap {
        return Err(ServiceError::too_many_keys(keys, cap));
    }
    let Some(Start::StartIndex(start)) = h.start else {
        return Ok(());
    };
    let oldest = (store.oldest_retained_index().await)
        .map_err(|e| ServiceError::internal("reading the oldest retained index", e))?;
    if start < oldest {
        return Err(ServiceError::start_index_retired(start, oldest));
    }
    let head = svc.board_head().await?;
    if start > head {
        return Err(ServiceError::start_index_ahead(start, head));
    }
    Ok(())
}

/// Validate the whole `key` under the scheme (off the async runtime) against its admitted
/// header, then store it with a new token (and the invite use, when `invite_hash`), counting the
/// outcome. Nothing is stored when anything is refused.
pub async fn register(
    svc: &Service,
    header: &RegistrationHeader,
    invite_hash: Option<[u8; 32]>,
    key: Vec<u8>,
) -> Result<Registered, ServiceError> {
    let limit = svc.config.max_key_bytes as usize;
    let scheme = svc.scheme.clone();
    let (key, accepted) = tokio::task::spawn_blocking(move || {
        let r = scheme.accept_key(&key, limit);
        (key, r)
    })
    .await
    .map_err(|e| ServiceError::internal("decoding a key", e))?;
    let accepted = accepted.map_err(|e| {
        count(svc, "invalid");
        ServiceError::new(
            ErrorCode::InvalidKey,
            format!("the detection key does not decode: {e}"),
        )
    })?;
    let (param_set, kbar) = (accepted.param_set, accepted.kbar);
    if param_set != header.param_set || kbar != header.kbar as usize {
        count(svc, "invalid");
        return Err(ServiceError::new(
            ErrorCode::InvalidKey,
            format!(
                "the key is for {param_set} with k̄ = {kbar}, the header says {} with k̄ = {}",
                header.param_set, header.kbar
            ),
        ));
    }
    let (access_token, token_hash) = super::auth::new_token();
    let key_id = uuid::Uuid::new_v4().to_string();
    let start = header.start.map_or(StartAt::Now, StartAt::from);
    let new = NewKey {
        key_id: key_id.clone(),
        param_set: svc.set.name(),
        kbar: header.kbar,
        start,
        token_hash,
        key: &key,
        digest_key: &accepted.digest_key,
        invite_hash,
    };
    let start_index =
        (svc.store.insert_key_within(&new, svc.config.max_keys).await).map_err(|e| {
            let refusal = match e {
                StoreError::KeyLimit { keys, cap } => ServiceError::too_many_keys(keys, cap),
                StoreError::StartRetired { start, oldest } => {
                    ServiceError::start_index_retired(start, oldest)
                }
                StoreError::InviteRefused(r) => ServiceError::invite_refused(r),
                e => return ServiceError::internal("storing a key", e),
            };
            count(svc, "refused");
            refusal
        })?;
    count(svc, "registered");
    svc.roster.changed();
    let invited = invite_hash.is_some();
    tracing::info!(%key_id, bytes = key.len(), start_index, invited, "detection key registered");
    Ok(Registered {
        key_id,
        access_token,
        start_index,
    })
}

/// Delete `key_id` for a caller presenting `authorization`.
pub async fn delete(
    svc: &Service,
    key_id: &str,
    authorization: Option<&str>,
) -> Result<(), ServiceError> {
    super::auth::authorize(&svc.store, key_id, authorization).await?;
    (svc.store.delete_key(key_id).await)
        .map_err(|e| ServiceError::internal("deleting a key", e))?;
    svc.digests.forget(key_id);
    svc.roster.changed();
    tracing::info!(%key_id, "detection key deleted");
    Ok(())
}

/// Check a registration header against a server running `server_params` that accepts keys of
/// at most `max_key_bytes`, before any key byte is read. Public for the decoder fuzz tests.
pub fn check_header(
    h: &RegistrationHeader,
    server: Set,
    max_key_bytes: u64,
) -> Result<(), ServiceError> {
    let malformed = |m: String| ServiceError::new(ErrorCode::MalformedUpload, m);
    let mismatch = |m: String| ServiceError::new(ErrorCode::ParamSetMismatch, m);
    let set = Set::by_name(&h.param_set)
        .ok_or_else(|| mismatch(format!("unknown parameter set {:?}", h.param_set)))?;
    if set != server {
        let (name, ours) = (set.name(), server.name());
        return Err(mismatch(format!(
            "parameter set {name} is not this server's ({ours})"
        )));
    }
    if h.kbar == 0 || h.kbar as usize > set.max_kbar() {
        return Err(malformed(format!(
            "k̄ = {} is out of range 1..={}",
            h.kbar,
            set.max_kbar()
        )));
    }
    if h.total_bytes == 0 {
        return Err(malformed("total_bytes must be the key's size".into()));
    }
    if h.total_bytes > max_key_bytes {
        return Err(ServiceError::new(
            ErrorCode::KeyTooLarge,
            format!(
                "key of {} bytes exceeds the limit of {} bytes",
                h.total_bytes, max_key_bytes
            ),
        ));
    }
    if h.start.is_none() {
        return Err(malformed(
            "header must say where to start: from_now or start_index".into(),
        ));
    }
    Ok(())
}

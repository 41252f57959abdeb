//! The key registry over gRPC: registering a detection key (a client stream), its status
//! ([`KeyStatus`], the wire type of `omr-api`), deleting it.

use std::sync::Arc;

pub use omr_api::http::KeyStatus;
use omr_api::StartAt;
use omr_proto::v1::{DeleteDetectionKeyRequest, GetKeyStatusRequest, GetParamsRequest};

use super::{Client, Progress};
use crate::error::{Api, Error, Result};
use crate::keydir::Registration;

impl Client {
    /// Upload an encoded detection key (gRPC client stream, 1 MiB chunks). `progress` sees the
    /// bytes handed to the transport. A failed upload stores nothing on the server, so a
    /// transient failure restarts the upload from the beginning (up to `retries` times).
    /// A server with `registration = "invite"` refuses it: use
    /// [`Client::register_with_invite`].
    pub async fn register(
        &self,
        detection_key: &[u8],
        start: StartAt,
        progress: Option<Progress>,
    ) -> Result<Registration> {
        self.register_with_invite(detection_key, start, None, progress)
            .await
    }

    /// [`Client::register`] with an invite code from the server's operator in the
    /// registration header (needed when the server runs with `registration = "invite"`; an
    /// open server ignores it). The server decides from the header, before any key byte is
    /// sent; a refused or failed registration takes no use of the code. A malformed code is
    /// refused here, before anything is sent.
    pub async fn register_with_invite(
        &self,
        detection_key: &[u8],
        start: StartAt,
        invite_code: Option<&str>,
        progress: Option<Progress>,
    ) -> Result<Registration> {
        let invite_code: Option<Arc<str>> = match invite_code {
            Some(c) => Some(
                omr_api::invite::normalize_invite_code(c)
                    .map_err(|e| Error::BadInvite(e.to_string()))?
                    .into(),
            ),
            None => None,
        };
        let (param_set, kbar) = crate::scheme::detection_key_set(detection_key)?;
        let bytes: Arc<[u8]> = Arc::from(detection_key);
        let total = bytes.len() as u64;
        let start = start.into();
        let r = self
            .retrying(|| {
                let bytes = bytes.clone();
                let progress = progress.clone();
                let invite_code = invite_code.clone();
                async move {
                    use omr_proto::v1::register_detection_key_request::Part;
                    let mut sent = 0u64;
                    let invite = invite_code.as_deref();
                    let stream = omr_proto::registration_stream(
                        param_set,
                        kbar as u32,
                        start,
                        invite,
                        bytes,
                    )
                    .inspect(move |req| {
                        if let Some(Part::Chunk(c)) = &req.part {
                            sent += c.len() as u64;
                            if let Some(p) = &progress {
                                p(sent, total);
                            }
                        }
                    });
                    let mut request = tonic::Request::new(tokio_stream::iter(stream));
                    request.set_timeout(self.options.upload_timeout);
                    let mut c = self.grpc().await?;
                    c.register_detection_key(request)
                        .await
                        .map(|r| r.into_inner())
                        .map_err(|s| self.registration_error(s))
                }
            })
            .await?;
        Ok(Registration {
            key_id: r.key_id,
            access_token: r.access_token,
            start_index: r.start_index,
            param_set: param_set.to_string(),
            kbar,
            grpc_url: self.grpc_url.clone(),
            http_url: Some(self.http_url.clone()),
            registered_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        })
    }

    /// A refused registration: an invite problem (UNAUTHENTICATED / PERMISSION_DENIED: there
    /// is no key yet whose token could be wrong) is [`Error::NotAdmitted`]; the rest as for any
    /// call.
    fn registration_error(&self, s: tonic::Status) -> Error {
        match s.code() {
            tonic::Code::Unauthenticated | tonic::Code::PermissionDenied => Error::NotAdmitted {
                api: Api::Grpc,
                url: self.grpc_url.clone(),
                message: s.message().to_string(),
            },
            _ => self.grpc_error(s, ""),
        }
    }

    /// Where detection stands for a registered key.
    pub async fn key_status(&self, reg: &Registration) -> Result<KeyStatus> {
        let s = self
            .retrying(|| async {
                let mut c = self.grpc().await?;
                let req = self.authorized(
                    reg,
                    GetKeyStatusRequest {
                        key_id: reg.key_id.clone(),
                    },
                )?;
                c.get_key_status(req)
                    .await
                    .map(|r| r.into_inner())
                    .map_err(|s| self.grpc_error(s, &reg.key_id))
            })
            .await?;
        Ok(s.into())
    }

    /// The server's parameter set over gRPC (a cheap check that the gRPC listener answers).
    pub async fn grpc_params(&self) -> Result<String> {
        self.retrying(|| async {
            let mut c = self.grpc().await?;
            c.get_params(GetParamsRequest {})
                .await
                .map(|r| r.into_inner().param_set)
                .map_err(|s| self.grpc_error(s, ""))
        })
        .await
    }

    /// Delete a registered key and everything the server derived from it.
    pub async fn delete_key(&self, reg: &Registration) -> Result<()> {
        let mut c = self.grpc().await?;
        let req = self.authorized(
            reg,
            DeleteDetectionKeyRequest {
                key_id: reg.key_id.clone(),
            },
        )?;
        c.delete_detection_key(req)
            .await
            .map(|_| ())
            .map_err(|s| self.grpc_error(s, &reg.key_id))
    }
}

//! [`Client`]: one omrd, for senders (send a sealed payload and an attachment to an address)
//! and recipients (register a key directory's detection key, its status, retrieve and follow
//! its messages, delete it). Every call is async and runs on the SDK's runtime
//! (`runtime.rs`); cancelling it aborts it.

use std::sync::Arc;
use std::time::Duration;

use omr_client::{ClientOptions, StartAt};

use crate::error::{OmrError, Result};
use crate::inbox::{self, Inbox, InboxListener};
use crate::keys::{Address, KeyDirectory, Registration};
use crate::runtime;

/// Where omrd is and how to talk to it. Only the URLs are required; the rest default to the
/// SDK's (connect 5 s, request 60 s, upload 600 s, 3 retries, postage on every core, a light
/// recipient up to 256 messages behind reads them from the board itself).
#[derive(Debug, Clone, uniffi::Record)]
pub struct ClientConfig {
    /// omrd's HTTP API, e.g. `http://127.0.0.1:8080` or `https://omr.example`.
    pub http_url: String,
    /// omrd's gRPC API (key registry), e.g. `http://127.0.0.1:50051`.
    pub grpc_url: String,
    /// For `https://` URLs: CA certificates (PEM) to trust instead of the system's, e.g. a
    /// private or self-signed server certificate.
    #[uniffi(default)]
    pub ca_cert_pem: Option<String>,
    #[uniffi(default)]
    pub connect_timeout_ms: Option<u64>,
    /// One ordinary request (not a key upload).
    #[uniffi(default)]
    pub request_timeout_ms: Option<u64>,
    /// A whole detection-key upload.
    #[uniffi(default)]
    pub upload_timeout_ms: Option<u64>,
    /// Extra attempts for calls that are safe to repeat, after a transient failure.
    #[uniffi(default)]
    pub retries: Option<u32>,
    /// Threads that search for a postage stamp when the server asks for one (0: every core).
    #[uniffi(default)]
    pub postage_threads: Option<u32>,
    /// omr-light-v1: a retrieval at most this many board messages behind reads them from the
    /// board and checks their clues itself instead of a digest and PIR (0: never).
    #[uniffi(default)]
    pub tail_messages: Option<u64>,
}

impl ClientConfig {
    fn options(&self) -> ClientOptions {
        let d = ClientOptions::default();
        let ms = |v: Option<u64>, d: Duration| v.map_or(d, Duration::from_millis);
        ClientOptions {
            connect_timeout: ms(self.connect_timeout_ms, d.connect_timeout),
            request_timeout: ms(self.request_timeout_ms, d.request_timeout),
            upload_timeout: ms(self.upload_timeout_ms, d.upload_timeout),
            retries: self.retries.unwrap_or(d.retries),
            backoff: d.backoff,
            postage_threads: self
                .postage_threads
                .map_or(d.postage_threads, |t| t as usize),
            ca_cert: self.ca_cert_pem.as_ref().map(|p| p.as_bytes().to_vec()),
            tail_messages: self.tail_messages.unwrap_or(d.tail_messages),
        }
    }
}

/// Called as a key uploads: `(bytes sent, bytes in all)`.
#[uniffi::export(callback_interface)]
pub trait UploadProgress: Send + Sync {
    fn on_progress(&self, sent: u64, total: u64);
}

/// Where detection stands for a registered key.
#[derive(Debug, Clone, uniffi::Record)]
pub struct KeyStatus {
    pub key_id: String,
    pub param_set: String,
    pub kbar: u32,
    pub start_index: u64,
    /// Every board message before this index has been detected for the key.
    pub cursor: u64,
    pub board_head: u64,
    /// Board messages not detected for the key yet.
    pub lag: u64,
    pub key_bytes: u64,
    pub registered_at: String,
    /// `caught_up`, `detecting`, `waiting` or `unassigned`.
    pub state: String,
    /// When `detecting` or `waiting`: about how many seconds until caught up.
    pub eta_secs: Option<u64>,
}

impl From<omr_client::KeyStatus> for KeyStatus {
    fn from(s: omr_client::KeyStatus) -> Self {
        KeyStatus {
            key_id: s.key_id,
            param_set: s.param_set,
            kbar: s.kbar,
            start_index: s.start_index,
            cursor: s.cursor,
            board_head: s.board_head,
            lag: s.lag,
            key_bytes: s.key_bytes,
            registered_at: s.registered_at,
            state: s.state,
            eta_secs: s.eta_secs,
        }
    }
}

/// A message sealed, with its clue and stamp, not posted yet ([`Client::prepare`]).
#[derive(Debug, uniffi::Object)]
pub struct PreparedMessage {
    inner: omr_client::Prepared,
}

/// A client of one omrd. Cheap to share between threads and tasks.
#[derive(Debug, uniffi::Object)]
pub struct Client {
    inner: omr_client::Client,
}

#[uniffi::export]
impl Client {
    /// A client of the omrd at `config`'s URLs; nothing is sent until a call.
    ///
    /// ```python
    /// client = omr.Client(omr.ClientConfig(
    ///     http_url="https://omr.example", grpc_url="https://omr.example:50051",
    ///     ca_cert_pem=open("ca.pem").read(), retries=5))
    /// ```
    #[uniffi::constructor]
    pub fn new(config: ClientConfig) -> Result<Arc<Self>> {
        let inner =
            omr_client::Client::with_options(&config.http_url, &config.grpc_url, config.options())?;
        Ok(Arc::new(Client { inner }))
    }

    /// Seal `payload` (and `attachment`, if given) to the recipient whose address is `to`, make
    /// its clue, stamp it when the server asks for postage, and post it. Returns its board
    /// index. A refused post stores nothing.
    ///
    /// ```python
    /// index = await client.send(address_text, b"paid 5", attachment=open("receipt.pdf", "rb").read())
    /// ```
    #[uniffi::method(default(attachment = None))]
    pub async fn send(
        &self,
        to: String,
        payload: Vec<u8>,
        attachment: Option<Vec<u8>>,
    ) -> Result<u64> {
        let address = Address::parse(to)?;
        let client = self.inner.clone();
        runtime::run(async move {
            let to = &address.inner;
            let sent = match attachment {
                Some(a) => client.send_with_attachment(to, &payload, &a, None).await?,
                None => client.send_to(to, &payload, None).await?,
            };
            Ok(sent.index)
        })
        .await
    }

    /// Seal `payload` (and `attachment`) to the address `to`, make its clue and stamp it as
    /// the server asks now, without posting it: [`Client::post`] posts it, now or later (a
    /// wallet offline, a queue), and again after an answer that was lost.
    #[uniffi::method(default(attachment = None))]
    pub async fn prepare(
        &self,
        to: String,
        payload: Vec<u8>,
        attachment: Option<Vec<u8>>,
    ) -> Result<Arc<PreparedMessage>> {
        let address = Address::parse(to)?;
        let client = self.inner.clone();
        runtime::run(async move {
            let to = &address.inner;
            let inner = (client.prepare_to(to, &payload, attachment.as_deref(), None)).await?;
            Ok(Arc::new(PreparedMessage { inner }))
        })
        .await
    }

    /// Post a message made by [`Client::prepare`]; its board index. A message already on the
    /// board (posted before) raises `OmrError.Refused` with code `duplicate_message`, its
    /// detail naming the index it has: the board holds it once.
    ///
    /// ```python
    /// message = await client.prepare(address_text, b"later")   # offline: sealed and stamped
    /// try:
    ///     index = await client.post(message)
    /// except omr.OmrError.Refused as e:
    ///     if e.code != "duplicate_message":                    # posted before: fine
    ///         raise
    /// ```
    pub async fn post(&self, message: Arc<PreparedMessage>) -> Result<u64> {
        let client = self.inner.clone();
        runtime::run(async move { Ok(client.post_prepared(&message.inner).await?) }).await
    }

    /// Upload `keys`' detection key (omr-v1 ≈ 107 MB, omr-light-v1 ≈ 32.5 MB) and save the
    /// registration in the key directory, as `omr register` does. `invite`: a code from the
    /// server's operator, for a server that registers keys only by invitation. `start_index`:
    /// detect from this board index instead of the board head. A directory already registered
    /// is refused (`already_registered`) unless `force`.
    ///
    /// ```python
    /// class Bar(omr.UploadProgress):
    ///     def on_progress(self, sent, total): print(f"{sent * 100 // total} %")
    /// reg = await client.register(keys, invite="0f1e…", progress=Bar())
    /// ```
    #[uniffi::method(default(invite = None, start_index = None, progress = None, force = false))]
    pub async fn register(
        &self,
        keys: Arc<KeyDirectory>,
        invite: Option<String>,
        start_index: Option<u64>,
        progress: Option<Box<dyn UploadProgress>>,
        force: bool,
    ) -> Result<Registration> {
        let client = self.inner.clone();
        runtime::run_pinned(move || async move {
            if let Some(old) = keys.dir.registration()? {
                if !force {
                    return Err(OmrError::local(
                        "already_registered",
                        format!(
                            "{} is already registered as key {} at {}; delete it first, or pass force",
                            keys.dir.path().display(),
                            old.key_id,
                            old.grpc_url
                        ),
                    ));
                }
            }
            let key = keys.dir.detection_key_bytes()?;
            let start = start_index.map_or(StartAt::Now, StartAt::Index);
            let progress: Option<omr_client::Progress> = progress.map(|p| {
                let p: Arc<dyn UploadProgress> = Arc::from(p);
                Arc::new(move |sent, total| p.on_progress(sent, total)) as omr_client::Progress
            });
            let reg = client
                .register_with_invite(&key, start, invite.as_deref(), progress)
                .await?;
            keys.dir.save_registration(&reg)?;
            Ok(Registration::from(&reg))
        })
        .await
    }

    /// Where detection stands for `keys`' registered key.
    pub async fn status(&self, keys: Arc<KeyDirectory>) -> Result<KeyStatus> {
        let client = self.inner.clone();
        runtime::run(async move {
            let reg = keys.require_registration()?;
            Ok(client.key_status(&reg).await?.into())
        })
        .await
    }

    /// What is new for `keys` since the last acknowledged retrieval: the messages detected for
    /// it, their payloads opened, and the attachments got this call (with `fetch_attachments`,
    /// one per closed epoch by PIR; the rest on later calls). The call changes nothing in the
    /// key directory: once the messages are kept, [`KeyDirectory::acknowledge`] the inbox, and
    /// the next retrieval starts after them. Until then, or when the call fails or is
    /// cancelled, the next retrieval returns the same messages (docs/bindings.md, "Exactly
    /// once").
    ///
    /// ```python
    /// inbox = await client.retrieve(keys)
    /// for m in inbox.messages:
    ///     print(m.index, m.payload)
    /// for a in inbox.attachments:
    ///     if a.data is not None:
    ///         open(f"{a.index}.bin", "wb").write(a.data)
    /// keys.acknowledge(inbox)
    /// ```
    #[uniffi::method(default(fetch_attachments = true))]
    pub async fn retrieve(
        &self,
        keys: Arc<KeyDirectory>,
        fetch_attachments: bool,
    ) -> Result<Inbox> {
        let client = self.inner.clone();
        runtime::run(async move { inbox::retrieve(&client, &keys, fetch_attachments).await }).await
    }

    /// Follow `keys`: wait for new messages and hand each retrieval that found something (new
    /// messages, attachments, payloads still pending) to `listener`, until it returns false,
    /// raises, or the call is cancelled. Each inbox is acknowledged when `on_inbox` returns;
    /// one it raised on (or was cancelled in) is not, and comes again on the next retrieval.
    /// Failures worth retrying (the server restarting, out of reach) are retried every 5 s;
    /// others end the call.
    ///
    /// ```python
    /// class Printer(omr.InboxListener):
    ///     def on_inbox(self, inbox):
    ///         for m in inbox.messages: print(m.index, m.payload)
    ///         return True                 # keep following
    /// task = asyncio.create_task(client.follow(keys, Printer()))
    /// ...
    /// task.cancel()                       # stops it
    /// # or: async for inbox in omr.follow(client, keys): ...
    /// ```
    pub async fn follow(
        &self,
        keys: Arc<KeyDirectory>,
        listener: Box<dyn InboxListener>,
    ) -> Result<()> {
        let client = self.inner.clone();
        runtime::run(async move { inbox::follow(&client, &keys, listener).await }).await
    }

    /// Delete `keys`' key from the server and forget its registration (a key the server no
    /// longer has is forgotten too).
    pub async fn delete(&self, keys: Arc<KeyDirectory>) -> Result<()> {
        let client = self.inner.clone();
        runtime::run(async move {
            let reg = keys.require_registration()?;
            match client.delete_key(&reg).await {
                Ok(()) | Err(omr_client::Error::UnknownKey { .. }) => {}
                Err(e) => return Err(e.into()),
            }
            keys.dir.remove_registration()?;
            Ok(())
        })
        .await
    }
}

//! omr-ffi: the client SDK (`omr-client`) for wallets outside Rust, through UniFFI. One
//! library behind the Python package (`bindings/python`, built with maturin) and the Kotlin and
//! Swift bindings (`bindings/generate.sh`); docs/bindings.md says how to build each.
//!
//! A thin layer: every step of the scheme and the protocol is the SDK's (keys, addresses,
//! sealing, postage, registration, digests, PIR, attachments, following); this maps its types
//! to records and objects a foreign language can hold, runs its calls on one runtime of its own
//! (`runtime.rs`), and turns its errors into one exception family ([`OmrError`]).
//!
//! - [`generate_keys`] / [`KeyDirectory`]: a recipient's key directory, the files `omr
//!   keygen` writes (either reads the other's); [`Address`]: an address as text and back.
//! - [`Client`]: `send` (sealed, with an attachment, stamped when asked; or `prepare` now and
//!   `post` later), `register` (with an
//!   invite and upload progress), `status`, `retrieve` ([`Inbox`]), `follow`
//!   ([`InboxListener`]), `delete`.

mod client;
mod error;
mod inbox;
mod keys;
mod runtime;

pub use client::{Client, ClientConfig, KeyStatus, PreparedMessage, UploadProgress};
pub use error::OmrError;
pub use inbox::{Attachment, Inbox, InboxListener, ReceivedMessage};
pub use keys::{generate_keys, Address, KeyDirectory, Registration};

uniffi::setup_scaffolding!("omr");

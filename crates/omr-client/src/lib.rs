//! omr-client: the Rust SDK for `omrd`, the OMR detector service (the `omr` command line in
//! `omr-cli` is built on it).
//!
//! - [`Client`] talks to one omrd: [`Client::send`] posts a message to a recipient's clue key
//!   (HTTP), [`Client::register`] uploads a detection key (gRPC client stream),
//!   [`Client::key_status`] and [`Client::delete_key`] manage it, and [`Client::retrieve`]
//!   downloads what is new in the key's digest, decodes it with the secret key, splits ranges
//!   that overflow k̄ and drops messages already seen. [`Client::wait_for_progress`] (an HTTP
//!   long-poll) and [`Client::watch_status`] (a gRPC stream) wait for the server to detect
//!   more; while they wait the recipient counts as online and its key is scheduled first.
//! - When the server asks for postage (`postage_bits` in `GET /v1/params`), [`Client::send`]
//!   first finds a stamp for the message on every core ([`postage::solve`]);
//!   [`Client::send_stamped`] also reports what it cost.
//! - Payloads are sealed to the recipient ([`seal`], HPKE): [`Client::send_to`] takes the
//!   recipient's [`Address`] (clue key and seal public key, one line of text) and seals before
//!   posting; [`Retrieval::open`] opens what retrieval decoded with
//!   the recipient's [`SealKey`]. [`Client::send`] posts a payload as it is (readable by anyone).
//! - Both detection schemes: TFHE (`omr-v1`, `omr-v2`) and the linear `omr-light-v1`
//!   ([`scheme`]). Keys, addresses and digests say their scheme in their headers; on
//!   omr-light-v1 [`Client::retrieve`] fetches the payloads by PIR, a fixed
//!   [`LIGHT_QUERIES_PER_EPOCH`] queries from every closed epoch.
//! - [`mailbox`] opens what a retrieval found and fetches the attachments its letters name;
//!   [`Client::wait_for_news`] is a follower's wait between retrievals.
//! - [`KeyDir`] keeps a recipient's keys, address, registration and retrieval state in a
//!   directory, the secret parts with mode 0600.
//! - Errors are one enum, [`Error`], naming the server or file and what to do;
//!   [`Error::is_transient`] tells which the client already retried (with exponential backoff,
//!   for calls that are safe to repeat).
//!
//! # Example
//!
//! A recipient registers, a sender posts, the recipient retrieves. (Here the test harness starts
//! a real omrd on ephemeral ports with the fast insecure test parameters; normally it runs
//! elsewhere with `omr-v1`.)
//!
//! ```
//! use omr_client::{Client, DigestState, StartAt};
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let server = omr_test_support::TestServer::start_sqlite().await;
//! # let (http, grpc) = (server.url(""), server.grpc_url());
//! let client = Client::new(&http, &grpc)?;
//!
//! // The recipient: keys for at most 4 messages per digest, and a registered detection key.
//! let keys = omr_core::keygen(&omr_core::INSECURE_TEST, 4)?;
//! let reg = client
//!     .register(&keys.detection_key.to_bytes(), StartAt::Now, None)
//!     .await?;
//!
//! // A sender, who knows only the recipient's public clue key.
//! let index = client.send(&keys.clue_key, b"hello").await?;
//!
//! // The recipient, later: wait until the server has detected the message, then retrieve.
//! let timeout = std::time::Duration::from_secs(30);
//! while client.wait_for_progress(&reg, index, timeout).await?.cursor <= index {}
//! let mut state = DigestState::new(&reg);
//! let got = client.retrieve(&keys.secret, &reg, &mut state, None).await?;
//! assert_eq!(got.messages.len(), 1);
//! assert_eq!((got.messages[0].index, &got.messages[0].payload[..]), (index, &b"hello"[..]));
//!
//! // Asking again returns nothing new.
//! let again = client.retrieve(&keys.secret, &reg, &mut state, None).await?;
//! assert!(again.messages.is_empty());
//! # Ok(())
//! # }
//! ```

pub mod address;
mod client;
mod error;
pub mod keydir;
pub mod mailbox;
pub mod postage;
mod retrieve;
pub mod scheme;
pub mod seal;

pub use address::Address;
pub use client::{
    Client, ClientOptions, FetchedDigest, Follow, KeyStatus, PirFetch, Prepared, Progress, Sent,
    ServerParams, TailRead, DEFAULT_TAIL_MESSAGES, FOLLOW_RETRY, LIGHT_FOLLOW_POLL,
    LIGHT_QUERIES_PER_EPOCH,
};
pub use error::{Api, Error, Result};
pub use keydir::{DigestState, KeyDir, PendingAttachment, Registration};
pub use omr_api::invite::normalize_invite_code;
pub use omr_api::param_sets;
pub use omr_api::StartAt;
pub use postage::Stamp;
pub use retrieve::{split_point, Received, Retrieval};
pub use scheme::{ClueKey, Digest, Keys, Secret, SecretKey};
pub use seal::{AttachmentRef, Letter, SealKey, SealPublicKey};

//! What the workspace's tests share: omrd started in-process ([`TestServer`]) or as the
//! `omrd` executable ([`Omrd`]) on a fresh store per test, omrd's HTTP and gRPC APIs called
//! directly ([`RawClient`]) with fresh keys ([`insecure_keys`]), polling that names what it waits for ([`wait_until`]), a seeded
//! random generator whose seed is printed ([`seeded_rng`]), and one test per backend from one
//! check ([`test_each_backend!`]).
//!
//! A fresh database per test comes from `omr_store::testing::TestDb` (re-exported here):
//! SQLite in a temporary directory, or a new PostgreSQL database on the server at
//! `OMR_TEST_POSTGRES_URL`, dropped afterwards; without that variable a PostgreSQL test prints
//! a `SKIPPED` line and passes.
//!
//! ```no_run
//! use omr_test_support::{insecure_keys, TestDb, TestServer};
//! use omr_proto::v1::registration_header::Start;
//!
//! async fn a_recipient_gets_its_message(db: &TestDb) {
//!     let server = TestServer::start(db).await;
//!     let api = server.client();
//!     let me = api.register(insecure_keys(4), Start::FromNow(true)).await;
//!     let index = api.post(&me.keys.clue_key, b"hello").await;
//!     let digest = api.caught_up_digest(&me, None).await;
//!     assert_eq!(digest.messages, vec![(index, b"hello".to_vec())]);
//!     server.stop().await;
//! }
//!
//! // `a_recipient_gets_its_message_sqlite` and `a_recipient_gets_its_message_postgres`.
//! omr_test_support::test_each_backend!(a_recipient_gets_its_message);
//! # fn main() {}
//! ```

mod backends;
mod faults;
mod keys;
mod light;
pub mod measure;
mod omrd;
mod raw;
mod seed;
mod server;
mod tls;
mod wait;

pub use faults::Faults;
pub use keys::insecure_keys;
pub use light::{light_message, light_messages_to, LightRecipient};
pub use omr_store::testing::{TestDb, POSTGRES_URL_VAR};
pub use omrd::Omrd;
pub use raw::{metric_in, with_token, DecodedDigest, RawClient, Recipient};
pub use seed::{seeded_rng, SEED_VAR};
pub use server::{quick_detection, quick_light, TestServer};
pub use tls::TestCert;
pub use wait::{wait_for, wait_for_blocking, wait_until, wait_until_blocking, POLL_INTERVAL};

/// For [`test_each_backend!`], so its callers need not depend on `paste`.
#[doc(hidden)]
pub use paste as __paste;

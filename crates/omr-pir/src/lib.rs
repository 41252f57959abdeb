//! omr-pir: single-server private information retrieval of the attachments of one closed board
//! epoch, so a recipient fetches its attachment without the server learning which.
//!
//! The scheme is SimplePIR (Henzinger, Hong, Corrigan-Gibbs, Meiklejohn, Vaikuntanathan, USENIX
//! Security 2023) over plain LWE, n = 1024, q = 2^32, with three changes for large records
//! (`docs/pir/STUDY.md`): each record is cut into `chunks` columns fetched by as many queries;
//! secrets come from the error distribution, so the hint can be rounded to 20 bits; answers are
//! rounded to 16.
//!
//! - the server builds a [`Database`] of the epoch's records, computes its [`Hint`] once
//!   ([`Database::preprocess`]), serves the hint to every client and [`Database::answer`]s
//!   queries;
//! - a client downloads the hint, makes a [`Query`] for record i ([`Hint::query`]), and decodes
//!   the [`Answer`] ([`Hint::decode`]).
//!
//! No I/O, no async. Everything that crosses the network has a versioned `to_bytes`/`from_bytes`.

pub mod attachment;
mod client;
pub mod error;
pub mod gauss;
pub mod matrix;
pub mod params;
pub mod security;
mod server;
pub mod wire;

pub use client::Fetch;
pub use error::PirError;
pub use matrix::{vector_extension, Seed};
pub use params::{Params, Shape, PIR_V1};
pub use server::Database;
pub use wire::{Answer, Hint, Query};

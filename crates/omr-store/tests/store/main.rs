//! One test binary for crates/omr-store's integration tests (each file below is a
//! module), so that the heavy dependencies are linked once rather than once per file.

mod attachments;
mod board;
mod common;
mod detection;
mod invites;
mod keys;
mod leases;
mod notify;
mod presence;
mod retention;

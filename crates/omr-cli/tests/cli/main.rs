//! One test binary for crates/omr-cli's integration tests (each file below is a
//! module), so that the heavy dependencies are linked once rather than once per file.

mod attach;
mod common;
mod errors;
mod flow;
mod follow;
mod invite;
mod light;
mod postage;
mod sealed;
mod standalone;
mod tls;

//! One test binary for crates/omr-server's integration tests (each file below is a
//! module), so that the heavy dependencies are linked once rather than once per file.

mod binary;
mod board_tail;
mod connections;
mod crash;
mod examples;
mod fleet;
mod invites;
mod key_files;
mod telemetry;
mod tls;

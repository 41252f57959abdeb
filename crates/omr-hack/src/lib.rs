//! No code: the workspace's one feature set for its dependencies (see this crate's
//! `Cargo.toml`). Every member but the UniFFI generator depends on it, so building a subset of
//! the workspace (maturin builds `omr-ffi` alone, `cargo build -p` anything, an example)
//! resolves every shared dependency with the same features as the whole workspace's build, and
//! reuses its artifacts instead of compiling tfhe and the rest again.

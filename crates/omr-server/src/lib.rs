//! omrd as a library, in layers (each uses only the layers below it):
//!
//! 1. `app` — composes and serves everything ([`Application`]); the one module that sees both
//!    transports.
//! 2. `http` (axum) and `grpc` (tonic) — the transports: every handler, each a thin adapter to
//!    the service core; neither imports the other, and no other module imports axum or tonic.
//!    `state` — what both transports share ([`state::ApiState`]).
//! 3. `service` — the transport-free core: board, registry, digests, key status, parameters,
//!    invites, PIR; and beside it `worker` — detection, retention, with its own context.
//! 4. `scheme` — the seam a detection scheme plugs into (TFHE: omr-v1, omr-v2); `epochs` — how
//!    the board is cut into epochs; `error` — [`error::ServiceError`].
//! 5. Shared infrastructure: `config` (with `admin_token`, `memory`), `admission` (client
//!    addresses and rate limits), `connections` (the connection bound), `tls`, `presence`,
//!    `progress`, `board_signal`, `health`, `metrics`, `telemetry`.
//!
//! `bin/omrd.rs` is a thin `main`.

pub mod admin_token;
pub mod admission;
pub mod app;
pub mod board_signal;
pub mod config;
pub mod connections;
pub mod epochs;
pub mod error;
pub mod grpc;
pub mod health;
pub mod http;
pub mod memory;
pub mod metrics;
pub mod presence;
pub mod progress;
pub mod roster;
pub mod scheme;
pub mod service;
pub mod set;
pub mod state;
pub mod telemetry;
pub mod tls;
pub mod tokens;
pub mod worker;

pub use app::Application;
pub use config::{AdminToken, Config, LogFormat, Registration, Role};

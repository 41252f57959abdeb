//! omrd as a library, in layers: a module uses only its own layer and the ones below it, and
//! the modules that stand beside each other (`http` and `grpc`; `service` and `worker`) do not
//! use each other (`tests/tests/e2e/layers.rs` checks it):
//!
//! 7. `bin` — `bin/omrd.rs`, a thin `main`.
//! 6. `app` — composes and serves everything ([`Application`]); the one module that sees both
//!    transports.
//! 5. `http` (axum) and `grpc` (tonic) — the transports: every handler, each a thin adapter to
//!    the service core; no other module but `app` imports axum or tonic.
//! 4. `state` — what both transports share ([`state::ApiState`]).
//! 3. `service` — the transport-free core: board, ingest, registry, digests, key status,
//!    parameters, invites, the tail, the payload fetch, PIR; and beside it `worker` —
//!    detection, leases, scheduling, retention, with its own context.
//! 2. `scheme` — the seam a detection scheme plugs into (TFHE: omr-v1, omr-v2; linear:
//!    omr-light-v1; the GPU pass).
//! 1. Shared infrastructure, usable from every layer: `set` (the parameter set a server runs),
//!    `epochs` (how the board is cut into epochs), `error` ([`error::ServiceError`]), `roster`
//!    (key changes a worker cannot see in its own work), `tokens` (access tokens),
//!    `config` (with `admin_token`, `memory`), `admission` (client addresses and rate limits),
//!    `connections` (the connection bound), `tls`, `presence`, `progress`, `board_signal`,
//!    `health`, `metrics`, `telemetry`.

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

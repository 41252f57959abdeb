//! omrd as a library: configuration, telemetry, the HTTP board (axum), the gRPC key registry
//! (tonic), group commit, detection, key status and waiting for it to move (`status`,
//! `progress`), who is online (`presence`), invite codes (`invites`), admission and
//! connection bounds (`admission`, `connections`), TLS (`tls`), metrics and ordered shutdown. `bin/omrd.rs` is a thin `main`.

pub mod admin_token;
pub mod admission;
pub mod app;
pub mod auth;
pub mod config;
pub mod connections;
pub mod digests;
pub mod error;
pub mod grpc;
pub mod grpc_deadline;
pub mod grpc_header;
pub mod grpc_pir;
pub mod health;
pub mod http;
pub mod ingest;
pub mod invites;
pub mod key_state;
pub mod memory;
pub mod metrics;
pub mod pir;
pub mod presence;
pub mod progress;
pub mod state;
pub mod status;
pub mod telemetry;
pub mod tls;
pub mod worker;

pub use app::Application;
pub use config::{AdminToken, Config, LogFormat, Registration, Role};

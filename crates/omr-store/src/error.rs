//! `StoreError`: what can go wrong talking to the database.

use thiserror::Error;

use crate::InviteRefusal;

/// Store errors. `Database` carries the driver's message for logs; callers show clients a
/// generic message.
#[derive(Debug, Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("unsupported database URL {0:?}: use postgres://… or sqlite://…")]
    UnsupportedUrl(String),
    #[error("cannot create data directory {path}: {source}")]
    DataDir {
        path: String,
        source: std::io::Error,
    },
    #[error("stored data is inconsistent: {0}")]
    Corrupt(String),
    /// A registration past the cap on registered keys; nothing was stored.
    #[error("{keys} detection keys are registered, the cap is {cap}")]
    KeyLimit { keys: u64, cap: u64 },
    /// A registration starting below the oldest board message retention kept; nothing was
    /// stored.
    #[error("start index {start} is below the oldest retained board index {oldest}")]
    StartRetired { start: u64, oldest: u64 },
    /// A registration whose invite code admits none (unknown, used up or expired); nothing was
    /// stored and no use was taken.
    #[error("{0}")]
    InviteRefused(InviteRefusal),
    /// An append whose message at `position` is already on the board at `index`; nothing was
    /// stored.
    #[error("message {position} is already on the board at index {index}")]
    Duplicate { position: usize, index: u64 },
}

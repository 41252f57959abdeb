//! State shared by the HTTP and gRPC services.

use std::sync::atomic::AtomicBool;

use omr_core::ParamSet;
use omr_store::Store;

use crate::config::Config;
use crate::ingest::Ingestor;
use crate::metrics::Metrics;

/// Everything a request handler needs.
#[derive(Debug)]
pub struct AppState {
    pub config: Config,
    pub params: &'static ParamSet,
    pub store: Store,
    pub ingestor: Ingestor,
    pub metrics: Metrics,
    /// Set once migrations ran and both servers listen.
    pub ready: AtomicBool,
}

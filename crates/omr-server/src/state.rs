//! [`ApiState`]: what both transports share: the service core, who the clients are and their
//! rate limits, and readiness. HTTP-only state (the admin token) is `http::HttpState`; the
//! detection worker has a context of its own (`worker::WorkerContext`).

use std::ops::Deref;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::admission::Admission;
use crate::health::WorkerHealth;
use crate::service::Service;

/// The state both APIs' handlers read.
#[derive(Debug)]
pub struct ApiState {
    pub service: Arc<Service>,
    /// Client addresses and their rate limits.
    pub admission: Admission,
    /// Set once migrations ran and both servers listen.
    pub ready: AtomicBool,
    /// The detection worker's restarts and failing rounds, for readiness.
    pub worker_health: Arc<WorkerHealth>,
}

/// The service core's fields (`state.store`, `state.config`, …) read through the API state.
impl Deref for ApiState {
    type Target = Service;

    fn deref(&self) -> &Service {
        &self.service
    }
}

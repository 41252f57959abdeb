//! [`WorkerContext`]: what detection works with, and nothing of the request side: the store,
//! the configuration with its epoch rule, metrics, the board's wake-ups, the progress channel
//! waiting recipients listen on, the asks for open batches, health for readiness, and the job
//! hooks.

use std::fmt;
use std::sync::Arc;

use omr_store::Store;

use super::pool::Priority;
use crate::board_signal::BoardSignal;
use crate::config::Config;
use crate::epochs::Epochs;
use crate::health::WorkerHealth;
use crate::metrics::Metrics;
use crate::progress::KeyProgress;
use crate::set::Set;

/// The detection worker's (and retention's) context.
#[derive(Debug)]
pub struct WorkerContext {
    pub config: Config,
    pub set: Set,
    pub epochs: Epochs,
    pub store: Store,
    pub metrics: Metrics,
    /// Raised after every board commit, of this process or (PostgreSQL) announced by another.
    pub board_notify: Arc<BoardSignal>,
    /// Where commits move each key's cursor, for the recipients waiting on it.
    pub progress: Arc<KeyProgress>,
    /// Keys registered or deleted through this process: list them again at the next plan.
    pub roster: Arc<crate::roster::RosterChanges>,
    /// Asks for open batches made through this process (`crate::presence::Asks`).
    pub asks: Arc<crate::presence::Asks>,
    /// Restarts and failing rounds, which `/readyz` reads.
    pub worker_health: Arc<WorkerHealth>,
    /// Called before each detection job ([`NoHooks`] in omrd).
    pub hooks: Arc<dyn JobHooks>,
}

/// Called on the detection pool before each detection job of `priority` runs. omrd installs
/// [`NoHooks`]; tests install fault injection (panics, held jobs) through
/// `Application::set_job_hooks`, so that no production state carries it.
pub trait JobHooks: Send + Sync + fmt::Debug {
    fn before_job(&self, priority: Priority) {
        let _ = priority;
    }
}

/// No hooks.
#[derive(Debug, Default)]
pub struct NoHooks;

impl JobHooks for NoHooks {}

//! Group commit: concurrent submissions are queued to one writer task, which appends everything
//! waiting in one transaction and answers each submitter with its indices only after the commit.
//! Durability (fsync per commit) then costs one flush per group, not per message.

use std::sync::Arc;
use std::time::Instant;

use omr_store::{NewMessage, Store, StoreError};
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::JoinHandle;

use crate::metrics::Metrics;

struct Job {
    messages: Vec<NewMessage>,
    reply: oneshot::Sender<Result<u64, Arc<StoreError>>>,
}

/// Why a submission was not stored.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// The writer has stopped (shutdown): nothing was stored.
    #[error("the server is shutting down")]
    Closed,
    /// The transaction failed: nothing of this submission was stored. Shared by every
    /// submission of the failed group.
    #[error("storing failed: {0}")]
    Store(#[source] Arc<StoreError>),
}

/// The submitting side; clone it freely.
#[derive(Debug, Clone)]
pub struct Ingestor {
    tx: mpsc::Sender<Job>,
}

impl Ingestor {
    /// Start the writer task. It runs until every `Ingestor` clone is dropped, then finishes
    /// what is queued and exits.
    pub fn start(
        store: Store,
        metrics: Metrics,
        max_commit_messages: usize,
        notify: Arc<Notify>,
    ) -> (Ingestor, JoinHandle<()>) {
        let (tx, rx) = mpsc::channel::<Job>(4096);
        let handle = tokio::spawn(writer(store, metrics, rx, max_commit_messages, notify));
        (Ingestor { tx }, handle)
    }

    /// Append `messages` (all or nothing); returns the first index once committed.
    pub async fn submit(&self, messages: Vec<NewMessage>) -> Result<u64, IngestError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Job { messages, reply })
            .await
            .map_err(|_| IngestError::Closed)?;
        match rx.await {
            Ok(Ok(first)) => Ok(first),
            Ok(Err(e)) => Err(IngestError::Store(e)),
            Err(_) => Err(IngestError::Closed),
        }
    }
}

async fn writer(
    store: Store,
    metrics: Metrics,
    mut rx: mpsc::Receiver<Job>,
    max: usize,
    notify: Arc<Notify>,
) {
    let mut jobs: Vec<Job> = Vec::new();
    while let Some(job) = rx.recv().await {
        jobs.push(job);
        let mut count = jobs[0].messages.len();
        while count < max {
            match rx.try_recv() {
                Ok(job) => {
                    count += job.messages.len();
                    jobs.push(job);
                }
                Err(_) => break,
            }
        }
        commit(&store, &metrics, &mut jobs).await;
        // A stored permit if the worker is busy: it looks again when it is done.
        notify.notify_one();
    }
    tracing::debug!("group-commit writer stopped");
}

async fn commit(store: &Store, metrics: &Metrics, jobs: &mut Vec<Job>) {
    let all: Vec<NewMessage> = jobs
        .iter()
        .flat_map(|j| j.messages.iter().cloned())
        .collect();
    let started = Instant::now();
    let result: Result<u64, StoreError> = store.append(&all).await;
    metrics
        .commit_seconds
        .observe(started.elapsed().as_secs_f64());
    metrics.commit_messages.observe(all.len() as f64);
    match result {
        Ok(first) => {
            metrics.board_head.set((first + all.len() as u64) as i64);
            let mut next = first;
            for job in jobs.drain(..) {
                let n = job.messages.len() as u64;
                let _ = job.reply.send(Ok(next));
                next += n;
            }
        }
        Err(e) => {
            tracing::error!(error = %e, messages = all.len(), "group commit failed; nothing stored");
            let e = Arc::new(e);
            for job in jobs.drain(..) {
                let _ = job.reply.send(Err(e.clone()));
            }
        }
    }
}

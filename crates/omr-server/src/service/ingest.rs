//! Group commit: concurrent submissions are queued to one writer task, which appends everything
//! waiting in one transaction and answers each submitter with its indices only after the commit.
//! Durability (fsync per commit) then costs one flush per group, not per message.

use std::sync::Arc;
use std::time::Instant;

use omr_store::{Appended, NewMessage, Store, StoreError};
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::JoinHandle;

use crate::metrics::Metrics;

struct Job {
    messages: Vec<NewMessage>,
    reply: oneshot::Sender<Result<Appended, Arc<StoreError>>>,
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

    /// Append `messages` (all or nothing); once committed, the first index, or why nothing
    /// was appended (a message already on the board, or repeated in `messages`).
    pub async fn submit(&self, messages: Vec<NewMessage>) -> Result<Appended, IngestError> {
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
    let groups: Vec<&[NewMessage]> = jobs.iter().map(|j| j.messages.as_slice()).collect();
    let count: usize = groups.iter().map(|g| g.len()).sum();
    let started = Instant::now();
    let result = store.append_groups(&groups).await;
    metrics
        .commit_seconds
        .observe(started.elapsed().as_secs_f64());
    metrics.commit_messages.observe(count as f64);
    match result {
        Ok(outcomes) => {
            let head = jobs
                .iter()
                .zip(&outcomes)
                .fold(None, |head, (job, o)| match o {
                    Appended::Stored { first } => Some(first + job.messages.len() as u64),
                    _ => head,
                });
            if let Some(head) = head {
                metrics.board_head.set(head as i64);
            }
            for (job, outcome) in jobs.drain(..).zip(outcomes) {
                let _ = job.reply.send(Ok(outcome));
            }
        }
        Err(e) => {
            tracing::error!(error = %e, messages = count, "group commit failed; nothing stored");
            let e = Arc::new(e);
            for job in jobs.drain(..) {
                let _ = job.reply.send(Err(e.clone()));
            }
        }
    }
}

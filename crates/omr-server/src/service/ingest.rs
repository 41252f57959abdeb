//! Group commit: concurrent submissions are queued to one writer task, which appends everything
//! waiting in one transaction and answers each submitter with its indices only after the commit.
//! Durability (fsync per commit) then costs one flush per group, not per message.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use omr_store::{Appended, NewMessage, Store, StoreError};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::board_signal::BoardSignal;
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
    /// Group commits tried so far (counted before their submitters hear back), so that a
    /// reader of the board knows its copy of the tail may be missing something.
    commits: Arc<AtomicU64>,
}

impl Ingestor {
    /// Start the writer task. It runs until every `Ingestor` clone is dropped, then finishes
    /// what is queued and exits.
    pub fn start(
        store: Store,
        metrics: Metrics,
        max_commit_messages: usize,
        notify: Arc<BoardSignal>,
    ) -> (Ingestor, JoinHandle<()>) {
        let (tx, rx) = mpsc::channel::<Job>(4096);
        let commits = Arc::new(AtomicU64::new(0));
        let writer = Writer {
            store,
            metrics,
            max: max_commit_messages,
            notify,
            commits: commits.clone(),
        };
        let handle = tokio::spawn(writer.run(rx));
        (Ingestor { tx, commits }, handle)
    }

    /// Group commits tried so far. Every message acknowledged to a submitter was committed
    /// before this count moved past the value it had when the submission was made.
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::Acquire)
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

/// The writer task's side.
struct Writer {
    store: Store,
    metrics: Metrics,
    /// Most messages per transaction.
    max: usize,
    /// Raised after each commit (the detection worker).
    notify: Arc<BoardSignal>,
    commits: Arc<AtomicU64>,
}

impl Writer {
    async fn run(self, mut rx: mpsc::Receiver<Job>) {
        let mut jobs: Vec<Job> = Vec::new();
        while let Some(job) = rx.recv().await {
            jobs.push(job);
            let mut count = jobs[0].messages.len();
            while count < self.max {
                match rx.try_recv() {
                    Ok(job) => {
                        count += job.messages.len();
                        jobs.push(job);
                    }
                    Err(_) => break,
                }
            }
            commit(&self.store, &self.metrics, &mut jobs, &self.commits).await;
            self.notify.raise();
        }
        tracing::debug!("group-commit writer stopped");
    }
}

async fn commit(store: &Store, metrics: &Metrics, jobs: &mut Vec<Job>, commits: &AtomicU64) {
    let groups: Vec<&[NewMessage]> = jobs.iter().map(|j| j.messages.as_slice()).collect();
    let count: usize = groups.iter().map(|g| g.len()).sum();
    let started = Instant::now();
    let result = store.append_groups(&groups).await;
    // Before anyone hears of it: a board read after an acknowledgement sees the count moved.
    commits.fetch_add(1, Ordering::Release);
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

//! The checkpointer: a thread that takes checkpoints by time, by WAL volume,
//! and on request.
//!
//! PostgreSQL's checkpointer wakes when `checkpoint_timeout` (5 min) has passed
//! since the last checkpoint, when the WAL written since it exceeds a share of
//! `max_wal_size`, or when a backend asks (`RequestCheckpoint`). Ours does the
//! same with [`CheckpointerConfig`]:
//!
//! 1. Sleep until the next deadline (`interval` after the last checkpoint),
//!    waking every `poll` to compare [`Wal::bytes_since_checkpoint`] with
//!    `max_wal_bytes`, or at once on [`Checkpointer::request`] or stop.
//! 2. Run the checkpoint the owner supplied: a closure that calls
//!    [`Wal::checkpoint`] with its page flush (`|_| pool.flush_all(false)`)
//!    and next xid, plus whatever protocol the owner needs around it (the
//!    engine's `TransactionManager::checkpoint` holds its commit gate).
//! 3. Count it, or remember the error (the previous checkpoint stands; the
//!    next deadline retries).
//!
//! The checkpoint itself is not paced over `checkpoint_completion_target`:
//! the page flush writes as fast as it can.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::log::Wal;

/// One checkpoint, as the owner takes it (usually a call of [`Wal::checkpoint`]).
pub type CheckpointFn =
    Box<dyn Fn() -> Result<(), Box<dyn std::error::Error + Send + Sync>> + Send>;

/// When the checkpointer checkpoints.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CheckpointerConfig {
    /// Time between checkpoints (PostgreSQL's `checkpoint_timeout`, 5 min).
    pub interval: Duration,
    /// WAL bytes since the last checkpoint that trigger one early
    /// (PostgreSQL: about `max_wal_size` / 2, 512 MiB by default).
    pub max_wal_bytes: u64,
    /// How often the WAL volume is looked at.
    pub poll: Duration,
}

impl Default for CheckpointerConfig {
    fn default() -> Self {
        CheckpointerConfig {
            interval: Duration::from_secs(300),
            max_wal_bytes: 512 * 1024 * 1024,
            poll: Duration::from_millis(100),
        }
    }
}

#[derive(Debug, Default)]
struct State {
    stop: bool,
    requested: bool,
    attempts: u64,
    completed: u64,
    last_error: Option<String>,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    done: Condvar,
}

/// A running checkpointer thread; stopped on [`stop`](Checkpointer::stop) or drop.
#[derive(Debug)]
pub struct Checkpointer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Start the thread. `wal` is watched for the volume trigger;
    /// `checkpoint` takes one checkpoint.
    pub fn start(
        wal: Arc<Wal>,
        config: CheckpointerConfig,
        checkpoint: CheckpointFn,
    ) -> Checkpointer {
        let shared = Arc::new(Shared::default());
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("checkpointer".into())
                .spawn(move || run(&wal, config, &checkpoint, &shared))
                .expect("spawn the checkpointer")
        };
        Checkpointer {
            shared,
            thread: Some(thread),
        }
    }

    /// Ask for a checkpoint now and wait until one has completed or failed
    /// (at most `timeout`). Returns whether one completed.
    pub fn request(&self, timeout: Duration) -> bool {
        let mut st = self.shared.state.lock();
        let (attempts, completed) = (st.attempts, st.completed);
        st.requested = true;
        self.shared.wake.notify_all();
        let deadline = Instant::now() + timeout;
        while st.attempts == attempts && !st.stop {
            if self.shared.done.wait_until(&mut st, deadline).timed_out() {
                break;
            }
        }
        st.completed > completed
    }

    /// Checkpoints completed so far.
    pub fn completed(&self) -> u64 {
        self.shared.state.lock().completed
    }

    /// The last checkpoint error, if the last attempt failed.
    pub fn last_error(&self) -> Option<String> {
        self.shared.state.lock().last_error.clone()
    }

    /// Stop the thread and wait for it (a checkpoint under way finishes first).
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.shared.state.lock().stop = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn run(wal: &Wal, config: CheckpointerConfig, checkpoint: &CheckpointFn, shared: &Shared) {
    let mut last = Instant::now();
    loop {
        {
            let mut st = shared.state.lock();
            loop {
                if st.stop {
                    return;
                }
                if st.requested
                    || last.elapsed() >= config.interval
                    || wal.bytes_since_checkpoint() >= config.max_wal_bytes
                {
                    st.requested = false;
                    break;
                }
                let until_deadline = config.interval.saturating_sub(last.elapsed());
                shared
                    .wake
                    .wait_for(&mut st, until_deadline.min(config.poll));
            }
        }
        let result = checkpoint();
        last = Instant::now();
        let mut st = shared.state.lock();
        st.attempts += 1;
        match result {
            Ok(_) => {
                st.completed += 1;
                st.last_error = None;
            }
            Err(e) => st.last_error = Some(e.to_string()),
        }
        shared.done.notify_all();
    }
}

//! The checkpointer thread: [`TransactionManager::checkpoint`] on a timer, on
//! WAL volume, or on request.
//!
//! `wal::Checkpointer` has the same triggers but calls `wal.checkpoint`
//! itself, reading the next xid *before* the redo point without stopping
//! `begin` in between, and without passing the commit gate. Both matter
//! (see `txn::xact`): an xid handed out in that window could log a record
//! before the redo point that recovery never sees, and a commit between its
//! record and its clog update could be lost. So the engine runs this small
//! loop around `tm.checkpoint()` instead, which does both right.
//!
//! 1. Wait until `interval` has passed since the last checkpoint, the WAL
//!    written since it reaches `max_wal_bytes`, a request arrives, or stop.
//! 2. `tm.checkpoint()` under the database's checkpoint mutex (one
//!    checkpoint at a time, so a waiting one never holds the running set
//!    frozen while another flushes pages).
//! 3. A failure is kept as `last_error` and retried at the next trigger; the
//!    previous checkpoint stands.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::txn::xact::TransactionManager;

/// How often the thread looks at the WAL volume between timer deadlines:
/// 100 ms, as `wal::CheckpointerConfig`'s default poll.
pub const CHECKPOINTER_POLL: Duration = Duration::from_millis(100);

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

/// A running checkpointer; dropping it stops the thread.
#[derive(Debug)]
pub struct Checkpointer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    pub(crate) fn start(
        tm: Arc<TransactionManager>,
        serial: Arc<Mutex<()>>,
        interval: Duration,
        max_wal_bytes: u64,
    ) -> std::io::Result<Checkpointer> {
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("checkpointer".into())
            .spawn(move || run(&tm, &serial, interval, max_wal_bytes, &s))?;
        Ok(Checkpointer {
            shared,
            thread: Some(thread),
        })
    }

    /// Ask for a checkpoint now and wait up to `timeout` for it; true if one
    /// completed.
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

    /// Checkpoints completed by this thread.
    pub fn completed(&self) -> u64 {
        self.shared.state.lock().completed
    }

    /// The error of the last attempt, if it failed.
    pub fn last_error(&self) -> Option<String> {
        self.shared.state.lock().last_error.clone()
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

fn run(
    tm: &TransactionManager,
    serial: &Mutex<()>,
    interval: Duration,
    max_wal_bytes: u64,
    shared: &Shared,
) {
    let mut last = Instant::now();
    loop {
        {
            let mut st = shared.state.lock();
            loop {
                if st.stop {
                    return;
                }
                if st.requested
                    || last.elapsed() >= interval
                    || tm.wal().bytes_since_checkpoint() >= max_wal_bytes
                {
                    st.requested = false;
                    break;
                }
                let until = interval.saturating_sub(last.elapsed());
                shared.wake.wait_for(&mut st, until.min(CHECKPOINTER_POLL));
            }
        }
        let result = {
            let _one = serial.lock();
            tm.checkpoint()
        };
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

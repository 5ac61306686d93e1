//! `DropLock`: a table's lock against DROP (and the other operations that
//! change what a reader may touch: CREATE / DROP INDEX, ALTER, a bulk load
//! into an empty table), with its "dropped" flag, sharded by thread so that
//! readers on different threads write no common cache line.
//!
//! ```text
//!   shard 0   RwLock<()>   <- threads whose running-set shard is 0
//!   ...
//!   shard 15
//!   read:   share-lock my thread's shard; copy the flag     (one lock, mine)
//!   write:  lock every shard, in order; the flag is written
//!           back when the guard is dropped, before any shard is unlocked
//! ```
//!
//! Rules:
//! 1. A reader holds one shard shared; a writer holds every shard
//!    exclusively. So a writer excludes every reader (whichever shard it
//!    is on) and every other writer, exactly as one `RwLock` would: a DROP
//!    waits for the operations in flight, and no operation starts while it
//!    runs.
//! 2. The flag changes only while every shard is held exclusively, so a
//!    reader's copy, taken under its shard, stays true for as long as it
//!    holds the shard: a reader that saw "not dropped" reads the table's
//!    files before the drop can remove them.
//! 3. Each thread uses its running-set shard (round robin on first use,
//!    `txn::snapshot::thread_shard`), so two threads of a lookup workload
//!    take different locks on different cache lines: a lookup's two atomic
//!    writes (take and release) stay in its own shard, where one shared
//!    `RwLock` made every lookup of every thread bounce one line.
//! 4. Writers lock the shards in index order, so two writers cannot
//!    deadlock on each other. A thread must not take the lock exclusively
//!    while it holds it: the bulk loader's own reads are refused before
//!    they get here (`crate::loading`), and a writer on a thread that holds
//!    the lock shared (DDL from a scan's callback) is refused with
//!    `TableReadByThisThread` by `write`, from the thread's list of rule 5.
//! 5. A thread may take the lock shared again while it holds it shared (a
//!    read from inside a scan's callback). A shard lock makes a new reader
//!    wait behind a waiting writer, and the writer waits for the thread's
//!    first hold, so the second hold takes no shard lock: the thread's
//!    first hold already excludes every writer (rule 1) until it ends, and
//!    it ends after the second (holds of a thread are nested), so the
//!    flag the second copies stays true as long (rule 2). Each thread
//!    keeps the locks it holds shared in a short list of its own.

use std::cell::RefCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::error::{EngineError, Result};
use crate::txn::snapshot::{SHARDS, thread_shard};

thread_local! {
    /// The drop locks this thread holds shared, by address, once per hold
    /// (rule 5).
    static HELD: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// One shard, on its own cache lines.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Shard(RwLock<()>);

/// The lock and its flag (module docs).
#[derive(Debug)]
pub(crate) struct DropLock {
    shards: Box<[Shard]>,
    /// Written only under every shard's write lock (rule 2).
    dropped: AtomicBool,
}

impl DropLock {
    /// A lock over a table that is not dropped.
    pub fn new() -> DropLock {
        DropLock {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
            dropped: AtomicBool::new(false),
        }
    }

    /// Hold the table shared (rule 1); the guard derefs to whether it is
    /// dropped.
    #[inline]
    pub fn read(&self) -> DropReadGuard<'_> {
        let me = self as *const DropLock as usize;
        let again = HELD.with(|h| {
            let mut h = h.borrow_mut();
            let again = h.contains(&me);
            h.push(me);
            again
        });
        // Rule 5: a second hold waiting behind a writer that waits for
        // this thread's first hold would never end; the first one suffices.
        let guard = (!again).then(|| self.shards[thread_shard()].0.read());
        DropReadGuard {
            dropped: self.dropped.load(Ordering::Acquire),
            lock: me,
            _guard: guard,
        }
    }

    /// Hold the table exclusively (rule 1); the guard derefs mutably to
    /// whether it is dropped, and writes the flag back when dropped.
    /// Refused with [`EngineError::TableReadByThisThread`] if this thread
    /// holds the lock shared (rule 4: it would wait for itself).
    pub fn write(
        &self,
        table: &str,
        operation: impl FnOnce() -> String,
    ) -> Result<DropWriteGuard<'_>> {
        let me = self as *const DropLock as usize;
        if HELD.with(|h| h.borrow().contains(&me)) {
            return Err(EngineError::TableReadByThisThread {
                table: table.to_string(),
                operation: operation(),
            });
        }
        Ok(self.write_unchecked())
    }

    /// [`write`](Self::write) for a caller that cannot hold the lock shared
    /// (the unit tests' writer threads).
    fn write_unchecked(&self) -> DropWriteGuard<'_> {
        let guards = self.shards.iter().map(|s| s.0.write()).collect();
        DropWriteGuard {
            dropped: self.dropped.load(Ordering::Acquire),
            lock: self,
            _guards: guards,
        }
    }
}

/// A shared hold: the flag as it stays while the hold lasts (rule 2).
#[derive(Debug)]
pub(crate) struct DropReadGuard<'a> {
    dropped: bool,
    /// The lock's address, as listed in `HELD`.
    lock: usize,
    /// `None` for a second hold of the thread (rule 5).
    _guard: Option<RwLockReadGuard<'a, ()>>,
}

impl Drop for DropReadGuard<'_> {
    fn drop(&mut self) {
        // The guard is not `Send` (its shard guard type is not): dropped on
        // the thread that listed it. Holds nest, so the last entry for this
        // lock is this hold's.
        HELD.with(|h| {
            let mut h = h.borrow_mut();
            if let Some(i) = h.iter().rposition(|&l| l == self.lock) {
                h.swap_remove(i);
            }
        });
    }
}

impl Deref for DropReadGuard<'_> {
    type Target = bool;

    #[inline]
    fn deref(&self) -> &bool {
        &self.dropped
    }
}

/// An exclusive hold of every shard.
#[derive(Debug)]
pub(crate) struct DropWriteGuard<'a> {
    dropped: bool,
    lock: &'a DropLock,
    _guards: Vec<RwLockWriteGuard<'a, ()>>,
}

impl Deref for DropWriteGuard<'_> {
    type Target = bool;

    fn deref(&self) -> &bool {
        &self.dropped
    }
}

impl DerefMut for DropWriteGuard<'_> {
    fn deref_mut(&mut self) -> &mut bool {
        &mut self.dropped
    }
}

impl Drop for DropWriteGuard<'_> {
    fn drop(&mut self) {
        // Runs before the fields (the shard guards) are dropped: the flag
        // is published while every shard is still held (rule 2).
        self.lock.dropped.store(self.dropped, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_reader_sees_the_flag_a_writer_set_once_the_writer_is_gone() {
        let l = DropLock::new();
        assert!(!*l.read());
        {
            let mut w = l.write_unchecked();
            assert!(!*w);
            *w = true;
        }
        assert!(*l.read());
        assert!(*l.write_unchecked());
    }

    #[test]
    fn a_writer_waits_for_readers_on_every_thread_and_readers_wait_for_it() {
        let l = Arc::new(DropLock::new());
        // Readers on several threads (so on several shards) hold the lock;
        // the writer must not get in until all of them let go.
        let holding = Arc::new(AtomicUsize::new(0));
        let release = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..4)
            .map(|_| {
                let (l, holding, release) = (l.clone(), holding.clone(), release.clone());
                std::thread::spawn(move || {
                    let g = l.read();
                    holding.fetch_add(1, Ordering::SeqCst);
                    while !release.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    let seen = *g;
                    // Counted out while still held: once the writer is in,
                    // every reader's count is gone.
                    holding.fetch_sub(1, Ordering::SeqCst);
                    drop(g);
                    seen
                })
            })
            .collect();
        while holding.load(Ordering::SeqCst) < 4 {
            std::thread::sleep(Duration::from_millis(1));
        }
        let writer = {
            let (l, holding) = (l.clone(), holding.clone());
            std::thread::spawn(move || {
                let mut w = l.write_unchecked();
                let readers_left = holding.load(Ordering::SeqCst);
                *w = true;
                readers_left
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!writer.is_finished(), "the writer got in past readers");
        release.store(true, Ordering::SeqCst);
        for r in readers {
            assert!(!r.join().unwrap(), "a reader saw the flag set under it");
        }
        assert_eq!(writer.join().unwrap(), 0, "readers still held the lock");
        // A reader on another thread, after the writer, sees the flag.
        let l2 = l.clone();
        assert!(std::thread::spawn(move || *l2.read()).join().unwrap());
    }

    #[test]
    fn a_reader_waits_while_a_writer_holds_the_lock() {
        let l = Arc::new(DropLock::new());
        let w = l.write_unchecked();
        let reader = {
            let l = l.clone();
            std::thread::spawn(move || *l.read())
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!reader.is_finished(), "a reader got in past the writer");
        let mut w = w;
        *w = true;
        drop(w);
        assert!(reader.join().unwrap(), "the reader missed the flag");
    }

    #[test]
    fn a_thread_holding_the_lock_shared_takes_it_again_while_a_writer_waits() {
        let l = Arc::new(DropLock::new());
        let outer = l.read();
        let writer = {
            let l = l.clone();
            std::thread::spawn(move || {
                let mut w = l.write_unchecked();
                *w = true;
            })
        };
        // The writer is now waiting for `outer`.
        std::thread::sleep(Duration::from_millis(50));
        // The writer waits for `outer`; this thread's second hold must not
        // wait for the writer.
        let again = l.read();
        assert!(!*again, "the second hold saw the drop before it happened");
        assert!(!writer.is_finished(), "the writer got in past a reader");
        drop(again);
        drop(outer);
        writer.join().unwrap();
        assert!(*l.read(), "a reader after the writer sees its flag");
    }
}

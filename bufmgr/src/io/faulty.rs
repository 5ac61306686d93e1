//! [`FaultyStorage`]: a fault-injecting wrapper for tests.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use super::{AsyncRead, PendingReads, StorageBackend, check_page_len};
use crate::error::{Error, Result};
use crate::tag::{BlockNumber, BufferTag, PAGE_SIZE, RelFork, RelId};

#[derive(Debug, Default)]
struct Faults {
    /// Writes still allowed before every write fails; `None`: no limit.
    writes_left: Option<u64>,
    /// Reads still allowed before every read fails; `None`: no limit.
    reads_left: Option<u64>,
    fail_syncs: bool,
    /// `Some(None)`: tear the next write of any tag.
    tear: Option<Option<BufferTag>>,
    crashed: bool,
    read_delay: Duration,
}

/// A fault-injecting backend for tests: wraps another backend, passes every
/// call through to it unless a fault says otherwise, and counts calls.
///
/// All controls take `&self`, so a test can keep an `Arc<FaultyStorage>` and
/// change the faults while a pool uses the same backend.
#[derive(Debug)]
pub struct FaultyStorage {
    inner: Arc<dyn StorageBackend>,
    faults: Mutex<Faults>,
    reads: AtomicU64,
    writes: AtomicU64,
    syncs: AtomicU64,
    overlapping_reads: AtomicU64,
    reads_by_tag: Mutex<HashMap<BufferTag, u64>>,
    /// Shared with the pending reads of `submit_reads`, which keep their
    /// blocks in flight until they are waited for.
    reads_in_flight: Arc<Mutex<HashMap<BufferTag, u32>>>,
}

const INJECTED_WRITE: &str = "injected write failure";
const INJECTED_READ: &str = "injected read failure";
const INJECTED_SYNC: &str = "injected sync failure";
const INJECTED_TEAR: &str = "injected torn write (simulated crash)";
const CRASHED: &str = "simulated crash: storage is gone";

/// Takes one operation from a budget: `false` if it is spent.
fn take_budget(left: &mut Option<u64>) -> bool {
    match left {
        None => true,
        Some(0) => false,
        Some(n) => {
            *n -= 1;
            true
        }
    }
}

impl FaultyStorage {
    /// Wraps `inner`, with no faults.
    pub fn new(inner: Arc<dyn StorageBackend>) -> FaultyStorage {
        FaultyStorage {
            inner,
            faults: Mutex::new(Faults::default()),
            reads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
            overlapping_reads: AtomicU64::new(0),
            reads_by_tag: Mutex::new(HashMap::new()),
            reads_in_flight: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// The wrapped backend.
    pub fn inner(&self) -> &Arc<dyn StorageBackend> {
        &self.inner
    }

    /// Lets `n` more writes through, then fails every later one.
    pub fn fail_writes_after(&self, n: u64) {
        self.faults.lock().writes_left = Some(n);
    }

    /// Lets `n` more reads through, then fails every later one.
    pub fn fail_reads_after(&self, n: u64) {
        self.faults.lock().reads_left = Some(n);
    }

    /// Makes every `sync` and `sync_all` fail (`true`) or not (`false`).
    pub fn fail_syncs(&self, fail: bool) {
        self.faults.lock().fail_syncs = fail;
    }

    /// Tears the next write of `tag` (of any tag if `None`): only its first
    /// 4 KiB reach the file, the rest keeps the old contents (zeros for an
    /// extension), the write fails, and the backend is crashed.
    pub fn tear_next_write(&self, tag: Option<BufferTag>) {
        self.faults.lock().tear = Some(tag);
    }

    /// Simulates a crash: every later write, sync, truncate, unlink and create
    /// fails; reads still work (they see what reached the files).
    pub fn crash(&self) {
        self.faults.lock().crashed = true;
    }

    /// Whether the backend is crashed (by [`crash`](Self::crash) or a torn write).
    pub fn is_crashed(&self) -> bool {
        self.faults.lock().crashed
    }

    /// Removes every fault, including the crash and the read delay. Counters
    /// are kept.
    pub fn clear(&self) {
        *self.faults.lock() = Faults::default();
    }

    /// Sleeps `delay` inside every read, while the read counts as in flight.
    pub fn set_read_delay(&self, delay: Duration) {
        self.faults.lock().read_delay = delay;
    }

    /// Pages read so far (by `read`, or submitted by `submit_reads`),
    /// failed ones included.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// Calls of `write` so far, failed ones included.
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// Calls of `sync` and `sync_all` so far, failed ones included.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    /// Reads of `tag` so far (as [`reads`](Self::reads)), failed ones
    /// included.
    pub fn reads_of(&self, tag: BufferTag) -> u64 {
        self.reads_by_tag.lock().get(&tag).copied().unwrap_or(0)
    }

    /// How many reads started while another read of the same block was in
    /// flight. A correct pool never does that, so tests expect 0.
    pub fn overlapping_reads(&self) -> u64 {
        self.overlapping_reads.load(Ordering::Relaxed)
    }

    fn injected(&self, op: &'static str, what: impl ToString, rf: RelFork, msg: &str) -> Error {
        Error::io(op, what, self.inner.path(rf), io::Error::other(msg))
    }

    /// Fails with the crash error if crashed.
    fn check_crashed(&self, op: &'static str, what: impl ToString, rf: RelFork) -> Result<()> {
        if self.faults.lock().crashed {
            Err(self.injected(op, what, rf, CRASHED))
        } else {
            Ok(())
        }
    }

    /// Marks a read of `tag` in flight (counting an overlap if another one
    /// is) until the guard is dropped.
    fn start_read(&self, tag: BufferTag) -> InFlight {
        let mut map = self.reads_in_flight.lock();
        let n = map.entry(tag).or_insert(0);
        if *n > 0 {
            self.overlapping_reads.fetch_add(1, Ordering::Relaxed);
        }
        *n += 1;
        InFlight {
            map: Arc::clone(&self.reads_in_flight),
            tag,
        }
    }

    /// Writes the first half-ish (4 KiB) of `page` over the old block.
    fn torn_write(&self, tag: BufferTag, page: &[u8]) -> Result<()> {
        const TORN: usize = 4096;
        let mut torn = vec![0u8; PAGE_SIZE];
        if tag.block < self.inner.nblocks(tag.relfork())? {
            self.inner.read(tag, &mut torn)?;
        }
        torn[..TORN].copy_from_slice(&page[..TORN]);
        self.inner.write(tag, &torn)
    }
}

/// Marks a read of one tag in flight until dropped.
struct InFlight {
    map: Arc<Mutex<HashMap<BufferTag, u32>>>,
    tag: BufferTag,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut map = self.map.lock();
        if let Some(n) = map.get_mut(&self.tag) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.tag);
            }
        }
    }
}

/// Reads submitted through [`FaultyStorage::submit_reads`].
struct FaultyReads {
    /// `None` once waited for.
    inner: Option<Box<dyn PendingReads>>,
    /// Per request: the injected error that cut it short, if any.
    injected: Vec<Option<Error>>,
    delay: Duration,
    /// The submitted pages, in flight until this is dropped.
    _in_flight: Vec<InFlight>,
}

impl PendingReads for FaultyReads {
    fn wait(mut self: Box<Self>) -> Vec<Result<()>> {
        if !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
        let results = self.inner.take().map(|p| p.wait()).unwrap_or_default();
        results
            .into_iter()
            .zip(std::mem::take(&mut self.injected))
            .map(|(r, injected)| match (r, injected) {
                // The wrapped backend's error comes first: it is of an
                // earlier page than the one refused.
                (Err(e), _) | (Ok(()), Some(e)) => Err(e),
                (Ok(()), None) => Ok(()),
            })
            .collect()
    }
}

impl StorageBackend for FaultyStorage {
    fn name(&self) -> &'static str {
        "faulty"
    }

    fn path(&self, rf: RelFork) -> PathBuf {
        self.inner.path(rf)
    }

    fn create(&self, rf: RelFork) -> Result<()> {
        self.check_crashed("create", rf, rf)?;
        self.inner.create(rf)
    }

    fn exists(&self, rf: RelFork) -> Result<bool> {
        self.inner.exists(rf)
    }

    fn nblocks(&self, rf: RelFork) -> Result<BlockNumber> {
        self.inner.nblocks(rf)
    }

    fn read(&self, tag: BufferTag, page: &mut [u8]) -> Result<()> {
        check_page_len(page.len());
        self.reads.fetch_add(1, Ordering::Relaxed);
        *self.reads_by_tag.lock().entry(tag).or_insert(0) += 1;
        let delay = {
            let mut faults = self.faults.lock();
            if !take_budget(&mut faults.reads_left) {
                return Err(self.injected("read", tag, tag.relfork(), INJECTED_READ));
            }
            faults.read_delay
        };
        let _in_flight = self.start_read(tag);
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        self.inner.read(tag, page)
    }

    /// Passed on to the wrapped backend's `submit_reads` (so over io_uring
    /// the reads are in flight while the caller works), with the faults of
    /// `read` applied page by page at submit time: each page counts as a
    /// read, and is in flight (for [`overlapping_reads`]) until the wait; a
    /// spent read budget cuts a request at the first page it refuses (the
    /// pages before it are read, its result is the injected error naming
    /// that block, as `read_run`'s would be); the read delay is slept at the
    /// wait, once per page.
    ///
    /// [`overlapping_reads`]: FaultyStorage::overlapping_reads
    unsafe fn submit_reads(&self, reqs: Vec<AsyncRead>) -> Box<dyn PendingReads> {
        let mut passed = Vec::with_capacity(reqs.len());
        let mut injected: Vec<Option<Error>> = Vec::with_capacity(reqs.len());
        let mut in_flight = Vec::new();
        let mut pages = 0u32;
        for mut req in reqs {
            let mut refused = None;
            for i in 0..req.pages.len() {
                let tag = BufferTag {
                    block: req.tag.block + i as BlockNumber,
                    ..req.tag
                };
                self.reads.fetch_add(1, Ordering::Relaxed);
                *self.reads_by_tag.lock().entry(tag).or_insert(0) += 1;
                if !take_budget(&mut self.faults.lock().reads_left) {
                    refused = Some((i, self.injected("read", tag, tag.relfork(), INJECTED_READ)));
                    break;
                }
                in_flight.push(self.start_read(tag));
                pages += 1;
            }
            if let Some((i, e)) = refused {
                req.pages.truncate(i);
                injected.push(Some(e));
            } else {
                injected.push(None);
            }
            passed.push(req);
        }
        let delay = self.faults.lock().read_delay;
        Box::new(FaultyReads {
            // SAFETY: our caller's contract, passed on for the same pages
            // (or fewer: a request cut short keeps its first pages).
            inner: Some(unsafe { self.inner.submit_reads(passed) }),
            injected,
            delay: delay * pages,
            _in_flight: in_flight,
        })
    }

    fn write(&self, tag: BufferTag, page: &[u8]) -> Result<()> {
        check_page_len(page.len());
        self.writes.fetch_add(1, Ordering::Relaxed);
        let tear = {
            let mut faults = self.faults.lock();
            if faults.crashed {
                return Err(self.injected("write", tag, tag.relfork(), CRASHED));
            }
            if !take_budget(&mut faults.writes_left) {
                return Err(self.injected("write", tag, tag.relfork(), INJECTED_WRITE));
            }
            match faults.tear {
                Some(t) if t.is_none_or(|t| t == tag) => {
                    // Crash now, so that no other write gets through after the
                    // torn one.
                    faults.tear = None;
                    faults.crashed = true;
                    true
                }
                _ => false,
            }
        };
        if tear {
            self.torn_write(tag, page)?;
            return Err(self.injected("write", tag, tag.relfork(), INJECTED_TEAR));
        }
        self.inner.write(tag, page)
    }

    fn truncate(&self, rf: RelFork, nblocks: BlockNumber) -> Result<()> {
        self.check_crashed("truncate", rf, rf)?;
        self.inner.truncate(rf, nblocks)
    }

    fn sync(&self, rf: RelFork) -> Result<()> {
        self.syncs.fetch_add(1, Ordering::Relaxed);
        {
            let faults = self.faults.lock();
            if faults.crashed {
                return Err(self.injected("fdatasync", rf, rf, CRASHED));
            }
            if faults.fail_syncs {
                return Err(self.injected("fdatasync", rf, rf, INJECTED_SYNC));
            }
        }
        self.inner.sync(rf)
    }

    fn sync_all(&self) -> Result<()> {
        self.syncs.fetch_add(1, Ordering::Relaxed);
        {
            let faults = self.faults.lock();
            let msg = if faults.crashed {
                Some(CRASHED)
            } else if faults.fail_syncs {
                Some(INJECTED_SYNC)
            } else {
                None
            };
            if let Some(msg) = msg {
                let base = self.inner.path(RelFork::main(RelId(0)));
                let dir = base.parent().map(Path::to_path_buf).unwrap_or(base);
                return Err(Error::io("fsync", "all files", dir, io::Error::other(msg)));
            }
        }
        self.inner.sync_all()
    }

    fn unlink(&self, rf: RelFork) -> Result<()> {
        self.check_crashed("unlink", rf, rf)?;
        self.inner.unlink(rf)
    }

    fn relations(&self) -> Result<Vec<RelFork>> {
        self.inner.relations()
    }
}

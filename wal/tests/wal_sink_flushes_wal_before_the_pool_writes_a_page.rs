//! Rule 5 through the real wiring: a `BufferPool` given the `Wal` as its
//! `WalSink` never writes a permanent page whose LSN is past the durable end
//! of the WAL. A storage wrapper checks, at the moment of every page write,
//! that `flushed_lsn >= page LSN`. Unlogged pages are written without a flush.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bufmgr::{
    BufferPool, BufferTag, FileStorage, ObservedStorage, PoolConfig, RelFork, RelId,
    StorageObserver, WalSink,
};
use common::{payload_record, small_segments, within};
use parking_lot::Mutex;
use wal::{BlockRef, Lsn, Record, RmgrKind, Wal, page_lsn};

/// Checks rule 5 at every page write (installed with `bufmgr::ObservedStorage`).
#[derive(Debug)]
struct CheckingStorage {
    wal: Arc<Wal>,
    /// Writes of pages with a non-zero LSN (those rule 5 is about).
    logged_writes: AtomicUsize,
    /// (tag, page LSN, flushed LSN) of every write that broke the rule.
    violations: Mutex<Vec<(BufferTag, Lsn, Lsn)>>,
}

impl StorageObserver for CheckingStorage {
    fn on_write(&self, tag: BufferTag, page: &[u8]) {
        let lsn = page_lsn(page);
        if lsn > Lsn::ZERO {
            self.logged_writes.fetch_add(1, Ordering::Relaxed);
            let flushed = self.wal.flushed_lsn();
            if flushed < lsn {
                self.violations.lock().push((tag, lsn, flushed));
            }
        }
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    wal: Arc<Wal>,
    storage: Arc<CheckingStorage>,
    pool: BufferPool,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let wal = Arc::new(Wal::open(dir.path(), small_segments()).unwrap());
    let storage = Arc::new(CheckingStorage {
        wal: Arc::clone(&wal),
        logged_writes: AtomicUsize::new(0),
        violations: Mutex::new(Vec::new()),
    });
    let files = Arc::new(FileStorage::open(dir.path()).unwrap());
    let observed = Arc::new(ObservedStorage::new(files, storage.clone()));
    let sink: Arc<dyn WalSink> = wal.clone();
    let pool = BufferPool::with_wal(PoolConfig::new(16), observed, sink).unwrap();
    Setup {
        _dir: dir,
        wal,
        storage,
        pool,
    }
}

/// Extend `rf` by one page, log a change to it and set its LSN to the
/// record's end (the caller's side of rule 5). Returns the page LSN.
fn extend_and_log(s: &Setup, rf: RelFork, xid: u64) -> Lsn {
    let mut g = s.pool.extend(rf, None).unwrap();
    g.mark_dirty();
    let record = Record::builder(RmgrKind::Heap, 0, xid)
        .block(BlockRef::new(g.tag()).will_init())
        .payload(vec![7u8; 40])
        .build()
        .unwrap();
    let (_start, end) = s.wal.insert(&record).unwrap();
    g.set_lsn(end.as_u64());
    end
}

#[test]
fn evicting_a_logged_page_flushes_the_wal_to_its_lsn_first() {
    within(Duration::from_secs(60), || {
        let s = setup();
        let rf = RelFork::main(RelId(1));
        s.pool.create_fork(rf).unwrap();
        let lsn = extend_and_log(&s, rf, 1);
        // More WAL after the page's record, never flushed by anyone.
        for xid in 2..10 {
            s.wal.insert(&payload_record(xid, 100)).unwrap();
        }
        assert!(
            s.wal.flushed_lsn() < lsn,
            "nothing flushed the WAL yet: the test would prove nothing"
        );

        s.pool.evict_all().unwrap();

        assert_eq!(s.storage.violations.lock().as_slice(), &[]);
        assert_eq!(s.storage.logged_writes.load(Ordering::Relaxed), 1);
        assert!(s.wal.flushed_lsn() >= lsn);
        assert!(s.wal.stats().fsyncs >= 1);
    });
}

#[test]
fn pages_evicted_by_a_scan_of_other_blocks_are_never_ahead_of_the_wal() {
    within(Duration::from_secs(60), || {
        let s = setup();
        let rf = RelFork::main(RelId(2));
        s.pool.create_fork(rf).unwrap();
        // 64 logged pages through a 16-buffer pool: extending evicts.
        let mut last = Lsn::ZERO;
        for xid in 1..=64 {
            last = extend_and_log(&s, rf, xid);
        }
        // Read them all back twice; every eviction of a dirty page is checked.
        for _ in 0..2 {
            for block in 0..64 {
                let g = s.pool.read_buffer(rf, block, None).unwrap().lock_shared();
                assert!(g.lsn() > 0 && g.lsn() <= last.as_u64());
            }
        }
        s.pool.flush_all(false).unwrap();
        assert_eq!(s.storage.violations.lock().as_slice(), &[]);
        assert!(s.storage.logged_writes.load(Ordering::Relaxed) >= 64);
        assert!(s.wal.flushed_lsn() >= last);
    });
}

#[test]
fn an_unlogged_page_is_written_without_a_wal_flush() {
    within(Duration::from_secs(60), || {
        let s = setup();
        let rf = RelFork::main(RelId(3));
        s.pool.set_unlogged(rf.rel, true);
        s.pool.create_fork(rf).unwrap();
        let lsn = extend_and_log(&s, rf, 1);
        s.pool.evict_all().unwrap();
        assert_eq!(s.wal.stats().fsyncs, 0, "unlogged pages need no WAL flush");
        assert!(s.wal.flushed_lsn() < lsn);
    });
}

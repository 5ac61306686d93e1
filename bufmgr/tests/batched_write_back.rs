//! Batched write-back (`WriteBatch`, used by checkpoints and the background
//! writer): every page of a batch stays share-exclusive locked with its
//! write in flight until the write completes, so hints set concurrently are
//! refused rather than slipped in after the checksum; every page that
//! reaches the backend carries a valid checksum; a failed write in a batch
//! leaves exactly the unwritten pages dirty; one WAL flush per batch.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bufmgr::{
    BufferPool, BufferTag, FileStorage, ObservedStorage, PoolConfig, RelFork, RelId,
    StorageBackend, StorageObserver,
};
use common::{HINT_AREA_OFFSET, TestDb, TestWal, bump_version, rel, with_timeout};

const REL: u32 = 9;
const BLOCKS: u32 = 96;

/// A slow disk that checks the checksum of every page it is handed, after
/// its delay, just before the bytes go to the file.
#[derive(Debug, Default)]
struct ChecksumAtWrite {
    writes: AtomicU64,
    bad: AtomicU64,
}

impl StorageObserver for ChecksumAtWrite {
    fn on_write(&self, tag: BufferTag, page: &[u8]) {
        std::thread::sleep(Duration::from_micros(300));
        self.writes.fetch_add(1, Ordering::Relaxed);
        if bufmgr::page::verify(page, tag.block).is_err() {
            self.bad.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[test]
fn hints_during_batched_writes_never_break_a_written_checksum() {
    with_timeout(120, || {
        let db = TestDb::new();
        db.create_rel(rel(REL), BLOCKS);
        // A slow disk: each write of a batch waits, so a batch's pages stay
        // in flight for a while.
        let observer = Arc::new(ChecksumAtWrite::default());
        let storage: Arc<dyn StorageBackend> =
            Arc::new(ObservedStorage::new(db.backend(), observer.clone()));
        let pool =
            BufferPool::new(PoolConfig::new(256).partitions(1).checksums(true), storage).unwrap();
        let stop = AtomicBool::new(false);
        let checkpoints = AtomicU64::new(0);
        std::thread::scope(|s| {
            // Writers: new versions of pages (exclusive lock), so there is
            // always something dirty for the checkpoint.
            s.spawn(|| {
                let mut b = 0;
                while !stop.load(Ordering::Relaxed) {
                    bump_version(&pool, rel(REL), b % BLOCKS);
                    b += 7;
                }
            });
            // Hinters: hints under the shared lock, on every page, all the time.
            for t in 0..2u32 {
                let (pool, stop) = (&pool, &stop);
                s.spawn(move || {
                    let mut b = t;
                    let mut bit = 0u16;
                    while !stop.load(Ordering::Relaxed) {
                        let g = pool
                            .read_buffer(rel(REL), b % BLOCKS, None)
                            .unwrap()
                            .lock_shared();
                        let off = HINT_AREA_OFFSET + 2 * (b as usize % 16);
                        g.set_hints(&[(off, 1 << (bit % 16))]).unwrap();
                        drop(g);
                        b = b.wrapping_add(3);
                        bit = bit.wrapping_add(1);
                    }
                });
            }
            // The checkpointer: batched flush_all in a loop, until enough
            // writes happened and some hint met one in flight (at most 60 s).
            s.spawn(|| {
                let started = std::time::Instant::now();
                while (checkpoints.load(Ordering::Relaxed) < 25
                    || observer.writes.load(Ordering::Relaxed) < 300
                    || pool.stats().hints_refused == 0)
                    && started.elapsed() < Duration::from_secs(60)
                {
                    pool.flush_all(false).unwrap();
                    checkpoints.fetch_add(1, Ordering::Relaxed);
                }
                stop.store(true, Ordering::Relaxed);
            });
        });
        pool.flush_all(false).unwrap();
        let st = pool.stats();
        let writes = observer.writes.load(Ordering::Relaxed);
        assert!(writes >= 300, "{writes} writes");
        assert_eq!(
            observer.bad.load(Ordering::Relaxed),
            0,
            "of {writes} writes"
        );
        assert!(st.hints_set > 0, "{st:?}");
        assert!(
            st.hints_refused > 0,
            "no hint met a write in flight, the test proves nothing: {st:?}"
        );
        drop(pool);
        // Every page on disk passes its checksum through a fresh pool.
        let fresh = BufferPool::new(
            PoolConfig::new(32).partitions(1).checksums(true),
            db.fresh_storage(),
        )
        .unwrap();
        for b in 0..BLOCKS {
            fresh
                .read_buffer(rel(REL), b, None)
                .unwrap_or_else(|e| panic!("block {b}: {e}"));
        }
    });
}

#[test]
fn a_checkpoint_writes_in_batches_with_one_wal_flush_each() {
    with_timeout(60, || {
        let db = TestDb::new();
        db.create_rel(rel(REL), BLOCKS);
        let wal = TestWal::new();
        let pool = db.pool_with_wal(PoolConfig::new(512).partitions(1), wal.clone());
        // (512 buffers: batches of 32, the most a batch holds.) Every page
        // dirty with a page LSN of its own, all above the flushed
        // point.
        for b in 0..BLOCKS {
            let mut g = pool
                .read_buffer(rel(REL), b, None)
                .unwrap()
                .lock_exclusive();
            g.set_lsn(1_000 + u64::from(b));
            g.mark_dirty();
        }
        let before = wal.flushes().len();
        assert_eq!(pool.flush_all(false).unwrap(), BLOCKS as usize);
        let flushes = wal.flushes()[before..].to_vec();
        let batches = (BLOCKS as usize).div_ceil(32);
        assert_eq!(
            flushes.len(),
            batches,
            "one WAL flush per batch: {flushes:?}"
        );
        // Each flush covers the highest page LSN of its batch (blocks in
        // order, 32 a batch), before any page of it was written.
        for (i, f) in flushes.iter().enumerate() {
            let last = ((i + 1) * 32).min(BLOCKS as usize) - 1;
            assert_eq!(*f, 1_000 + last as u64);
        }
        for w in db.storage.writes() {
            assert!(w.wal_flushed >= w.page_lsn, "{w:?}: data before its WAL");
        }
        assert_eq!(pool.buffercache_summary().dirty, 0);
    });
}

#[test]
fn a_failed_write_in_a_batch_leaves_exactly_the_unwritten_pages_dirty() {
    with_timeout(60, || {
        let db = TestDb::new();
        db.create_rel(rel(REL), BLOCKS);
        let pool = db.pool(PoolConfig::new(256).partitions(1).checksums(true));
        for b in 0..BLOCKS {
            bump_version(&pool, rel(REL), b);
        }
        db.faulty.fail_writes_after(40);
        let e = pool.flush_all(false).unwrap_err();
        assert!(e.to_string().contains(&format!("{}", RelId(REL))), "{e}");
        let dirty: Vec<u32> = pool
            .buffercache()
            .into_iter()
            .filter(|r| r.dirty)
            .filter_map(|r| r.tag.map(|t| t.block))
            .collect();
        // The first 40 writes went through; everything after is still dirty.
        assert_eq!(dirty.len(), BLOCKS as usize - 40, "{dirty:?}");
        assert!(dirty.iter().all(|&b| b >= 40), "{dirty:?}");
        // Later writes are refused (the write-failure latch), also after the
        // fault is gone, and nothing more is marked clean.
        db.faulty.fail_writes_after(u64::MAX);
        assert!(pool.flush_all(false).is_err());
        assert_eq!(pool.buffercache_summary().dirty, BLOCKS as usize - 40);
        // The pool still reads.
        for b in 0..BLOCKS {
            pool.read_buffer(rel(REL), b, None).unwrap();
        }
        // What reached the files is the new version for the written blocks.
        let files = FileStorage::open(db.dir.path()).unwrap();
        let mut page = vec![0u8; bufmgr::PAGE_SIZE];
        files
            .read(BufferTag::new(RelFork::main(RelId(REL)), 0), &mut page)
            .unwrap();
        assert_eq!(common::page_version(&page), 1);
        files
            .read(BufferTag::new(RelFork::main(RelId(REL)), 50), &mut page)
            .unwrap();
        assert_eq!(common::page_version(&page), 0);
    });
}

//! Read streams: blocks in order with the right contents, combined reads,
//! never two reads of one block at once, errors that end the stream and
//! leave nothing behind, and no pins or I/O left by a stream dropped early.

mod common;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use bufmgr::{
    BlockNumber, BufferPool, BufferTag, ErrorKind, ReadRequest, RelFork, RingKind, StorageBackend,
    StreamConfig,
};
use common::{TestDb, check_page, rel, row_of, small_config, tag, with_timeout};

const REL: u32 = 31;

/// Stream `blocks` of REL and check each page is the model page of the
/// block expected next; returns the blocks seen.
fn stream_all(
    pool: &BufferPool,
    blocks: std::ops::Range<BlockNumber>,
    ring: Option<bufmgr::Ring>,
    config: StreamConfig,
) -> Vec<BlockNumber> {
    stream_all_ring(pool, blocks, ring, config).0
}

/// [`stream_all`], also returning the size of the stream's ring (a
/// bulk-read ring grows to fit the stream's distance).
fn stream_all_ring(
    pool: &BufferPool,
    blocks: std::ops::Range<BlockNumber>,
    ring: Option<bufmgr::Ring>,
    config: StreamConfig,
) -> (Vec<BlockNumber>, Option<usize>) {
    let mut s = pool.read_stream(rel(REL), blocks, ring, config);
    let ring_len = s.ring_len();
    let mut seen = Vec::new();
    while let Some(b) = s.next_buffer() {
        let b = b.unwrap_or_else(|e| panic!("stream: {e}"));
        let g = b.lock_shared();
        check_page(&g, g.block()).unwrap_or_else(|e| panic!("{e}"));
        seen.push(g.block());
    }
    assert!(
        s.next_buffer().is_none(),
        "a finished stream stays finished"
    );
    (seen, ring_len)
}

fn assert_quiet(pool: &BufferPool) {
    assert_eq!(pool.pinned_buffers(), 0, "pins left behind");
    assert_eq!(pool.io_in_progress(), 0, "I/O left in progress");
}

/// Every block once, in order, on a pool a quarter of the relation's size,
/// with and without a ring, for lookahead 1..64 and io_combine 1..16; each
/// block read exactly once per pass (the pool starts each pass empty).
#[test]
fn a_stream_yields_every_block_in_order() {
    with_timeout(120, || {
        const N: BlockNumber = 512;
        let db = TestDb::new();
        db.create_rel(rel(REL), N);
        let pool = db.pool(small_config(128));
        for lookahead in [1, 2, 3, 7, 16, 31, 64] {
            for io_combine in [1, 2, 5, 16] {
                for with_ring in [false, true] {
                    pool.evict_all().unwrap();
                    let ring = with_ring.then(|| pool.ring_forced(RingKind::BulkRead, 64).unwrap());
                    let reads = db.faulty.reads();
                    let config = StreamConfig::default()
                        .lookahead(lookahead)
                        .io_combine(io_combine);
                    let (seen, ring_len) = stream_all_ring(&pool, 0..N, ring, config);
                    let what = format!(
                        "lookahead {lookahead}, io_combine {io_combine}, ring {ring_len:?}"
                    );
                    assert_eq!(seen, (0..N).collect::<Vec<_>>(), "{what}");
                    assert_eq!(db.faulty.reads() - reads, u64::from(N), "{what}");
                    assert_quiet(&pool);
                    if let Some(len) = ring_len {
                        // Scan resistance: the ring (grown to the distance
                        // or not) holds the scan, and never more than
                        // pool / 8 of it.
                        let resident = pool.resident_pages().get(&rel(REL)).copied().unwrap_or(0);
                        assert!(
                            resident <= len && len <= pool.size() / 8,
                            "{what}: {resident} pages resident, ring of {len}"
                        );
                        assert!(len >= (lookahead + 1).min(pool.size() / 8), "{what}");
                    }
                }
            }
        }
        assert_eq!(db.faulty.overlapping_reads(), 0);
    });
}

/// A sub-range, and a range that is empty.
#[test]
fn a_stream_over_part_of_a_relation() {
    with_timeout(30, || {
        let db = TestDb::new();
        db.create_rel(rel(REL), 40);
        let pool = db.pool(small_config(32));
        let seen = stream_all(&pool, 7..29, None, StreamConfig::default());
        assert_eq!(seen, (7..29).collect::<Vec<_>>());
        assert!(stream_all(&pool, 5..5, None, StreamConfig::default()).is_empty());
        assert_quiet(&pool);
    });
}

/// The distance is the lookahead limited to pool / 8 and to the ring's
/// size - 1; a bulk-read ring grows to fit the distance (at most pool / 8,
/// the ring cap), any other ring keeps its size.
#[test]
fn the_distance_fits_the_ring_and_the_pool() {
    let db = TestDb::new();
    db.create_rel(rel(REL), 4);
    let pool = db.pool(small_config(256));
    let cfg = StreamConfig::default().lookahead(64);
    let s = pool.read_stream(rel(REL), 0..4, None, cfg);
    assert_eq!(s.distance(), 32);
    assert_eq!(s.current_distance(), 16, "a stream starts at 16 blocks");
    // A bulk-read ring of 5 grows to pool / 8 = 32; the distance is 31.
    let ring = pool.ring_forced(RingKind::BulkRead, 40).unwrap();
    assert_eq!(ring.len(), 5);
    let s = pool.read_stream(rel(REL), 0..4, Some(ring), cfg);
    assert_eq!((s.distance(), s.ring_len()), (31, Some(32)));
    assert!(s.uses_ring());
    // A bulk-read ring grows only as far as the lookahead needs.
    let ring = pool.ring_forced(RingKind::BulkRead, 40).unwrap();
    let s = pool.read_stream(rel(REL), 0..4, Some(ring), cfg.lookahead(9));
    assert_eq!((s.distance(), s.ring_len()), (9, Some(10)));
    // A vacuum ring is not grown: the distance fits it.
    let ring = pool.ring_forced(RingKind::Vacuum, 40).unwrap();
    let s = pool.read_stream(rel(REL), 0..4, Some(ring), cfg);
    assert_eq!((s.distance(), s.ring_len()), (4, Some(5)));
    let small = db.pool(small_config(8));
    assert_eq!(small.read_stream(rel(REL), 0..4, None, cfg).distance(), 1);
}

/// A backend that records the length of every `read_run` and `read_batch`,
/// and can make reads of one block slow and failing.
#[derive(Debug)]
struct RunRecorder {
    inner: Arc<dyn StorageBackend>,
    runs: Mutex<Vec<usize>>,
    batches: Mutex<Vec<usize>>,
    slow_failure: Mutex<Option<(BlockNumber, Duration)>>,
}

impl RunRecorder {
    fn new(inner: Arc<dyn StorageBackend>) -> Arc<RunRecorder> {
        Arc::new(RunRecorder {
            inner,
            runs: Mutex::new(Vec::new()),
            batches: Mutex::new(Vec::new()),
            slow_failure: Mutex::new(None),
        })
    }
}

impl StorageBackend for RunRecorder {
    fn name(&self) -> &'static str {
        "run-recorder"
    }
    fn path(&self, rf: RelFork) -> PathBuf {
        self.inner.path(rf)
    }
    fn create(&self, rf: RelFork) -> bufmgr::Result<()> {
        self.inner.create(rf)
    }
    fn exists(&self, rf: RelFork) -> bufmgr::Result<bool> {
        self.inner.exists(rf)
    }
    fn nblocks(&self, rf: RelFork) -> bufmgr::Result<BlockNumber> {
        self.inner.nblocks(rf)
    }
    fn read(&self, tag: BufferTag, page: &mut [u8]) -> bufmgr::Result<()> {
        let slow = *self.slow_failure.lock().unwrap();
        if let Some((block, delay)) = slow
            && tag.block == block
        {
            std::thread::sleep(delay);
            return Err(bufmgr::Error::io(
                "read",
                tag,
                self.inner.path(tag.relfork()),
                std::io::Error::other("slow injected failure"),
            ));
        }
        self.inner.read(tag, page)
    }
    fn write(&self, tag: BufferTag, page: &[u8]) -> bufmgr::Result<()> {
        self.inner.write(tag, page)
    }
    fn truncate(&self, rf: RelFork, nblocks: BlockNumber) -> bufmgr::Result<()> {
        self.inner.truncate(rf, nblocks)
    }
    fn sync(&self, rf: RelFork) -> bufmgr::Result<()> {
        self.inner.sync(rf)
    }
    fn sync_all(&self) -> bufmgr::Result<()> {
        self.inner.sync_all()
    }
    fn unlink(&self, rf: RelFork) -> bufmgr::Result<()> {
        self.inner.unlink(rf)
    }
    fn relations(&self) -> bufmgr::Result<Vec<RelFork>> {
        self.inner.relations()
    }
    fn read_run(&self, tag: BufferTag, pages: &mut [&mut [u8]]) -> bufmgr::Result<()> {
        self.runs.lock().unwrap().push(pages.len());
        if self.slow_failure.lock().unwrap().is_some() {
            for (i, page) in pages.iter_mut().enumerate() {
                self.read(BufferTag::new(tag.relfork(), tag.block + i as u32), page)?;
            }
            return Ok(());
        }
        self.inner.read_run(tag, pages)
    }
    fn read_batch(&self, reqs: &mut [ReadRequest<'_>]) -> Vec<bufmgr::Result<()>> {
        self.batches.lock().unwrap().push(reqs.len());
        self.inner.read_batch(reqs)
    }
}

/// Adjacent misses become one `read_run` of at most `io_combine` blocks; a
/// resident page splits a run, and lone misses go to `read_batch` together.
#[test]
fn adjacent_misses_are_read_in_combined_runs() {
    with_timeout(30, || {
        const N: BlockNumber = 100;
        let db = TestDb::new();
        db.create_rel(rel(REL), N);
        let rec = RunRecorder::new(db.backend());
        let pool = BufferPool::new(small_config(256), rec.clone()).unwrap();
        let cfg = StreamConfig::default().lookahead(16).io_combine(8);
        assert_eq!(stream_all(&pool, 0..N, None, cfg).len(), N as usize);
        let runs = std::mem::take(&mut *rec.runs.lock().unwrap());
        // 100 blocks = 12 operations of 8 (half the distance) + one of 4.
        assert_eq!(runs, [[8; 12].as_slice(), &[4]].concat());
        assert!(rec.batches.lock().unwrap().is_empty());

        // Every other block resident: only lone misses, one batch per
        // operation (half the distance: 8 blocks, 4 misses).
        pool.evict_all().unwrap();
        for b in (0..32).step_by(2) {
            drop(pool.read_buffer(rel(REL), b, None).unwrap());
        }
        assert_eq!(stream_all(&pool, 0..32, None, cfg).len(), 32);
        assert!(rec.runs.lock().unwrap().is_empty());
        assert_eq!(*rec.batches.lock().unwrap(), [4, 4, 4, 4]);
        assert_quiet(&pool);
    });
}

/// One thread streams while others read the same blocks with read_buffer,
/// all missing at once (a read delay widens the window): every page is
/// correct, the stream sees each block once in order, and no block is ever
/// read twice at once; on a pool that holds the relation, each block is
/// read exactly once in all.
#[test]
fn concurrent_streams_and_point_reads_read_each_block_once() {
    with_timeout(120, || {
        const N: BlockNumber = 128;
        let db = TestDb::new();
        db.create_rel(rel(REL), N);
        let pool = db.pool(small_config(1024));
        db.faulty.set_read_delay(Duration::from_micros(300));
        let start = Barrier::new(4);
        std::thread::scope(|sc| {
            for t in 0..2 {
                let (pool, start) = (&pool, &start);
                sc.spawn(move || {
                    start.wait();
                    let cfg = StreamConfig::default()
                        .lookahead(8 + 8 * t)
                        .io_combine(4 << t);
                    assert_eq!(
                        stream_all(pool, 0..N, None, cfg),
                        (0..N).collect::<Vec<_>>()
                    );
                });
            }
            for t in 0..2u32 {
                let (pool, start) = (&pool, &start);
                sc.spawn(move || {
                    start.wait();
                    // One forwards with a stride, one backwards.
                    let order: Vec<BlockNumber> = if t == 0 {
                        (0..N).map(|i| (i * 5) % N).collect()
                    } else {
                        (0..N).rev().collect()
                    };
                    for b in order {
                        let g = pool.read_buffer(rel(REL), b, None).unwrap().lock_shared();
                        assert_eq!(check_page(&g, b), Ok(0));
                    }
                });
            }
        });
        db.faulty.clear();
        assert_eq!(db.faulty.overlapping_reads(), 0);
        for b in 0..N {
            assert_eq!(db.faulty.reads_of(tag(REL, b)), 1, "block {b}");
        }
        assert_quiet(&pool);
    });
}

/// The same on a pool smaller than the relation, for several passes: pages
/// are re-read as they are evicted, but never two reads of one block at
/// once, and every page read is the right one.
#[test]
fn concurrent_streams_and_point_reads_on_a_small_pool() {
    with_timeout(120, || {
        const N: BlockNumber = 256;
        let db = TestDb::new();
        db.create_rel(rel(REL), N);
        let pool = db.pool(small_config(64));
        let stop = AtomicBool::new(false);
        std::thread::scope(|sc| {
            let (pool_r, stop_r) = (&pool, &stop);
            let readers: Vec<_> = (0..2u32)
                .map(|t| {
                    sc.spawn(move || {
                        let mut b = t * 17;
                        while !stop_r.load(Ordering::Relaxed) {
                            b = (b + 7 + t) % N;
                            let g = pool_r.read_buffer(rel(REL), b, None).unwrap().lock_shared();
                            assert_eq!(check_page(&g, b), Ok(0));
                        }
                    })
                })
                .collect();
            for pass in 0..4 {
                let ring =
                    (pass % 2 == 1).then(|| pool.ring_forced(RingKind::BulkRead, 64).unwrap());
                let cfg = StreamConfig::default().lookahead(4 + pass * 3);
                assert_eq!(
                    stream_all(&pool, 0..N, ring, cfg),
                    (0..N).collect::<Vec<_>>()
                );
            }
            stop.store(true, Ordering::Relaxed);
            for r in readers {
                r.join().unwrap();
            }
        });
        assert_eq!(db.faulty.overlapping_reads(), 0);
        assert_quiet(&pool);
    });
}

/// A read fails mid-stream: the stream yields the blocks before it in order,
/// then the error (naming the file and the block), then nothing; no pin, no
/// I/O and no never-valid page is left; the next stream reads everything.
#[test]
fn a_read_failure_ends_the_stream_and_leaves_nothing_behind() {
    with_timeout(60, || {
        const N: BlockNumber = 64;
        let db = TestDb::new();
        db.create_rel(rel(REL), N);
        let pool = db.pool(small_config(64));
        for io_combine in [1, 4, 16] {
            pool.evict_all().unwrap();
            db.faulty.fail_reads_after(21);
            let cfg = StreamConfig::default().lookahead(8).io_combine(io_combine);
            let mut s = pool.read_stream(rel(REL), 0..N, None, cfg);
            let mut seen = 0;
            let err = loop {
                match s.next_buffer().expect("the stream ended without the error") {
                    Ok(b) => {
                        assert_eq!(b.block(), seen);
                        seen += 1;
                    }
                    Err(e) => break e,
                }
            };
            assert!(s.next_buffer().is_none(), "an error ends the stream");
            // The failing read is block 21, but the budget is spent by then:
            // a failed combined read is read again page by page, so the
            // error may come at an earlier block of that run.
            assert!(
                seen <= 21 && seen + io_combine as u32 > 21,
                "{seen} {io_combine}"
            );
            assert_eq!(err.kind(), ErrorKind::Io, "{err}");
            let msg = err.to_string();
            assert!(msg.contains("injected read failure"), "{msg}");
            assert!(
                msg.contains(&db.storage.path(rel(REL)).display().to_string()),
                "{msg}"
            );
            assert!(
                msg.contains(&format!("block {seen}")),
                "the error names the block: {msg}"
            );
            drop(s);
            assert_quiet(&pool);
            for b in seen..N {
                assert!(
                    row_of(&pool, tag(REL, b)).is_none(),
                    "block {b} left resident"
                );
            }
            db.faulty.clear();
            let all = stream_all(&pool, 0..N, None, cfg);
            assert_eq!(all, (0..N).collect::<Vec<_>>());
            assert_quiet(&pool);
        }
        assert_eq!(db.faulty.overlapping_reads(), 0);
    });
}

/// A stream past the end of the relation fails at the end, and leaves
/// nothing that would stop the relation from being extended there.
#[test]
fn a_stream_past_the_end_does_not_block_extension() {
    with_timeout(30, || {
        let db = TestDb::new();
        db.create_rel(rel(REL), 10);
        let pool = db.pool(small_config(64));
        let mut s = pool.read_stream(rel(REL), 0..14, None, StreamConfig::default());
        let mut seen = 0;
        let err = loop {
            match s.next_buffer().unwrap() {
                Ok(_) => seen += 1,
                Err(e) => break e,
            }
        };
        drop(s);
        assert_eq!(seen, 10, "{err}");
        assert_quiet(&pool);
        let mut p = pool.extend(rel(REL), None).unwrap();
        assert_eq!(p.block(), 10);
        p.mark_dirty();
        drop(p);
        assert_quiet(&pool);
    });
}

/// Threads waiting for a block whose stream read fails (slowly) do not
/// hang: they try the read themselves and get the error naming the block.
#[test]
fn waiters_of_a_failed_stream_read_do_not_hang() {
    with_timeout(30, || {
        let db = TestDb::new();
        db.create_rel(rel(REL), 16);
        let rec = RunRecorder::new(db.backend());
        let pool = BufferPool::new(small_config(64), rec.clone()).unwrap();
        *rec.slow_failure.lock().unwrap() = Some((3, Duration::from_millis(100)));
        let start = Barrier::new(3);
        std::thread::scope(|sc| {
            sc.spawn(|| {
                start.wait();
                let mut s = pool.read_stream(rel(REL), 0..16, None, StreamConfig::default());
                for b in 0..3 {
                    assert_eq!(s.next_buffer().unwrap().unwrap().block(), b);
                }
                let e = s.next_buffer().unwrap().unwrap_err();
                assert!(e.to_string().contains("block 3"), "{e}");
            });
            for _ in 0..2 {
                sc.spawn(|| {
                    start.wait();
                    std::thread::sleep(Duration::from_millis(20));
                    let e = pool.read_buffer(rel(REL), 3, None).unwrap_err();
                    let msg = e.to_string();
                    assert!(msg.contains("slow injected failure"), "{msg}");
                    assert!(msg.contains("block 3"), "{msg}");
                    assert!(
                        msg.contains(&db.storage.path(rel(REL)).display().to_string()),
                        "{msg}"
                    );
                });
            }
        });
        *rec.slow_failure.lock().unwrap() = None;
        assert_quiet(&pool);
        assert_eq!(
            stream_all(&pool, 0..16, None, StreamConfig::default()).len(),
            16
        );
        assert_quiet(&pool);
    });
}

/// Dropped half-way, a stream leaves no pin and no I/O in progress; the
/// blocks it read ahead stay in the pool, unpinned.
#[test]
fn a_stream_dropped_half_way_leaves_nothing_pinned() {
    with_timeout(30, || {
        const N: BlockNumber = 100;
        let db = TestDb::new();
        db.create_rel(rel(REL), N);
        let pool = db.pool(small_config(256));
        for lookahead in [1, 5, 16, 32] {
            pool.evict_all().unwrap();
            let cfg = StreamConfig::default().lookahead(lookahead);
            let mut s = pool.read_stream(rel(REL), 0..N, None, cfg);
            for b in 0..7 {
                assert_eq!(s.next_buffer().unwrap().unwrap().block(), b);
            }
            assert!(pool.pinned_buffers() > 0 || lookahead == 1);
            drop(s);
            assert_quiet(&pool);
        }
    });
}

/// `release_ahead` unpins what was read ahead; the stream goes on with the
/// same blocks, pinned again as hits (no second read).
#[test]
fn release_ahead_unpins_and_the_stream_goes_on() {
    with_timeout(30, || {
        const N: BlockNumber = 64;
        let db = TestDb::new();
        db.create_rel(rel(REL), N);
        let pool = db.pool(small_config(256));
        let reads = db.faulty.reads();
        let stats = pool.stats();
        let mut s = pool.read_stream(rel(REL), 0..N, None, StreamConfig::default());
        let mut seen = Vec::new();
        loop {
            let Some(b) = s.next_buffer() else { break };
            seen.push(b.unwrap().block());
            if seen.len() % 5 == 0 {
                s.release_ahead();
                assert_eq!(s.pinned_ahead(), 0);
                assert_quiet(&pool);
            }
        }
        assert_eq!(seen, (0..N).collect::<Vec<_>>());
        assert_eq!(db.faulty.reads() - reads, u64::from(N));
        // Pinned again without being counted again: one access per block.
        let t = pool.stats().since(&stats).totals();
        assert_eq!(
            (t.accesses, t.reads, t.hits),
            (u64::from(N), u64::from(N), 0)
        );
        drop(s);
        assert_quiet(&pool);
    });
}

/// Blocks released ahead whose buffers other pages then take (a pool much
/// smaller than the reads between two blocks) are read again: the stream
/// still hands out every block, in order, each with its own contents,
/// whether the block comes back in the buffer it was read ahead into, in
/// another one, or was evicted and is read again.
#[test]
fn blocks_released_ahead_and_evicted_meanwhile_come_back_as_themselves() {
    with_timeout(60, || {
        const N: BlockNumber = 48;
        const OTHER: u32 = 32;
        // Other blocks numbered apart from the stream's, so a buffer that
        // holds one of them never passes for a stream block's page.
        const OTHER_FIRST: BlockNumber = 1000;
        const OTHER_N: BlockNumber = 64;
        let db = TestDb::new();
        db.create_rel(rel(REL), N);
        db.create_rel(rel(OTHER), OTHER_FIRST + OTHER_N);
        let pool = db.pool(small_config(24));
        let cfg = StreamConfig::default().lookahead(8);
        let mut s = pool.read_stream(rel(REL), 0..N, None, cfg);
        let mut next = 0;
        loop {
            {
                let Some(b) = s.next_buffer() else { break };
                let b = b.unwrap();
                assert_eq!(b.block(), next);
                assert_eq!(check_page(&b.lock_shared(), next), Ok(0), "block {next}");
            }
            s.release_ahead();
            // Between blocks: none, a few or enough other pages to turn
            // the whole pool over.
            let others = [0, 3, 40][next as usize % 3];
            for o in 0..others {
                let block = OTHER_FIRST + (next * 7 + o) % OTHER_N;
                let p = pool.read_buffer(rel(OTHER), block, None).unwrap();
                assert_eq!(check_page(&p.lock_shared(), block), Ok(0));
            }
            next += 1;
        }
        assert_eq!(next, N);
        drop(s);
        assert_quiet(&pool);
    });
}

/// A block read ahead, unpinned by `release_ahead` and pinned again when its
/// turn comes was accessed once: the evictor sees one access too (a page
/// read once stays at the first step: COOL for HOT/COOL and probation, and
/// for probation still in the queue; usage 1 for the clock).
#[test]
fn a_block_released_ahead_and_pinned_again_is_one_access_to_the_evictor() {
    with_timeout(30, || {
        const N: BlockNumber = 64;
        for evictor in bufmgr::Evictor::ALL {
            let db = TestDb::new();
            db.create_rel(rel(REL), N);
            let pool = db.pool(small_config(256).evictor(evictor));
            let mut s = pool.read_stream(rel(REL), 0..N, None, StreamConfig::default());
            let mut released = 0;
            loop {
                let Some(b) = s.next_buffer() else { break };
                drop(b.unwrap());
                if s.pinned_ahead() > 0 {
                    released += s.pinned_ahead();
                    s.release_ahead();
                }
            }
            drop(s);
            assert!(released > 0, "{evictor}: nothing was read ahead");
            let first_step = u8::from(evictor == bufmgr::Evictor::Clock);
            for b in 0..N {
                let row = row_of(&pool, tag(REL, b)).unwrap();
                assert_eq!(row.usage, first_step, "{evictor}: block {b}");
                assert_eq!(
                    row.probation,
                    evictor == bufmgr::Evictor::Probation,
                    "{evictor}: block {b}"
                );
            }
        }
    });
}

/// The thread that owns a stream asks for blocks the stream has started
/// (read ahead, pinned): it gets them at once, it does not wait on itself.
#[test]
fn the_streaming_thread_reads_its_own_window_without_waiting() {
    with_timeout(30, || {
        const N: BlockNumber = 64;
        let db = TestDb::new();
        db.create_rel(rel(REL), N);
        let pool = db.pool(small_config(256));
        let cfg = StreamConfig::default().lookahead(16);
        let mut s = pool.read_stream(rel(REL), 0..N, None, cfg);
        let mut next = 0;
        while let Some(b) = s.next_buffer() {
            let b = b.unwrap();
            assert_eq!(b.block(), next);
            drop(b);
            // Everything in the window, and a little beyond it.
            for w in next..(next + 20).min(N) {
                let p = pool.read_buffer(rel(REL), w, None).unwrap().lock_shared();
                assert_eq!(check_page(&p, w), Ok(0));
            }
            next += 1;
        }
        assert_eq!(next, N);
        drop(s);
        assert_quiet(&pool);
        for b in 0..N {
            assert_eq!(db.faulty.reads_of(tag(REL, b)), 1, "block {b}");
        }
    });
}

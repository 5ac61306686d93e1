//! What the buffer manager's integration tests share:
//!
//! - [`with_timeout`]: a watchdog, so a deadlock fails the test instead of
//!   hanging the run;
//! - [`TestDb`]: a temporary data directory with the storage stack
//!   `FileStorage -> FaultyStorage -> TestStorage` and pools over it;
//! - [`TestStorage`]: a storage wrapper that logs every write (with the page
//!   LSN and the WAL's flushed LSN at that moment) and can hold the writes of
//!   one block, or the next fsync, at a gate;
//! - [`TestWal`]: a [`WalSink`] with a settable flushed LSN that records every
//!   flush and full-page-image request;
//! - the model page format ([`fill_page`], [`check_page`]): block number,
//!   version counter, and a fill derived from both, so a torn or misplaced
//!   page is detected.
//!
//! It uses nothing but `bufmgr` and `tempfile`: the workspace's `tests`
//! crate includes this same file for its cross-crate tests, so it is
//! written once.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use bufmgr::page::{self, OWNER_HEADER_OFFSET};
use bufmgr::{
    BlockNumber, BufferPool, BufferTag, FaultyStorage, FileStorage, PAGE_SIZE, PoolConfig, RelFork,
    RelId, Result, StorageBackend, WalError, WalSink,
};

// ---------------------------------------------------------------------------
// Watchdog
// ---------------------------------------------------------------------------

/// Run `f` on its own thread and return its result; panic with a clear
/// message if it does not finish within `secs` seconds (a deadlock or a
/// livelock then fails the test instead of hanging the whole run). A panic
/// inside `f` is propagated unchanged.
pub fn with_timeout<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let name = std::thread::current().name().unwrap_or("test").to_string();
    let handle = std::thread::Builder::new()
        .name(format!("{name} (watched)"))
        .spawn(move || {
            let r = f();
            // The receiver is gone only if the watchdog already fired.
            let _ = tx.send(r);
        })
        .expect("spawn the watched test thread");
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(r) => {
            let _ = handle.join();
            r
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => match handle.join() {
            Err(payload) => std::panic::resume_unwind(payload),
            Ok(()) => unreachable!("the watched thread ended without a result"),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => panic!(
            "watchdog: `{name}` did not finish within {secs} s \
             (deadlock or livelock in the buffer manager?)"
        ),
    }
}

/// Poll `cond` every millisecond until it is true or `limit` passes;
/// returns whether it became true.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if cond() {
            return true;
        }
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

// ---------------------------------------------------------------------------
// Names
// ---------------------------------------------------------------------------

/// The main fork of relation `n`.
pub const fn rel(n: u32) -> RelFork {
    RelFork::main(RelId(n))
}

/// Block `block` of the main fork of relation `n`.
pub const fn tag(n: u32, block: BlockNumber) -> BufferTag {
    BufferTag::new(rel(n), block)
}

// ---------------------------------------------------------------------------
// Model pages
// ---------------------------------------------------------------------------

/// Offset of the block number in a model page (after the 12-byte header the
/// pool owns: LSN and checksum).
pub const MODEL_BLOCK_OFFSET: usize = OWNER_HEADER_OFFSET;
/// Offset of the version counter in a model page.
pub const MODEL_VERSION_OFFSET: usize = MODEL_BLOCK_OFFSET + 4;
/// First byte of the fill.
pub const MODEL_FILL_OFFSET: usize = MODEL_VERSION_OFFSET + 8;
/// The last [`HINT_AREA`] bytes of a model page are not part of the fill:
/// tests set hint bits there while the fill stays checkable.
pub const HINT_AREA: usize = 64;
/// First byte of the hint area.
pub const HINT_AREA_OFFSET: usize = PAGE_SIZE - HINT_AREA;

#[inline]
fn fill_word(block: BlockNumber, version: u64, i: usize) -> u64 {
    let mut x = u64::from(block).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ version.wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
        ^ (i as u64).wrapping_mul(0x1656_67B1_9E37_79F9);
    x ^= x >> 29;
    x.wrapping_mul(0xBF58_476D_1CE4_E5B9)
}

/// Write the model contents of `block` at `version` into `page` (bytes from
/// [`MODEL_BLOCK_OFFSET`] to [`HINT_AREA_OFFSET`]; the LSN and checksum
/// fields and the hint area are left alone).
pub fn fill_page(page: &mut [u8], block: BlockNumber, version: u64) {
    assert_eq!(page.len(), PAGE_SIZE);
    page[MODEL_BLOCK_OFFSET..MODEL_VERSION_OFFSET].copy_from_slice(&block.to_le_bytes());
    page[MODEL_VERSION_OFFSET..MODEL_FILL_OFFSET].copy_from_slice(&version.to_le_bytes());
    for (i, chunk) in page[MODEL_FILL_OFFSET..HINT_AREA_OFFSET]
        .chunks_exact_mut(8)
        .enumerate()
    {
        chunk.copy_from_slice(&fill_word(block, version, i).to_le_bytes());
    }
}

/// Check that `page` is a consistent model page of `block` and return its
/// version; the error says what is wrong (wrong block, torn fill).
pub fn check_page(page: &[u8], block: BlockNumber) -> std::result::Result<u64, String> {
    assert_eq!(page.len(), PAGE_SIZE);
    let b = u32::from_le_bytes(
        page[MODEL_BLOCK_OFFSET..MODEL_VERSION_OFFSET]
            .try_into()
            .unwrap(),
    );
    let v = u64::from_le_bytes(
        page[MODEL_VERSION_OFFSET..MODEL_FILL_OFFSET]
            .try_into()
            .unwrap(),
    );
    if b != block {
        return Err(format!(
            "page of block {block} says it is block {b} (version {v})"
        ));
    }
    for (i, chunk) in page[MODEL_FILL_OFFSET..HINT_AREA_OFFSET]
        .chunks_exact(8)
        .enumerate()
    {
        let want = fill_word(block, v, i);
        let got = u64::from_le_bytes(chunk.try_into().unwrap());
        if got != want {
            return Err(format!(
                "torn page: block {block} version {v}: fill word {i} is {got:#018x}, \
                 expected {want:#018x}"
            ));
        }
    }
    Ok(v)
}

/// The version of a model page, without checking it.
pub fn page_version(page: &[u8]) -> u64 {
    u64::from_le_bytes(
        page[MODEL_VERSION_OFFSET..MODEL_FILL_OFFSET]
            .try_into()
            .unwrap(),
    )
}

/// A model page image of `block` at `version`, with its checksum set, ready
/// to be written to storage directly.
pub fn model_image(block: BlockNumber, version: u64) -> Vec<u8> {
    let mut p = vec![0u8; PAGE_SIZE];
    fill_page(&mut p, block, version);
    page::set_checksum(&mut p, block);
    p
}

/// Read the 16-bit little-endian field at `offset` of a page.
pub fn read_u16(page: &[u8], offset: usize) -> u16 {
    u16::from_le_bytes([page[offset], page[offset + 1]])
}

// ---------------------------------------------------------------------------
// WAL
// ---------------------------------------------------------------------------

/// A [`WalSink`] for tests: WAL is "durable" up to a settable LSN;
/// `needs_flush(lsn)` is `lsn > flushed`; `flush(lsn)` records the call and
/// advances the flushed LSN. Full-page-image requests for hints are recorded
/// and answered with a settable LSN.
#[derive(Debug, Default)]
pub struct TestWal {
    flushed: AtomicU64,
    flushes: Mutex<Vec<u64>>,
    fpi_calls: Mutex<Vec<BufferTag>>,
    /// What `log_hint_full_page` returns (0 = `None`).
    fpi_lsn: AtomicU64,
    fail_flushes: AtomicBool,
    fail_fpis: AtomicBool,
}

impl TestWal {
    pub fn new() -> Arc<TestWal> {
        Arc::new(TestWal::default())
    }

    /// The LSN up to which WAL is durable.
    pub fn flushed(&self) -> u64 {
        self.flushed.load(Ordering::SeqCst)
    }

    /// Pretend WAL is durable up to `lsn`.
    pub fn set_flushed(&self, lsn: u64) {
        self.flushed.store(lsn, Ordering::SeqCst);
    }

    /// Every `flush(lsn)` call so far, in order.
    pub fn flushes(&self) -> Vec<u64> {
        self.flushes.lock().unwrap().clone()
    }

    /// Every `log_hint_full_page` call so far, in order.
    pub fn fpi_calls(&self) -> Vec<BufferTag> {
        self.fpi_calls.lock().unwrap().clone()
    }

    /// Make `log_hint_full_page` return `Some(lsn)` (or `None` for 0).
    pub fn set_fpi_lsn(&self, lsn: u64) {
        self.fpi_lsn.store(lsn, Ordering::SeqCst);
    }

    /// Make every later `log_hint_full_page` fail (or succeed again), as a
    /// WAL insert does on a full disk. Failed calls are recorded too.
    pub fn fail_fpis(&self, fail: bool) {
        self.fail_fpis.store(fail, Ordering::SeqCst);
    }

    /// Make every later `flush` fail (or succeed again).
    pub fn fail_flushes(&self, fail: bool) {
        self.fail_flushes.store(fail, Ordering::SeqCst);
    }
}

impl WalSink for TestWal {
    fn flush(&self, lsn: u64) -> std::result::Result<(), WalError> {
        if self.fail_flushes.load(Ordering::SeqCst) {
            return Err("injected WAL flush failure".into());
        }
        self.flushes.lock().unwrap().push(lsn);
        self.flushed.fetch_max(lsn, Ordering::SeqCst);
        Ok(())
    }

    fn needs_flush(&self, lsn: u64) -> bool {
        lsn > self.flushed()
    }

    fn log_hint_full_page(
        &self,
        tag: BufferTag,
        _page: &[u8],
    ) -> std::result::Result<Option<u64>, WalError> {
        self.fpi_calls.lock().unwrap().push(tag);
        if self.fail_fpis.load(Ordering::SeqCst) {
            return Err("injected WAL insert failure".into());
        }
        let lsn = self.fpi_lsn.load(Ordering::SeqCst);
        Ok((lsn != 0).then_some(lsn))
    }
}

// ---------------------------------------------------------------------------
// Storage wrapper: write log and write gate
// ---------------------------------------------------------------------------

/// One write that reached [`TestStorage`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteRecord {
    pub tag: BufferTag,
    /// The LSN in the page as written.
    pub page_lsn: u64,
    /// The WAL's flushed LSN at the moment of the write (0 without a WAL).
    pub wal_flushed: u64,
    /// The model version in the page as written (see [`page_version`]).
    pub version: u64,
}

/// What the gate of a [`TestStorage`] stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateOn {
    /// Writes of this block.
    Write(BufferTag),
    /// Writes of this block, held once the page has reached the files.
    AfterWrite(BufferTag),
    /// `sync` of any fork.
    Sync,
}

#[derive(Debug, Default)]
struct GateState {
    /// What waits at the gate.
    armed: Option<GateOn>,
    /// A call is waiting at the gate.
    entered: bool,
    open: bool,
}

/// A storage wrapper that logs every write and can stop writes of one block
/// (or fsyncs) at a gate until the test opens it, to catch the pool in the
/// middle of an operation.
#[derive(Debug)]
pub struct TestStorage {
    inner: Arc<dyn StorageBackend>,
    wal: Mutex<Option<Arc<TestWal>>>,
    writes: Mutex<Vec<WriteRecord>>,
    gate: Mutex<GateState>,
    gate_cv: Condvar,
    /// Microseconds every write sleeps before reaching the files.
    write_delay_us: AtomicU64,
}

impl TestStorage {
    pub fn new(inner: Arc<dyn StorageBackend>) -> TestStorage {
        TestStorage {
            inner,
            wal: Mutex::new(None),
            writes: Mutex::new(Vec::new()),
            gate: Mutex::new(GateState::default()),
            gate_cv: Condvar::new(),
            write_delay_us: AtomicU64::new(0),
        }
    }

    /// Make every later write sleep `delay` first (a slow disk).
    pub fn set_write_delay(&self, delay: Duration) {
        self.write_delay_us
            .store(delay.as_micros() as u64, Ordering::SeqCst);
    }

    /// Record the flushed LSN of `wal` with every write.
    pub fn watch_wal(&self, wal: Arc<TestWal>) {
        *self.wal.lock().unwrap() = Some(wal);
    }

    /// Every write so far, in order.
    pub fn writes(&self) -> Vec<WriteRecord> {
        self.writes.lock().unwrap().clone()
    }

    /// Writes of `tag` so far.
    pub fn writes_of(&self, tag: BufferTag) -> Vec<WriteRecord> {
        self.writes
            .lock()
            .unwrap()
            .iter()
            .filter(|w| w.tag == tag)
            .cloned()
            .collect()
    }

    /// Hold the next writes of `tag` at the gate until [`open_gate`](Self::open_gate).
    pub fn arm_gate(&self, tag: BufferTag) {
        self.arm(GateOn::Write(tag));
    }

    /// Hold the next calls of what `on` names at the gate until
    /// [`open_gate`](Self::open_gate).
    pub fn arm(&self, on: GateOn) {
        let mut g = self.gate.lock().unwrap();
        *g = GateState {
            armed: Some(on),
            entered: false,
            open: false,
        };
    }

    /// Stop at the gate if it is armed for `what`.
    fn gate(&self, what: GateOn) {
        let mut g = self.gate.lock().unwrap();
        if g.armed == Some(what) && !g.open {
            g.entered = true;
            self.gate_cv.notify_all();
            // Bounded, so that a broken test cannot hang the pool forever.
            let _unused = self
                .gate_cv
                .wait_timeout_while(g, Duration::from_secs(20), |g| !g.open)
                .unwrap();
        }
    }

    /// Wait until a call is held at the gate; false after `limit`.
    pub fn wait_at_gate(&self, limit: Duration) -> bool {
        let g = self.gate.lock().unwrap();
        let (g, _) = self
            .gate_cv
            .wait_timeout_while(g, limit, |g| !g.entered)
            .unwrap();
        g.entered
    }

    /// Let the held call (and later ones) through.
    pub fn open_gate(&self) {
        let mut g = self.gate.lock().unwrap();
        g.open = true;
        g.armed = None;
        self.gate_cv.notify_all();
    }
}

impl StorageBackend for TestStorage {
    fn name(&self) -> &'static str {
        "test"
    }
    fn path(&self, rf: RelFork) -> PathBuf {
        self.inner.path(rf)
    }
    fn create(&self, rf: RelFork) -> Result<()> {
        self.inner.create(rf)
    }
    fn exists(&self, rf: RelFork) -> Result<bool> {
        self.inner.exists(rf)
    }
    fn nblocks(&self, rf: RelFork) -> Result<BlockNumber> {
        self.inner.nblocks(rf)
    }
    fn read(&self, tag: BufferTag, page: &mut [u8]) -> Result<()> {
        self.inner.read(tag, page)
    }
    fn write(&self, tag: BufferTag, page: &[u8]) -> Result<()> {
        self.gate(GateOn::Write(tag));
        let delay = self.write_delay_us.load(Ordering::SeqCst);
        if delay > 0 {
            std::thread::sleep(Duration::from_micros(delay));
        }
        let wal_flushed = self.wal.lock().unwrap().as_ref().map_or(0, |w| w.flushed());
        let result = self.inner.write(tag, page);
        if result.is_ok() {
            self.gate(GateOn::AfterWrite(tag));
            self.writes.lock().unwrap().push(WriteRecord {
                tag,
                page_lsn: page::page_lsn(page),
                wal_flushed,
                version: page_version(page),
            });
        }
        result
    }
    fn truncate(&self, rf: RelFork, nblocks: BlockNumber) -> Result<()> {
        self.inner.truncate(rf, nblocks)
    }
    fn sync(&self, rf: RelFork) -> Result<()> {
        self.gate(GateOn::Sync);
        self.inner.sync(rf)
    }
    fn sync_all(&self) -> Result<()> {
        self.inner.sync_all()
    }
    fn unlink(&self, rf: RelFork) -> Result<()> {
        self.inner.unlink(rf)
    }
    fn relations(&self) -> Result<Vec<RelFork>> {
        self.inner.relations()
    }
}

// ---------------------------------------------------------------------------
// A data directory and its pools
// ---------------------------------------------------------------------------

/// A temporary data directory with the storage stack
/// `FileStorage -> FaultyStorage -> TestStorage`; pools opened with
/// [`pool`](Self::pool) use the `TestStorage` on top.
#[derive(Debug)]
pub struct TestDb {
    pub dir: tempfile::TempDir,
    pub faulty: Arc<FaultyStorage>,
    pub storage: Arc<TestStorage>,
}

impl Default for TestDb {
    fn default() -> Self {
        TestDb::new()
    }
}

impl TestDb {
    pub fn new() -> TestDb {
        let dir = tempfile::tempdir().expect("temporary directory");
        let file = FileStorage::open(dir.path()).expect("open file storage");
        let faulty = Arc::new(FaultyStorage::new(Arc::new(file)));
        let storage = Arc::new(TestStorage::new(faulty.clone()));
        TestDb {
            dir,
            faulty,
            storage,
        }
    }

    /// The storage pools use.
    pub fn backend(&self) -> Arc<dyn StorageBackend> {
        self.storage.clone()
    }

    /// A pool over this directory, without WAL.
    pub fn pool(&self, config: PoolConfig) -> BufferPool {
        BufferPool::new(config, self.backend()).expect("open pool")
    }

    /// A pool over this directory with `wal`; writes record its flushed LSN.
    pub fn pool_with_wal(&self, config: PoolConfig, wal: Arc<TestWal>) -> BufferPool {
        self.storage.watch_wal(wal.clone());
        BufferPool::with_wal(config, self.backend(), wal).expect("open pool")
    }

    /// A brand-new storage stack over the same files (nothing cached), to see
    /// what really reached them.
    pub fn fresh_storage(&self) -> Arc<dyn StorageBackend> {
        Arc::new(FileStorage::open(self.dir.path()).expect("reopen file storage"))
    }

    /// Create `rf` with `nblocks` model pages at version 0, written straight
    /// to the files (with checksums), bypassing any pool.
    pub fn create_rel(&self, rf: RelFork, nblocks: BlockNumber) {
        let s = self.faulty.inner();
        s.create(rf).expect("create relation");
        for b in 0..nblocks {
            s.write(BufferTag::new(rf, b), &model_image(b, 0))
                .expect("write page");
        }
        s.sync(rf).expect("sync relation");
    }

    /// The bytes of block `block` of `rf` as they are in the file now.
    pub fn read_file_page(&self, rf: RelFork, block: BlockNumber) -> Vec<u8> {
        let mut p = vec![0u8; PAGE_SIZE];
        self.fresh_storage()
            .read(BufferTag::new(rf, block), &mut p)
            .expect("read page from file");
        p
    }
}

/// A small pool configuration for tests: `buffers` buffers, one partition,
/// batch 1, no background writer, checksums on.
pub fn small_config(buffers: usize) -> PoolConfig {
    PoolConfig::new(buffers)
        .partitions(1)
        .batch(bufmgr::SweepBatch::Fixed(1))
        .balancing(false)
}

/// Read `block` of `rf` through `pool` under the shared lock and return its
/// model version (panics if the page is not a consistent model page).
pub fn read_version(pool: &BufferPool, rf: RelFork, block: BlockNumber) -> u64 {
    let g = pool
        .read_buffer(rf, block, None)
        .unwrap_or_else(|e| panic!("read {rf} block {block}: {e}"))
        .lock_shared();
    check_page(&g, block).unwrap_or_else(|e| panic!("{e}"))
}

/// Write the next model version of `block` through `pool` (exclusive lock,
/// fill, `mark_dirty`); returns the new version.
pub fn bump_version(pool: &BufferPool, rf: RelFork, block: BlockNumber) -> u64 {
    let mut g = pool
        .read_buffer(rf, block, None)
        .unwrap_or_else(|e| panic!("read {rf} block {block}: {e}"))
        .lock_exclusive();
    let v = check_page(&g, block).unwrap_or_else(|e| panic!("{e}")) + 1;
    fill_page(&mut g, block, v);
    g.mark_dirty();
    v
}

/// The tags resident in `pool` (buffercache rows with a valid page).
pub fn resident(pool: &BufferPool) -> Vec<BufferTag> {
    pool.buffercache()
        .into_iter()
        .filter_map(|r| r.tag)
        .collect()
}

/// Whether `tag` is resident in `pool`.
pub fn is_resident(pool: &BufferPool, t: BufferTag) -> bool {
    pool.buffercache().iter().any(|r| r.tag == Some(t))
}

/// The buffercache row of `tag`, if resident.
pub fn row_of(pool: &BufferPool, t: BufferTag) -> Option<bufmgr::BufferRow> {
    pool.buffercache().into_iter().find(|r| r.tag == Some(t))
}

/// The open flags (octal, as `/proc/self/fdinfo` shows them) of each of
/// this process's descriptors of `path`.
pub fn open_flags(path: &std::path::Path) -> Vec<i64> {
    use std::fs;
    fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter(|e| fs::read_link(e.path()).ok().as_deref() == Some(path))
        .filter_map(|e| {
            let fd = e.file_name().to_string_lossy().into_owned();
            let info = fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).ok()?;
            let flags = info.lines().find_map(|l| l.strip_prefix("flags:"))?;
            i64::from_str_radix(flags.trim(), 8).ok()
        })
        .collect()
}

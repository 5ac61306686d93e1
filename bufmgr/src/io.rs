//! Relation storage: the files behind the buffer pool, and the ways to reach them.
//!
//! This is the layer PostgreSQL calls `smgr` (the storage-manager switch) and
//! `md` (its one "magnetic disk" implementation). The buffer pool never opens a
//! file itself: it asks a [`StorageBackend`] to read, write, extend, truncate and
//! sync whole pages of one fork of one relation.
//!
//! # Layout
//!
//! Every relation fork is one file, `<datadir>/base/<relno><suffix>`, where the
//! suffix is [`Fork::suffix`]: `base/42` is the main fork of relation 42 and
//! `base/42_fsm` its free-space map. A file holds whole pages of
//! [`PAGE_SIZE`] bytes, block `n` at byte offset `n * PAGE_SIZE`, and nothing
//! else: no header, no per-file metadata. The block count of a fork is the file
//! length divided by `PAGE_SIZE`; a trailing partial page (left by a crash in
//! the middle of an extension) is not counted, and is overwritten by the next
//! extension.
//!
//! # Backends
//!
//! * [`FileStorage`] (`"sync"`): synchronous `pread`/`pwrite` on an open-file
//!   cache, with each file's block count kept in memory after the first open,
//!   so that asking for it costs no system call.
//! * [`FaultyStorage`] (`"faulty"`): wraps another backend and injects failures
//!   (failed reads, writes and syncs, torn writes, a simulated crash), counts
//!   operations, and detects two concurrent reads of the same block, for tests
//!   of the pool's error handling and its I/O de-duplication.
//!
//! # Durability
//!
//! A write reaches the kernel's page cache only; it is durable once
//! [`StorageBackend::sync`] (or [`StorageBackend::sync_all`]) of its fork has
//! returned `Ok`. The same holds for extensions and truncations (the file size
//! is made durable by `fdatasync`). Creating and removing a file fsyncs the
//! `base/` directory before returning, so the name itself is durable.
//!
//! # Not done
//!
//! * No segmenting: PostgreSQL splits a fork into 1 GiB segment files; here a
//!   fork is a single file of any length (up to `u32::MAX` blocks).
//! * No virtual file descriptors: every fork ever touched keeps its file open
//!   until it is unlinked or the backend is dropped (PostgreSQL's `fd.c` closes
//!   and reopens files to stay under the descriptor limit).
//! * No tablespaces or databases: one `base/` directory.
//! * No asynchronous or direct I/O, no read-ahead, no `posix_fadvise`.
//! * No sync request queue: the pool (or checkpointer) calls `sync` itself; a
//!   failed `fdatasync` is reported, and a caller must treat it as fatal (the
//!   kernel may have dropped the dirty pages, so a retry proves nothing).
//! * No holes: a write may extend a fork by exactly one page, never more.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

use crate::error::{Error, Result};
use crate::tag::{BlockNumber, BufferTag, Fork, PAGE_SIZE, RelFork, RelId};

/// Where the pool's pages live: one file per relation fork.
///
/// All methods take `&self` and may be called from many threads at once. Two
/// concurrent extensions of the same fork must be serialised by the caller
/// (the pool holds a per-relation extension lock); everything else is safe to
/// overlap.
pub trait StorageBackend: Send + Sync + std::fmt::Debug {
    /// A short name for logs and benchmarks (`"sync"`, `"faulty"`).
    fn name(&self) -> &'static str;

    /// The file that holds `rf`, for error messages.
    fn path(&self, rf: RelFork) -> PathBuf;

    /// Creates the empty file of `rf` if it does not exist; `Ok` if it does.
    fn create(&self, rf: RelFork) -> Result<()>;

    /// Whether the file of `rf` exists.
    fn exists(&self, rf: RelFork) -> Result<bool>;

    /// The number of whole pages in `rf`. A missing file is an [`Error::Io`]
    /// (`NotFound`) naming the path.
    fn nblocks(&self, rf: RelFork) -> Result<BlockNumber>;

    /// Reads block `tag.block` into `page`, which must be `PAGE_SIZE` bytes
    /// long (panics otherwise).
    ///
    /// A block at or past the end is [`Error::BlockOutOfRange`]; a file
    /// shorter than its block count claims is [`Error::CorruptFile`].
    fn read(&self, tag: BufferTag, page: &mut [u8]) -> Result<()>;

    /// Writes `page` (`PAGE_SIZE` bytes, panics otherwise) as block `tag.block`.
    ///
    /// A block below the block count is overwritten; the block equal to it
    /// extends the fork by one page; a block past it is
    /// [`Error::BlockOutOfRange`] (no holes).
    fn write(&self, tag: BufferTag, page: &[u8]) -> Result<()>;

    /// Cuts `rf` down to `nblocks` pages. Growing a fork this way is
    /// [`Error::BlockOutOfRange`].
    fn truncate(&self, rf: RelFork, nblocks: BlockNumber) -> Result<()>;

    /// Makes everything written to `rf` so far durable (`fdatasync`), whether
    /// or not this backend wrote it.
    fn sync(&self, rf: RelFork) -> Result<()>;

    /// `fdatasync`s every open file, then fsyncs the `base/` directory.
    fn sync_all(&self) -> Result<()>;

    /// Removes the file of `rf`; `Ok` if it does not exist.
    fn unlink(&self, rf: RelFork) -> Result<()>;

    /// Every relation fork with a file in `base/`, sorted. Files whose names
    /// are not `<relno>[<suffix>]` are ignored.
    fn relations(&self) -> Result<Vec<RelFork>>;

    // ---- batched I/O (asynchronous backends override these) ----

    /// Reads the consecutive blocks `tag.block`, `tag.block + 1`, ... into
    /// `pages` (one `PAGE_SIZE` buffer each) as one combined read where the
    /// backend can (PostgreSQL's `io_combine_limit`). The error names the
    /// first block that failed, as [`read`](Self::read)'s would. The
    /// default reads block by block.
    fn read_run(&self, tag: BufferTag, pages: &mut [&mut [u8]]) -> Result<()> {
        for (i, page) in pages.iter_mut().enumerate() {
            let block = tag.block + i as BlockNumber;
            self.read(BufferTag { block, ..tag }, page)?;
        }
        Ok(())
    }

    /// Reads every request, all in flight at once where the backend can;
    /// one result per request, in order. The default reads one by one.
    fn read_batch(&self, reqs: &mut [ReadRequest<'_>]) -> Vec<Result<()>> {
        reqs.iter_mut().map(|r| self.read(r.tag, r.page)).collect()
    }

    /// Writes every request, all in flight at once where the backend can;
    /// one result per request, in order. The default writes one by one.
    fn write_batch(&self, reqs: &[WriteRequest<'_>]) -> Vec<Result<()>> {
        reqs.iter().map(|r| self.write(r.tag, r.page)).collect()
    }
}

/// One read of a [`StorageBackend::read_batch`]: block `tag.block` into `page`.
#[derive(Debug)]
pub struct ReadRequest<'a> {
    pub tag: BufferTag,
    pub page: &'a mut [u8],
}

/// One write of a [`StorageBackend::write_batch`]: `page` as block `tag.block`.
#[derive(Debug)]
pub struct WriteRequest<'a> {
    pub tag: BufferTag,
    pub page: &'a [u8],
}

fn check_page_len(len: usize) {
    assert_eq!(
        len, PAGE_SIZE,
        "a page buffer must be PAGE_SIZE ({PAGE_SIZE}) bytes"
    );
}

fn byte_offset(block: BlockNumber) -> u64 {
    u64::from(block) * PAGE_SIZE as u64
}

/// The relation fork a file in `base/` stores, if its name is one of ours.
fn parse_file_name(name: &str) -> Option<RelFork> {
    let (digits, fork) = Fork::ALL
        .iter()
        .filter(|f| !f.suffix().is_empty())
        .find_map(|&f| name.strip_suffix(f.suffix()).map(|d| (d, f)))
        .unwrap_or((name, Fork::Main));
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let relno: u32 = digits.parse().ok()?;
    // "042" would name relation 42, whose file is "42": not ours.
    if relno.to_string() != digits {
        return None;
    }
    Some(RelFork {
        rel: RelId(relno),
        fork,
    })
}

/// One open relation fork file.
#[derive(Debug)]
struct RelFile {
    file: File,
    path: PathBuf,
    /// Whole pages in the file: from its length at open, then kept up to date
    /// by extensions and truncations.
    nblocks: AtomicU32,
}

/// The synchronous file backend: `pread`/`pwrite` on one file per fork.
#[derive(Debug)]
pub struct FileStorage {
    base: PathBuf,
    files: RwLock<HashMap<RelFork, Arc<RelFile>>>,
}

impl FileStorage {
    /// Opens the storage under `data_dir`, creating `data_dir/base/` if needed
    /// (and fsyncing `base/` and `data_dir` when it did).
    pub fn open(data_dir: &Path) -> Result<FileStorage> {
        let base = data_dir.join("base");
        let existed = base
            .try_exists()
            .map_err(|e| Error::io("stat", "base directory", &base, e))?;
        if !existed {
            fs::create_dir_all(&base)
                .map_err(|e| Error::io("create", "base directory", &base, e))?;
            fsync_dir(&base)?;
            fsync_dir(data_dir)?;
        }
        Ok(FileStorage {
            base,
            files: RwLock::new(HashMap::new()),
        })
    }

    /// The `base/` directory.
    pub fn base_dir(&self) -> &Path {
        &self.base
    }

    /// The open file of `rf`, opening it on first use. `op` and `what` name
    /// the operation for the error if the file cannot be opened.
    fn file(&self, rf: RelFork, op: &'static str, what: &dyn ToString) -> Result<Arc<RelFile>> {
        if let Some(f) = self.files.read().get(&rf) {
            return Ok(Arc::clone(f));
        }
        let path = self.path(rf);
        let open_err = |e| Error::io(op, what.to_string(), &path, e);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(open_err)?;
        let len = file.metadata().map_err(open_err)?.len();
        let nblocks =
            BlockNumber::try_from(len / PAGE_SIZE as u64).map_err(|_| Error::CorruptFile {
                relfork: rf,
                path: path.clone(),
                detail: format!("{len} bytes is more than {} blocks", BlockNumber::MAX),
            })?;
        let rel_file = Arc::new(RelFile {
            file,
            path,
            nblocks: AtomicU32::new(nblocks),
        });
        // Another thread may have opened it meanwhile: keep the first one, so
        // that every thread sees the same block count.
        let mut files = self.files.write();
        Ok(Arc::clone(files.entry(rf).or_insert(rel_file)))
    }
}

fn fsync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io("fsync", "directory", dir, e))
}

impl StorageBackend for FileStorage {
    fn name(&self) -> &'static str {
        "sync"
    }

    fn path(&self, rf: RelFork) -> PathBuf {
        self.base.join(format!("{}{}", rf.rel.0, rf.fork.suffix()))
    }

    fn create(&self, rf: RelFork) -> Result<()> {
        if self.files.read().contains_key(&rf) {
            return Ok(());
        }
        let path = self.path(rf);
        match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(file) => {
                fsync_dir(&self.base)?;
                self.files.write().entry(rf).or_insert_with(|| {
                    Arc::new(RelFile {
                        file,
                        path,
                        nblocks: AtomicU32::new(0),
                    })
                });
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(Error::io("create", rf, path, e)),
        }
    }

    fn exists(&self, rf: RelFork) -> Result<bool> {
        if self.files.read().contains_key(&rf) {
            return Ok(true);
        }
        let path = self.path(rf);
        path.try_exists()
            .map_err(|e| Error::io("stat", rf, path, e))
    }

    fn nblocks(&self, rf: RelFork) -> Result<BlockNumber> {
        Ok(self.file(rf, "open", &rf)?.nblocks.load(Ordering::Acquire))
    }

    fn read(&self, tag: BufferTag, page: &mut [u8]) -> Result<()> {
        check_page_len(page.len());
        let rf = tag.relfork();
        let f = self.file(rf, "open", &tag)?;
        let nblocks = f.nblocks.load(Ordering::Acquire);
        if tag.block >= nblocks {
            return Err(Error::BlockOutOfRange {
                relfork: rf,
                block: tag.block,
                nblocks,
                path: f.path.clone(),
            });
        }
        f.file
            .read_exact_at(page, byte_offset(tag.block))
            .map_err(|e| {
                if e.kind() == io::ErrorKind::UnexpectedEof {
                    Error::CorruptFile {
                        relfork: rf,
                        path: f.path.clone(),
                        detail: format!(
                            "short read of block {}: the file ends inside it, \
                             though it was counted as {nblocks} blocks",
                            tag.block
                        ),
                    }
                } else {
                    Error::io("read", tag, &f.path, e)
                }
            })
    }

    fn write(&self, tag: BufferTag, page: &[u8]) -> Result<()> {
        check_page_len(page.len());
        let rf = tag.relfork();
        let f = self.file(rf, "open", &tag)?;
        let nblocks = f.nblocks.load(Ordering::Acquire);
        if tag.block > nblocks {
            return Err(Error::BlockOutOfRange {
                relfork: rf,
                block: tag.block,
                nblocks,
                path: f.path.clone(),
            });
        }
        f.file
            .write_all_at(page, byte_offset(tag.block))
            .map_err(|e| Error::io("write", tag, &f.path, e))?;
        // An extension: count the new page only once it is fully written.
        // `fetch_max` keeps the count right even if two extensions of the same
        // block race (the caller should have prevented that).
        f.nblocks.fetch_max(tag.block + 1, Ordering::AcqRel);
        Ok(())
    }

    fn truncate(&self, rf: RelFork, nblocks: BlockNumber) -> Result<()> {
        let f = self.file(rf, "open", &rf)?;
        let current = f.nblocks.load(Ordering::Acquire);
        if nblocks > current {
            return Err(Error::BlockOutOfRange {
                relfork: rf,
                block: nblocks,
                nblocks: current,
                path: f.path.clone(),
            });
        }
        // Lower the count first, so that no reader trusts pages being cut off.
        f.nblocks.store(nblocks, Ordering::Release);
        f.file
            .set_len(byte_offset(nblocks))
            .map_err(|e| Error::io("truncate", format!("{rf} to {nblocks} blocks"), &f.path, e))
    }

    fn sync(&self, rf: RelFork) -> Result<()> {
        let f = self.file(rf, "open", &rf)?;
        f.file
            .sync_data()
            .map_err(|e| Error::io("fdatasync", rf, &f.path, e))
    }

    fn sync_all(&self) -> Result<()> {
        let mut open: Vec<(RelFork, Arc<RelFile>)> = self
            .files
            .read()
            .iter()
            .map(|(&rf, f)| (rf, Arc::clone(f)))
            .collect();
        open.sort_by_key(|&(rf, _)| rf);
        for (rf, f) in open {
            f.file
                .sync_data()
                .map_err(|e| Error::io("fdatasync", rf, &f.path, e))?;
        }
        fsync_dir(&self.base)
    }

    fn unlink(&self, rf: RelFork) -> Result<()> {
        let path = self.path(rf);
        self.files.write().remove(&rf);
        match fs::remove_file(&path) {
            Ok(()) => fsync_dir(&self.base),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("unlink", rf, path, e)),
        }
    }

    fn relations(&self) -> Result<Vec<RelFork>> {
        let list_err = |e| Error::io("list", "base directory", &self.base, e);
        let mut out = Vec::new();
        for entry in fs::read_dir(&self.base).map_err(list_err)? {
            let entry = entry.map_err(list_err)?;
            let is_file = entry.file_type().map_err(list_err)?.is_file();
            let name = entry.file_name();
            if let (true, Some(rf)) = (is_file, name.to_str().and_then(parse_file_name)) {
                out.push(rf);
            }
        }
        out.sort();
        Ok(out)
    }
}

/// The faults a [`FaultyStorage`] injects.
/// Hooks called by [`ObservedStorage`] around the calls it passes through.
/// Both default to doing nothing; implement the ones you need.
pub trait StorageObserver: Send + Sync + std::fmt::Debug {
    /// After a successful read of `tag`.
    fn on_read(&self, _tag: BufferTag) {}
    /// Before `page` is written as `tag` (the page LSN is in its first 8 bytes).
    fn on_write(&self, _tag: BufferTag, _page: &[u8]) {}
}

/// A backend that passes every call to another one and tells an observer
/// about reads and writes: for benchmarks that count reads per relation and
/// tests that check an invariant at every write (WAL before data).
#[derive(Debug)]
pub struct ObservedStorage<O: StorageObserver> {
    inner: Arc<dyn StorageBackend>,
    observer: Arc<O>,
}

impl<O: StorageObserver> ObservedStorage<O> {
    pub fn new(inner: Arc<dyn StorageBackend>, observer: Arc<O>) -> ObservedStorage<O> {
        ObservedStorage { inner, observer }
    }

    pub fn observer(&self) -> &Arc<O> {
        &self.observer
    }
}

impl<O: StorageObserver> StorageBackend for ObservedStorage<O> {
    fn name(&self) -> &'static str {
        "observed"
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
        self.inner.read(tag, page)?;
        self.observer.on_read(tag);
        Ok(())
    }
    fn write(&self, tag: BufferTag, page: &[u8]) -> Result<()> {
        self.observer.on_write(tag, page);
        self.inner.write(tag, page)
    }
    fn truncate(&self, rf: RelFork, nblocks: BlockNumber) -> Result<()> {
        self.inner.truncate(rf, nblocks)
    }
    fn sync(&self, rf: RelFork) -> Result<()> {
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
    reads_in_flight: Mutex<HashMap<BufferTag, u32>>,
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
            reads_in_flight: Mutex::new(HashMap::new()),
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

    /// Calls of `read` so far, failed ones included.
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

    /// Calls of `read` of `tag` so far, failed ones included.
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
struct InFlight<'a> {
    map: &'a Mutex<HashMap<BufferTag, u32>>,
    tag: BufferTag,
}

impl Drop for InFlight<'_> {
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
        let _in_flight = {
            let mut map = self.reads_in_flight.lock();
            let n = map.entry(tag).or_insert(0);
            if *n > 0 {
                self.overlapping_reads.fetch_add(1, Ordering::Relaxed);
            }
            *n += 1;
            InFlight {
                map: &self.reads_in_flight,
                tag,
            }
        };
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        self.inner.read(tag, page)
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

#[cfg(test)]
mod tests {
    use super::*;

    const REL: RelFork = RelFork::main(RelId(42));

    fn page(fill: u8) -> Vec<u8> {
        vec![fill; PAGE_SIZE]
    }

    fn tag(block: BlockNumber) -> BufferTag {
        BufferTag::new(REL, block)
    }

    fn storage() -> (tempfile::TempDir, FileStorage) {
        let dir = tempfile::tempdir().unwrap();
        let s = FileStorage::open(dir.path()).unwrap();
        (dir, s)
    }

    /// A file storage with REL created and `n` pages written (page `i` filled
    /// with `i + 1`).
    fn storage_with(n: BlockNumber) -> (tempfile::TempDir, FileStorage) {
        let (dir, s) = storage();
        s.create(REL).unwrap();
        for b in 0..n {
            s.write(tag(b), &page(b as u8 + 1)).unwrap();
        }
        (dir, s)
    }

    fn faulty(n: BlockNumber) -> (tempfile::TempDir, Arc<FaultyStorage>) {
        let (dir, s) = storage_with(n);
        (dir, Arc::new(FaultyStorage::new(Arc::new(s))))
    }

    fn read_page(s: &dyn StorageBackend, block: BlockNumber) -> Vec<u8> {
        let mut buf = page(0);
        s.read(tag(block), &mut buf).unwrap();
        buf
    }

    fn io_message(e: &Error) -> String {
        match e {
            Error::Io { source, .. } => source.to_string(),
            other => panic!("expected Error::Io, got {other:?}"),
        }
    }

    #[derive(Debug, Default)]
    struct Seen {
        reads: parking_lot::Mutex<Vec<BufferTag>>,
        writes: parking_lot::Mutex<Vec<(BufferTag, u8)>>,
    }

    impl StorageObserver for Seen {
        fn on_read(&self, tag: BufferTag) {
            self.reads.lock().push(tag);
        }
        fn on_write(&self, tag: BufferTag, page: &[u8]) {
            self.writes.lock().push((tag, page[0]));
        }
    }

    #[test]
    fn observed_storage_reports_successful_reads_and_every_write() {
        let (_dir, s) = storage_with(0);
        let seen = Arc::new(Seen::default());
        let o = ObservedStorage::new(Arc::new(s), seen.clone());
        o.write(tag(0), &page(5)).unwrap();
        let mut buf = vec![0u8; PAGE_SIZE];
        o.read(tag(0), &mut buf).unwrap();
        assert!(o.read(tag(3), &mut buf).is_err(), "past the end");
        assert_eq!(*seen.writes.lock(), [(tag(0), page(5)[0])]);
        assert_eq!(
            *seen.reads.lock(),
            [tag(0)],
            "a failed read is not reported"
        );
        assert_eq!(o.nblocks(REL).unwrap(), 1);
    }

    #[test]
    fn write_then_read_round_trips() {
        let (_dir, s) = storage_with(0);
        let mut p = page(0);
        p[0] = 1;
        p[PAGE_SIZE - 1] = 0xAB;
        s.write(tag(0), &p).unwrap();
        assert_eq!(read_page(&s, 0), p);
        s.write(tag(0), &page(7)).unwrap();
        assert_eq!(read_page(&s, 0), page(7));
        assert_eq!(s.nblocks(REL).unwrap(), 1);
        s.sync(REL).unwrap();
        s.sync_all().unwrap();
        assert_eq!(s.name(), "sync");
    }

    #[test]
    fn writing_at_nblocks_extends() {
        let (_dir, s) = storage_with(0);
        assert_eq!(s.nblocks(REL).unwrap(), 0);
        for b in 0..5 {
            s.write(tag(b), &page(b as u8 + 1)).unwrap();
            assert_eq!(s.nblocks(REL).unwrap(), b + 1);
        }
        for b in 0..5 {
            assert_eq!(read_page(&s, b), page(b as u8 + 1));
        }
        let len = fs::metadata(s.path(REL)).unwrap().len();
        assert_eq!(len, 5 * PAGE_SIZE as u64);
    }

    #[test]
    fn writing_past_nblocks_is_out_of_range() {
        let (_dir, s) = storage_with(2);
        let err = s.write(tag(3), &page(1)).unwrap_err();
        assert!(
            matches!(
                err,
                Error::BlockOutOfRange {
                    block: 3,
                    nblocks: 2,
                    ..
                }
            ),
            "{err:?}"
        );
        let msg = err.to_string();
        assert!(msg.contains(&s.path(REL).display().to_string()), "{msg}");
        assert!(msg.contains("block 3"), "{msg}");
        assert_eq!(s.nblocks(REL).unwrap(), 2);
    }

    #[test]
    fn reading_past_the_end_is_out_of_range() {
        let (_dir, s) = storage_with(2);
        let mut buf = page(0);
        let err = s.read(tag(2), &mut buf).unwrap_err();
        assert!(
            matches!(
                err,
                Error::BlockOutOfRange {
                    block: 2,
                    nblocks: 2,
                    ..
                }
            ),
            "{err:?}"
        );
        let msg = err.to_string();
        assert!(msg.contains(&s.path(REL).display().to_string()), "{msg}");
        assert!(msg.contains("block 2"), "{msg}");
    }

    #[test]
    fn missing_file_is_not_found_naming_the_path() {
        let (_dir, s) = storage();
        let err = s.nblocks(REL).unwrap_err();
        match &err {
            Error::Io { source, path, .. } => {
                assert_eq!(source.kind(), io::ErrorKind::NotFound);
                assert_eq!(path, &s.path(REL));
            }
            other => panic!("{other:?}"),
        }
        assert!(err.to_string().contains("base/42"), "{err}");
        assert!(s.sync(REL).is_err());
        assert!(s.read(tag(0), &mut page(0)).is_err());
    }

    #[test]
    fn nblocks_survives_reopening() {
        let (dir, s) = storage_with(3);
        s.sync_all().unwrap();
        drop(s);
        let s = FileStorage::open(dir.path()).unwrap();
        assert!(s.exists(REL).unwrap());
        assert_eq!(s.nblocks(REL).unwrap(), 3);
        assert_eq!(read_page(&s, 2), page(3));
    }

    #[test]
    fn create_is_idempotent_and_keeps_contents() {
        let (dir, s) = storage_with(2);
        s.create(REL).unwrap();
        assert_eq!(s.nblocks(REL).unwrap(), 2);
        let s2 = FileStorage::open(dir.path()).unwrap();
        s2.create(REL).unwrap();
        assert_eq!(s2.nblocks(REL).unwrap(), 2);
    }

    #[test]
    fn truncate_cuts_pages_off() {
        let (dir, s) = storage_with(4);
        s.truncate(REL, 1).unwrap();
        assert_eq!(s.nblocks(REL).unwrap(), 1);
        assert!(matches!(
            s.read(tag(1), &mut page(0)),
            Err(Error::BlockOutOfRange { .. })
        ));
        assert_eq!(read_page(&s, 0), page(1));
        // Growing by truncation is refused.
        assert!(matches!(
            s.truncate(REL, 2),
            Err(Error::BlockOutOfRange { .. })
        ));
        // Extending after a truncation writes where the cut was.
        s.write(tag(1), &page(9)).unwrap();
        s.truncate(REL, 0).unwrap();
        let s2 = FileStorage::open(dir.path()).unwrap();
        assert_eq!(s2.nblocks(REL).unwrap(), 0);
    }

    #[test]
    fn unlink_removes_the_file() {
        let (_dir, s) = storage_with(2);
        assert!(s.exists(REL).unwrap());
        s.unlink(REL).unwrap();
        assert!(!s.exists(REL).unwrap());
        assert!(!s.path(REL).exists());
        assert!(s.nblocks(REL).is_err());
        // Unlinking a missing file is fine.
        s.unlink(REL).unwrap();
        // Re-creating starts empty.
        s.create(REL).unwrap();
        assert_eq!(s.nblocks(REL).unwrap(), 0);
    }

    #[test]
    fn relations_lists_forks_and_ignores_strangers() {
        let (dir, s) = storage();
        let fsm = RelFork {
            rel: RelId(7),
            fork: Fork::FreeSpace,
        };
        s.create(REL).unwrap();
        s.create(fsm).unwrap();
        s.create(RelFork::main(RelId(7))).unwrap();
        let base = dir.path().join("base");
        for junk in ["readme", "042", "12_vm", "_fsm", "+5", "3.tmp"] {
            fs::write(base.join(junk), b"x").unwrap();
        }
        fs::create_dir(base.join("99")).unwrap();
        assert_eq!(s.path(fsm), base.join("7_fsm"));
        assert_eq!(
            s.relations().unwrap(),
            vec![RelFork::main(RelId(7)), fsm, REL]
        );
    }

    #[test]
    fn trailing_partial_page_is_not_counted() {
        let (dir, s) = storage_with(2);
        drop(s);
        let path = dir.path().join("base/42");
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(&[5u8; 100], 2 * PAGE_SIZE as u64).unwrap();
        drop(f);
        let s = FileStorage::open(dir.path()).unwrap();
        assert_eq!(s.nblocks(REL).unwrap(), 2);
        assert!(matches!(
            s.read(tag(2), &mut page(0)),
            Err(Error::BlockOutOfRange { .. })
        ));
        // The next extension overwrites the partial page.
        s.write(tag(2), &page(3)).unwrap();
        assert_eq!(s.nblocks(REL).unwrap(), 3);
        assert_eq!(read_page(&s, 2), page(3));
    }

    #[test]
    fn file_shorter_than_its_count_is_corrupt() {
        let (dir, s) = storage_with(2);
        assert_eq!(s.nblocks(REL).unwrap(), 2);
        // Someone else cuts the file behind the cache's back.
        let f = OpenOptions::new()
            .write(true)
            .open(dir.path().join("base/42"))
            .unwrap();
        f.set_len(PAGE_SIZE as u64 + 10).unwrap();
        let err = s.read(tag(1), &mut page(0)).unwrap_err();
        assert!(matches!(err, Error::CorruptFile { .. }), "{err:?}");
        assert!(err.to_string().contains("base/42"), "{err}");
    }

    #[test]
    #[should_panic(expected = "PAGE_SIZE")]
    fn wrong_page_length_panics() {
        let (_dir, s) = storage_with(1);
        let _ = s.read(tag(0), &mut [0u8; 100]);
    }

    #[test]
    fn faulty_fails_writes_after_n() {
        let (_dir, f) = faulty(0);
        f.fail_writes_after(2);
        f.write(tag(0), &page(1)).unwrap();
        f.write(tag(1), &page(2)).unwrap();
        for b in [2, 0] {
            let err = f.write(tag(b), &page(3)).unwrap_err();
            assert!(io_message(&err).contains("injected write failure"), "{err}");
            assert!(err.to_string().contains("base/42"), "{err}");
        }
        assert_eq!(f.writes(), 4);
        assert_eq!(f.nblocks(REL).unwrap(), 2);
        assert_eq!(read_page(&*f, 0), page(1));
        assert_eq!(f.name(), "faulty");
    }

    #[test]
    fn faulty_fails_reads_after_n() {
        let (_dir, f) = faulty(2);
        f.fail_reads_after(1);
        read_page(&*f, 0);
        let err = f.read(tag(1), &mut page(0)).unwrap_err();
        assert!(io_message(&err).contains("injected read failure"), "{err}");
        assert!(f.read(tag(0), &mut page(0)).is_err());
        assert_eq!(f.reads(), 3);
        // Writes are unaffected.
        f.write(tag(2), &page(3)).unwrap();
    }

    #[test]
    fn faulty_fails_syncs() {
        let (_dir, f) = faulty(1);
        f.sync(REL).unwrap();
        f.fail_syncs(true);
        assert!(f.sync(REL).is_err());
        let err = f.sync_all().unwrap_err();
        assert!(io_message(&err).contains("injected"), "{err}");
        f.fail_syncs(false);
        f.sync_all().unwrap();
        assert_eq!(f.syncs(), 4);
    }

    #[test]
    fn faulty_torn_write_keeps_old_second_half_and_crashes() {
        let (dir, f) = faulty(2);
        f.tear_next_write(Some(tag(1)));
        // Writes of other blocks go through.
        f.write(tag(0), &page(0x10)).unwrap();
        let err = f.write(tag(1), &page(0xEE)).unwrap_err();
        assert!(
            io_message(&err).contains("injected torn write (simulated crash)"),
            "{err}"
        );
        assert!(f.is_crashed());

        // Read back through a fresh backend: what reached the file.
        let fresh = FileStorage::open(dir.path()).unwrap();
        let torn = read_page(&fresh, 1);
        assert!(torn[..4096].iter().all(|&b| b == 0xEE));
        assert!(torn[4096..].iter().all(|&b| b == 2));
        assert_eq!(read_page(&fresh, 0), page(0x10));

        // Crashed: nothing else gets through; reads still work.
        let err = f.write(tag(0), &page(1)).unwrap_err();
        assert!(io_message(&err).contains("simulated crash: storage is gone"));
        assert!(f.sync(REL).is_err());
        assert!(f.sync_all().is_err());
        assert!(f.truncate(REL, 0).is_err());
        assert!(f.unlink(REL).is_err());
        assert!(f.create(RelFork::main(RelId(5))).is_err());
        assert_eq!(read_page(&*f, 0), page(0x10));
    }

    #[test]
    fn faulty_torn_extension_pads_with_zeros() {
        let (dir, f) = faulty(1);
        f.tear_next_write(None);
        assert!(f.write(tag(1), &page(0x77)).is_err());
        let fresh = FileStorage::open(dir.path()).unwrap();
        assert_eq!(fresh.nblocks(REL).unwrap(), 2);
        let torn = read_page(&fresh, 1);
        assert!(torn[..4096].iter().all(|&b| b == 0x77));
        assert!(torn[4096..].iter().all(|&b| b == 0));
    }

    #[test]
    fn faulty_crash_and_clear() {
        let (_dir, f) = faulty(1);
        assert!(!f.is_crashed());
        f.crash();
        assert!(f.is_crashed());
        assert!(f.write(tag(0), &page(9)).is_err());
        assert!(f.sync(REL).is_err());
        assert_eq!(read_page(&*f, 0), page(1));
        assert!(f.exists(REL).unwrap());
        assert_eq!(f.relations().unwrap(), vec![REL]);

        f.fail_writes_after(0);
        f.fail_reads_after(0);
        f.fail_syncs(true);
        f.tear_next_write(None);
        f.clear();
        assert!(!f.is_crashed());
        f.write(tag(0), &page(9)).unwrap();
        f.write(tag(1), &page(8)).unwrap();
        assert_eq!(read_page(&*f, 1), page(8));
        f.sync(REL).unwrap();
        f.truncate(REL, 1).unwrap();
        f.unlink(REL).unwrap();
        assert!(!f.exists(REL).unwrap());
    }

    #[test]
    fn faulty_detects_overlapping_reads() {
        let (_dir, f) = faulty(2);
        f.set_read_delay(Duration::from_millis(300));
        let two_reads = |a: BlockNumber, b: BlockNumber| {
            let start = std::sync::Barrier::new(2);
            std::thread::scope(|s| {
                for block in [a, b] {
                    let (f, start) = (&f, &start);
                    s.spawn(move || {
                        start.wait();
                        read_page(&**f, block)
                    });
                }
            });
        };
        // Different blocks at once: no overlap.
        two_reads(0, 1);
        assert_eq!(f.overlapping_reads(), 0);
        // The same block at once: an overlap.
        two_reads(1, 1);
        assert_eq!(f.overlapping_reads(), 1);
        // One after the other: no new overlap.
        f.set_read_delay(Duration::ZERO);
        read_page(&*f, 1);
        read_page(&*f, 1);
        assert_eq!(f.overlapping_reads(), 1);
    }

    #[test]
    fn faulty_counts_reads_per_tag() {
        let (_dir, f) = faulty(3);
        for _ in 0..3 {
            read_page(&*f, 0);
        }
        read_page(&*f, 2);
        assert_eq!(f.reads_of(tag(0)), 3);
        assert_eq!(f.reads_of(tag(1)), 0);
        assert_eq!(f.reads_of(tag(2)), 1);
        assert_eq!(f.reads(), 4);
        // A failed read still counts.
        let missing = BufferTag::new(RelFork::main(RelId(1)), 0);
        assert!(f.read(missing, &mut page(0)).is_err());
        assert_eq!(f.reads_of(missing), 1);
    }
}

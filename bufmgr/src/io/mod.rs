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
//!   so that asking for it costs no system call. The cache holds at most
//!   `max_open_files` descriptors (least recently used closed first, reopened
//!   on the next use; PostgreSQL's virtual file descriptors), and an open
//!   that finds the process out of descriptors closes cached ones and retries.
//! * [`UringStorage`] (`"io_uring"`): the same files, cache and checks, with
//!   page reads and writes submitted to io_uring; batches and runs go in with
//!   one `io_uring_enter` (see its module for rings, threads and errors).
//! * [`FaultyStorage`] (`"faulty"`): wraps another backend and injects failures
//!   (failed reads, writes and syncs, torn writes, a simulated crash), counts
//!   operations, and detects two concurrent reads of the same block, for tests
//!   of the pool's error handling and its I/O de-duplication.
//!
//! [`open_storage`] builds the backend an [`IoMode`] asks for
//! (`Auto` probes io_uring and falls back to sync with one line on stderr);
//! with `direct_io` either backend opens its files with `O_DIRECT`; with
//! `mapped_reads` ([`FileOptions`], sync only) `FileStorage` reads single
//! pages by copying them from a mapping of the file (module `mapped`).
//! `FileStorage::read_run` reads a run of consecutive blocks with one
//! `preadv`.
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
//! * No tablespaces or databases: one `base/` directory.
//! * No read-ahead, no `posix_fadvise`; no registered buffers or files for
//!   io_uring.
//! * No sync request queue: the pool (or checkpointer) calls `sync` itself; a
//!   failed `fdatasync` is reported, and a caller must treat it as fatal (the
//!   kernel may have dropped the dirty pages, so a retry proves nothing).
//! * No holes: a write may extend a fork by exactly one page, never more.

mod aligned;
mod faulty;
mod file;
mod mapped;
mod observed;
#[cfg(test)]
pub(crate) mod test_child;
mod uring;

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Re-exported: whether an error is running out of descriptors is decided
/// in `error` (an error's kind depends on it).
pub use crate::error::is_out_of_descriptors;
pub use aligned::AlignedBuf;
pub use faulty::FaultyStorage;
pub use file::{
    FileOptions, FileStorage, default_max_open_files, shed_cached_descriptor, with_spare_descriptor,
};
pub use observed::{ObservedStorage, StorageObserver};
pub use uring::{UringStorage, probe_io_uring};

use crate::error::{Error, Result};
use crate::tag::{BlockNumber, BufferTag, Fork, PAGE_SIZE, RelFork, RelId};

/// How relation files are read and written (`--io`, the engine's `io`
/// option): the backend [`open_storage`] builds.
///
/// The default is `Sync`: on the page cache io_uring is no faster per read
/// (measured on a 2-core test machine: ~0.5 M random 8 KiB reads/s either way), the pool does
/// not yet issue batches for it to overlap, and `Auto` on a machine without
/// io_uring (seccomp, `kernel.io_uring_disabled`) would log a fallback line
/// at every open. Choose `Auto` or `IoUring` to use it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum IoMode {
    /// `pread`/`pwrite`/`preadv` ([`crate::FileStorage`]).
    #[default]
    Sync,
    /// io_uring ([`crate::UringStorage`]); an error at open if it cannot start.
    IoUring,
    /// io_uring if a probe at open (a ring and a NOP) succeeds, else `Sync`
    /// with one line on stderr naming the reason.
    Auto,
}

impl std::str::FromStr for IoMode {
    type Err = String;
    fn from_str(s: &str) -> Result<IoMode, String> {
        match s {
            "sync" => Ok(IoMode::Sync),
            "io_uring" | "io-uring" | "uring" => Ok(IoMode::IoUring),
            "auto" => Ok(IoMode::Auto),
            _ => Err(format!(
                "invalid io mode {s:?}: expected \"sync\", \"io_uring\" or \"auto\""
            )),
        }
    }
}

impl std::fmt::Display for IoMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            IoMode::Sync => "sync",
            IoMode::IoUring => "io_uring",
            IoMode::Auto => "auto",
        })
    }
}

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

    /// Starts every request (PostgreSQL's `StartReadBuffers` half of a
    /// read) and returns at once where the backend can; the returned
    /// [`PendingReads::wait`] waits for them: one result per request, in
    /// order, each as [`read_run`](Self::read_run)'s. The default reads
    /// everything now (through `read_run`) and returns the results ready.
    ///
    /// # Safety
    /// Every page pointer must be valid for writes of `PAGE_SIZE` bytes,
    /// the pages must not overlap, and nobody may read or write them until
    /// the returned object's `wait` has returned or it has been dropped
    /// (dropping it waits for the I/O too).
    unsafe fn submit_reads(&self, reqs: Vec<AsyncRead>) -> Box<dyn PendingReads> {
        let page = |p: *mut u8| {
            // SAFETY: the caller's contract: valid, distinct, untouched
            // pages of PAGE_SIZE bytes, ours until we return.
            unsafe { std::slice::from_raw_parts_mut(p, PAGE_SIZE) }
        };
        let mut results: Vec<Result<()>> = Vec::with_capacity(reqs.len());
        // Single pages together in one read_batch; runs as read_run.
        let mut singles = Vec::new();
        let mut batch = Vec::new();
        for (i, r) in reqs.iter().enumerate() {
            results.push(Ok(()));
            if r.pages.len() == 1 {
                singles.push(i);
                batch.push(ReadRequest {
                    tag: r.tag,
                    page: page(r.pages[0]),
                });
            } else {
                let mut pages: Vec<&mut [u8]> = r.pages.iter().map(|&p| page(p)).collect();
                results[i] = self.read_run(r.tag, &mut pages);
            }
        }
        if !batch.is_empty() {
            let mut got = self.read_batch(&mut batch).into_iter();
            for i in singles {
                results[i] = got.next().unwrap_or_else(|| {
                    Err(Error::InvalidConfig(
                        "the storage backend's read_batch returned too few results".into(),
                    ))
                });
            }
        }
        Box::new(ReadyReads(results))
    }
}

/// One read of [`StorageBackend::submit_reads`]: the consecutive blocks
/// `tag.block`, `tag.block + 1`, ..., block `tag.block + i` into the
/// `PAGE_SIZE` bytes at `pages[i]`.
#[derive(Debug, Clone)]
pub struct AsyncRead {
    pub tag: BufferTag,
    pub pages: Vec<*mut u8>,
}

// SAFETY: the pointers are only dereferenced under `submit_reads`'s
// contract, which makes the pages the I/O's alone, whichever thread waits.
unsafe impl Send for AsyncRead {}

/// Reads started by [`StorageBackend::submit_reads`]. Dropping it without
/// [`wait`](Self::wait) waits for the I/O all the same.
pub trait PendingReads: Send {
    /// Waits for every read: one result per request, in order.
    fn wait(self: Box<Self>) -> Vec<Result<()>>;
}

/// Reads already done (the default `submit_reads`).
struct ReadyReads(Vec<Result<()>>);

impl PendingReads for ReadyReads {
    fn wait(self: Box<Self>) -> Vec<Result<()>> {
        self.0
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

/// Which backend `mode` gives, given the result of probing io_uring (called
/// only for `Auto` and `IoUring`): `Sync` or `IoUring`, and for an `Auto`
/// fallback the line to log. An explicit `IoUring` whose probe fails is an
/// error naming the reason.
pub fn choose_io(
    mode: IoMode,
    data_dir: &Path,
    probe: impl FnOnce() -> std::result::Result<(), String>,
) -> Result<(IoMode, Option<String>)> {
    match mode {
        IoMode::Sync => Ok((IoMode::Sync, None)),
        IoMode::IoUring => match probe() {
            Ok(()) => Ok((IoMode::IoUring, None)),
            Err(why) => Err(Error::io(
                "use io_uring for",
                "io = io_uring was asked for",
                data_dir,
                std::io::Error::other(why),
            )),
        },
        IoMode::Auto => match probe() {
            Ok(()) => Ok((IoMode::IoUring, None)),
            Err(why) => Ok((
                IoMode::Sync,
                Some(format!(
                    "bufmgr: io = auto: io_uring is not usable ({why}); using sync pread/pwrite"
                )),
            )),
        },
    }
}

/// The storage backend under `data_dir` that `mode` and `files` select:
/// [`FileStorage`] or [`UringStorage`]; see [`choose_io`].
pub fn open_storage(
    data_dir: &Path,
    mode: IoMode,
    files: FileOptions,
) -> Result<Arc<dyn StorageBackend>> {
    open_storage_with(data_dir, mode, files, default_max_open_files())
}

/// As [`open_storage`], keeping at most `max_open_files` relation files open
/// at once ([`FileStorage::set_max_open_files`]; both backends share that
/// open-file cache).
///
/// Mapped reads are a [`FileStorage`] read path: with them, `Auto` is sync
/// without probing io_uring, and `IoUring` is [`Error::InvalidConfig`].
pub fn open_storage_with(
    data_dir: &Path,
    mode: IoMode,
    files: FileOptions,
    max_open_files: usize,
) -> Result<Arc<dyn StorageBackend>> {
    let mode = match (mode, files.mapped_reads) {
        (IoMode::IoUring, true) => {
            return Err(Error::InvalidConfig(
                "io = io_uring with mapped reads: mapped reads copy pages from a mapping \
                 of the file, which only the sync backend does"
                    .into(),
            ));
        }
        (IoMode::Auto, true) => IoMode::Sync,
        (mode, _) => mode,
    };
    let (chosen, log) = choose_io(mode, data_dir, probe_io_uring)?;
    if let Some(line) = log {
        eprintln!("{line}");
    }
    Ok(match chosen {
        IoMode::IoUring => {
            let s = UringStorage::open(data_dir, files.direct_io)?;
            s.files().set_max_open_files(max_open_files);
            Arc::new(s)
        }
        _ => {
            let s = FileStorage::open_options(data_dir, files)?;
            s.set_max_open_files(max_open_files);
            Arc::new(s)
        }
    })
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

/// The open flags (octal, as `/proc/self/fdinfo` shows them) of each of
/// this process's descriptors of `path`.
#[cfg(test)]
pub(crate) fn open_flags(path: &Path) -> Vec<i64> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::{self, OpenOptions};
    use std::io;
    use std::os::unix::fs::FileExt;
    use std::time::Duration;

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

    /// The backends the contract tests run against.
    #[derive(Copy, Clone, Debug, PartialEq, Eq)]
    enum Kind {
        Sync,
        Uring,
        SyncDirect,
        UringDirect,
        /// `FileStorage` with mapped reads.
        SyncMapped,
    }

    impl Kind {
        fn name(self) -> &'static str {
            match self {
                Kind::Sync | Kind::SyncDirect | Kind::SyncMapped => "sync",
                Kind::Uring | Kind::UringDirect => "io_uring",
            }
        }
        fn direct(self) -> bool {
            matches!(self, Kind::SyncDirect | Kind::UringDirect)
        }
        fn uring(self) -> bool {
            matches!(self, Kind::Uring | Kind::UringDirect)
        }
    }

    /// Any backend, behind one concrete type.
    #[derive(Debug)]
    struct Any(Box<dyn StorageBackend>);

    impl StorageBackend for Any {
        fn name(&self) -> &'static str {
            self.0.name()
        }
        fn path(&self, rf: RelFork) -> PathBuf {
            self.0.path(rf)
        }
        fn create(&self, rf: RelFork) -> Result<()> {
            self.0.create(rf)
        }
        fn exists(&self, rf: RelFork) -> Result<bool> {
            self.0.exists(rf)
        }
        fn nblocks(&self, rf: RelFork) -> Result<BlockNumber> {
            self.0.nblocks(rf)
        }
        fn read(&self, tag: BufferTag, page: &mut [u8]) -> Result<()> {
            self.0.read(tag, page)
        }
        fn write(&self, tag: BufferTag, page: &[u8]) -> Result<()> {
            self.0.write(tag, page)
        }
        fn truncate(&self, rf: RelFork, nblocks: BlockNumber) -> Result<()> {
            self.0.truncate(rf, nblocks)
        }
        fn sync(&self, rf: RelFork) -> Result<()> {
            self.0.sync(rf)
        }
        fn sync_all(&self) -> Result<()> {
            self.0.sync_all()
        }
        fn unlink(&self, rf: RelFork) -> Result<()> {
            self.0.unlink(rf)
        }
        fn relations(&self) -> Result<Vec<RelFork>> {
            self.0.relations()
        }
        fn read_run(&self, tag: BufferTag, pages: &mut [&mut [u8]]) -> Result<()> {
            self.0.read_run(tag, pages)
        }
        fn read_batch(&self, reqs: &mut [ReadRequest<'_>]) -> Vec<Result<()>> {
            self.0.read_batch(reqs)
        }
        fn write_batch(&self, reqs: &[WriteRequest<'_>]) -> Vec<Result<()>> {
            self.0.write_batch(reqs)
        }
        unsafe fn submit_reads(&self, reqs: Vec<AsyncRead>) -> Box<dyn PendingReads> {
            // SAFETY: our caller's contract, passed on unchanged.
            unsafe { self.0.submit_reads(reqs) }
        }
    }

    /// Opens a backend of kind `k` on `dir`, or `None` (with the reason
    /// printed) where this machine cannot run it: no io_uring, or a file
    /// system that refuses O_DIRECT.
    fn try_open_k(k: Kind, dir: &Path) -> Option<Any> {
        if k.uring()
            && let Err(why) = probe_io_uring()
        {
            eprintln!("skipped ({k:?}): io_uring is not usable here: {why}");
            return None;
        }
        let opened: Result<Box<dyn StorageBackend>> = if k.uring() {
            UringStorage::with_rings(dir, k.direct(), 2).map(|s| Box::new(s) as _)
        } else {
            let options = FileOptions {
                direct_io: k.direct(),
                mapped_reads: k == Kind::SyncMapped,
                // The contract tests verify no checksums.
                checksummed_pages: false,
            };
            FileStorage::open_options(dir, options).map(|s| Box::new(s) as _)
        };
        match opened {
            Ok(s) => Some(Any(s)),
            Err(e) if k.direct() && e.to_string().contains("O_DIRECT") => {
                eprintln!("skipped ({k:?}): {e}");
                None
            }
            Err(e) => panic!("open {k:?}: {e}"),
        }
    }

    fn open_k(k: Kind, dir: &Path) -> Any {
        try_open_k(k, dir).expect("it opened before")
    }

    fn storage_k(k: Kind) -> Option<(tempfile::TempDir, Any)> {
        let dir = tempfile::tempdir().unwrap();
        let s = try_open_k(k, dir.path())?;
        Some((dir, s))
    }

    fn storage_with_k(k: Kind, n: BlockNumber) -> Option<(tempfile::TempDir, Any)> {
        let (dir, s) = storage_k(k)?;
        s.create(REL).unwrap();
        for b in 0..n {
            s.write(tag(b), &page(b as u8 + 1)).unwrap();
        }
        Some((dir, s))
    }

    /// `#[test]`s running each named contract test against every backend.
    macro_rules! for_each_backend {
        ($($name:ident),* $(,)?) => {
            mod sync {
                $(#[test] fn $name() { super::$name(super::Kind::Sync) })*
            }
            mod io_uring {
                $(#[test] fn $name() { super::$name(super::Kind::Uring) })*
            }
            mod sync_direct {
                $(#[test] fn $name() { super::$name(super::Kind::SyncDirect) })*
            }
            mod io_uring_direct {
                $(#[test] fn $name() { super::$name(super::Kind::UringDirect) })*
            }
            mod sync_mapped {
                $(#[test] fn $name() { super::$name(super::Kind::SyncMapped) })*
            }
        };
    }

    for_each_backend!(
        write_then_read_round_trips,
        writing_at_nblocks_extends,
        writing_past_nblocks_is_out_of_range,
        reading_past_the_end_is_out_of_range,
        missing_file_is_not_found_naming_the_path,
        nblocks_survives_reopening,
        create_is_idempotent_and_keeps_contents,
        truncate_cuts_pages_off,
        unlink_removes_the_file,
        relations_lists_forks_and_ignores_strangers,
        trailing_partial_page_is_not_counted,
        file_shorter_than_its_count_is_corrupt,
        read_run_reads_consecutive_blocks,
        read_run_across_the_end,
        read_run_of_a_cut_file_is_corrupt,
        batch_reads_each_get_their_own_result,
        batch_writes_each_get_their_own_result,
        batches_longer_than_the_queue_depth,
        submitted_reads_each_get_their_own_result,
        concurrent_threads_each_see_their_own_pages,
        unaligned_buffers_round_trip,
    );

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

    fn write_then_read_round_trips(k: Kind) {
        let Some((_dir, s)) = storage_with_k(k, 0) else {
            return;
        };
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
        assert_eq!(s.name(), k.name());
    }

    fn writing_at_nblocks_extends(k: Kind) {
        let Some((_dir, s)) = storage_with_k(k, 0) else {
            return;
        };
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

    fn writing_past_nblocks_is_out_of_range(k: Kind) {
        let Some((_dir, s)) = storage_with_k(k, 2) else {
            return;
        };
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

    fn reading_past_the_end_is_out_of_range(k: Kind) {
        let Some((_dir, s)) = storage_with_k(k, 2) else {
            return;
        };
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

    fn missing_file_is_not_found_naming_the_path(k: Kind) {
        let Some((_dir, s)) = storage_k(k) else {
            return;
        };
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

    fn nblocks_survives_reopening(k: Kind) {
        let Some((dir, s)) = storage_with_k(k, 3) else {
            return;
        };
        s.sync_all().unwrap();
        drop(s);
        let s = open_k(k, dir.path());
        assert!(s.exists(REL).unwrap());
        assert_eq!(s.nblocks(REL).unwrap(), 3);
        assert_eq!(read_page(&s, 2), page(3));
    }

    fn create_is_idempotent_and_keeps_contents(k: Kind) {
        let Some((dir, s)) = storage_with_k(k, 2) else {
            return;
        };
        s.create(REL).unwrap();
        assert_eq!(s.nblocks(REL).unwrap(), 2);
        let s2 = open_k(k, dir.path());
        s2.create(REL).unwrap();
        assert_eq!(s2.nblocks(REL).unwrap(), 2);
    }

    fn truncate_cuts_pages_off(k: Kind) {
        let Some((dir, s)) = storage_with_k(k, 4) else {
            return;
        };
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
        let s2 = open_k(k, dir.path());
        assert_eq!(s2.nblocks(REL).unwrap(), 0);
    }

    fn unlink_removes_the_file(k: Kind) {
        let Some((_dir, s)) = storage_with_k(k, 2) else {
            return;
        };
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

    fn relations_lists_forks_and_ignores_strangers(k: Kind) {
        let Some((dir, s)) = storage_k(k) else { return };
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

    fn trailing_partial_page_is_not_counted(k: Kind) {
        let Some((dir, s)) = storage_with_k(k, 2) else {
            return;
        };
        drop(s);
        let path = dir.path().join("base/42");
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(&[5u8; 100], 2 * PAGE_SIZE as u64).unwrap();
        drop(f);
        let s = open_k(k, dir.path());
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

    fn file_shorter_than_its_count_is_corrupt(k: Kind) {
        let Some((dir, s)) = storage_with_k(k, 2) else {
            return;
        };
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

    /// A backend whose `submit_reads` reads nothing until the wait (an
    /// asynchronous backend, made visible): it counts submissions, and the
    /// pages stay untouched between the submit and the wait.
    #[derive(Debug)]
    struct Deferred {
        inner: Arc<dyn StorageBackend>,
        submits: std::sync::atomic::AtomicUsize,
    }

    struct DeferredReads {
        inner: Arc<dyn StorageBackend>,
        reqs: Vec<AsyncRead>,
    }

    impl PendingReads for DeferredReads {
        fn wait(self: Box<Self>) -> Vec<Result<()>> {
            // SAFETY: the pages are ours until this returns
            // (`submit_reads`'s contract, as it was given to us).
            unsafe { self.inner.submit_reads(self.reqs.clone()) }.wait()
        }
    }

    impl StorageBackend for Deferred {
        fn name(&self) -> &'static str {
            "deferred"
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
        unsafe fn submit_reads(&self, reqs: Vec<AsyncRead>) -> Box<dyn PendingReads> {
            self.submits
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Box::new(DeferredReads {
                inner: Arc::clone(&self.inner),
                reqs,
            })
        }
    }

    #[derive(Debug, Default)]
    struct ReadLog(parking_lot::Mutex<Vec<BlockNumber>>);

    impl StorageObserver for ReadLog {
        fn on_read(&self, tag: BufferTag) {
            self.0.lock().push(tag.block);
        }
    }

    /// `FaultyStorage` and `ObservedStorage` pass `submit_reads` on to the
    /// backend they wrap (so the reads stay asynchronous under them): the
    /// wrapped backend gets one submission, nothing is read before the
    /// wait; the fault injector's read budget cuts a request at the block
    /// it refuses, its pages count as in flight until the wait (a read of
    /// one meanwhile is an overlap); the observer sees the pages once read.
    #[test]
    fn faulty_and_observed_pass_submitted_reads_on() {
        let (_dir, s) = storage_with(8);
        let deferred = Arc::new(Deferred {
            inner: Arc::new(s),
            submits: Default::default(),
        });
        let submits = || deferred.submits.load(std::sync::atomic::Ordering::Relaxed);
        let log = Arc::new(ReadLog::default());
        let observed = ObservedStorage::new(deferred.clone(), log.clone());
        let faulty = FaultyStorage::new(deferred.clone());
        faulty.fail_reads_after(5);
        let wrappers: [&dyn StorageBackend; 2] = [&observed, &faulty];
        for (w, s) in wrappers.into_iter().enumerate() {
            let mut bufs: Vec<Vec<u8>> = (0..6).map(|_| page(0)).collect();
            let mut ptrs: Vec<*mut u8> = bufs.iter_mut().map(|b| b.as_mut_ptr()).collect();
            let single = ptrs.split_off(4);
            let reqs = vec![
                AsyncRead {
                    tag: tag(1),
                    pages: ptrs,
                },
                AsyncRead {
                    tag: tag(6),
                    pages: single,
                },
            ];
            // SAFETY: distinct PAGE_SIZE buffers, untouched until the wait.
            let pending = unsafe { s.submit_reads(reqs) };
            assert_eq!(
                submits(),
                w + 1,
                "{}: passed on as one submission",
                s.name()
            );
            assert!(
                bufs.iter().all(|b| b[..] == page(0)[..]),
                "nothing read yet"
            );
            assert!(w == 1 || log.0.lock().is_empty(), "observed only once read");
            if w == 1 {
                assert_eq!(faulty.reads(), 6, "each submitted page counts");
                // Block 2 is in flight: reading it now overlaps.
                faulty.fail_reads_after(1);
                let mut other = page(0);
                faulty.read(tag(2), &mut other).unwrap();
                assert_eq!(other, page(3));
                assert_eq!(faulty.overlapping_reads(), 1);
            }
            let results = pending.wait();
            assert_eq!(results.len(), 2);
            for (i, b) in bufs[..4].iter().enumerate() {
                assert_eq!(b[..], page(i as u8 + 2)[..], "block {}", i + 1);
            }
            if w == 0 {
                assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
                assert_eq!(bufs[4][..], page(7)[..]);
                assert_eq!(*log.0.lock(), vec![1, 2, 3, 4, 6, 7]);
            } else {
                // Five reads allowed: blocks 1-4 and 6; block 7 refused.
                assert!(results[0].is_ok(), "{:?}", results[0]);
                let err = results[1].as_ref().unwrap_err();
                assert!(err.to_string().contains("injected read failure"), "{err}");
                assert!(err.to_string().contains("block 7"), "{err}");
                assert_eq!(bufs[4][..], page(7)[..], "the page before it is read");
                assert_eq!(bufs[5][..], page(0)[..], "the refused page is not");
                // Nothing stays in flight after the wait.
                faulty.clear();
                let mut again = page(0);
                faulty.read(tag(2), &mut again).unwrap();
                assert_eq!(faulty.overlapping_reads(), 1);
            }
        }
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

    fn read_run_reads_consecutive_blocks(k: Kind) {
        let Some((_dir, s)) = storage_with_k(k, 20) else {
            return;
        };
        let mut bufs: Vec<AlignedBuf> = (0..16).map(|_| AlignedBuf::zeroed(PAGE_SIZE)).collect();
        let mut pages: Vec<&mut [u8]> = bufs.iter_mut().map(|b| &mut b[..]).collect();
        s.read_run(tag(3), &mut pages).unwrap();
        for (i, b) in bufs.iter().enumerate() {
            assert_eq!(b[..], page(i as u8 + 4)[..], "block {}", i + 3);
        }
        // Unaligned (Vec) buffers work too (bounced under O_DIRECT).
        let mut v: Vec<Vec<u8>> = (0..3).map(|_| page(0)).collect();
        let mut pages: Vec<&mut [u8]> = v.iter_mut().map(|b| &mut b[..]).collect();
        s.read_run(tag(17), &mut pages).unwrap();
        assert_eq!(v, [page(18), page(19), page(20)]);
        s.read_run(tag(0), &mut []).unwrap();
    }

    fn read_run_across_the_end(k: Kind) {
        let Some((_dir, s)) = storage_with_k(k, 5) else {
            return;
        };
        let mut v: Vec<Vec<u8>> = (0..4).map(|_| page(0)).collect();
        let mut pages: Vec<&mut [u8]> = v.iter_mut().map(|b| &mut b[..]).collect();
        let err = s.read_run(tag(3), &mut pages).unwrap_err();
        assert!(
            matches!(
                err,
                Error::BlockOutOfRange {
                    block: 5,
                    nblocks: 5,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("base/42"), "{err}");
        // The blocks before the end were read.
        assert_eq!(v[0], page(4));
        assert_eq!(v[1], page(5));
        // A run starting past the end names its first block.
        let mut pages: Vec<&mut [u8]> = v.iter_mut().map(|b| &mut b[..]).collect();
        let err = s.read_run(tag(7), &mut pages).unwrap_err();
        assert!(
            matches!(err, Error::BlockOutOfRange { block: 7, .. }),
            "{err:?}"
        );
    }

    fn read_run_of_a_cut_file_is_corrupt(k: Kind) {
        let Some((dir, s)) = storage_with_k(k, 4) else {
            return;
        };
        let f = OpenOptions::new()
            .write(true)
            .open(dir.path().join("base/42"))
            .unwrap();
        f.set_len(2 * PAGE_SIZE as u64 + 100).unwrap();
        let mut v: Vec<AlignedBuf> = (0..4).map(|_| AlignedBuf::zeroed(PAGE_SIZE)).collect();
        let mut pages: Vec<&mut [u8]> = v.iter_mut().map(|b| &mut b[..]).collect();
        let err = s.read_run(tag(0), &mut pages).unwrap_err();
        assert!(matches!(err, Error::CorruptFile { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains("base/42") && msg.contains("block 2"), "{msg}");
        // A single short read too.
        let err = s.read(tag(2), &mut page(0)).unwrap_err();
        assert!(matches!(err, Error::CorruptFile { .. }), "{err:?}");
        assert!(err.to_string().contains("block 2"), "{err}");
    }

    fn batch_reads_each_get_their_own_result(k: Kind) {
        let Some((_dir, s)) = storage_with_k(k, 4) else {
            return;
        };
        let missing = BufferTag::new(RelFork::main(RelId(9)), 0);
        let tags = [tag(0), tag(9), missing, tag(3), tag(2), tag(4)];
        let mut bufs: Vec<Vec<u8>> = tags.iter().map(|_| page(0xAA)).collect();
        let mut reqs: Vec<ReadRequest<'_>> = tags
            .iter()
            .zip(bufs.iter_mut())
            .map(|(&tag, b)| ReadRequest { tag, page: b })
            .collect();
        let results = s.read_batch(&mut reqs);
        assert_eq!(results.len(), tags.len());
        assert!(results[0].is_ok() && results[3].is_ok() && results[4].is_ok());
        assert!(
            matches!(results[1], Err(Error::BlockOutOfRange { block: 9, .. })),
            "{:?}",
            results[1]
        );
        match &results[2] {
            Err(Error::Io { source, path, .. }) => {
                assert_eq!(source.kind(), io::ErrorKind::NotFound);
                assert!(path.ends_with("base/9"), "{path:?}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            results[5],
            Err(Error::BlockOutOfRange { block: 4, .. })
        ));
        assert_eq!(bufs[0], page(1));
        assert_eq!(bufs[3], page(4));
        assert_eq!(bufs[4], page(3));
        assert_eq!(bufs[1], page(0xAA), "a failed read leaves its buffer");
        assert!(s.read_batch(&mut []).is_empty());
    }

    fn batch_writes_each_get_their_own_result(k: Kind) {
        let Some((_dir, s)) = storage_with_k(k, 2) else {
            return;
        };
        let missing = BufferTag::new(RelFork::main(RelId(9)), 0);
        let pages: Vec<Vec<u8>> = (0..7).map(|i| page(0x40 + i)).collect();
        // Overwrite 0, extend by 2 then 3, a hole at 7, a missing file,
        // overwrite 1, extend by 4.
        let tags = [tag(0), tag(2), tag(3), tag(7), missing, tag(1), tag(4)];
        let reqs: Vec<WriteRequest<'_>> = tags
            .iter()
            .zip(&pages)
            .map(|(&tag, p)| WriteRequest { tag, page: p })
            .collect();
        let results = s.write_batch(&reqs);
        for i in [0, 1, 2, 5, 6] {
            assert!(results[i].is_ok(), "{i}: {:?}", results[i]);
        }
        assert!(
            matches!(results[3], Err(Error::BlockOutOfRange { block: 7, .. })),
            "{:?}",
            results[3]
        );
        assert!(
            matches!(&results[4], Err(Error::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound)
        );
        assert_eq!(s.nblocks(REL).unwrap(), 5);
        for (b, i) in [(0, 0), (2, 1), (3, 2), (1, 5), (4, 6)] {
            assert_eq!(read_page(&s, b), pages[i], "block {b}");
        }
        let len = fs::metadata(s.path(REL)).unwrap().len();
        assert_eq!(len, 5 * PAGE_SIZE as u64, "no holes");
        assert!(s.write_batch(&[]).is_empty());
    }

    fn batches_longer_than_the_queue_depth(k: Kind) {
        let n = 3 * uring::QUEUE_DEPTH as BlockNumber + 7;
        let Some((_dir, s)) = storage_with_k(k, 0) else {
            return;
        };
        let pages: Vec<Vec<u8>> = (0..n).map(|b| page((b % 251) as u8)).collect();
        // All extensions, in one batch.
        let reqs: Vec<WriteRequest<'_>> = (0..n)
            .map(|b| WriteRequest {
                tag: tag(b),
                page: &pages[b as usize],
            })
            .collect();
        assert!(s.write_batch(&reqs).iter().all(|r| r.is_ok()));
        assert_eq!(s.nblocks(REL).unwrap(), n);
        // All overwrites, reversed contents.
        let reqs: Vec<WriteRequest<'_>> = (0..n)
            .map(|b| WriteRequest {
                tag: tag(b),
                page: &pages[(n - 1 - b) as usize],
            })
            .collect();
        assert!(s.write_batch(&reqs).iter().all(|r| r.is_ok()));
        let mut bufs: Vec<AlignedBuf> = (0..n).map(|_| AlignedBuf::zeroed(PAGE_SIZE)).collect();
        let mut reqs: Vec<ReadRequest<'_>> = bufs
            .iter_mut()
            .enumerate()
            .map(|(b, buf)| ReadRequest {
                tag: tag(b as BlockNumber),
                page: buf,
            })
            .collect();
        assert!(s.read_batch(&mut reqs).iter().all(|r| r.is_ok()));
        for (b, buf) in bufs.iter().enumerate() {
            assert_eq!(buf[..], pages[n as usize - 1 - b][..], "block {b}");
        }
        let mut run: Vec<&mut [u8]> = bufs.iter_mut().map(|b| &mut b[..]).collect();
        s.read_run(tag(0), &mut run).unwrap();
        assert_eq!(bufs[0][..], pages[n as usize - 1][..]);
    }

    /// `submit_reads` then `wait` (and drop without wait): runs and single
    /// pages, more pages than a ring's depth, a run across the end, a
    /// missing file, a cut file: one result per request, as `read_run`'s.
    fn submitted_reads_each_get_their_own_result(k: Kind) {
        let n = uring::QUEUE_DEPTH as BlockNumber + 10;
        let Some((dir, s)) = storage_with_k(k, n) else {
            return;
        };
        let missing = BufferTag::new(RelFork::main(RelId(9)), 0);
        // (first block, pages)
        let reqs = [
            (tag(0), n as usize - 2),
            (tag(n - 1), 1),
            (tag(n - 2), 4),
            (missing, 2),
            (tag(3), 1),
        ];
        let mut bufs: Vec<Vec<AlignedBuf>> = reqs
            .iter()
            .map(|&(_, len)| (0..len).map(|_| AlignedBuf::zeroed(PAGE_SIZE)).collect())
            .collect();
        let areqs = |bufs: &mut Vec<Vec<AlignedBuf>>| -> Vec<AsyncRead> {
            reqs.iter()
                .zip(bufs.iter_mut())
                .map(|(&(tag, _), b)| AsyncRead {
                    tag,
                    pages: b.iter_mut().map(|p| p.as_mut_ptr()).collect(),
                })
                .collect()
        };
        // SAFETY: distinct PAGE_SIZE buffers, untouched until the wait.
        let results = unsafe { s.submit_reads(areqs(&mut bufs)) }.wait();
        assert_eq!(results.len(), reqs.len());
        assert!(
            results[0].is_ok() && results[1].is_ok() && results[4].is_ok(),
            "{results:?}"
        );
        for (i, b) in bufs[0].iter().enumerate() {
            assert_eq!(b[..], page(i as u8 + 1)[..], "block {i}");
        }
        assert_eq!(bufs[1][0][..], page(n as u8)[..]);
        assert_eq!(bufs[4][0][..], page(4)[..]);
        assert!(
            matches!(results[2], Err(Error::BlockOutOfRange { block, .. }) if block == n),
            "{:?}",
            results[2]
        );
        assert_eq!(
            bufs[2][1][..],
            page(n as u8)[..],
            "the blocks before the end are read"
        );
        assert!(
            matches!(&results[3], Err(Error::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound),
            "{:?}",
            results[3]
        );
        // Dropped without a wait: the reads are finished all the same.
        // SAFETY: as above.
        drop(unsafe { s.submit_reads(areqs(&mut bufs)) });
        assert_eq!(bufs[0][5][..], page(6)[..]);
        // A cut file: the short read is corrupt, naming the block.
        let f = OpenOptions::new()
            .write(true)
            .open(dir.path().join("base/42"))
            .unwrap();
        f.set_len(2 * PAGE_SIZE as u64 + 100).unwrap();
        // SAFETY: as above.
        let results = unsafe { s.submit_reads(areqs(&mut bufs)[..1].to_vec()) }.wait();
        let err = results[0].as_ref().unwrap_err();
        assert!(matches!(err, Error::CorruptFile { .. }), "{err:?}");
        assert!(err.to_string().contains("block 2"), "{err}");
        // SAFETY: nothing to read.
        assert!(unsafe { s.submit_reads(Vec::new()) }.wait().is_empty());
    }

    /// Runs `f` on another thread; panics if it takes longer than `secs`.
    fn watchdog<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(secs))
            .unwrap_or_else(|_| panic!("no result within {secs} s (a hang, or a panic)"))
    }

    fn concurrent_threads_each_see_their_own_pages(k: Kind) {
        const THREADS: BlockNumber = 6;
        const PER: BlockNumber = 40;
        let Some((dir, s)) = storage_with_k(k, THREADS * PER) else {
            return;
        };
        let s = Arc::new(s);
        watchdog(60, move || {
            std::thread::scope(|scope| {
                for t in 0..THREADS {
                    let s = &s;
                    scope.spawn(move || {
                        let mine = |i: BlockNumber| t * PER + i;
                        for round in 0..5u8 {
                            let fill = |i: BlockNumber| (t as u8) * 16 + round + i as u8;
                            for i in 0..PER / 2 {
                                s.write(tag(mine(i)), &page(fill(i))).unwrap();
                            }
                            let pages: Vec<Vec<u8>> =
                                (PER / 2..PER).map(|i| page(fill(i))).collect();
                            let reqs: Vec<WriteRequest<'_>> = (PER / 2..PER)
                                .zip(&pages)
                                .map(|(i, p)| WriteRequest {
                                    tag: tag(mine(i)),
                                    page: p,
                                })
                                .collect();
                            assert!(s.write_batch(&reqs).iter().all(|r| r.is_ok()));
                            for i in 0..PER / 2 {
                                assert_eq!(read_page(&**s, mine(i)), page(fill(i)));
                            }
                            let mut bufs: Vec<Vec<u8>> = (0..PER / 2).map(|_| page(0)).collect();
                            let mut run: Vec<&mut [u8]> =
                                bufs.iter_mut().map(|b| &mut b[..]).collect();
                            s.read_run(tag(mine(PER / 2)), &mut run).unwrap();
                            for (j, b) in bufs.iter().enumerate() {
                                assert_eq!(*b, page(fill(PER / 2 + j as BlockNumber)));
                            }
                        }
                    });
                }
            });
            drop(dir);
        });
    }

    fn unaligned_buffers_round_trip(k: Kind) {
        let Some((_dir, s)) = storage_with_k(k, 0) else {
            return;
        };
        // A buffer that is certainly not 4 KiB aligned.
        let mut backing = vec![0u8; PAGE_SIZE + 1];
        let off = if (backing.as_ptr() as usize).is_multiple_of(4096) {
            1
        } else {
            0
        };
        backing[off..off + PAGE_SIZE].copy_from_slice(&page(0x5A));
        s.write(tag(0), &backing[off..off + PAGE_SIZE]).unwrap();
        let aligned = AlignedBuf::copy_of(&page(0x6B));
        s.write(tag(1), &aligned).unwrap();
        let mut back = vec![0u8; PAGE_SIZE + 1];
        let boff = if (back.as_ptr() as usize).is_multiple_of(4096) {
            1
        } else {
            0
        };
        s.read(tag(1), &mut back[boff..boff + PAGE_SIZE]).unwrap();
        assert_eq!(back[boff..boff + PAGE_SIZE], page(0x6B)[..]);
        let mut a = AlignedBuf::zeroed(PAGE_SIZE);
        s.read(tag(0), &mut a).unwrap();
        assert_eq!(a[..], page(0x5A)[..]);
        s.sync_all().unwrap();
    }

    #[test]
    #[should_panic(expected = "PAGE_SIZE")]
    fn io_uring_wrong_page_length_panics() {
        let Some((_dir, s)) = storage_with_k(Kind::Uring, 1) else {
            panic!("skipped: PAGE_SIZE")
        };
        let _ = s.read(tag(0), &mut [0u8; 100]);
    }

    #[test]
    fn direct_io_really_opens_with_o_direct() {
        for k in [Kind::SyncDirect, Kind::UringDirect] {
            let Some((dir, s)) = storage_with_k(k, 1) else {
                continue;
            };
            // The flag is visible in /proc/self/fdinfo of the open file.
            assert_eq!(read_page(&s, 0), page(1));
            let found = open_flags(&dir.path().join("base/42"))
                .iter()
                .any(|f| f & i64::from(libc::O_DIRECT) != 0);
            assert!(found, "{k:?}: base/42 is not open with O_DIRECT");
        }
    }

    #[test]
    fn file_system_names() {
        assert_eq!(file::fs_magic_name(0x0102_1994), "tmpfs");
        assert_eq!(file::fs_magic_name(0xEF53), "ext2/3/4");
        assert!(file::fs_magic_name(0x1234).contains("0x1234"));
        let here = file::fs_type_name(Path::new("/"));
        assert!(!here.is_empty());
        assert!(file::fs_type_name(Path::new("/no/such/dir")).starts_with("unknown"));
    }

    #[test]
    fn io_choice_follows_the_mode_and_the_probe() {
        let dir = Path::new("/data");
        let works = || Ok(());
        let fails = || Err("io_uring_setup failed: Operation not permitted".to_string());
        assert_eq!(
            choose_io(IoMode::Sync, dir, fails).unwrap(),
            (IoMode::Sync, None)
        );
        assert_eq!(
            choose_io(IoMode::Sync, dir, || -> std::result::Result<(), String> {
                panic!("sync does not probe")
            })
            .unwrap(),
            (IoMode::Sync, None)
        );
        assert_eq!(
            choose_io(IoMode::IoUring, dir, works).unwrap(),
            (IoMode::IoUring, None)
        );
        assert_eq!(
            choose_io(IoMode::Auto, dir, works).unwrap(),
            (IoMode::IoUring, None)
        );
        let (mode, log) = choose_io(IoMode::Auto, dir, fails).unwrap();
        assert_eq!(mode, IoMode::Sync);
        let log = log.expect("a fallback is logged");
        assert!(
            log.contains("Operation not permitted") && log.contains("sync"),
            "{log}"
        );
        let err = choose_io(IoMode::IoUring, dir, fails).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("io_uring") && msg.contains("Operation not permitted"),
            "{msg}"
        );
        assert!(msg.contains("/data"), "{msg}");
    }

    #[test]
    fn open_storage_builds_the_chosen_backend() {
        let dir = tempfile::tempdir().unwrap();
        let s = open_storage(dir.path(), IoMode::Sync, FileOptions::default()).unwrap();
        assert_eq!(s.name(), "sync");
        let auto = open_storage(dir.path(), IoMode::Auto, FileOptions::default()).unwrap();
        match probe_io_uring() {
            Ok(()) => {
                assert_eq!(auto.name(), "io_uring");
                let u = open_storage(dir.path(), IoMode::IoUring, FileOptions::default()).unwrap();
                assert_eq!(u.name(), "io_uring");
            }
            Err(why) => {
                assert_eq!(auto.name(), "sync", "fell back: {why}");
                assert!(open_storage(dir.path(), IoMode::IoUring, FileOptions::default()).is_err());
            }
        }
    }

    #[test]
    fn mapped_reads_are_the_sync_backend_and_refuse_io_uring() {
        let dir = tempfile::tempdir().unwrap();
        let mapped = FileOptions {
            mapped_reads: true,
            ..FileOptions::default()
        };
        for mode in [IoMode::Sync, IoMode::Auto] {
            let s = open_storage(dir.path(), mode, mapped).unwrap();
            assert_eq!(s.name(), "sync", "{mode:?}");
            s.create(REL).unwrap();
            s.write(tag(0), &page(9)).unwrap();
            let mut back = page(0);
            s.read(tag(0), &mut back).unwrap();
            assert_eq!(back, page(9));
        }
        let e = open_storage(dir.path(), IoMode::IoUring, mapped).unwrap_err();
        assert!(matches!(e, Error::InvalidConfig(_)), "{e:?}");
        assert!(e.to_string().contains("mapped reads"), "{e}");
    }
}

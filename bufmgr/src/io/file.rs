//! [`FileStorage`]: synchronous `pread`/`pwrite` (and one `preadv` per run
//! of consecutive blocks) on one file per relation fork, optionally opened
//! with `O_DIRECT`, or with single pages read from a mapping of the file
//! (`mapped_reads`, module `mapped`).
//!
//! # Open files
//!
//! Descriptors are a bounded cache, after PostgreSQL's virtual file
//! descriptors (`fd.c`, `max_files_per_process`): at most
//! [`FileStorage::max_open_files`] relation files are open at once; opening
//! one more first closes the least recently used, and a closed file is
//! reopened by path at its next use. Each fork's block count lives apart
//! from its descriptor, so closing and reopening never changes what the
//! storage believes the fork's length is. A descriptor in use by an
//! operation (an `Arc<RelFile>` held across a read, a write or an io_uring
//! submission) is closed only when that operation lets go of it.
//!
//! Files are opened outside the table's lock, so an open may race an
//! unlink of the same fork: the descriptor may be of the file the unlink
//! removes. An unlink therefore removes the file under the table's write
//! lock and counts itself there, and a descriptor is taken into the table
//! only if no unlink ran since its opener looked the fork up; otherwise
//! the path is opened again (and is not found, or is the new file of a
//! fork made again). A file unlinked is never served again, not with its
//! old pages nor as the file that writes to a fork made again go into.
//!
//! # Near copies
//!
//! Every thread misses pages of the same few files, so the table of open
//! files would be the one structure every miss writes: its lock word (a
//! shared read lock is an atomic write) and the file's reference count
//! (the `Arc` clone and drop). Two threads reading pages of one table
//! moved both lines between their cores on every miss. So the handles are
//! also kept in 16 near copies, one per group of threads (threads are
//! dealt round robin, on their first use, to a copy): a single-page read
//! or write share-locks its own thread's copy, finds the file there, and
//! does its I/O under that lock, taking no reference. The rules:
//! 1. Only the table holds what is open; a near copy holds a subset of it.
//!    A handle goes into a near copy only while the table's lock is held
//!    and the table holds it, so a file closed (or unlinked) is never put
//!    back into a copy afterwards.
//! 2. Closing a file (the cap, `EMFILE`, an unlink) removes it from the
//!    table and then from every near copy, each under its write lock,
//!    still holding the table's write lock: the close waits for the reads
//!    and writes in flight on it, and the descriptor is closed when the
//!    last handle goes, as before.
//! 3. Locks are taken table first, then a near copy, never the other way,
//!    and nothing is done under a near copy's read lock but the one page's
//!    I/O: no other file operation, so no thread waits for itself.
//!
//! An open that fails with `EMFILE` or `ENFILE` (the process or the system
//! is out of descriptors, whoever holds them) closes the least recently used
//! file and tries again, until it succeeds or nothing of ours is left to
//! close; then it is an [`Error::Io`] whose kind is
//! [`ErrorKind::ResourceExhausted`](crate::ErrorKind::ResourceExhausted),
//! for that operation only.
//!
//! Descriptors are one budget for the whole process, so the files the
//! engine opens outside this cache (WAL segments, the WAL directory it
//! fsyncs, the control file) get the same chance: [`with_spare_descriptor`]
//! runs such an open and, on `EMFILE` or `ENFILE`, closes the least recently
//! used file of any live `FileStorage` of the process
//! ([`shed_cached_descriptor`]) and tries again, as PostgreSQL's `fd.c` does
//! for every file it opens.

use std::collections::HashMap;
use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::hash::{BuildHasherDefault, Hasher};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use parking_lot::RwLock;

use super::aligned::{AlignedBuf, is_direct_aligned};
use super::mapped::MappedFile;
use super::{StorageBackend, byte_offset, check_page_len, parse_file_name};
use crate::error::{Error, Result, is_out_of_descriptors};
use crate::replacement::sweep::CachePadded;
use crate::tag::{BlockNumber, BufferTag, PAGE_SIZE, RelFork};

/// Most iovecs one `preadv` takes (Linux's `IOV_MAX`).
const IOV_MAX: usize = 1024;

/// One open relation fork file.
#[derive(Debug)]
pub(super) struct RelFile {
    pub(super) file: File,
    pub(super) path: PathBuf,
    /// Whole pages in the fork: from the file's length at its first open,
    /// then kept up to date by extensions and truncations. Shared with the
    /// fork's later descriptors, should this one be closed.
    pub(super) nblocks: Arc<AtomicU32>,
    /// The file's mapping, with mapped reads on (see [`FileOptions`]).
    pub(super) map: Option<MappedFile>,
    /// The storage's `clock` at the last use (least recently used is
    /// closed first).
    used: AtomicU64,
}

impl RelFile {
    /// Stamp this file as the most recently used, unless it already is
    /// (its stamp is the last one `clock` gave out): then nothing is
    /// written. The order of the stamps is the same either way, but
    /// threads that keep reading one relation (every miss of a scan or
    /// of a sweep over one table) only load the clock's and the stamp's
    /// cache lines instead of writing both on every read, which moved them
    /// between cores on each miss. A use that races with another file's
    /// stamp may skip its own: the two uses were concurrent, and either
    /// order is a true one.
    #[inline]
    fn touch(&self, clock: &AtomicU64) {
        let last = clock.load(Ordering::Relaxed).wrapping_sub(1);
        if self.used.load(Ordering::Relaxed) != last {
            self.used
                .store(clock.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
        }
    }

    /// [`Error::BlockOutOfRange`] for `block` of `rf` in this file of
    /// `nblocks` pages.
    pub(super) fn out_of_range(
        &self,
        rf: RelFork,
        block: BlockNumber,
        nblocks: BlockNumber,
    ) -> Error {
        Error::BlockOutOfRange {
            relfork: rf,
            block,
            nblocks,
            path: self.path.clone(),
        }
    }
}

/// The synchronous file backend: `pread`/`pwrite` on one file per fork.
///
/// With `direct_io` every file is opened with `O_DIRECT`: reads and writes
/// bypass the kernel's page cache. Buffers that are not 4 KiB aligned (the
/// pool's pages always are) go through an aligned bounce buffer.
#[derive(Debug)]
pub struct FileStorage {
    base: PathBuf,
    table: Arc<FileTable>,
    direct: bool,
    mapped: bool,
    /// [`FileOptions::checksummed_pages`].
    checksummed: bool,
    /// The cap on `files.open`'s length.
    max_open: AtomicUsize,
    /// Ticks once per use of an open file: its `used` stamp.
    clock: AtomicU64,
    /// Opens of a relation file (first ones and reopens).
    opens: AtomicU64,
}

/// How [`FileStorage::open_options`] reaches the files.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileOptions {
    /// Open every file with `O_DIRECT`: reads and writes bypass the
    /// kernel's page cache.
    pub direct_io: bool,
    /// Read single pages by copying them from a read-only mapping of the
    /// file instead of `pread` (RocksDB's `allow_mmap_reads`): a page in
    /// the kernel's page cache then costs a `memcpy`, not a system call and
    /// a page-cache lookup. A page not in the page cache is read in by the
    /// page fault, with the kernel's read-around for mappings. Runs of
    /// pages, writes and syncs are unchanged. A file that shrinks under a
    /// copy (a truncation by another process, a device error) makes that
    /// read fall back to `pread`, which reports it as before.
    pub mapped_reads: bool,
    /// Whoever reads through this storage verifies every page against a
    /// checksum of the whole page and refuses a mismatch (a pool with
    /// `checksums` on and `zero_damaged_pages` off). Only mapped reads look
    /// at it: a file cut by another process inside a block's last 4 KiB
    /// shows the rest of that block through the mapping as zeros, with no
    /// fault, where `pread` reports a short read. Without this promise a
    /// mapped copy whose last byte is zero (most pages') asks the file's
    /// length (`fstat`) to tell; with it, the zeroed tail is left to fail
    /// the checksum, an error naming the block.
    pub checksummed_pages: bool,
}

/// The caches of every live [`FileStorage`] of the process, for
/// [`shed_cached_descriptor`].
type Registry = Vec<Weak<FileTable>>;
static CACHES: Mutex<Registry> = Mutex::new(Vec::new());

/// Close the least recently used relation file of one live [`FileStorage`]
/// of this process (its next use reopens it); `false` if none holds an open
/// file. A file in use by an operation keeps its descriptor until that
/// operation lets go of it.
pub fn shed_cached_descriptor() -> bool {
    let mut caches = CACHES.lock().unwrap_or_else(|p| p.into_inner());
    caches.retain(|t| t.strong_count() > 0);
    for table in caches.iter() {
        let Some(table) = table.upgrade() else {
            continue;
        };
        if table.close_lru(&mut table.files.write()) {
            return true;
        }
    }
    false
}

/// Runs `op` (something that opens a descriptor outside the relation-file
/// cache: a WAL segment, a directory to fsync, the control file), and while
/// it fails for want of descriptors, closes a cached relation file
/// ([`shed_cached_descriptor`]) and runs it again; the last error once no
/// cached file is left to close.
pub fn with_spare_descriptor<T>(mut op: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match op() {
            Err(e) if is_out_of_descriptors(&e) => {
                if !shed_cached_descriptor() {
                    return Err(e);
                }
            }
            r => return r,
        }
    }
}

/// Near copies of the table of open files (module docs, "Near copies").
const NEAR_COPIES: usize = 16;

/// The near copy this thread uses: dealt round robin on its first use.
#[inline]
fn near_copy() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static COPY: usize = NEXT.fetch_add(1, Ordering::Relaxed) % NEAR_COPIES;
    }
    COPY.with(|c| *c)
}

/// One near copy: handles of files the table holds open.
type NearCopy = RwLock<RelForkMap<Arc<RelFile>>>;

/// The files a storage knows, and the near copies of its open ones.
#[derive(Debug)]
struct FileTable {
    files: RwLock<Files>,
    /// Module docs, "Near copies".
    near: Box<[CachePadded<NearCopy>]>,
    /// Descriptors closed to stay under the cap or after `EMFILE`.
    closes: AtomicU64,
}

impl FileTable {
    fn new() -> FileTable {
        FileTable {
            files: RwLock::new(Files::default()),
            near: (0..NEAR_COPIES)
                .map(|_| CachePadded(RwLock::new(RelForkMap::default())))
                .collect(),
            closes: AtomicU64::new(0),
        }
    }

    /// Put `file` (of `rf`, held by `_files`, whose lock the caller holds)
    /// into this thread's near copy (rule 1).
    fn remember_near(&self, _files: &Files, rf: RelFork, file: &Arc<RelFile>) {
        self.near[near_copy()].write().insert(rf, Arc::clone(file));
    }

    /// Take `rf` out of the table and every near copy (rule 2): `files`
    /// is the table, write-locked by the caller.
    fn forget(&self, files: &mut Files, rf: RelFork) -> Option<Arc<RelFile>> {
        let file = files.open.remove(&rf);
        if file.is_some() {
            for near in self.near.iter() {
                near.write().remove(&rf);
            }
        }
        file
    }

    /// Close the least recently used open file of `files` (this table,
    /// write-locked by the caller); `false` if none is open.
    fn close_lru(&self, files: &mut Files) -> bool {
        let victim = files
            .open
            .iter()
            .min_by_key(|(_, f)| f.used.load(Ordering::Relaxed))
            .map(|(&rf, _)| rf);
        match victim {
            Some(rf) => {
                self.forget(files, rf);
                self.closes.fetch_add(1, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }
}

/// Hashes a [`RelFork`] with one multiply per field written (FxHash's
/// step): the maps of [`Files`] are looked up on every read and write of a
/// page, and SipHash, the standard maps' default, cost a pool miss more
/// instructions than its mapping-table work. The keys are relation
/// numbers this process chose, not input an adversary picks.
#[derive(Default, Debug)]
struct RelForkHasher(u64);

impl Hasher for RelForkHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u8(&mut self, n: u8) {
        self.write_u64(u64::from(n));
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
    fn write_isize(&mut self, n: isize) {
        self.write_u64(n as u64);
    }
    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

type RelForkMap<V> = HashMap<RelFork, V, BuildHasherDefault<RelForkHasher>>;

/// The relation files this storage knows, open or not.
#[derive(Debug, Default)]
struct Files {
    /// The open ones: at most `max_open`.
    open: RelForkMap<Arc<RelFile>>,
    /// The block count of every fork opened or created since the storage
    /// was, open now or not (removed by `unlink`).
    nblocks: RelForkMap<Arc<AtomicU32>>,
    /// Unlinks so far that closed or removed a file (one that found
    /// neither cannot have raced an open). A descriptor opened outside the
    /// lock is taken into `open` only if no unlink ran since the opener
    /// looked at the table: it may be of a file unlinked meanwhile, which
    /// would then be served (with its old block count) as the relation,
    /// even once a file of that name is made again.
    unlinks: u64,
}

/// Relation files open at once by default: half the process's soft
/// `RLIMIT_NOFILE` (the other half for the WAL, directories, sockets and
/// whatever else the process opens), at most 1,000 (PostgreSQL's default
/// `max_files_per_process`) and at least 1.
pub fn default_max_open_files() -> usize {
    // SAFETY: an all-zero rlimit is a valid value of this plain C struct.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: getrlimit writes the struct we pass and nothing else.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        lim.rlim_cur
    } else {
        // No answer: assume the common default soft limit.
        1024
    };
    usize::try_from(soft / 2).map_or(1000, |n| n.clamp(1, 1000))
}

impl FileStorage {
    /// Opens the storage under `data_dir` with buffered I/O, creating
    /// `data_dir/base/` if needed (and fsyncing `base/` and `data_dir` when
    /// it did).
    pub fn open(data_dir: &Path) -> Result<FileStorage> {
        FileStorage::open_with(data_dir, false)
    }

    /// As [`open`](Self::open); with `direct_io`, files are opened with
    /// `O_DIRECT`, and a file system that refuses it (tmpfs before Linux 6.6,
    /// some FUSE and network file systems) is an error here, naming the file
    /// system and the path, rather than at the first relation touched.
    pub fn open_with(data_dir: &Path, direct_io: bool) -> Result<FileStorage> {
        FileStorage::open_options(
            data_dir,
            FileOptions {
                direct_io,
                ..FileOptions::default()
            },
        )
    }

    /// As [`open`](Self::open), with every choice of [`FileOptions`].
    /// Direct I/O and mapped reads together are [`Error::InvalidConfig`]:
    /// a mapping reads the page cache that `O_DIRECT` bypasses.
    pub fn open_options(data_dir: &Path, options: FileOptions) -> Result<FileStorage> {
        let FileOptions {
            direct_io,
            mapped_reads,
            checksummed_pages,
        } = options;
        if direct_io && mapped_reads {
            return Err(Error::InvalidConfig(
                "mapped reads copy from the kernel's page cache, which direct I/O bypasses: \
                 choose one"
                    .into(),
            ));
        }
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
        let s = FileStorage {
            base,
            table: Arc::new(FileTable::new()),
            direct: direct_io,
            mapped: mapped_reads,
            checksummed: checksummed_pages,
            max_open: AtomicUsize::new(default_max_open_files()),
            clock: AtomicU64::new(0),
            opens: AtomicU64::new(0),
        };
        {
            let mut caches = CACHES.lock().unwrap_or_else(|p| p.into_inner());
            caches.retain(|t| t.strong_count() > 0);
            caches.push(Arc::downgrade(&s.table));
        }
        if direct_io {
            s.probe_direct()?;
        }
        Ok(s)
    }

    /// Whether files are opened with `O_DIRECT`.
    pub fn direct_io(&self) -> bool {
        self.direct
    }

    /// Whether single-page reads copy from a mapping of the file.
    pub fn mapped_reads(&self) -> bool {
        self.mapped
    }

    /// The `base/` directory.
    pub fn base_dir(&self) -> &Path {
        &self.base
    }

    /// The most relation files kept open at once (see the module docs).
    pub fn max_open_files(&self) -> usize {
        self.max_open.load(Ordering::Relaxed)
    }

    /// Keep at most `n` relation files open (at least 1), closing the least
    /// recently used ones now if more are open.
    pub fn set_max_open_files(&self, n: usize) {
        let n = n.max(1);
        self.max_open.store(n, Ordering::Relaxed);
        let mut files = self.table.files.write();
        while files.open.len() > n && self.table.close_lru(&mut files) {}
    }

    /// Relation files open now (held by the cache).
    pub fn open_files(&self) -> usize {
        self.table.files.read().open.len()
    }

    /// Opens of relation files so far, first ones and reopens.
    pub fn files_opened(&self) -> u64 {
        self.opens.load(Ordering::Relaxed)
    }

    /// Descriptors closed so far to stay under the cap (or after `EMFILE`).
    pub fn files_closed(&self) -> u64 {
        self.table.closes.load(Ordering::Relaxed)
    }

    /// Runs `op` (something that opens a descriptor), and while it fails
    /// for want of descriptors, closes our least recently used file and
    /// runs it again; the last error once nothing of ours is left to close.
    fn with_descriptor<T>(&self, mut op: impl FnMut() -> io::Result<T>) -> io::Result<T> {
        loop {
            match op() {
                Err(e) if is_out_of_descriptors(&e) => {
                    if !self.table.close_lru(&mut self.table.files.write()) {
                        return Err(e);
                    }
                }
                r => return r,
            }
        }
    }

    /// fsyncs the `base/` directory, closing cached files if the process is
    /// out of descriptors for the directory's.
    fn fsync_base(&self) -> Result<()> {
        self.with_descriptor(|| File::open(&self.base).and_then(|d| d.sync_all()))
            .map_err(|e| Error::io("fsync", "directory", &self.base, e))
    }

    /// Adds a just-opened `file` of `rf` to the cache, closing the least
    /// recently used ones to stay under the cap; if another thread opened
    /// `rf` meanwhile, its descriptor wins and `file` is dropped. With
    /// `unlinks` (the table's count of unlinks when the opener looked for
    /// `rf`), `None` if an unlink has run since: `file` may be of a file
    /// unlinked meanwhile, and the caller opens the path again.
    fn insert_open(
        &self,
        rf: RelFork,
        path: PathBuf,
        file: File,
        nblocks: BlockNumber,
        unlinks: Option<u64>,
    ) -> Option<Arc<RelFile>> {
        let used = self.clock.fetch_add(1, Ordering::Relaxed);
        let mut files = self.table.files.write();
        if let Some(f) = files.open.get(&rf) {
            f.used.store(used, Ordering::Relaxed);
            let f = Arc::clone(f);
            self.table.remember_near(&files, rf, &f);
            return Some(f);
        }
        if unlinks.is_some_and(|n| n != files.unlinks) {
            return None;
        }
        let max = self.max_open.load(Ordering::Relaxed);
        while files.open.len() >= max && self.table.close_lru(&mut files) {}
        let count = Arc::clone(
            files
                .nblocks
                .entry(rf)
                .or_insert_with(|| Arc::new(AtomicU32::new(nblocks))),
        );
        let map = self
            .mapped
            .then(|| MappedFile::new(file.as_raw_fd(), self.checksummed));
        let file = Arc::new(RelFile {
            file,
            path,
            nblocks: count,
            map,
            used: AtomicU64::new(used),
        });
        files.open.insert(rf, Arc::clone(&file));
        self.table.remember_near(&files, rf, &file);
        Some(file)
    }

    /// Creates and removes a scratch file with `O_DIRECT`, so that a file
    /// system refusing it is reported at open.
    fn probe_direct(&self) -> Result<()> {
        let path = self
            .base
            .join(format!(".direct_io_probe.{}", std::process::id()));
        let opened = self
            .options()
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| self.open_error("create", "O_DIRECT probe file", &path, e));
        let _ = fs::remove_file(&path);
        opened.map(drop)
    }

    /// Read-write open options, with `O_DIRECT` if asked for.
    fn options(&self) -> OpenOptions {
        let mut o = OpenOptions::new();
        o.read(true).write(true);
        if self.direct {
            o.custom_flags(libc::O_DIRECT);
        }
        o
    }

    /// Open a relation file (with `create_new`, create it), then give the
    /// descriptor `O_NOATIME` where the kernel allows it (`set_noatime`):
    /// a read through a descriptor without it checks, on every `pread`,
    /// whether the file's access time is due an update, which is kernel
    /// time on every miss for a time stamp nothing here reads.
    ///
    /// The flag is set after the open rather than passed to it: the kernel
    /// refuses it (`EPERM`) on a file this process's user does not own,
    /// and on a file system that gives new files an owner of its own (NFS
    /// with `all_squash`, vfat or CIFS mounted with `uid=`, FUSE) it does
    /// so only after creating the file, so an open retried without the
    /// flag would find the file the first attempt made.
    fn open_file(&self, path: &Path, create_new: bool) -> io::Result<File> {
        let file = self.options().create_new(create_new).open(path)?;
        set_noatime(&file);
        Ok(file)
    }

    /// The error for a failed open: `EINVAL` under `O_DIRECT` is the file
    /// system refusing direct I/O, and says which file system.
    fn open_error(
        &self,
        op: &'static str,
        what: impl ToString,
        path: &Path,
        e: io::Error,
    ) -> Error {
        if self.direct && e.raw_os_error() == Some(libc::EINVAL) {
            let fs = fs_type_name(&self.base);
            Error::io(
                op,
                format!(
                    "{} with O_DIRECT: the {fs} file system refuses direct I/O",
                    what.to_string()
                ),
                path,
                e,
            )
        } else {
            Error::io(op, what, path, e)
        }
    }

    /// The open file of `rf`, opening it on first use. `op` and `what` name
    /// the operation for the error if the file cannot be opened.
    pub(super) fn file(
        &self,
        rf: RelFork,
        op: &'static str,
        what: &dyn ToString,
    ) -> Result<Arc<RelFile>> {
        if let Some(f) = self.table.near[near_copy()].read().get(&rf) {
            f.touch(&self.clock);
            return Ok(Arc::clone(f));
        }
        loop {
            if let Some(f) = self.open_again(rf, op, what)? {
                return Ok(f);
            }
        }
    }

    /// [`file`](Self::file) past the near copy: the table's file, or the
    /// path opened and added to the table; `None` if an unlink ran while
    /// the path was being opened (try again: the descriptor may be of the
    /// file it removed).
    fn open_again(
        &self,
        rf: RelFork,
        op: &'static str,
        what: &dyn ToString,
    ) -> Result<Option<Arc<RelFile>>> {
        let (known, unlinks) = {
            let files = self.table.files.read();
            if let Some(f) = files.open.get(&rf) {
                f.touch(&self.clock);
                self.table.remember_near(&files, rf, f);
                return Ok(Some(Arc::clone(f)));
            }
            (
                files.nblocks.get(&rf).map(|n| n.load(Ordering::Acquire)),
                files.unlinks,
            )
        };
        let path = self.path(rf);
        let file = self
            .with_descriptor(|| self.open_file(&path, false))
            .map_err(|e| self.open_error(op, what.to_string(), &path, e))?;
        self.opens.fetch_add(1, Ordering::Relaxed);
        // A reopened file keeps the count kept for it while it was closed
        // (`insert_open` takes the stored one); only a first open reads the
        // length.
        let nblocks = match known {
            Some(n) => n,
            None => {
                let len = file
                    .metadata()
                    .map_err(|e| Error::io(op, what.to_string(), &path, e))?
                    .len();
                BlockNumber::try_from(len / PAGE_SIZE as u64).map_err(|_| Error::CorruptFile {
                    relfork: rf,
                    path: path.clone(),
                    detail: format!("{len} bytes is more than {} blocks", BlockNumber::MAX),
                })?
            }
        };
        // Another thread may have opened it meanwhile: the first descriptor
        // and the first count win, so every thread sees the same count.
        Ok(self.insert_open(rf, path, file, nblocks, Some(unlinks)))
    }

    /// The open file of `tag`'s fork and its block count, if `tag.block` can
    /// be read: [`Error::BlockOutOfRange`] if it is at or past the end.
    pub(super) fn readable(&self, tag: BufferTag) -> Result<(Arc<RelFile>, BlockNumber)> {
        let f = self.file(tag.relfork(), "open", &tag)?;
        let nblocks = f.nblocks.load(Ordering::Acquire);
        if tag.block >= nblocks {
            return Err(f.out_of_range(tag.relfork(), tag.block, nblocks));
        }
        Ok((f, nblocks))
    }

    /// The open file of `tag`'s fork, if `tag.block` can be written: below
    /// the block count, or equal to it (an extension); past it is
    /// [`Error::BlockOutOfRange`] (no holes).
    pub(super) fn writable(&self, tag: BufferTag) -> Result<Arc<RelFile>> {
        let f = self.file(tag.relfork(), "open", &tag)?;
        let nblocks = f.nblocks.load(Ordering::Acquire);
        if tag.block > nblocks {
            return Err(f.out_of_range(tag.relfork(), tag.block, nblocks));
        }
        Ok(f)
    }

    /// `io(file)` with the file of `tag`'s fork: under this thread's near
    /// copy if the file is there (module docs, "Near copies"; rule 3:
    /// `io` does one page's I/O and nothing else), else with the table's
    /// handle.
    #[inline]
    fn with_file<T>(&self, tag: BufferTag, io: impl FnOnce(&RelFile) -> Result<T>) -> Result<T> {
        {
            let near = self.table.near[near_copy()].read();
            if let Some(f) = near.get(&tag.relfork()) {
                f.touch(&self.clock);
                return io(f);
            }
        }
        let f = self.file(tag.relfork(), "open", &tag)?;
        io(&f)
    }

    /// One page (`read`) from `f`, the file of `tag`'s fork.
    fn read_from(&self, f: &RelFile, tag: BufferTag, page: &mut [u8]) -> Result<()> {
        let nblocks = f.nblocks.load(Ordering::Acquire);
        if tag.block >= nblocks {
            return Err(f.out_of_range(tag.relfork(), tag.block, nblocks));
        }
        if let Some(map) = &f.map
            && map.copy(tag.block, page)
        {
            return Ok(());
        }
        if self.direct && !is_direct_aligned(page) {
            let mut bounce = AlignedBuf::zeroed(PAGE_SIZE);
            self.pread_page(f, tag, nblocks, &mut bounce)?;
            page.copy_from_slice(&bounce);
            return Ok(());
        }
        self.pread_page(f, tag, nblocks, page)
    }

    /// One page (`write`) into `f`, the file of `tag`'s fork: below its
    /// block count, or at it (an extension); past it is
    /// [`Error::BlockOutOfRange`] (no holes).
    fn write_to(&self, f: &RelFile, tag: BufferTag, page: &[u8]) -> Result<()> {
        let nblocks = f.nblocks.load(Ordering::Acquire);
        if tag.block > nblocks {
            return Err(f.out_of_range(tag.relfork(), tag.block, nblocks));
        }
        let bounce;
        let buf = if self.direct && !is_direct_aligned(page) {
            bounce = AlignedBuf::copy_of(page);
            &bounce[..]
        } else {
            page
        };
        f.file
            .write_all_at(buf, byte_offset(tag.block))
            .map_err(|e| Error::io("write", tag, &f.path, e))?;
        // An extension: count the new page only once it is fully written.
        // `fetch_max` keeps the count right even if two extensions of the same
        // block race (the caller should have prevented that).
        f.nblocks.fetch_max(tag.block + 1, Ordering::AcqRel);
        Ok(())
    }

    /// Reads one page (aligned if direct) at `tag.block`, retrying short
    /// reads (except under `O_DIRECT`, where a short read is the end of the
    /// file).
    fn pread_page(
        &self,
        f: &RelFile,
        tag: BufferTag,
        nblocks: BlockNumber,
        buf: &mut [u8],
    ) -> Result<()> {
        let off = byte_offset(tag.block);
        let mut done = 0;
        while done < buf.len() {
            match f.file.read_at(&mut buf[done..], off + done as u64) {
                Ok(0) => return Err(short_read(tag, &f.path, nblocks)),
                Ok(n) => {
                    done += n;
                    if self.direct && done < buf.len() {
                        return Err(short_read(tag, &f.path, nblocks));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io("read", tag, &f.path, e)),
            }
        }
        Ok(())
    }

    /// Reads consecutive blocks from `tag.block` into `pages` with one
    /// `preadv` per `IOV_MAX` pages (more only after a short read).
    fn preadv_run(
        &self,
        f: &RelFile,
        tag: BufferTag,
        nblocks: BlockNumber,
        pages: &mut [&mut [u8]],
    ) -> Result<()> {
        let fd = f.file.as_raw_fd();
        let mut first = 0;
        while first < pages.len() {
            let end = (first + IOV_MAX).min(pages.len());
            let chunk = &mut pages[first..end];
            let total = chunk.len() * PAGE_SIZE;
            let chunk_off = byte_offset(tag.block + first as BlockNumber);
            let block_at = |bytes: usize| BufferTag {
                block: tag.block + (first + bytes / PAGE_SIZE) as BlockNumber,
                ..tag
            };
            let mut done = 0;
            while done < total {
                let (skip_pages, skip_bytes) = (done / PAGE_SIZE, done % PAGE_SIZE);
                let iov: Vec<libc::iovec> = chunk[skip_pages..]
                    .iter_mut()
                    .enumerate()
                    .map(|(i, p)| {
                        let s = if i == 0 { skip_bytes } else { 0 };
                        libc::iovec {
                            iov_base: p[s..].as_mut_ptr().cast(),
                            iov_len: PAGE_SIZE - s,
                        }
                    })
                    .collect();
                // SAFETY: every iovec points into a distinct `&mut` page of
                // `chunk` (PAGE_SIZE bytes each, checked by the caller) that
                // stays borrowed for the whole call; `iov` outlives the call.
                let r = unsafe {
                    libc::preadv(
                        fd,
                        iov.as_ptr(),
                        iov.len() as libc::c_int,
                        (chunk_off + done as u64) as libc::off_t,
                    )
                };
                if r < 0 {
                    let e = io::Error::last_os_error();
                    if e.kind() == io::ErrorKind::Interrupted {
                        continue;
                    }
                    return Err(Error::io("read", block_at(done), &f.path, e));
                }
                let r = r as usize;
                if r == 0 || (self.direct && r < total - done) {
                    return Err(short_read(block_at(done + r), &f.path, nblocks));
                }
                done += r;
            }
            first = end;
        }
        Ok(())
    }
}

/// A read that found the end of the file inside a block it counted.
pub(super) fn short_read(tag: BufferTag, path: &Path, nblocks: BlockNumber) -> Error {
    Error::CorruptFile {
        relfork: tag.relfork(),
        path: path.to_path_buf(),
        detail: format!(
            "short read of block {}: the file ends inside it, \
             though it was counted as {nblocks} blocks",
            tag.block
        ),
    }
}

/// The name of the file system holding `path` (from `statfs`'s `f_type`),
/// for the error of a file system that refuses `O_DIRECT`.
pub fn fs_type_name(path: &Path) -> String {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return "unknown".into();
    };
    // SAFETY: an all-zero statfs is a valid value of this plain C struct.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a writable statfs.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return format!("unknown ({})", io::Error::last_os_error());
    }
    fs_magic_name(st.f_type as i64)
}

/// A file system's name from its `statfs` magic number.
pub fn fs_magic_name(magic: i64) -> String {
    let name = match magic {
        0x0102_1994 => "tmpfs",
        0x8584_58f6 => "ramfs",
        0xEF53 => "ext2/3/4",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        0xF2F5_2010 => "f2fs",
        0x2FC1_2FC1 => "zfs",
        0x794C_7630 => "overlayfs",
        0x6573_5546 => "fuse",
        0x6969 => "nfs",
        0xFF53_4D42 => "cifs",
        0xFE53_4D42 => "smb2",
        0x0102_1997 => "9p",
        0x7371_7368 => "squashfs",
        0x4d44 => "vfat",
        0x2011_BAB0 => "exfat",
        0x9fa0 => "proc",
        _ => return format!("unknown (f_type {magic:#x})"),
    };
    name.to_string()
}

/// Add `O_NOATIME` to `file`'s open flags if the kernel allows it (it
/// refuses, `EPERM`, on a file this process's user does not own; then the
/// descriptor stays as it is: reads work the same, with access times).
fn set_noatime(file: &File) {
    let fd = file.as_raw_fd();
    // SAFETY: F_GETFL on a descriptor `file` owns reads its flags only.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags >= 0 && flags & libc::O_NOATIME == 0 {
        // SAFETY: F_SETFL changes only the status flags of `file`'s open
        // file description (access mode and creation flags are ignored);
        // a refusal leaves them as they were.
        unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NOATIME) };
    }
}

pub(super) fn fsync_dir(dir: &Path) -> Result<()> {
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
        if self.table.files.read().nblocks.contains_key(&rf) {
            return Ok(());
        }
        let path = self.path(rf);
        match self.with_descriptor(|| self.open_file(&path, true)) {
            Ok(file) => {
                self.opens.fetch_add(1, Ordering::Relaxed);
                self.insert_open(rf, path, file, 0, None);
                self.fsync_base()
            }
            // Already there (made before a crash, or by a replayed create):
            // it is the relation's file if it is a file. Anything else
            // in its place is an error now, not at the relation's first use.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => match fs::metadata(&path) {
                Ok(m) if m.is_file() => Ok(()),
                Ok(m) => Err(Error::CorruptFile {
                    relfork: rf,
                    path,
                    detail: format!(
                        "the relation's file is {}, not a regular file",
                        if m.is_dir() {
                            "a directory"
                        } else {
                            "a special file"
                        }
                    ),
                }),
                Err(e) => Err(Error::io("create", rf, &path, e)),
            },
            Err(e) => Err(self.open_error("create", rf, &path, e)),
        }
    }

    fn exists(&self, rf: RelFork) -> Result<bool> {
        if self.table.files.read().nblocks.contains_key(&rf) {
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
        self.with_file(tag, |f| self.read_from(f, tag, page))
    }

    /// One `preadv` for the whole run (per 1,024 pages). Blocks before the
    /// end of the file are read even when the run goes past it; the error
    /// then names the first block past the end.
    fn read_run(&self, tag: BufferTag, pages: &mut [&mut [u8]]) -> Result<()> {
        if pages.is_empty() {
            return Ok(());
        }
        for p in pages.iter() {
            check_page_len(p.len());
        }
        let (f, nblocks) = self.readable(tag)?;
        let n = pages.len().min((nblocks - tag.block) as usize);
        if self.direct && pages[..n].iter().any(|p| !is_direct_aligned(p)) {
            for (i, p) in pages[..n].iter_mut().enumerate() {
                let block = tag.block + i as BlockNumber;
                self.read(BufferTag { block, ..tag }, p)?;
            }
        } else {
            self.preadv_run(&f, tag, nblocks, &mut pages[..n])?;
        }
        if n < pages.len() {
            return Err(f.out_of_range(tag.relfork(), tag.block + n as BlockNumber, nblocks));
        }
        Ok(())
    }

    fn write(&self, tag: BufferTag, page: &[u8]) -> Result<()> {
        check_page_len(page.len());
        self.with_file(tag, |f| self.write_to(f, tag, page))
    }

    fn truncate(&self, rf: RelFork, nblocks: BlockNumber) -> Result<()> {
        let f = self.file(rf, "open", &rf)?;
        let current = f.nblocks.load(Ordering::Acquire);
        if nblocks > current {
            return Err(f.out_of_range(rf, nblocks, current));
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

    /// Every fork this storage has opened, including those whose
    /// descriptor the cache has closed since (reopened to be synced). A
    /// fork unlinked after it was listed has nothing left to sync: its
    /// failure (the file is not there to reopen) is no error of this call.
    fn sync_all(&self) -> Result<()> {
        let mut known: Vec<RelFork> = self.table.files.read().nblocks.keys().copied().collect();
        known.sort();
        for rf in known {
            match self.sync(rf) {
                Err(_) if !self.table.files.read().nblocks.contains_key(&rf) => {}
                r => r?,
            }
        }
        self.fsync_base()
    }

    /// The file is removed under the table's lock, and counted as an
    /// unlink: a descriptor another thread opened before cannot be taken
    /// into the table afterwards, nor can the path be opened again while
    /// it still names the file going away.
    fn unlink(&self, rf: RelFork) -> Result<()> {
        let path = self.path(rf);
        let removed = {
            let mut files = self.table.files.write();
            let was_open = self.table.forget(&mut files, rf).is_some();
            files.nblocks.remove(&rf);
            let removed = fs::remove_file(&path);
            // No file, none open: no opener can hold a descriptor of it.
            if was_open || removed.is_ok() {
                files.unlinks += 1;
            }
            removed
        };
        match removed {
            Ok(()) => self.fsync_base(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::StorageBackend;
    use crate::io::open_flags;
    use crate::tag::RelId;

    fn stamps(s: &FileStorage) -> u64 {
        s.clock.load(Ordering::Relaxed)
    }

    #[test]
    fn relation_files_are_read_without_updating_their_access_time() {
        let dir = tempfile::tempdir().unwrap();
        let rf = RelFork::main(RelId(5));
        let path = dir.path().join("base/5");
        {
            let s = FileStorage::open(dir.path()).unwrap();
            s.create(rf).unwrap();
            s.write(BufferTag::new(rf, 0), &vec![3u8; PAGE_SIZE])
                .unwrap();
            s.sync(rf).unwrap();
        }
        // An access time two days old: under `relatime` (Linux's default)
        // the next read through a descriptor without O_NOATIME updates it.
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(2 * 86_400);
        File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_times(fs::FileTimes::new().set_accessed(old))
            .unwrap();
        let s = FileStorage::open(dir.path()).unwrap();
        let mut buf = vec![0u8; PAGE_SIZE];
        s.read(BufferTag::new(rf, 0), &mut buf).unwrap();
        assert_eq!(buf, vec![3u8; PAGE_SIZE]);
        let flags = open_flags(&path);
        assert_eq!(flags.len(), 1, "one descriptor of {}", path.display());
        assert_ne!(
            flags[0] & i64::from(libc::O_NOATIME),
            0,
            "{} is open without O_NOATIME",
            path.display()
        );
        let atime = fs::metadata(&path).unwrap().accessed().unwrap();
        assert_eq!(atime, old, "the read updated the access time");
    }

    #[test]
    fn creating_a_relation_whose_path_is_a_directory_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let s = FileStorage::open(dir.path()).unwrap();
        let rf = RelFork::main(RelId(6));
        fs::create_dir(dir.path().join("base/6")).unwrap();
        let e = s.create(rf).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, Error::CorruptFile { .. }), "{e:?}");
        assert!(msg.contains("base/6") && msg.contains("directory"), "{msg}");
        // A file already there (left by a crash) is taken as it is.
        let other = RelFork::main(RelId(8));
        fs::write(dir.path().join("base/8"), vec![0u8; PAGE_SIZE]).unwrap();
        s.create(other).unwrap();
        assert_eq!(s.nblocks(other).unwrap(), 1);
    }

    /// Descriptors of this process whose link names `path` (an unlinked
    /// file's reads "<path> (deleted)").
    fn descriptors_of(path: &Path) -> usize {
        let path = path.to_str().unwrap();
        fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .filter_map(|e| fs::read_link(e.path()).ok())
            .filter(|l| {
                let l = l.to_string_lossy();
                l == path || l == format!("{path} (deleted)")
            })
            .count()
    }

    /// A storage with relations 1 and 2 of one page each, and the path of 1.
    fn two_relations(dir: &Path) -> (FileStorage, RelFork, RelFork, PathBuf) {
        let s = FileStorage::open(dir).unwrap();
        let (a, b) = (RelFork::main(RelId(1)), RelFork::main(RelId(2)));
        for (rf, fill) in [(a, 1u8), (b, 2u8)] {
            s.create(rf).unwrap();
            s.write(BufferTag::new(rf, 0), &vec![fill; PAGE_SIZE])
                .unwrap();
        }
        let path = s.path(a);
        (s, a, b, path)
    }

    /// Threads that read `rf` once each (and so keep it in their near
    /// copies), then end.
    fn read_on_threads(s: &FileStorage, rf: RelFork, threads: usize) {
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| {
                    let mut buf = vec![0u8; PAGE_SIZE];
                    s.read(BufferTag::new(rf, 0), &mut buf).unwrap();
                    s.write(BufferTag::new(rf, 0), &buf).unwrap();
                });
            }
        });
    }

    /// A file closed to stay under the cap is closed for every thread that
    /// read it: its descriptor goes, though each thread's near copy held
    /// it (module docs, "Near copies", rule 2).
    #[test]
    fn a_file_closed_by_the_cap_leaves_no_descriptor_in_any_threads_near_copy() {
        let dir = tempfile::tempdir().unwrap();
        let (s, a, b, path) = two_relations(dir.path());
        read_on_threads(&s, a, NEAR_COPIES + 1);
        assert_eq!(descriptors_of(&path), 1);
        let mut buf = vec![0u8; PAGE_SIZE];
        s.read(BufferTag::new(a, 0), &mut buf).unwrap();
        assert!(
            s.table.near[near_copy()].read().contains_key(&a),
            "a read leaves its file in the thread's near copy"
        );
        s.set_max_open_files(1);
        s.read(BufferTag::new(b, 0), &mut buf).unwrap();
        assert_eq!(s.open_files(), 1);
        assert_eq!(descriptors_of(&path), 0, "{} is still open", path.display());
        // And reopened at its next use, on any thread.
        read_on_threads(&s, a, 2);
        s.read(BufferTag::new(a, 0), &mut buf).unwrap();
        assert_eq!(buf, vec![1u8; PAGE_SIZE]);
        assert_eq!(descriptors_of(&path), 1);
    }

    /// An unlinked relation's file is closed for every thread that read it,
    /// so its space is given back now, not when some thread next reads.
    #[test]
    fn an_unlinked_file_leaves_no_descriptor_in_any_threads_near_copy() {
        let dir = tempfile::tempdir().unwrap();
        let (s, a, _, path) = two_relations(dir.path());
        read_on_threads(&s, a, 3);
        s.unlink(a).unwrap();
        assert_eq!(descriptors_of(&path), 0, "{} is still open", path.display());
        let e = s
            .read(BufferTag::new(a, 0), &mut vec![0u8; PAGE_SIZE])
            .unwrap_err();
        assert!(e.to_string().contains("base/1"), "{e}");
    }

    /// Readers and writers on two threads while a third closes files (the
    /// cap at one, shedding as `EMFILE` does) and lets them reopen: every
    /// page reads as written, nothing waits forever, and afterwards the
    /// descriptors open are the ones the table counts.
    #[test]
    fn reads_and_writes_go_on_while_files_are_closed_under_them() {
        let dir = tempfile::tempdir().unwrap();
        let (s, a, b, _) = two_relations(dir.path());
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            for (t, rf) in [(0u8, a), (1u8, b)] {
                let (s, stop) = (&s, &stop);
                scope.spawn(move || {
                    let mut buf = vec![0u8; PAGE_SIZE];
                    let mut n = 0u32;
                    while !stop.load(Ordering::Relaxed) {
                        let block = 1 + n % 8;
                        let fill = (n % 200) as u8 + t;
                        s.write(BufferTag::new(rf, block), &vec![fill; PAGE_SIZE])
                            .unwrap();
                        s.read(BufferTag::new(rf, block), &mut buf).unwrap();
                        assert_eq!(buf, vec![fill; PAGE_SIZE], "{rf} block {block}");
                        n += 1;
                    }
                });
            }
            for i in 0..20_000 {
                match i % 3 {
                    0 => s.set_max_open_files(1),
                    // What `EMFILE` does, to this storage only:
                    // `shed_cached_descriptor` would close files of any
                    // storage of the process, those of the tests running
                    // beside this one too (which count their descriptors
                    // and stamps).
                    1 => {
                        let _ = s.table.close_lru(&mut s.table.files.write());
                    }
                    _ => s.set_max_open_files(8),
                }
            }
            stop.store(true, Ordering::Relaxed);
        });
        assert!(s.files_closed() > 0, "nothing was closed under the threads");
        let open = s.open_files();
        let held = [a, b]
            .iter()
            .map(|&rf| descriptors_of(&s.path(rf)))
            .sum::<usize>();
        assert_eq!(held, open, "descriptors held against the table's count");
    }

    #[test]
    fn rereading_the_most_recently_used_file_writes_no_stamp_and_keeps_the_lru_order() {
        let dir = tempfile::tempdir().unwrap();
        let s = FileStorage::open(dir.path()).unwrap();
        let (a, b) = (RelFork::main(RelId(1)), RelFork::main(RelId(2)));
        let page = vec![7u8; PAGE_SIZE];
        for rf in [a, b] {
            s.create(rf).unwrap();
            s.write(BufferTag::new(rf, 0), &page).unwrap();
        }
        let mut buf = vec![0u8; PAGE_SIZE];
        s.read(BufferTag::new(a, 0), &mut buf).unwrap();
        let after_a = stamps(&s);
        s.read(BufferTag::new(a, 0), &mut buf).unwrap();
        s.read(BufferTag::new(a, 0), &mut buf).unwrap();
        assert_eq!(stamps(&s), after_a, "a was already the most recent");
        s.read(BufferTag::new(b, 0), &mut buf).unwrap();
        assert_eq!(stamps(&s), after_a + 1, "b is stamped");
        s.read(BufferTag::new(a, 0), &mut buf).unwrap();
        assert_eq!(stamps(&s), after_a + 2, "a is stamped again after b");
        // a is the most recent: lowering the cap to one closes b.
        s.set_max_open_files(1);
        let open: Vec<RelFork> = s.table.files.read().open.keys().copied().collect();
        assert_eq!(open, vec![a]);
        assert_eq!(buf, page);
    }
}

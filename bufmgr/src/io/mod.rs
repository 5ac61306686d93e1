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
//! with `direct_io` either backend opens its files with `O_DIRECT`.
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
//! * No virtual file descriptors: every fork ever touched keeps its file open
//!   until it is unlinked or the backend is dropped (PostgreSQL's `fd.c` closes
//!   and reopens files to stay under the descriptor limit).
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
mod observed;
mod uring;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use aligned::AlignedBuf;
pub use faulty::FaultyStorage;
pub use file::FileStorage;
pub use observed::{ObservedStorage, StorageObserver};
pub use uring::{UringStorage, probe_io_uring};

use crate::config::IoMode;
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

/// The storage backend under `data_dir` that `mode` and `direct_io` select:
/// [`FileStorage`] or [`UringStorage`]; see [`choose_io`].
pub fn open_storage(
    data_dir: &Path,
    mode: IoMode,
    direct_io: bool,
) -> Result<Arc<dyn StorageBackend>> {
    let (chosen, log) = choose_io(mode, data_dir, probe_io_uring)?;
    if let Some(line) = log {
        eprintln!("{line}");
    }
    Ok(match chosen {
        IoMode::IoUring => Arc::new(UringStorage::open(data_dir, direct_io)?),
        _ => Arc::new(FileStorage::open_with(data_dir, direct_io)?),
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

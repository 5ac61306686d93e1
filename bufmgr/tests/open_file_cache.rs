//! `FileStorage`'s open files are a bounded cache (PostgreSQL's virtual file
//! descriptors): never more than `max_open_files` descriptors held, the
//! least recently used closed first and reopened at the next touch, with
//! every fork's block count, contents, truncation and sync unaffected by
//! the closing. A process out of descriptors (`EMFILE`) gets them back by
//! closing cached files; with nothing left to close it is a
//! resource-exhausted error for that one operation.

use std::process::Command;

use bufmgr::tag::{BufferTag, Fork, PAGE_SIZE, RelFork, RelId};
use bufmgr::{ErrorKind, FileStorage, StorageBackend};

fn rf(rel: u32) -> RelFork {
    RelFork {
        rel: RelId(rel),
        fork: Fork::Main,
    }
}

fn tag(rel: u32, block: u32) -> BufferTag {
    BufferTag::new(rf(rel), block)
}

/// A page whose bytes say which relation and block it is.
fn page(rel: u32, block: u32) -> Vec<u8> {
    let mut p = vec![0u8; PAGE_SIZE];
    p[..4].copy_from_slice(&rel.to_le_bytes());
    p[4..8].copy_from_slice(&block.to_le_bytes());
    p[PAGE_SIZE - 1] = (rel ^ block) as u8;
    p
}

fn read(s: &dyn StorageBackend, rel: u32, block: u32) -> Vec<u8> {
    let mut p = vec![0u8; PAGE_SIZE];
    s.read(tag(rel, block), &mut p)
        .unwrap_or_else(|e| panic!("read {rel}/{block}: {e}"));
    p
}

#[test]
fn at_most_the_cap_is_open_and_closed_files_come_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let s = FileStorage::open(dir.path()).unwrap();
    s.set_max_open_files(4);
    assert_eq!(s.max_open_files(), 4);
    const RELS: u32 = 20;
    for rel in 1..=RELS {
        s.create(rf(rel)).unwrap();
        for block in 0..3 {
            s.write(tag(rel, block), &page(rel, block)).unwrap();
        }
        assert!(s.open_files() <= 4, "{} files open", s.open_files());
    }
    assert!(
        s.files_closed() >= u64::from(RELS - 4),
        "{}",
        s.files_closed()
    );
    // Every fork, in an order that keeps reopening closed ones: the block
    // count kept while closed, every page as written.
    for rel in (1..=RELS).rev() {
        assert_eq!(s.nblocks(rf(rel)).unwrap(), 3, "relation {rel}");
        for block in 0..3 {
            assert_eq!(read(&s, rel, block), page(rel, block), "{rel}/{block}");
        }
        assert!(s.open_files() <= 4);
    }
    // Extend, truncate and sync forks whose descriptor was closed (the
    // loop above ended with 1..=4 open).
    let opened = s.files_opened();
    s.write(tag(15, 3), &page(15, 3)).unwrap();
    assert_eq!(s.nblocks(rf(15)).unwrap(), 4);
    s.truncate(rf(16), 1).unwrap();
    s.sync(rf(17)).unwrap();
    assert_eq!(
        s.files_opened(),
        opened + 3,
        "closed files were not reopened"
    );
    // sync_all reaches every fork written, open or not.
    s.sync_all().unwrap();
    assert!(s.open_files() <= 4);
    // Past the end is still an error after a reopen (the count is kept).
    read(&s, 1, 0);
    read(&s, 2, 0);
    read(&s, 3, 0);
    read(&s, 4, 0);
    let e = s.read(tag(16, 1), &mut vec![0u8; PAGE_SIZE]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BadInput, "{e}");
    // Unlinking a closed fork removes it; the others are untouched.
    s.unlink(rf(5)).unwrap();
    assert!(!s.exists(rf(5)).unwrap());
    drop(s);

    // A fresh storage (and a fresh cache) sees the same files.
    let s = FileStorage::open(dir.path()).unwrap();
    s.set_max_open_files(1);
    for rel in (1..=RELS).filter(|&r| r != 5) {
        let want = match rel {
            15 => 4,
            16 => 1,
            _ => 3,
        };
        assert_eq!(s.nblocks(rf(rel)).unwrap(), want, "relation {rel}");
        for block in 0..want {
            assert_eq!(read(&s, rel, block), page(rel, block), "{rel}/{block}");
        }
        assert_eq!(s.open_files(), 1);
    }
}

#[test]
fn lowering_the_cap_closes_the_least_recently_used_now() {
    let dir = tempfile::tempdir().unwrap();
    let s = FileStorage::open(dir.path()).unwrap();
    s.set_max_open_files(10);
    for rel in 1..=10 {
        s.create(rf(rel)).unwrap();
        s.write(tag(rel, 0), &page(rel, 0)).unwrap();
    }
    assert_eq!(s.open_files(), 10);
    // Touch 1..=3 last: they are the most recently used.
    for rel in 1..=3 {
        read(&s, rel, 0);
    }
    s.set_max_open_files(3);
    assert_eq!(s.open_files(), 3);
    let opened = s.files_opened();
    for rel in 1..=3 {
        read(&s, rel, 0);
    }
    assert_eq!(s.files_opened(), opened, "a recently used file was closed");
    read(&s, 4, 0);
    assert_eq!(s.files_opened(), opened + 1);
    assert_eq!(s.open_files(), 3);
}

const CHILD: &str = "TESTS_OPEN_FILE_CACHE_CHILD_DIR";

#[test]
fn out_of_descriptors_closes_cached_files_or_is_a_resource_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_out_of_descriptors",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD, dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {stdout}\n{stderr}");
    assert!(stdout.contains("CHILD: ok"), "{stdout}");
}

/// Run by the test above in a child process: its descriptor limit is
/// lowered below the storage's cap, so only the `EMFILE` path keeps it
/// working.
#[test]
#[ignore = "run as a child process by out_of_descriptors_closes_cached_files_or_is_a_resource_error"]
fn child_out_of_descriptors() {
    let Some(dir) = std::env::var_os(CHILD) else {
        return;
    };
    const LIMIT: u64 = 64;
    let lim = libc::rlimit {
        rlim_cur: LIMIT as libc::rlim_t,
        rlim_max: LIMIT as libc::rlim_t,
    };
    // SAFETY: setrlimit reads the struct we pass and nothing else.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
    let s = FileStorage::open(dir.as_ref()).unwrap();
    s.set_max_open_files(1000);
    // Three times as many forks as descriptors: every create and write
    // past the limit works by closing cached files.
    let rels = 3 * LIMIT as u32;
    for rel in 1..=rels {
        s.create(rf(rel)).unwrap();
        s.write(tag(rel, 0), &page(rel, 0)).unwrap();
    }
    assert!(s.files_closed() > 0, "the limit was never reached");
    for rel in 1..=rels {
        assert_eq!(read(&s, rel, 0), page(rel, 0), "relation {rel}");
    }
    s.sync_all().unwrap();

    // Nothing cached and no descriptor left: an error of its own kind,
    // naming the file, and the storage works again once one is free.
    s.set_max_open_files(1);
    let mut hogs = Vec::new();
    loop {
        match std::fs::File::open("/dev/null") {
            Ok(f) => hogs.push(f),
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::EMFILE), "{e}");
                break;
            }
        }
    }
    // The one cached file is closed to make room: the read works.
    let closed = s.files_closed();
    assert_eq!(read(&s, 7, 0), page(7, 0));
    assert_eq!(s.files_closed(), closed + 1);
    // Empty the cache (unlinking 7 closes it) and take that descriptor too.
    s.unlink(rf(7)).unwrap();
    assert_eq!(s.open_files(), 0);
    hogs.push(std::fs::File::open("/dev/null").unwrap());
    let mut p = vec![0u8; PAGE_SIZE];
    let e = s.read(tag(8, 0), &mut p).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ResourceExhausted, "{e}");
    let path = s.path(rf(8));
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    // A descriptor free again: the same read works.
    hogs.pop();
    assert_eq!(read(&s, 8, 0), page(8, 0));
    println!("CHILD: ok");
}

/// A storage whose writes and syncs, while armed, fail as a file that
/// cannot be opened for want of descriptors does (nothing reaches the file).
#[derive(Debug)]
struct NoDescriptors {
    inner: FileStorage,
    writes: std::sync::atomic::AtomicBool,
    syncs: std::sync::atomic::AtomicBool,
}

impl NoDescriptors {
    fn emfile(&self, rf: RelFork) -> bufmgr::Error {
        bufmgr::Error::io(
            "open",
            rf,
            self.inner.path(rf),
            std::io::Error::from_raw_os_error(libc::EMFILE),
        )
    }
}

impl StorageBackend for NoDescriptors {
    fn name(&self) -> &'static str {
        "no-descriptors"
    }
    fn path(&self, rf: RelFork) -> std::path::PathBuf {
        self.inner.path(rf)
    }
    fn create(&self, rf: RelFork) -> bufmgr::Result<()> {
        self.inner.create(rf)
    }
    fn exists(&self, rf: RelFork) -> bufmgr::Result<bool> {
        self.inner.exists(rf)
    }
    fn nblocks(&self, rf: RelFork) -> bufmgr::Result<u32> {
        self.inner.nblocks(rf)
    }
    fn read(&self, tag: BufferTag, page: &mut [u8]) -> bufmgr::Result<()> {
        self.inner.read(tag, page)
    }
    fn write(&self, tag: BufferTag, page: &[u8]) -> bufmgr::Result<()> {
        if self.writes.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(self.emfile(tag.relfork()));
        }
        self.inner.write(tag, page)
    }
    fn truncate(&self, rf: RelFork, nblocks: u32) -> bufmgr::Result<()> {
        self.inner.truncate(rf, nblocks)
    }
    fn sync(&self, rf: RelFork) -> bufmgr::Result<()> {
        if self.syncs.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(self.emfile(rf));
        }
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
}

/// The pool meets a write and then a sync that fail for want of
/// descriptors: each is that call's error (kind `ResourceExhausted`), the
/// page stays dirty and the fork stays to be synced, and the next flush
/// writes and syncs them; nothing refuses later writes (before, the pool
/// took both for lost data and refused every later write).
#[test]
fn a_write_or_sync_without_descriptors_is_retried_not_fatal() {
    use std::sync::atomic::Ordering::SeqCst;
    let dir = tempfile::tempdir().unwrap();
    let inner = FileStorage::open(dir.path()).unwrap();
    inner.create(rf(1)).unwrap();
    for block in 0..2 {
        inner.write(tag(1, block), &page(1, block)).unwrap();
    }
    let storage = std::sync::Arc::new(NoDescriptors {
        inner,
        writes: Default::default(),
        syncs: Default::default(),
    });
    let pool = bufmgr::BufferPool::new(
        bufmgr::PoolConfig::new(16).partitions(1).checksums(false),
        storage.clone(),
    )
    .unwrap();
    let dirty = |block: u32, byte: u8| {
        let mut g = pool
            .read_buffer(rf(1), block, None)
            .unwrap()
            .lock_exclusive();
        g[100] = byte;
        g.mark_dirty();
    };
    dirty(0, 0xA1);
    storage.writes.store(true, SeqCst);
    let e = pool.flush_all(false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ResourceExhausted, "{e}");
    storage.writes.store(false, SeqCst);
    assert_eq!(
        pool.flush_all(false).unwrap(),
        1,
        "the page was not retried"
    );
    assert_eq!(read(&storage.inner, 1, 0)[100], 0xA1);

    dirty(1, 0xB2);
    storage.syncs.store(true, SeqCst);
    let e = pool.flush_all(false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ResourceExhausted, "{e}");
    storage.syncs.store(false, SeqCst);
    // Written already; the sync is still owed and done now; writes go on.
    pool.flush_all(false).unwrap();
    dirty(0, 0xC3);
    assert_eq!(pool.flush_all(false).unwrap(), 1);
    assert_eq!(read(&storage.inner, 1, 0)[100], 0xC3);
    assert_eq!(read(&storage.inner, 1, 1)[100], 0xB2);
}

//! Mapped reads: a relation file mapped read-only, so that a page already in
//! the kernel's page cache is read with one `memcpy` instead of a `pread`
//! (RocksDB's `allow_mmap_reads`, LMDB's whole design). Writes, extensions,
//! truncations and syncs stay `pwrite`, `ftruncate` and `fdatasync`: a
//! `MAP_SHARED` mapping shows the same page cache those change.
//!
//! # Segments
//!
//! A file is mapped in segments that double in size, made on first use:
//! segment 0 holds blocks `0 .. 8192` (64 MiB), segment `k >= 1` blocks
//! `8192 << (k - 1) .. 8192 << k`, so 20 segments reach block `u32::MAX` and
//! a file of `n` bytes is covered by at most `2n` (and at least 64 MiB) of
//! address space. A segment may reach past the end of the file; only blocks
//! below the fork's block count are ever copied.
//!
//! # A file that shrinks under a copy
//!
//! Touching a mapped page past the end of its file raises `SIGBUS`, and so
//! does a page the kernel fails to read from the device. A `pread` would
//! have returned a short read or `EIO`. A file can shrink under a copy: our
//! own truncation racing a read of a block it cuts off, or another process
//! truncating the file. So every copy runs inside a guard:
//!
//! 1. Before the copy, the thread records the source range and its
//!    segment in thread-local cells.
//! 2. A `SIGBUS` handler (installed with the first segment, chained to
//!    whatever handler was there before) checks the faulting address
//!    against the current thread's range. If it is ours, it sets the
//!    segment's `poisoned` flag and the thread's `faulted` cell, then maps
//!    anonymous memory (zeros) over the whole segment and returns, so the
//!    copy finishes. The whole segment, not the faulting page: a segment
//!    is one mapping, and replacing a whole mapping adds none, where a
//!    one-page patch splits it in three, which the kernel refuses to a
//!    process at its mapping-count limit (`vm.max_map_count`).
//! 3. After the copy, a fault, or a `poisoned` segment (another thread's
//!    fault, whose zeros this copy may have read), makes the copy fail.
//!    The caller then reads with `pread`, which returns the real answer
//!    (the data, a short read or the device's error).
//!
//! A file that ends inside a system page does not fault there: the rest of
//! that page reads as zeros. A copy whose last byte is zero may be such a
//! page, so it also fails when `fstat` finds the file too short for the
//! block, unless the reader verifies each page against a checksum of the
//! whole page (`FileOptions::checksummed_pages`; the pool's `checksums`):
//! a tail of zeros where the block had other bytes then fails that check,
//! an error naming the block, and a tail that was zeros is the block as it
//! was written. (Not where system pages are larger than a block: a whole
//! block past the end would then read as zeros, which no checksum covers.)
//!
//! A poisoned segment is never copied from again; its file's reads go
//! through `pread` until the descriptor is closed and the file reopened.
//! A fault outside any guarded range goes to the previous handler (Rust's
//! stack-overflow check, or the default action), as if we were not there.

use std::cell::Cell;
use std::ptr::{self, NonNull};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering, compiler_fence, fence};

use crate::tag::{BlockNumber, PAGE_SIZE};

/// Blocks in segment 0 (and the unit of every later segment's size).
const FIRST_SEGMENT_BLOCKS: u64 = 8192;
/// Segments needed to reach block `u32::MAX`.
const SEGMENTS: usize = 20;

/// The segment holding `block`, its first block and its length in blocks.
fn segment_of(block: BlockNumber) -> (usize, u64, u64) {
    let unit = u64::from(block) / FIRST_SEGMENT_BLOCKS;
    if unit == 0 {
        (0, 0, FIRST_SEGMENT_BLOCKS)
    } else {
        let k = 64 - unit.leading_zeros() as usize;
        let start = FIRST_SEGMENT_BLOCKS << (k - 1);
        (k, start, start)
    }
}

/// One read-only shared mapping of part of a file.
#[derive(Debug)]
struct Segment {
    base: NonNull<u8>,
    len: usize,
    /// Set by the `SIGBUS` handler when a copy from this segment faulted.
    poisoned: AtomicBool,
}

// SAFETY: the mapping is read-only and lives until `drop`; its pointer is
// only read through (by `copy`), from any thread.
unsafe impl Send for Segment {}
// SAFETY: as above; `poisoned` is atomic.
unsafe impl Sync for Segment {}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly what `mmap` returned, unmapped
        // once, here; no copy is running (they borrow the segment).
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// The mapped segments of one open relation file.
#[derive(Debug)]
pub(super) struct MappedFile {
    fd: libc::c_int,
    /// The reader verifies every page against a checksum of the whole page
    /// ([`FileOptions::checksummed_pages`](super::FileOptions)), and system
    /// pages are no larger than a block: a zeroed tail then fails that
    /// check, and a copy ending in zero needs no `fstat`.
    checked_by_reader: bool,
    /// `None` inside: the kernel refused that segment's mapping; its blocks
    /// are read with `pread`.
    segments: [OnceLock<Option<Segment>>; SEGMENTS],
}

impl MappedFile {
    /// Segments of `fd` are mapped on first use; `fd` must stay open as long
    /// as this lives (the owner keeps the `File` beside it). `checksummed`:
    /// see [`FileOptions::checksummed_pages`](super::FileOptions).
    pub(super) fn new(fd: libc::c_int, checksummed: bool) -> MappedFile {
        // SAFETY: sysconf has no preconditions.
        let system_page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let small_pages = usize::try_from(system_page).is_ok_and(|p| p > 0 && p <= PAGE_SIZE);
        MappedFile {
            fd,
            checked_by_reader: checksummed && small_pages,
            segments: std::array::from_fn(|_| OnceLock::new()),
        }
    }

    /// Copies block `block` into `page` from the mapping; `false` if it
    /// could not (no mapping, or the copy faulted: see the module's text),
    /// and the caller must read it another way. `block` must be below the
    /// fork's block count.
    pub(super) fn copy(&self, block: BlockNumber, page: &mut [u8]) -> bool {
        debug_assert_eq!(page.len(), PAGE_SIZE);
        let (k, start, blocks) = segment_of(block);
        let Some(seg) = self.segments[k]
            .get_or_init(|| self.map(start, blocks))
            .as_ref()
        else {
            return false;
        };
        if seg.poisoned.load(Ordering::Relaxed) {
            return false;
        }
        let off = (u64::from(block) - start) as usize * PAGE_SIZE;
        // SAFETY: `off + PAGE_SIZE <= seg.len` (the block is in segment k).
        let src = unsafe { seg.base.as_ptr().add(off) };
        if !guarded_copy(src, page, seg) {
            return false;
        }
        // A file that ends inside a system page shows the rest of that page
        // as zeros, without a fault: a file cut inside this block's last
        // system page (or, where system pages are larger than a block, a
        // whole block past the end but inside the file's last system page)
        // copies as the block with a zeroed tail. Such a copy's last byte
        // is zero, so only then is the file's length worth a system call;
        // and not even then when the reader's checksum will refuse such a
        // tail (most pages end in a zero byte: free space, or the high byte
        // of a small integer).
        page[PAGE_SIZE - 1] != 0 || self.checked_by_reader || self.holds(block)
    }

    /// Whether the file is long enough now to hold all of `block`.
    fn holds(&self, block: BlockNumber) -> bool {
        // SAFETY: an all-zero stat is a valid value of this plain C struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `fd` is open while `self` lives; `st` is writable.
        if unsafe { libc::fstat(self.fd, &mut st) } != 0 {
            return false;
        }
        u64::try_from(st.st_size).is_ok_and(|len| len >= (u64::from(block) + 1) * PAGE_SIZE as u64)
    }

    fn map(&self, start: u64, blocks: u64) -> Option<Segment> {
        install_handler();
        let len = usize::try_from(blocks * PAGE_SIZE as u64).ok()?;
        let offset = libc::off_t::try_from(start * PAGE_SIZE as u64).ok()?;
        // SAFETY: a new read-only shared mapping of our open descriptor at
        // a page-aligned offset; the kernel picks the address. Past the end
        // of the file is allowed (touching it faults: see the module text).
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                self.fd,
                offset,
            )
        };
        if p == libc::MAP_FAILED {
            return None;
        }
        Some(Segment {
            base: NonNull::new(p.cast())?,
            len,
            poisoned: AtomicBool::new(false),
        })
    }
}

thread_local! {
    /// The source range of this thread's running copy (`start`, `end`) and
    /// the address of its [`Segment`]; zeros when none runs.
    static WINDOW: Cell<(usize, usize, usize)> = const { Cell::new((0, 0, 0)) };
    /// Set by the handler when this thread's copy faulted.
    static FAULTED: Cell<bool> = const { Cell::new(false) };
}

/// Copies `dst.len()` bytes from `src` (inside `seg`) into `dst`; `true`
/// if the bytes are the file's.
fn guarded_copy(src: *const u8, dst: &mut [u8], seg: &Segment) -> bool {
    let len = dst.len();
    WINDOW.set((
        src as usize,
        src as usize + len,
        ptr::from_ref(seg) as usize,
    ));
    FAULTED.set(false);
    // The handler runs on this thread: the cells must be written before the
    // copy's first load, and read after its last.
    compiler_fence(Ordering::SeqCst);
    // SAFETY: `src .. src + len` lies in a live read-only mapping (the
    // segment outlives this call); `dst` is a distinct exclusive buffer. A
    // fault replaces the segment with zeros (the handler), so the copy always
    // finishes; its bytes are then thrown away below.
    unsafe { ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), len) };
    compiler_fence(Ordering::SeqCst);
    WINDOW.set((0, 0, 0));
    let faulted = FAULTED.get();
    // Another thread's fault poisons the segment (a sequentially
    // consistent store, so visible to all before its `mmap` of zeros
    // begins) before it maps zeros: a copy that read those zeros sees the
    // flag if the flag is loaded after the copy's loads. Only that order
    // is needed, loads before a load, which an acquire fence gives (on
    // x86 no instruction at all; loads are not reordered with loads). A
    // sequentially consistent fence here also waited for all of the
    // copy's 8 KiB of stores to reach the cache, a stall on every mapped
    // read with nothing to gain.
    fence(Ordering::Acquire);
    !faulted && !seg.poisoned.load(Ordering::Relaxed)
}

/// The `SIGBUS` action in place before ours, called for faults not ours.
struct Previous(libc::sigaction);
// SAFETY: a plain C struct, written once before the handler is installed
// and only read afterwards.
unsafe impl Sync for Previous {}
// SAFETY: as above.
unsafe impl Send for Previous {}
static PREVIOUS: OnceLock<Previous> = OnceLock::new();

/// Installs the `SIGBUS` handler, once per process.
fn install_handler() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        // SAFETY: an all-zero sigaction is a valid value of this C struct;
        // sigaction only reads `new` and writes `old`.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            libc::sigaction(libc::SIGBUS, ptr::null(), &mut old);
            let _ = PREVIOUS.set(Previous(old));
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = on_sigbus as *const () as usize;
            new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut new.sa_mask);
            libc::sigaction(libc::SIGBUS, &new, ptr::null_mut());
        }
    });
}

/// The handler: see the module's text. Only async-signal-safe work: reads
/// of const-initialised thread-locals, an atomic store, `mmap`,
/// `sigaction`.
extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let (start, end, seg) = WINDOW.get();
    if start <= addr && addr < end {
        // SAFETY: `seg` is the address of the running copy's segment, which
        // outlives the copy.
        let seg = unsafe { &*(seg as *const Segment) };
        seg.poisoned.store(true, Ordering::SeqCst);
        // SAFETY: replaces exactly our own read-only mapping of the segment
        // with zeros; nothing else lives there, and `Drop` unmaps the same
        // range. No copy reads it again once poisoned.
        let p = unsafe {
            libc::mmap(
                seg.base.as_ptr().cast(),
                seg.len,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            FAULTED.set(true);
            return;
        }
        // Not patched: returning would fault forever; let the previous
        // action have it.
    }
    let Some(Previous(old)) = PREVIOUS.get() else {
        return reset_default(sig);
    };
    let h = old.sa_sigaction;
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        return reset_default(sig);
    }
    // SAFETY: `h` is the handler that was installed for SIGBUS before ours,
    // called with the arguments its flags ask for.
    unsafe {
        if old.sa_flags & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                std::mem::transmute(h);
            f(sig, info, ctx);
        } else {
            let f: extern "C" fn(libc::c_int) = std::mem::transmute(h);
            f(sig);
        }
    }
}

/// Puts the default action back; the faulting instruction runs again and
/// the process ends as it would have without us.
fn reset_default(sig: libc::c_int) {
    // SAFETY: as in `install_handler`.
    unsafe {
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut dfl.sa_mask);
        libc::sigaction(sig, &dfl, ptr::null_mut());
    }
}

#[cfg(test)]
impl MappedFile {
    /// Whether the segment holding `block` is mapped and poisoned.
    pub(super) fn poisoned(&self, block: BlockNumber) -> bool {
        self.segments[segment_of(block).0]
            .get()
            .and_then(Option::as_ref)
            .is_some_and(|s| s.poisoned.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::io::{FileOptions, FileStorage, StorageBackend};
    use crate::tag::{BufferTag, RelFork, RelId};
    use std::fs::OpenOptions;
    use std::os::unix::fs::FileExt;
    use std::path::Path;

    const REL: RelFork = RelFork::main(RelId(42));

    fn tag(block: BlockNumber) -> BufferTag {
        BufferTag::new(REL, block)
    }

    /// Block `b`'s contents in these tests: every byte names the block and
    /// its offset, so a page from the wrong place or of zeros shows.
    fn content(b: BlockNumber) -> Vec<u8> {
        (0..PAGE_SIZE)
            .map(|i| (b as usize * 31 + i / 512 + 1) as u8)
            .collect()
    }

    fn mapped(dir: &Path) -> FileStorage {
        let options = FileOptions {
            mapped_reads: true,
            ..FileOptions::default()
        };
        FileStorage::open_options(dir, options).unwrap()
    }

    /// A mapped storage on `dir` whose relation has blocks `0 .. n` of
    /// [`content`], written through it.
    fn mapped_with(dir: &Path, n: BlockNumber) -> FileStorage {
        let s = mapped(dir);
        s.create(REL).unwrap();
        for b in 0..n {
            s.write(tag(b), &content(b)).unwrap();
        }
        s
    }

    fn read(s: &FileStorage, b: BlockNumber) -> crate::error::Result<Vec<u8>> {
        let mut page = vec![0u8; PAGE_SIZE];
        s.read(tag(b), &mut page).map(|()| page)
    }

    fn cut(dir: &Path, bytes: u64) {
        OpenOptions::new()
            .write(true)
            .open(dir.join("base/42"))
            .unwrap()
            .set_len(bytes)
            .unwrap();
    }

    /// Block `b` copied from the mapping itself (no `pread` to fall back
    /// on), or `None` if the copy failed.
    fn mapped_copy(s: &FileStorage, b: BlockNumber) -> Option<Vec<u8>> {
        let f = s.file(REL, "open", &REL).unwrap();
        let mut page = vec![0u8; PAGE_SIZE];
        f.map
            .as_ref()
            .expect("mapped reads are on")
            .copy(b, &mut page)
            .then_some(page)
    }

    fn is_poisoned(s: &FileStorage, b: BlockNumber) -> bool {
        let f = s.file(REL, "open", &REL).unwrap();
        f.map.as_ref().expect("mapped reads are on").poisoned(b)
    }

    #[test]
    fn direct_io_and_mapped_reads_together_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let options = FileOptions {
            direct_io: true,
            mapped_reads: true,
            ..FileOptions::default()
        };
        let e = FileStorage::open_options(dir.path(), options).unwrap_err();
        assert!(matches!(e, Error::InvalidConfig(_)), "{e:?}");
        assert!(e.to_string().contains("direct I/O"), "{e}");
    }

    #[test]
    fn mapped_reads_follow_truncations_extensions_and_later_segments() {
        let dir = tempfile::tempdir().unwrap();
        // A sparse file reaching into segment 1, written behind the storage.
        {
            let s = mapped(dir.path());
            s.create(REL).unwrap();
        }
        let f = OpenOptions::new()
            .write(true)
            .open(dir.path().join("base/42"))
            .unwrap();
        f.set_len(8200 * PAGE_SIZE as u64).unwrap();
        for b in [0, 1, 8191, 8192, 8199] {
            f.write_all_at(&content(b), u64::from(b) * PAGE_SIZE as u64)
                .unwrap();
        }
        let s = mapped(dir.path());
        assert!(s.mapped_reads());
        for b in [0, 1, 8191, 8192, 8199] {
            assert_eq!(read(&s, b).unwrap(), content(b), "block {b}");
            // From the mapping, not from a `pread` after a failed copy.
            assert_eq!(mapped_copy(&s, b), Some(content(b)), "block {b}");
        }
        assert_eq!(read(&s, 2).unwrap(), vec![0u8; PAGE_SIZE]);
        // Written through the storage after the mapping was made.
        s.write(tag(3), &content(3)).unwrap();
        assert_eq!(read(&s, 3).unwrap(), content(3));
        // Cut through the storage, then extended with other contents.
        s.truncate(REL, 2).unwrap();
        assert!(matches!(read(&s, 2), Err(Error::BlockOutOfRange { .. })));
        for b in 2..6 {
            s.write(tag(b), &content(b + 100)).unwrap();
        }
        for b in 2..6 {
            assert_eq!(read(&s, b).unwrap(), content(b + 100), "block {b}");
        }
        assert_eq!(read(&s, 1).unwrap(), content(1));
        assert!(!is_poisoned(&s, 0));
    }

    #[test]
    fn a_file_cut_under_mapped_pages_is_a_short_read_and_other_pages_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let s = mapped_with(dir.path(), 4);
        // Every page read once: mapped and faulted in before the cut.
        for b in 0..4 {
            assert_eq!(read(&s, b).unwrap(), content(b));
        }
        assert!(!is_poisoned(&s, 0));
        cut(dir.path(), PAGE_SIZE as u64 + 100);
        let e = read(&s, 3).unwrap_err();
        assert!(matches!(e, Error::CorruptFile { .. }), "{e:?}");
        assert!(e.to_string().contains("short read of block 3"), "{e}");
        // The copy faulted: the segment is given up, reads go to `pread`.
        assert!(is_poisoned(&s, 0));
        assert_eq!(read(&s, 0).unwrap(), content(0));
        let e = read(&s, 1).unwrap_err();
        assert!(e.to_string().contains("short read of block 1"), "{e}");
        // A new storage (new descriptors, new mappings) maps again.
        drop(s);
        let s = mapped(dir.path());
        assert_eq!(s.nblocks(REL).unwrap(), 1);
        assert_eq!(read(&s, 0).unwrap(), content(0));
        assert!(!is_poisoned(&s, 0));
    }

    /// A file cut inside the last system page of a block does not fault:
    /// a mapping shows the bytes past the end of a file's last page as
    /// zeros. The copy must still fail, so that the read reports the short
    /// read `pread` reports, not a page with a zeroed tail.
    #[test]
    fn a_file_cut_inside_a_blocks_last_system_page_is_a_short_read_not_zeros() {
        let dir = tempfile::tempdir().unwrap();
        let s = mapped_with(dir.path(), 4);
        for b in 0..4 {
            assert_eq!(read(&s, b).unwrap(), content(b));
        }
        for cut_at in [4 * PAGE_SIZE - 1, 4 * PAGE_SIZE - 100, 3 * PAGE_SIZE + 4097] {
            cut(dir.path(), cut_at as u64);
            let e = match read(&s, 3) {
                Ok(p) => panic!(
                    "cut at {cut_at}: read as a page whose last bytes are {:?}",
                    &p[PAGE_SIZE - 4..]
                ),
                Err(e) => e,
            };
            assert!(e.to_string().contains("short read of block 3"), "{e}");
            s.write(tag(3), &content(3)).unwrap();
            assert_eq!(read(&s, 3).unwrap(), content(3));
        }
        assert_eq!(read(&s, 2).unwrap(), content(2));
    }

    /// With `checksummed_pages` a copy ending in zero asks no file length:
    /// a block cut inside its last system page copies with a zeroed tail,
    /// and the pool's checksum refuses it, naming the block, as the
    /// storage promised it would. Pages ending in a zero byte, as the
    /// engine's do.
    #[test]
    fn with_checksummed_pages_a_zeroed_tail_is_refused_by_the_pools_checksum() {
        use crate::{BufferPool, PoolConfig};
        let dir = tempfile::tempdir().unwrap();
        let options = FileOptions {
            mapped_reads: true,
            checksummed_pages: true,
            ..FileOptions::default()
        };
        let s = std::sync::Arc::new(FileStorage::open_options(dir.path(), options).unwrap());
        s.create(REL).unwrap();
        let stamped = |b: BlockNumber| {
            let mut p = content(b);
            p[PAGE_SIZE - 8..].fill(0);
            crate::page::set_checksum(&mut p, b);
            p
        };
        for b in 0..4 {
            s.write(tag(b), &stamped(b)).unwrap();
        }
        // The same file without the promise, its length counted before the cut.
        let plain = mapped(dir.path());
        assert_eq!(read(&plain, 3).unwrap(), stamped(3));
        let pool = BufferPool::new(PoolConfig::new(16).checksums(true), s.clone()).unwrap();
        for b in 0..4 {
            assert_eq!(
                &pool.read_buffer(REL, b, None).unwrap().lock_shared()[..],
                &stamped(b)[..]
            );
        }
        pool.evict_all().unwrap();
        // Cut 100 bytes into block 3's last system page: no fault, and the
        // copy's last byte is zero either way.
        cut(dir.path(), 4 * PAGE_SIZE as u64 - 100);
        let mut page = vec![0u8; PAGE_SIZE];
        s.read(tag(3), &mut page).unwrap();
        assert_ne!(page, stamped(3), "the tail past the cut reads as zeros");
        let e = pool.read_buffer(REL, 3, None).map(drop).unwrap_err();
        assert!(e.to_string().contains("block 3"), "{e}");
        assert!(
            !matches!(e, Error::CorruptFile { .. }),
            "no length was asked: {e:?}"
        );
        assert_eq!(
            &pool.read_buffer(REL, 2, None).unwrap().lock_shared()[..],
            &stamped(2)[..]
        );
        // Without the promise the same copy asks the length: a short read.
        let e = read(&plain, 3).unwrap_err();
        assert!(e.to_string().contains("short read of block 3"), "{e}");
    }

    /// A copy that began before another thread's fault poisoned the
    /// segment does not fault itself on the segment that fault patched: it
    /// reads the zeros mapped there, and only the poison tells it.
    #[test]
    fn a_copy_from_a_page_another_fault_patched_fails_though_it_did_not_fault() {
        let dir = tempfile::tempdir().unwrap();
        let s = mapped_with(dir.path(), 4);
        cut(dir.path(), PAGE_SIZE as u64);
        assert!(read(&s, 3).is_err());
        // The file is whole again, but the faulted segment stays patched.
        let f = OpenOptions::new()
            .write(true)
            .open(dir.path().join("base/42"))
            .unwrap();
        for b in 1..4 {
            f.write_all_at(&content(b), u64::from(b) * PAGE_SIZE as u64)
                .unwrap();
        }
        let rel = s.file(REL, "open", &REL).unwrap();
        let seg = rel.map.as_ref().unwrap().segments[0]
            .get()
            .and_then(Option::as_ref)
            .expect("segment 0 is mapped");
        assert!(seg.poisoned.load(Ordering::Relaxed));
        let mut page = vec![0u8; PAGE_SIZE];
        // SAFETY: block 3 lies inside segment 0.
        let src = unsafe { seg.base.as_ptr().add(3 * PAGE_SIZE) };
        assert!(!guarded_copy(src, &mut page, seg));
        assert_ne!(page, content(3), "the patched segment should read as zeros");
        // All of it: block 0 never faulted, and reads as zeros too.
        assert!(!guarded_copy(seg.base.as_ptr(), &mut page, seg));
        assert_eq!(page, vec![0u8; PAGE_SIZE]);
        assert_eq!(read(&s, 3).unwrap(), content(3));
    }

    /// Readers on several threads while the file is cut and rewritten
    /// behind the storage: every read is the block's own bytes or an error,
    /// never the zeros the handler maps over a faulting page.
    #[test]
    fn concurrent_mapped_reads_of_a_file_cut_and_rewritten_never_return_zeros() {
        const BLOCKS: BlockNumber = 16;
        let dir = tempfile::tempdir().unwrap();
        for round in 0..8 {
            let s = mapped_with(dir.path(), BLOCKS);
            let stop = AtomicBool::new(false);
            let (ok, failed) = std::thread::scope(|scope| {
                let readers: Vec<_> = (0..3)
                    .map(|t| {
                        let (s, stop) = (&s, &stop);
                        scope.spawn(move || {
                            let (mut ok, mut failed) = (0u64, 0u64);
                            let mut b = t;
                            while !stop.load(Ordering::Relaxed) {
                                b = (b + 7) % BLOCKS;
                                match read(s, b) {
                                    Ok(p) => {
                                        assert!(
                                            p == content(b),
                                            "round {round}: block {b} read wrong"
                                        );
                                        ok += 1;
                                    }
                                    Err(Error::CorruptFile { .. }) => failed += 1,
                                    Err(e) => panic!("round {round}: block {b}: {e}"),
                                }
                            }
                            (ok, failed)
                        })
                    })
                    .collect();
                let f = OpenOptions::new()
                    .write(true)
                    .open(dir.path().join("base/42"))
                    .unwrap();
                for _ in 0..50 {
                    f.set_len(u64::from(BLOCKS / 2) * PAGE_SIZE as u64 - 4096)
                        .unwrap();
                    std::thread::yield_now();
                    for b in BLOCKS / 2 - 1..BLOCKS {
                        f.write_all_at(&content(b), u64::from(b) * PAGE_SIZE as u64)
                            .unwrap();
                    }
                    std::thread::yield_now();
                }
                stop.store(true, Ordering::Relaxed);
                readers
                    .into_iter()
                    .map(|r| r.join().unwrap())
                    .fold((0, 0), |(a, b), (c, d)| (a + c, b + d))
            });
            assert!(ok > 0, "round {round}: no read succeeded ({failed} failed)");
            drop(s);
            std::fs::remove_file(dir.path().join("base/42")).unwrap();
        }
    }

    /// The process's mapping count at its limit (`vm.max_map_count`): a
    /// fault in the middle of a segment must still be patched, which a
    /// one-page patch could not be (it splits the segment's mapping in
    /// three): the process died of the `SIGBUS`.
    /// Run in a child by the test below: it fills the mapping count.
    #[test]
    #[ignore = "run in a child process by a_cut_file_at_the_mapping_count_limit_is_a_short_read"]
    fn cut_file_at_the_mapping_count_limit_child() {
        let max: usize = std::fs::read_to_string("/proc/sys/vm/max_map_count")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(usize::MAX);
        if max > 1 << 18 {
            println!("vm.max_map_count is {max}: too many mappings to fill");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let s = mapped_with(dir.path(), 8);
        assert_eq!(read(&s, 0).unwrap(), content(0));
        cut(dir.path(), PAGE_SIZE as u64);
        // Split one big inaccessible mapping page by page until the kernel
        // refuses another mapping.
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let len = 2 * max * page;
        // SAFETY: a fresh anonymous mapping; nothing else uses its range.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        let mut filled = false;
        for i in (1..2 * max).step_by(2) {
            // SAFETY: one page of the mapping made above.
            let r = unsafe {
                libc::mprotect(p.cast::<u8>().add(i * page).cast(), page, libc::PROT_READ)
            };
            if r != 0 {
                filled = true;
                break;
            }
        }
        assert!(filled, "the mapping count never reached its limit");
        let e = read(&s, 5).unwrap_err();
        assert!(e.to_string().contains("short read of block 5"), "{e}");
        // SAFETY: the mapping made above, unmapped once.
        unsafe { libc::munmap(p, len) };
    }

    #[test]
    fn a_cut_file_at_the_mapping_count_limit_is_a_short_read() {
        crate::io::test_child::in_child(
            "io::mapped::tests::cut_file_at_the_mapping_count_limit_child",
        );
    }

    /// Maps a file of our own, cuts it and touches the mapping past the
    /// file's end: a `SIGBUS` no guarded copy asked for.
    fn touch_a_cut_mapping(dir: &Path) -> u8 {
        let path = dir.join("other");
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .unwrap();
        f.set_len(2 * 4096).unwrap();
        // SAFETY: a fresh read-only mapping of our own file.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                2 * 4096,
                libc::PROT_READ,
                libc::MAP_SHARED,
                std::os::fd::AsRawFd::as_raw_fd(&f),
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        f.set_len(0).unwrap();
        // SAFETY: inside the mapping; past the file's end, so it faults.
        unsafe { ptr::read_volatile(p.cast::<u8>().add(4096)) }
    }

    /// A `SIGBUS` outside a guarded copy still ends the process, as it
    /// would without the handler. Run in a child by the test below.
    #[test]
    #[ignore = "run in a child process by a_foreign_sigbus_still_ends_the_process"]
    fn foreign_sigbus_child() {
        let dir = tempfile::tempdir().unwrap();
        let s = mapped(dir.path());
        s.create(REL).unwrap();
        s.write(tag(0), &content(0)).unwrap();
        assert_eq!(read(&s, 0).unwrap(), content(0));
        let byte = touch_a_cut_mapping(dir.path());
        println!("read {byte} past the end of a file: the fault was swallowed");
    }

    /// As above while other threads copy from mappings without pause:
    /// their guarded windows are theirs, not the faulting thread's.
    #[test]
    #[ignore = "run in a child process by a_foreign_sigbus_still_ends_the_process"]
    fn foreign_sigbus_during_copies_child() {
        let dir = tempfile::tempdir().unwrap();
        let s = mapped_with(dir.path(), 4);
        let copies = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|scope| {
            for t in 0..2 {
                let (s, copies) = (&s, &copies);
                scope.spawn(move || {
                    for i in t.. {
                        let b = i % 4;
                        assert_eq!(read(s, b).unwrap(), content(b));
                        copies.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
            while copies.load(Ordering::Relaxed) < 1000 {
                std::thread::yield_now();
            }
            let byte = touch_a_cut_mapping(dir.path());
            println!("read {byte} past the end of a file: the fault was swallowed");
            std::process::exit(0);
        });
    }

    #[test]
    fn a_foreign_sigbus_still_ends_the_process() {
        use std::os::unix::process::ExitStatusExt;
        for child in ["foreign_sigbus_child", "foreign_sigbus_during_copies_child"] {
            let out = crate::io::test_child::run_child(&format!("io::mapped::tests::{child}"));
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                text.contains("running 1 test"),
                "{child} did not run:\n{text}"
            );
            assert_eq!(
                out.status.signal(),
                Some(libc::SIGBUS),
                "{child} was not ended by SIGBUS: {:?}\n{text}",
                out.status
            );
        }
    }

    #[test]
    fn segments_double_and_cover_every_block() {
        assert_eq!(segment_of(0), (0, 0, 8192));
        assert_eq!(segment_of(8191), (0, 0, 8192));
        assert_eq!(segment_of(8192), (1, 8192, 8192));
        assert_eq!(segment_of(16383), (1, 8192, 8192));
        assert_eq!(segment_of(16384), (2, 16384, 16384));
        assert_eq!(segment_of(u32::MAX).0, SEGMENTS - 1);
        let mut next = 0u64;
        for k in 0..SEGMENTS {
            let block = u32::try_from(next).unwrap();
            let (kk, start, len) = segment_of(block);
            assert_eq!((kk, start), (k, next));
            assert_eq!(segment_of(u32::try_from(start + len - 1).unwrap()).0, k);
            next = start + len;
        }
        assert_eq!(next, 1 << 32);
    }
}

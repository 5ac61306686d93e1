//! [`UringStorage`]: the file backend's files, read and written through
//! io_uring.
//!
//! It wraps a [`FileStorage`] and uses its open-file cache, block counts and
//! checks (block ranges, "no holes", the `O_DIRECT` setting); only the page
//! reads and writes go through a ring. Everything else (create, truncate,
//! sync, unlink, listing) is the `FileStorage` call itself.
//!
//! # Rings and threads
//!
//! The backend owns a small set of rings (one per core, at most
//! [`MAX_RINGS`]), each behind a `Mutex`. A thread is given a home ring
//! (round robin, at its first I/O) and uses it unless another thread holds
//! it, then any free one, then waits for its home. A call holds its ring from
//! the first submission to the last completion it reaps, so completions never
//! need routing between threads, and a ring never holds another call's I/O.
//!
//! # What one call submits
//!
//! * `read` / `write`: one SQE, then wait for it.
//! * `read_run`: one vectored read (`IORING_OP_READV`) over the run's
//!   pages, as `preadv` is for the sync backend; one read SQE per block
//!   where `O_DIRECT` needs a bounce buffer for an unaligned page.
//! * `read_batch` / `write_batch`: every request at once, [`QUEUE_DEPTH`] at
//!   a time, reaping completions as they come; each request has its own
//!   result. Writes that extend a fork (block at or past its count when the
//!   batch starts) are done after the overwrites, one at a time in block
//!   order, each checked against the count the previous one left, so the
//!   block count and the no-holes rule stay exactly as `FileStorage` keeps
//!   them.
//!
//! A short transfer is resubmitted for the remainder; a read that finds the
//! end of the file inside a counted block is [`Error::CorruptFile`] naming the
//! path and block (under `O_DIRECT` a short read is taken as the end of the
//! file at once: the remainder could not be read aligned). Errors are mapped
//! as `FileStorage` maps them.
//!
//! * `submit_reads` (read streams): one READV SQE per combined run (one
//!   read SQE per lone page, or per page where `O_DIRECT` needs a bounce
//!   buffer), on a ring taken from the backend's fixed set of submission
//!   rings ([`ASYNC_RINGS`], created at open) for the pending reads alone,
//!   pushed and submitted with one `io_uring_enter` without waiting; the
//!   returned `UringReads` keeps the ring (so no other call's I/O shares it)
//!   and reaps at its wait or drop, then gives the ring back. When every
//!   submission ring is taken (more reads pending at once than there are
//!   rings), the reads are done at once, synchronously, through the file
//!   backend (as `FileStorage::submit_reads` does): a submission never
//!   waits for a ring, which it might hold itself, and never creates one.
//!
//! # Resources
//!
//! The backend's rings are all it holds: [`ring_count`](UringStorage::ring_count)
//! rings for the calls that wait, [`ASYNC_RINGS`] for submissions, each one
//! file descriptor, created at open and closed when the backend is dropped
//! (and its last pending reads with it). A ring dropped as broken is
//! created again at its next use, up to the same number; if that fails
//! (`EMFILE` under a tight descriptor limit, for one), the call reads or
//! writes synchronously through the file backend instead of failing.
//!
//! A buffer handed to the kernel must stay valid until its completion is
//! reaped: no call but `submit_reads` returns with I/O in flight, and its
//! pending reads reap everything before they are dropped (the caller keeps
//! the pages, by `submit_reads`'s contract, until then). If `io_uring_enter` itself
//! fails (not `EINTR`/`EAGAIN`/`EBUSY`) while nothing is in flight, the
//! unsubmitted requests fail with that error and the ring is rebuilt at the
//! next call; if it fails with requests in flight, which the kernel does not
//! do, the process aborts rather than free buffers the kernel may write.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use io_uring::{IoUring, opcode, types};
use parking_lot::{Mutex, MutexGuard};

use super::aligned::{AlignedBuf, DIRECT_ALIGN, is_direct_aligned};
use super::file::{RelFile, short_read};
use super::{
    AsyncRead, FileStorage, PendingReads, ReadRequest, StorageBackend, WriteRequest, byte_offset,
    check_page_len,
};
use crate::error::{Error, Result};
use crate::tag::{BlockNumber, BufferTag, PAGE_SIZE, RelFork};

/// Entries of each ring's submission queue: the most requests one ring has
/// in flight (its completion queue is twice as large, so it cannot overflow).
pub const QUEUE_DEPTH: u32 = 64;
/// Most rings one backend creates for the calls that wait (`read`,
/// `write`, `read_run`, `read_batch`, `write_batch`).
pub const MAX_RINGS: usize = 8;
/// Rings one backend keeps for [`StorageBackend::submit_reads`]: at most
/// this many sets of submitted reads are in flight at once (a read stream
/// keeps up to eight with the default distance); more are read at once.
pub const ASYNC_RINGS: usize = 16;
/// Most pages in one vectored read: Linux's `UIO_MAXIOV` (`IOV_MAX`); a
/// longer run is several READVs.
const MAX_IOVECS: usize = 1024;

/// Checks that io_uring works here: creates a ring, asks which operations
/// the kernel supports (read, write, NOP), submits a NOP and reaps it. The
/// error says what failed (seccomp filters, `kernel.io_uring_disabled`, an
/// old kernel, a locked-memory limit).
pub fn probe_io_uring() -> std::result::Result<(), String> {
    let mut ring = IoUring::new(2).map_err(|e| format!("io_uring_setup failed: {e}"))?;
    let mut probe = io_uring::Probe::new();
    if ring.submitter().register_probe(&mut probe).is_ok() {
        for (code, name) in [
            (opcode::Read::CODE, "READ"),
            (opcode::Readv::CODE, "READV"),
            (opcode::Write::CODE, "WRITE"),
        ] {
            if !probe.is_supported(code) {
                return Err(format!("the kernel's io_uring lacks IORING_OP_{name}"));
            }
        }
    }
    let nop = opcode::Nop::new().build().user_data(7);
    // SAFETY: a NOP references no memory.
    unsafe { ring.submission().push(&nop) }.map_err(|_| "the new ring is full".to_string())?;
    ring.submit_and_wait(1)
        .map_err(|e| format!("io_uring_enter failed: {e}"))?;
    let cqe = ring
        .completion()
        .next()
        .ok_or_else(|| "a NOP was submitted but never completed".to_string())?;
    if cqe.result() < 0 {
        return Err(format!(
            "a NOP failed: {}",
            io::Error::from_raw_os_error(-cqe.result())
        ));
    }
    Ok(())
}

/// The io_uring backend (`"io_uring"`). See the module docs.
pub struct UringStorage {
    files: FileStorage,
    /// `None`: broken by a failed `io_uring_enter`; rebuilt at next use.
    rings: Box<[Mutex<Option<IoUring>>]>,
    /// The rings of [`submit_reads`](StorageBackend::submit_reads): each
    /// pending set of reads takes one out for its lifetime and gives it
    /// back after its last completion.
    spare: Arc<SubmitRings>,
}

/// The fixed set of submission rings of a [`UringStorage`].
struct SubmitRings {
    /// Rings free now.
    free: Mutex<Vec<IoUring>>,
    /// Rings that exist (free or held by pending reads): [`ASYNC_RINGS`]
    /// less those dropped as broken and not yet created again.
    live: AtomicUsize,
    base: PathBuf,
}

impl SubmitRings {
    fn open(base: &Path) -> Result<SubmitRings> {
        let free = (0..ASYNC_RINGS)
            .map(|_| new_ring(base))
            .collect::<Result<Vec<_>>>()?;
        Ok(SubmitRings {
            free: Mutex::new(free),
            live: AtomicUsize::new(ASYNC_RINGS),
            base: base.to_path_buf(),
        })
    }

    /// A free ring, or a new one in place of a broken one; `None` if every
    /// ring is taken or a new one cannot be created.
    fn take(&self) -> Option<IoUring> {
        if let Some(r) = self.free.lock().pop() {
            return Some(r);
        }
        self.live
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < ASYNC_RINGS).then_some(n + 1)
            })
            .ok()?;
        match new_ring(&self.base) {
            Ok(r) => Some(r),
            Err(_) => {
                self.live.fetch_sub(1, Ordering::AcqRel);
                None
            }
        }
    }

    fn give_back(&self, ring: IoUring) {
        self.free.lock().push(ring);
    }

    /// A ring dropped as broken (nothing in flight on it).
    fn broken(&self, ring: IoUring) {
        drop(ring);
        self.live.fetch_sub(1, Ordering::AcqRel);
    }
}

impl std::fmt::Debug for UringStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UringStorage")
            .field("files", &self.files)
            .field("rings", &self.rings.len())
            .finish()
    }
}

static NEXT_THREAD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's home ring, modulo the ring count.
    static HOME: usize = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
}

impl UringStorage {
    /// Opens the storage under `data_dir` (as [`FileStorage::open_with`])
    /// and creates its rings: one per core, at most `MAX_RINGS`. A ring
    /// that cannot be created is an error naming the reason.
    pub fn open(data_dir: &Path, direct_io: bool) -> Result<UringStorage> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        UringStorage::with_rings(data_dir, direct_io, cores.min(MAX_RINGS))
    }

    /// As [`open`](Self::open), with `rings` rings (at least 1).
    pub fn with_rings(data_dir: &Path, direct_io: bool, rings: usize) -> Result<UringStorage> {
        let files = FileStorage::open_with(data_dir, direct_io)?;
        let rings = (0..rings.max(1))
            .map(|_| new_ring(files.base_dir()).map(|r| Mutex::new(Some(r))))
            .collect::<Result<Vec<_>>>()?
            .into_boxed_slice();
        let spare = Arc::new(SubmitRings::open(files.base_dir())?);
        Ok(UringStorage {
            files,
            rings,
            spare,
        })
    }

    /// The file backend whose files this one reads and writes.
    pub fn files(&self) -> &FileStorage {
        &self.files
    }

    /// How many rings the backend has for the calls that wait (besides its
    /// `ASYNC_RINGS` submission rings).
    pub fn ring_count(&self) -> usize {
        self.rings.len()
    }

    /// Submission rings free now (none are in use by pending reads when
    /// this is `ASYNC_RINGS`).
    pub fn free_submit_rings(&self) -> usize {
        self.spare.free.lock().len()
    }

    /// This thread's home ring if free, else any free ring, else the home
    /// ring once it is released.
    fn lock_ring(&self) -> MutexGuard<'_, Option<IoUring>> {
        let n = self.rings.len();
        let home = HOME.with(|h| *h) % n;
        for i in 0..n {
            if let Some(g) = self.rings[(home + i) % n].try_lock() {
                return g;
            }
        }
        self.rings[home].lock()
    }

    /// Runs every pending op to completion (or failure); see [`run_ops`].
    /// `Err(NoRing)` (nothing done) if the ring this call would use was
    /// broken and cannot be created again now: the caller does the call
    /// through the file backend instead.
    fn run(&self, ops: &mut [Op]) -> std::result::Result<(), NoRing> {
        if ops.is_empty() {
            return Ok(());
        }
        let mut guard = self.lock_ring();
        if guard.is_none() {
            *guard = Some(new_ring(self.files.base_dir()).map_err(|_| NoRing)?);
        }
        let ring = guard.as_mut().expect("a ring was just ensured");
        if run_ops(ring, ops, self.files.direct_io()).is_err() {
            *guard = None;
        }
        Ok(())
    }

    /// The op reading `tag` into `page` (through a bounce buffer if direct
    /// I/O needs one), with what its result needs.
    fn prepare_read(
        &self,
        f: &Arc<RelFile>,
        nblocks: BlockNumber,
        tag: BufferTag,
        page: &mut [u8],
    ) -> (Op, Pending) {
        let mut bounce = (self.files.direct_io() && !is_direct_aligned(page))
            .then(|| AlignedBuf::zeroed(PAGE_SIZE));
        let ptr = match &mut bounce {
            Some(b) => b.as_mut_ptr(),
            None => page.as_mut_ptr(),
        };
        let op = Op::new(f.file.as_raw_fd(), ptr, byte_offset(tag.block), false);
        let pending = Pending {
            tag,
            file: Arc::clone(f),
            nblocks,
            bounce,
        };
        (op, pending)
    }

    /// The vectored op reading consecutive blocks from `tag` into `pages`
    /// (`PAGE_SIZE` each, aligned if direct I/O is on: no bounce buffers).
    fn prepare_readv(
        &self,
        f: &Arc<RelFile>,
        nblocks: BlockNumber,
        tag: BufferTag,
        pages: &[*mut u8],
    ) -> (Op, Pending) {
        let op = Op::readv(f.file.as_raw_fd(), pages, byte_offset(tag.block));
        let pending = Pending {
            tag,
            file: Arc::clone(f),
            nblocks,
            bounce: None,
        };
        (op, pending)
    }

    /// Whether a run into `pages` can be one vectored read: more than one
    /// page, and no page that `O_DIRECT` would need a bounce buffer for.
    fn vectored(&self, pages: &[*mut u8]) -> bool {
        pages.len() > 1
            && (!self.files.direct_io()
                || pages
                    .iter()
                    .all(|&p| (p as usize) & (DIRECT_ALIGN - 1) == 0))
    }

    /// The result of a read op; copies a bounce buffer into `page`.
    fn finish_read(op: Op, p: Pending, page: &mut [u8]) -> Result<()> {
        match op.outcome {
            Outcome::Done => {
                if let Some(b) = &p.bounce {
                    page.copy_from_slice(b);
                }
                Ok(())
            }
            Outcome::Eof => {
                // A vectored read names the page the file ended in.
                let block = p.tag.block + (op.done / PAGE_SIZE) as BlockNumber;
                let tag = BufferTag { block, ..p.tag };
                Err(short_read(tag, &p.file.path, p.nblocks))
            }
            Outcome::Failed(e) => Err(Error::io("read", p.tag, &p.file.path, e)),
            Outcome::Pending => unreachable!("run_ops finishes every op"),
        }
    }

    /// The op writing `page` as `tag` (copied to a bounce buffer if direct
    /// I/O needs one).
    fn prepare_write(&self, f: &Arc<RelFile>, tag: BufferTag, page: &[u8]) -> (Op, Pending) {
        let bounce =
            (self.files.direct_io() && !is_direct_aligned(page)).then(|| AlignedBuf::copy_of(page));
        let ptr = match &bounce {
            Some(b) => b.as_ptr().cast_mut(),
            None => page.as_ptr().cast_mut(),
        };
        let op = Op::new(f.file.as_raw_fd(), ptr, byte_offset(tag.block), true);
        let pending = Pending {
            tag,
            file: Arc::clone(f),
            nblocks: 0,
            bounce,
        };
        (op, pending)
    }

    /// The result of a write op; counts an extension once it is written.
    fn finish_write(op: Op, p: Pending) -> Result<()> {
        match op.outcome {
            Outcome::Done => {
                p.file.nblocks.fetch_max(p.tag.block + 1, Ordering::AcqRel);
                Ok(())
            }
            Outcome::Failed(e) => Err(Error::io("write", p.tag, &p.file.path, e)),
            Outcome::Eof | Outcome::Pending => unreachable!("writes end done or failed"),
        }
    }

    /// One write, submitted alone.
    fn write_one(&self, tag: BufferTag, page: &[u8]) -> Result<()> {
        check_page_len(page.len());
        let f = self.files.writable(tag)?;
        let (op, p) = self.prepare_write(&f, tag, page);
        let mut ops = [op];
        if self.run(&mut ops).is_err() {
            return self.files.write(tag, page);
        }
        let [op] = ops;
        Self::finish_write(op, p)
    }
}

/// No ring could be had for a call: it is done through the file backend.
struct NoRing;

fn new_ring(base: &Path) -> Result<IoUring> {
    IoUring::new(QUEUE_DEPTH).map_err(|e| Error::io("set up an io_uring for", "io_uring", base, e))
}

/// What one op's result needs besides the op.
struct Pending {
    tag: BufferTag,
    /// Keeps the file descriptor open while the I/O is in flight.
    file: Arc<RelFile>,
    nblocks: BlockNumber,
    bounce: Option<AlignedBuf>,
}

enum Outcome {
    Pending,
    Done,
    /// A read reached the end of the file before the op's last byte.
    Eof,
    Failed(io::Error),
}

/// One read or write of `len` bytes at `offset`, advanced past what a short
/// transfer moved: of one buffer at `ptr`, or (a combined read) vectored over
/// the pages of `iov[iov_at..]` (`IORING_OP_READV`, PostgreSQL's READV).
struct Op {
    fd: RawFd,
    ptr: *mut u8,
    len: usize,
    offset: u64,
    write: bool,
    /// Empty for one buffer; the pages of a vectored read otherwise. Its
    /// heap array is what the kernel reads the iovecs from, so it is never
    /// reallocated while the op is in flight (only edited in place between
    /// submissions, by [`advance`](Op::advance)).
    iov: Vec<libc::iovec>,
    /// The first iovec not yet wholly transferred.
    iov_at: usize,
    /// Bytes transferred so far (to name the block where a read met the
    /// end of the file).
    done: usize,
    outcome: Outcome,
}

impl Op {
    fn new(fd: RawFd, ptr: *mut u8, offset: u64, write: bool) -> Op {
        Op {
            fd,
            ptr,
            len: PAGE_SIZE,
            offset,
            write,
            iov: Vec::new(),
            iov_at: 0,
            done: 0,
            outcome: Outcome::Pending,
        }
    }

    /// A vectored read of consecutive blocks from `offset` into `pages`
    /// (each `PAGE_SIZE` bytes).
    fn readv(fd: RawFd, pages: &[*mut u8], offset: u64) -> Op {
        let iov = pages
            .iter()
            .map(|&p| libc::iovec {
                iov_base: p.cast(),
                iov_len: PAGE_SIZE,
            })
            .collect();
        Op {
            fd,
            ptr: pages[0],
            len: pages.len() * PAGE_SIZE,
            offset,
            write: false,
            iov,
            iov_at: 0,
            done: 0,
            outcome: Outcome::Pending,
        }
    }

    /// Moves past `n` bytes that a short transfer moved (`n < len`).
    fn advance(&mut self, n: usize) {
        self.len -= n;
        self.offset += n as u64;
        if self.iov.is_empty() {
            self.ptr = self.ptr.wrapping_add(n);
            return;
        }
        let mut n = n;
        while n > 0 {
            let v = &mut self.iov[self.iov_at];
            if n >= v.iov_len {
                n -= v.iov_len;
                self.iov_at += 1;
            } else {
                v.iov_base = v.iov_base.cast::<u8>().wrapping_add(n).cast();
                v.iov_len -= n;
                n = 0;
            }
        }
    }

    fn entry(&self, user_data: u64) -> io_uring::squeue::Entry {
        let fd = types::Fd(self.fd);
        let len = self.len as u32;
        if !self.iov.is_empty() {
            let rest = &self.iov[self.iov_at..];
            opcode::Readv::new(fd, rest.as_ptr(), rest.len() as u32)
                .offset(self.offset)
                .build()
                .user_data(user_data)
        } else if self.write {
            opcode::Write::new(fd, self.ptr.cast_const(), len)
                .offset(self.offset)
                .build()
                .user_data(user_data)
        } else {
            opcode::Read::new(fd, self.ptr, len)
                .offset(self.offset)
                .build()
                .user_data(user_data)
        }
    }
}

fn retryable(errno: i32) -> bool {
    matches!(errno, libc::EINTR | libc::EAGAIN | libc::EBUSY)
}

/// Submits every `Pending` op of `ops`, at most the ring's depth in flight,
/// and reaps completions until each op is done, at the end of the file, or
/// failed. `Err` if the ring itself failed (the ops not yet submitted are
/// then failed with its error, and the ring must be dropped).
///
/// Every op's buffer must stay valid, and not be touched by the caller, until
/// this returns; it never returns with an op in flight.
fn run_ops(ring: &mut IoUring, ops: &mut [Op], direct: bool) -> std::result::Result<(), ()> {
    let mut fl = Flight::new(ops);
    drive(ring, ops, direct, &mut fl)
}

/// Where a set of ops stands on its ring.
struct Flight {
    /// Ops still to push.
    queue: VecDeque<usize>,
    /// Pushed to the submission queue and not yet completed.
    in_flight: usize,
    /// Pushed and not yet consumed by the kernel.
    unsubmitted: usize,
}

impl Flight {
    fn new(ops: &[Op]) -> Flight {
        Flight {
            queue: (0..ops.len())
                .filter(|&i| matches!(ops[i].outcome, Outcome::Pending))
                .collect(),
            in_flight: 0,
            unsubmitted: 0,
        }
    }
}

/// Pushes queued ops while the ring has room.
fn push_ops(ring: &mut IoUring, ops: &[Op], fl: &mut Flight) {
    let depth = ring.params().sq_entries() as usize;
    let mut sq = ring.submission();
    while fl.in_flight < depth {
        let Some(&i) = fl.queue.front() else { break };
        let entry = ops[i].entry(i as u64);
        // SAFETY: the entry's buffer (`ops[i].ptr`, `ops[i].len` bytes,
        // inside a PAGE_SIZE page or bounce buffer the caller keeps alive
        // and untouched; for a vectored read, the pages its iovecs name and
        // the iovec array itself, owned by `ops[i]` and not reallocated
        // while in flight) and its file descriptor (kept open by the
        // caller's `Arc<RelFile>`) stay valid until its completion is reaped by
        // `drive`, which every caller runs to the end before releasing them
        // (`run_ops` at once, `UringReads` at its wait or drop).
        if unsafe { sq.push(&entry) }.is_err() {
            break;
        }
        fl.queue.pop_front();
        fl.in_flight += 1;
        fl.unsubmitted += 1;
    }
}

/// Pushes what fits and tells the kernel, without waiting; errors are left
/// for [`drive`], which meets them again.
fn start_ops(ring: &mut IoUring, ops: &[Op], fl: &mut Flight) {
    push_ops(ring, ops, fl);
    if fl.unsubmitted > 0
        && let Ok(n) = ring.submit()
    {
        fl.unsubmitted = fl.unsubmitted.saturating_sub(n);
    }
}

/// [`run_ops`] from where `fl` stands.
fn drive(
    ring: &mut IoUring,
    ops: &mut [Op],
    direct: bool,
    fl: &mut Flight,
) -> std::result::Result<(), ()> {
    loop {
        push_ops(ring, ops, fl);
        let Flight {
            queue,
            in_flight,
            unsubmitted,
        } = fl;
        if *in_flight == 0 {
            return Ok(());
        }
        match ring.submit_and_wait(1) {
            Ok(n) => *unsubmitted = unsubmitted.saturating_sub(n),
            Err(e) if e.raw_os_error().is_some_and(retryable) => {}
            Err(e) => {
                if *in_flight > *unsubmitted {
                    eprintln!(
                        "bufmgr: io_uring_enter failed ({e}) with {} requests in flight: \
                         aborting rather than free buffers the kernel may still write",
                        *in_flight - *unsubmitted
                    );
                    std::process::abort();
                }
                // Nothing reached the kernel: the pushed entries die with the
                // ring, which the caller drops.
                for op in ops.iter_mut() {
                    if matches!(op.outcome, Outcome::Pending) {
                        op.outcome = Outcome::Failed(io::Error::new(
                            e.kind(),
                            format!("io_uring_enter failed: {e}"),
                        ));
                    }
                }
                return Err(());
            }
        }
        for cqe in ring.completion() {
            *in_flight -= 1;
            let i = cqe.user_data() as usize;
            let res = cqe.result();
            let op = &mut ops[i];
            if res < 0 {
                if retryable(-res) {
                    queue.push_back(i);
                } else {
                    op.outcome = Outcome::Failed(io::Error::from_raw_os_error(-res));
                }
            } else if res == 0 {
                op.outcome = if op.write {
                    Outcome::Failed(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "the write transferred nothing",
                    ))
                } else {
                    Outcome::Eof
                };
            } else {
                let n = res as usize;
                op.done += n;
                if n >= op.len {
                    op.outcome = Outcome::Done;
                } else if direct && !op.write {
                    op.outcome = Outcome::Eof;
                } else {
                    op.advance(n);
                    queue.push_back(i);
                }
            }
        }
    }
}

impl StorageBackend for UringStorage {
    fn name(&self) -> &'static str {
        "io_uring"
    }

    fn path(&self, rf: RelFork) -> PathBuf {
        self.files.path(rf)
    }

    fn create(&self, rf: RelFork) -> Result<()> {
        self.files.create(rf)
    }

    fn exists(&self, rf: RelFork) -> Result<bool> {
        self.files.exists(rf)
    }

    fn nblocks(&self, rf: RelFork) -> Result<BlockNumber> {
        self.files.nblocks(rf)
    }

    fn read(&self, tag: BufferTag, page: &mut [u8]) -> Result<()> {
        check_page_len(page.len());
        let (f, nblocks) = self.files.readable(tag)?;
        let (op, p) = self.prepare_read(&f, nblocks, tag, page);
        let mut ops = [op];
        if self.run(&mut ops).is_err() {
            return self.files.read(tag, page);
        }
        let [op] = ops;
        Self::finish_read(op, p, page)
    }

    fn write(&self, tag: BufferTag, page: &[u8]) -> Result<()> {
        self.write_one(tag, page)
    }

    fn truncate(&self, rf: RelFork, nblocks: BlockNumber) -> Result<()> {
        self.files.truncate(rf, nblocks)
    }

    fn sync(&self, rf: RelFork) -> Result<()> {
        self.files.sync(rf)
    }

    fn sync_all(&self) -> Result<()> {
        self.files.sync_all()
    }

    fn unlink(&self, rf: RelFork) -> Result<()> {
        self.files.unlink(rf)
    }

    fn relations(&self) -> Result<Vec<RelFork>> {
        self.files.relations()
    }

    /// One read SQE per block, all submitted together. Blocks before the end
    /// of the file are read even when the run goes past it; the error names
    /// the first block that failed.
    fn read_run(&self, tag: BufferTag, pages: &mut [&mut [u8]]) -> Result<()> {
        if pages.is_empty() {
            return Ok(());
        }
        for p in pages.iter() {
            check_page_len(p.len());
        }
        let (f, nblocks) = self.files.readable(tag)?;
        let n = pages.len().min((nblocks - tag.block) as usize);
        let ptrs: Vec<*mut u8> = pages[..n].iter_mut().map(|p| p.as_mut_ptr()).collect();
        if self.vectored(&ptrs) {
            // One READV per MAX_IOVECS pages, all submitted together.
            let (mut ops, pending): (Vec<Op>, Vec<Pending>) = ptrs
                .chunks(MAX_IOVECS)
                .enumerate()
                .map(|(c, chunk)| {
                    let block = tag.block + (c * MAX_IOVECS) as BlockNumber;
                    self.prepare_readv(&f, nblocks, BufferTag { block, ..tag }, chunk)
                })
                .unzip();
            if self.run(&mut ops).is_err() {
                return self.files.read_run(tag, pages);
            }
            for (op, p) in ops.into_iter().zip(pending) {
                // No bounce buffer: the page argument is not used.
                Self::finish_read(op, p, &mut [])?;
            }
            if n < pages.len() {
                return Err(f.out_of_range(tag.relfork(), tag.block + n as BlockNumber, nblocks));
            }
            return Ok(());
        }
        let (mut ops, pending): (Vec<Op>, Vec<Pending>) = pages[..n]
            .iter_mut()
            .enumerate()
            .map(|(i, page)| {
                let block = tag.block + i as BlockNumber;
                self.prepare_read(&f, nblocks, BufferTag { block, ..tag }, page)
            })
            .unzip();
        if self.run(&mut ops).is_err() {
            drop(ops);
            return self.files.read_run(tag, pages);
        }
        let mut first_err = None;
        for ((op, p), page) in ops.into_iter().zip(pending).zip(pages.iter_mut()) {
            if let Err(e) = Self::finish_read(op, p, page) {
                first_err.get_or_insert(e);
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        if n < pages.len() {
            return Err(f.out_of_range(tag.relfork(), tag.block + n as BlockNumber, nblocks));
        }
        Ok(())
    }

    fn read_batch(&self, reqs: &mut [ReadRequest<'_>]) -> Vec<Result<()>> {
        let mut results: Vec<Result<()>> = Vec::with_capacity(reqs.len());
        let mut ops = Vec::with_capacity(reqs.len());
        let mut pending = Vec::with_capacity(reqs.len());
        for (i, r) in reqs.iter_mut().enumerate() {
            check_page_len(r.page.len());
            match self.files.readable(r.tag) {
                Ok((f, nblocks)) => {
                    let (op, p) = self.prepare_read(&f, nblocks, r.tag, r.page);
                    ops.push(op);
                    pending.push((i, p));
                    results.push(Ok(()));
                }
                Err(e) => results.push(Err(e)),
            }
        }
        if self.run(&mut ops).is_err() {
            drop((ops, pending));
            return self.files.read_batch(reqs);
        }
        for (op, (i, p)) in ops.into_iter().zip(pending) {
            results[i] = Self::finish_read(op, p, reqs[i].page);
        }
        results
    }

    fn write_batch(&self, reqs: &[WriteRequest<'_>]) -> Vec<Result<()>> {
        let mut results: Vec<Result<()>> = Vec::with_capacity(reqs.len());
        let mut ops = Vec::with_capacity(reqs.len());
        let mut pending = Vec::with_capacity(reqs.len());
        // Extensions: after the overwrites, one at a time, in block order.
        let mut extensions = Vec::new();
        for (i, r) in reqs.iter().enumerate() {
            check_page_len(r.page.len());
            results.push(Ok(()));
            match self.files.file(r.tag.relfork(), "open", &r.tag) {
                Ok(f) if r.tag.block < f.nblocks.load(Ordering::Acquire) => {
                    let (op, p) = self.prepare_write(&f, r.tag, r.page);
                    ops.push(op);
                    pending.push((i, p));
                }
                Ok(_) => extensions.push(i),
                Err(e) => results[i] = Err(e),
            }
        }
        if self.run(&mut ops).is_err() {
            // Nothing written yet: all of it through the file backend.
            return self.files.write_batch(reqs);
        }
        for (op, (i, p)) in ops.into_iter().zip(pending) {
            results[i] = Self::finish_write(op, p);
        }
        extensions.sort_by_key(|&i| (reqs[i].tag.relfork(), reqs[i].tag.block));
        for i in extensions {
            results[i] = self.write_one(reqs[i].tag, reqs[i].page);
        }
        results
    }

    /// Every request's reads pushed to a ring of its own (taken from the
    /// submission rings) and submitted with one `io_uring_enter`; the
    /// returned object keeps the ring, and reaps at its wait (or drop).
    /// With no submission ring free, everything is read at once through
    /// the file backend.
    unsafe fn submit_reads(&self, reqs: Vec<AsyncRead>) -> Box<dyn PendingReads> {
        let Some(ring) = self.spare.take() else {
            // SAFETY: our caller's contract, passed on unchanged (the file
            // backend reads everything before it returns).
            return unsafe { self.files.submit_reads(reqs) };
        };
        let mut results: Vec<Result<()>> = Vec::with_capacity(reqs.len());
        let mut ops = Vec::new();
        let mut pending = Vec::new();
        let mut pages = Vec::new();
        let mut of_req = Vec::new();
        let mut past_end = Vec::with_capacity(reqs.len());
        for (r, req) in reqs.iter().enumerate() {
            results.push(Ok(()));
            past_end.push(None);
            if req.pages.is_empty() {
                continue;
            }
            let (f, nblocks) = match self.files.readable(req.tag) {
                Ok(x) => x,
                Err(e) => {
                    results[r] = Err(e);
                    continue;
                }
            };
            let n = req
                .pages
                .len()
                .min(nblocks.saturating_sub(req.tag.block) as usize);
            if self.vectored(&req.pages[..n]) {
                // A combined read: one READV per MAX_IOVECS pages.
                for (c, chunk) in req.pages[..n].chunks(MAX_IOVECS).enumerate() {
                    let tag = BufferTag {
                        block: req.tag.block + (c * MAX_IOVECS) as BlockNumber,
                        ..req.tag
                    };
                    let (op, p) = self.prepare_readv(&f, nblocks, tag, chunk);
                    ops.push(op);
                    pending.push(p);
                    pages.push(chunk[0]);
                    of_req.push(r);
                }
            } else {
                for (i, &ptr) in req.pages[..n].iter().enumerate() {
                    let tag = BufferTag {
                        block: req.tag.block + i as BlockNumber,
                        ..req.tag
                    };
                    // SAFETY: the caller's contract: a valid PAGE_SIZE page that
                    // nobody else touches until our wait or drop.
                    let page = unsafe { std::slice::from_raw_parts_mut(ptr, PAGE_SIZE) };
                    let (op, p) = self.prepare_read(&f, nblocks, tag, page);
                    ops.push(op);
                    pending.push(p);
                    pages.push(ptr);
                    of_req.push(r);
                }
            }
            if n < req.pages.len() {
                past_end[r] = Some(f.out_of_range(
                    req.tag.relfork(),
                    req.tag.block + n as BlockNumber,
                    nblocks,
                ));
            }
        }
        let mut reads = UringReads {
            ring: Some(ring),
            spare: Arc::clone(&self.spare),
            fl: Flight::new(&ops),
            ops,
            pending,
            pages,
            of_req,
            past_end,
            results,
            direct: self.files.direct_io(),
            reaped: false,
        };
        if let Some(ring) = reads.ring.as_mut() {
            start_ops(ring, &reads.ops, &mut reads.fl);
        }
        Box::new(reads)
    }
}

/// Reads submitted by [`UringStorage::submit_reads`], on a ring of their own.
struct UringReads {
    /// `None` once reaped (the ring is given back).
    ring: Option<IoUring>,
    spare: Arc<SubmitRings>,
    fl: Flight,
    ops: Vec<Op>,
    pending: Vec<Pending>,
    /// The page each op reads into (the caller's).
    pages: Vec<*mut u8>,
    /// The request each op belongs to.
    of_req: Vec<usize>,
    /// Per request: the error for its blocks past the end of the file.
    past_end: Vec<Option<Error>>,
    results: Vec<Result<()>>,
    direct: bool,
    reaped: bool,
}

// SAFETY: the raw pointers (the ops' and `pages`) address pages that
// `submit_reads`'s contract makes this object's alone until it is waited
// for or dropped, and the ring is used only through `&mut self`; nothing
// is tied to the submitting thread.
unsafe impl Send for UringReads {}

impl UringReads {
    /// Reaps every completion (once) and works out the results.
    fn reap(&mut self) {
        if self.reaped {
            return;
        }
        self.reaped = true;
        if let Some(mut ring) = self.ring.take() {
            match drive(&mut ring, &mut self.ops, self.direct, &mut self.fl) {
                Ok(()) => self.spare.give_back(ring),
                // A broken ring is dropped (nothing is in flight on it).
                Err(()) => self.spare.broken(ring),
            }
        }
        let ops = std::mem::take(&mut self.ops);
        let pending = std::mem::take(&mut self.pending);
        for ((op, p), (&ptr, &r)) in ops
            .into_iter()
            .zip(pending)
            .zip(self.pages.iter().zip(&self.of_req))
        {
            // SAFETY: the caller's page, ours until we return; its read is
            // over (reaped above).
            let page = unsafe { std::slice::from_raw_parts_mut(ptr, PAGE_SIZE) };
            if let Err(e) = UringStorage::finish_read(op, p, page)
                && self.results[r].is_ok()
            {
                self.results[r] = Err(e);
            }
        }
        for (r, e) in self.past_end.iter_mut().enumerate() {
            if let Some(e) = e.take()
                && self.results[r].is_ok()
            {
                self.results[r] = Err(e);
            }
        }
    }
}

impl PendingReads for UringReads {
    fn wait(mut self: Box<Self>) -> Vec<Result<()>> {
        self.reap();
        std::mem::take(&mut self.results)
    }
}

impl Drop for UringReads {
    fn drop(&mut self) {
        // Never give the pages back with reads in flight.
        self.reap();
    }
}

#[cfg(test)]
mod tests {
    //! The descriptor test sets `RLIMIT_NOFILE`, which every test of this
    //! binary running at once would feel: it runs its body in a child
    //! process of its own (`crate::io::test_child`).

    use super::*;
    use crate::io::test_child::in_child;
    use crate::tag::RelId;

    fn rel(i: usize) -> RelFork {
        RelFork::main(RelId(20 + i as u32))
    }

    /// Its rings dropped as broken and none to be had in their place (the
    /// descriptor limit reached): single-page and multi-page reads, batches
    /// and writes, waited for or submitted, go through the file backend and
    /// read and write the right bytes.
    #[test]
    fn without_a_ring_every_call_falls_back_to_the_file_backend() {
        in_child(
            "io::uring::tests::child_without_a_ring_every_call_falls_back_to_the_file_backend",
        );
    }

    #[test]
    #[ignore = "run in a child process by without_a_ring_every_call_falls_back_to_the_file_backend"]
    fn child_without_a_ring_every_call_falls_back_to_the_file_backend() {
        if let Err(why) = probe_io_uring() {
            eprintln!("skipped: io_uring is not usable here: {why}");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let s = UringStorage::with_rings(dir.path(), false, 2).unwrap();
        let rf = rel(0);
        s.create(rf).unwrap();
        let page = |b: BlockNumber| {
            let mut p = vec![0u8; PAGE_SIZE];
            p[100..104].copy_from_slice(&b.to_le_bytes());
            p
        };
        for b in 0..4 {
            s.write(BufferTag::new(rf, b), &page(b)).unwrap();
        }
        // Every ring broken, and no descriptor to be had: none is made.
        for r in s.rings.iter() {
            r.lock().take();
        }
        let free = std::mem::take(&mut *s.spare.free.lock());
        for r in free {
            s.spare.broken(r);
        }
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit/setrlimit write/read the struct we pass.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
        // A new descriptor takes the lowest free number, refused at or
        // above the limit.
        // SAFETY: dup of stdin, closed at once: its number is the lowest
        // free one.
        let lowest_free = unsafe { libc::dup(0) };
        assert!(lowest_free >= 0);
        // SAFETY: the descriptor just made, ours alone.
        assert_eq!(unsafe { libc::close(lowest_free) }, 0);
        lim.rlim_cur = lowest_free as libc::rlim_t;
        // SAFETY: as above.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
        assert!(new_ring(dir.path()).is_err(), "a ring was still to be had");
        let block_of = |p: &[u8]| u32::from_le_bytes(p[100..104].try_into().unwrap());
        // Waited for: a page, a run, a batch, a write and a batch of writes.
        let mut one = vec![0u8; PAGE_SIZE];
        s.read(BufferTag::new(rf, 2), &mut one).unwrap();
        assert_eq!(block_of(&one), 2);
        let mut bufs = vec![vec![0u8; PAGE_SIZE]; 3];
        let mut pages: Vec<&mut [u8]> = bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
        s.read_run(BufferTag::new(rf, 1), &mut pages).unwrap();
        assert_eq!(
            bufs.iter().map(|b| block_of(b)).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        let (mut a, mut b) = (vec![0u8; PAGE_SIZE], vec![0u8; PAGE_SIZE]);
        let mut reqs = [
            ReadRequest {
                tag: BufferTag::new(rf, 3),
                page: &mut a,
            },
            ReadRequest {
                tag: BufferTag::new(rf, 0),
                page: &mut b,
            },
        ];
        assert!(s.read_batch(&mut reqs).iter().all(Result::is_ok));
        assert_eq!((block_of(&a), block_of(&b)), (3, 0));
        s.write(BufferTag::new(rf, 4), &page(4)).unwrap();
        let (p5, p0) = (page(5), page(10));
        let writes = [
            WriteRequest {
                tag: BufferTag::new(rf, 5),
                page: &p5,
            },
            WriteRequest {
                tag: BufferTag::new(rf, 0),
                page: &p0,
            },
        ];
        assert!(s.write_batch(&writes).iter().all(Result::is_ok));
        assert_eq!(s.nblocks(rf).unwrap(), 6);
        // Submitted: a run and a single page.
        let mut bufs = vec![vec![0u8; PAGE_SIZE]; 4];
        let ptrs: Vec<*mut u8> = bufs.iter_mut().map(|b| b.as_mut_ptr()).collect();
        let reqs = vec![
            AsyncRead {
                tag: BufferTag::new(rf, 0),
                pages: ptrs[..3].to_vec(),
            },
            AsyncRead {
                tag: BufferTag::new(rf, 5),
                pages: ptrs[3..].to_vec(),
            },
        ];
        // SAFETY: four distinct PAGE_SIZE buffers, untouched until the wait.
        let results = unsafe { s.submit_reads(reqs) }.wait();
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        assert_eq!(
            bufs.iter().map(|b| block_of(b)).collect::<Vec<_>>(),
            [10, 1, 2, 5]
        );
    }
}

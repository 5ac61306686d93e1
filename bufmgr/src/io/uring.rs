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
//!   buffer), on a ring taken
//!   from the spare rings (or created) for the pending reads alone, pushed
//!   and submitted with one `io_uring_enter` without waiting; the returned
//!   `UringReads` keeps the ring (so no other call's I/O shares it) and
//!   reaps at its wait or drop, then gives the ring back.
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
/// Most rings one backend creates.
pub const MAX_RINGS: usize = 8;
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
    /// Rings free for [`submit_reads`](StorageBackend::submit_reads): each
    /// pending set of reads takes one out for its lifetime (or creates one)
    /// and gives it back after its last completion.
    spare: Arc<Mutex<Vec<IoUring>>>,
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
        Ok(UringStorage {
            files,
            rings,
            spare: Arc::new(Mutex::new(Vec::new())),
        })
    }

    /// The file backend whose files this one reads and writes.
    pub fn files(&self) -> &FileStorage {
        &self.files
    }

    /// How many rings the backend has.
    pub fn ring_count(&self) -> usize {
        self.rings.len()
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
    fn run(&self, ops: &mut [Op]) {
        if ops.is_empty() {
            return;
        }
        let mut guard = self.lock_ring();
        if guard.is_none() {
            match new_ring(self.files.base_dir()) {
                Ok(r) => *guard = Some(r),
                Err(e) => {
                    for op in ops.iter_mut() {
                        op.outcome = Outcome::Failed(io::Error::other(e.to_string()));
                    }
                    return;
                }
            }
        }
        let ring = guard.as_mut().expect("a ring was just ensured");
        if run_ops(ring, ops, self.files.direct_io()).is_err() {
            *guard = None;
        }
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
        self.run(&mut ops);
        let [op] = ops;
        Self::finish_write(op, p)
    }
}

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
        self.run(&mut ops);
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
            self.run(&mut ops);
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
        self.run(&mut ops);
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
        self.run(&mut ops);
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
        self.run(&mut ops);
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
    /// spare rings) and submitted with one `io_uring_enter`; the returned
    /// object keeps the ring, and reaps at its wait (or drop).
    unsafe fn submit_reads(&self, reqs: Vec<AsyncRead>) -> Box<dyn PendingReads> {
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
        let spare = self.spare.lock().pop();
        let ring = match spare.map_or_else(|| new_ring(self.files.base_dir()), Ok) {
            Ok(ring) => Some(ring),
            Err(e) => {
                for op in &mut ops {
                    op.outcome = Outcome::Failed(io::Error::other(e.to_string()));
                }
                None
            }
        };
        let mut reads = UringReads {
            ring,
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
    /// `None` if no ring could be had (every op failed already).
    ring: Option<IoUring>,
    spare: Arc<Mutex<Vec<IoUring>>>,
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
                Ok(()) => self.spare.lock().push(ring),
                // A broken ring is dropped (nothing is in flight on it).
                Err(()) => drop(ring),
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

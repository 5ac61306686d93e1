//! Page-access traces: every access and every eviction of a pool, recorded
//! into a compact binary file, and the reader that decodes one.
//!
//! A trace is what a replay (the `lab` crate's `replay`) runs other policies on, so it
//! records what a policy sees: which page was asked for, by which thread,
//! through which ring, and whether the pool had it; and, for each eviction,
//! which page went and how many ticks of the hand it cost.
//!
//! # File layout (all integers little-endian)
//! ```text
//! header, 16 bytes
//!   0..8    magic  b"BMTRACE\0"
//!   8..10   version (1)
//!   10..12  record size (32)
//!   12..16  pool buffers (u32): the size of the pool that was recorded
//! records, 32 bytes each, one after another
//!   0       kind: 0 = access, 1 = eviction
//!   1       flags: bit 0 hit (access only); bits 1..3 ring: 0 none,
//!           1 bulk read, 2 bulk write, 3 vacuum
//!   2       fork (0 main, 1 free-space map)
//!   3       reserved, 0
//!   4..8    thread: the trace id of the recording thread (see below)
//!   8..12   relation id
//!   12..16  block
//!   16..20  buffer id the page is in (access) or was evicted from
//!   20..24  ticks: hand ticks the eviction's sweep cost (0 for an access,
//!           and for a victim a ring reused)
//!   24..32  nanoseconds since the pool opened (the recording thread's
//!           monotonic clock), to merge the threads' batches back in order
//! ```
//!
//! # Recording
//! 1. Each thread appends to its own buffer (in its per-pool state,
//!    `local::Local`), so recording takes no lock per access; a full buffer
//!    ([`BATCH_RECORDS`]) is written to the file under the file's lock, in one
//!    `write`. So records of one thread are in order, and batches of
//!    different threads interleave: a replay sees each thread's accesses in
//!    order and the threads' batches one after another. Each record carries
//!    its time, and the reader's [`Trace::accesses_by_time`] merges the
//!    threads back into the order they ran in (to the clock's resolution;
//!    a concurrent pool defines no finer order anyway).
//! 2. A thread's buffer is written when it is full, when the thread's state
//!    for the pool is dropped (the thread exits), when the thread calls
//!    [`BufferPool::flush_trace`](crate::BufferPool::flush_trace), and when
//!    it drops the pool. A worker should call `flush_trace` as its last
//!    act: a thread's exit (and so its state's drop) may come after a
//!    `thread::scope` that spawned it has returned.
//! 3. Off (no [`PoolConfig::trace`](crate::PoolConfig)), the hit path pays
//!    one test of a field of the thread's state that it has already loaded:
//!    the recording call is out of line and marked cold.
//! 4. A thread's trace id is what it set with [`set_thread_id`] before its
//!    first access to the pool (the benchmarks do, so that `bench replay
//!    --threads` names their OLTP threads stably), else
//!    [`UNNAMED_THREAD_BASE`] + the order in which it first used the pool.
//! 5. What counts as an access is what [`PoolStats`](crate::PoolStats)
//!    counts: a read of a block through the pool (not an extension). A pin
//!    of a page another thread is still reading is recorded as a miss.
//!
//! 6. [`BufferPool::stop_trace`](crate::BufferPool::stop_trace) ends the
//!    recording while the pool stays open: later accesses are not
//!    recorded, the batches already recorded are written as in 2 (so a
//!    benchmark's data check after its measured run stays out of the
//!    trace). The test is in the cold recording call: it costs nothing
//!    when tracing is off.
//!
//! # A torn file
//! A process killed while a thread writes its batch can leave a file cut
//! at any byte. Cut inside a record, [`Trace::read`] refuses it with an
//! [`Error::BadTrace`] naming the offset of the torn record (a reader
//! must not mistake a cut-short trace for a whole one), and
//! [`Trace::read_torn`] reads the whole records before that offset and
//! returns where the tear is, for a caller that wants what survived
//! (`bench replay` replays that part and prints a warning). Cut at a
//! record boundary, or with batches that never reached the file (still in
//! a killed thread's buffer), the file reads as whole but holds fewer
//! records than the pool made: only a count kept elsewhere (the benchmarks'
//! list of files written) can tell.
//!
//! The pool does not know what kind of relation (heap, index) a relation
//! is: the trace names relations by id, and the reserved byte stays 0.

use std::cell::Cell;
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::replacement::ring::RingKind;
use crate::tag::{BufferTag, Fork, RelFork, RelId};

/// The first 8 bytes of every trace file.
pub const MAGIC: [u8; 8] = *b"BMTRACE\0";
/// The format version this reader and writer speak.
pub const VERSION: u16 = 1;
/// Bytes in the header.
pub const HEADER_SIZE: usize = 16;
/// Bytes in one record.
pub const RECORD_SIZE: usize = 32;
/// Records a thread buffers before writing them out: 4096 x 32 bytes = 128 KiB,
/// one `write` per batch, large enough that the file lock is taken about
/// once per 4096 accesses.
pub const BATCH_RECORDS: usize = 4096;

const KIND_ACCESS: u8 = 0;
const KIND_EVICT: u8 = 1;

/// One decoded record.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum TraceEvent {
    /// A read of a page through the pool.
    Access(Access),
    /// A page was evicted to make room.
    Evict(Eviction),
}

/// A read of a page through the pool.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct Access {
    pub tag: BufferTag,
    pub thread: u32,
    pub hit: bool,
    /// The ring the read went through, if any.
    pub ring: Option<RingKind>,
    pub buffer: u32,
    /// Nanoseconds since the pool opened.
    pub nanos: u64,
}

/// An eviction: `tag` left buffer `buffer`.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct Eviction {
    pub tag: BufferTag,
    pub thread: u32,
    pub buffer: u32,
    /// Hand ticks the sweep that chose it took (0: a ring slot reused).
    pub ticks: u32,
    /// The victim came from the thread's ring.
    pub ring: Option<RingKind>,
    /// Nanoseconds since the pool opened.
    pub nanos: u64,
}

fn ring_code(r: Option<RingKind>) -> u8 {
    match r {
        None => 0,
        Some(RingKind::BulkRead) => 1,
        Some(RingKind::BulkWrite) => 2,
        Some(RingKind::Vacuum) => 3,
    }
}

fn ring_of(code: u8) -> Option<RingKind> {
    match code {
        1 => Some(RingKind::BulkRead),
        2 => Some(RingKind::BulkWrite),
        3 => Some(RingKind::Vacuum),
        _ => None,
    }
}

impl TraceEvent {
    /// The record's 24 bytes.
    pub fn encode(&self) -> [u8; RECORD_SIZE] {
        let (kind, flags, tag, thread, buffer, ticks, nanos) = match *self {
            TraceEvent::Access(a) => (
                KIND_ACCESS,
                u8::from(a.hit) | (ring_code(a.ring) << 1),
                a.tag,
                a.thread,
                a.buffer,
                0,
                a.nanos,
            ),
            TraceEvent::Evict(e) => (
                KIND_EVICT,
                ring_code(e.ring) << 1,
                e.tag,
                e.thread,
                e.buffer,
                e.ticks,
                e.nanos,
            ),
        };
        let mut r = [0u8; RECORD_SIZE];
        r[0] = kind;
        r[1] = flags;
        r[2] = tag.fork as u8;
        r[4..8].copy_from_slice(&thread.to_le_bytes());
        r[8..12].copy_from_slice(&tag.rel.0.to_le_bytes());
        r[12..16].copy_from_slice(&tag.block.to_le_bytes());
        r[16..20].copy_from_slice(&buffer.to_le_bytes());
        r[20..24].copy_from_slice(&ticks.to_le_bytes());
        r[24..32].copy_from_slice(&nanos.to_le_bytes());
        r
    }

    /// Decode one record; `Err` says what is wrong with it.
    pub fn decode(r: &[u8; RECORD_SIZE]) -> std::result::Result<TraceEvent, String> {
        let u32_at = |i: usize| u32::from_le_bytes([r[i], r[i + 1], r[i + 2], r[i + 3]]);
        let fork = Fork::from_u8(r[2]).ok_or_else(|| format!("unknown fork {}", r[2]))?;
        if r[3] != 0 {
            return Err(format!("reserved byte is {}, not 0", r[3]));
        }
        if r[1] & !0b111 != 0 {
            return Err(format!("unknown flag bits {:#x}", r[1]));
        }
        let tag = BufferTag::new(
            RelFork {
                rel: RelId(u32_at(8)),
                fork,
            },
            u32_at(12),
        );
        let ring = ring_of((r[1] >> 1) & 0b11);
        let nanos = u64::from_le_bytes(r[24..32].try_into().expect("8 bytes"));
        match r[0] {
            KIND_ACCESS => {
                if u32_at(20) != 0 {
                    return Err(format!("an access with {} ticks", u32_at(20)));
                }
                Ok(TraceEvent::Access(Access {
                    tag,
                    thread: u32_at(4),
                    hit: r[1] & 1 != 0,
                    ring,
                    buffer: u32_at(16),
                    nanos,
                }))
            }
            KIND_EVICT => {
                if r[1] & 1 != 0 {
                    return Err("an eviction flagged as a hit".into());
                }
                Ok(TraceEvent::Evict(Eviction {
                    tag,
                    thread: u32_at(4),
                    buffer: u32_at(16),
                    ticks: u32_at(20),
                    ring,
                    nanos,
                }))
            }
            k => Err(format!("unknown record kind {k}")),
        }
    }
}

/// A decoded trace file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    /// The buffers of the pool that recorded it.
    pub pool_buffers: u32,
    pub events: Vec<TraceEvent>,
}

impl Trace {
    /// The evictions, in file order.
    pub fn evictions(&self) -> impl Iterator<Item = &Eviction> + '_ {
        self.events.iter().filter_map(|e| match e {
            TraceEvent::Evict(v) => Some(v),
            TraceEvent::Access(_) => None,
        })
    }

    /// The accesses, in file order.
    pub fn accesses(&self) -> impl Iterator<Item = &Access> + '_ {
        self.events.iter().filter_map(|e| match e {
            TraceEvent::Access(a) => Some(a),
            TraceEvent::Evict(_) => None,
        })
    }

    /// The accesses in the order they happened: each thread's in its own
    /// order, the threads merged by time (a stable sort of file order).
    pub fn accesses_by_time(&self) -> Vec<&Access> {
        let mut v: Vec<&Access> = self.accesses().collect();
        v.sort_by_key(|a| a.nanos);
        v
    }

    /// Read and decode the trace file at `path`. A damaged file is an
    /// [`Error::BadTrace`] naming the file and the byte offset of the fault;
    /// so is a torn one (see [`Trace::read_torn`]).
    pub fn read(path: &Path) -> Result<Trace> {
        let bytes = read_all(path)?;
        Trace::decode(&bytes).map_err(|(offset, detail)| Error::BadTrace {
            path: path.to_path_buf(),
            offset,
            detail,
        })
    }

    /// Read the trace file at `path`, keeping the whole records of a file
    /// whose end was torn off (a killed writer): the trace up to the tear,
    /// and `Some(offset)` of the torn last record (`None`: the file is
    /// whole). Any other damage is an error as in [`Trace::read`].
    pub fn read_torn(path: &Path) -> Result<(Trace, Option<u64>)> {
        let bytes = read_all(path)?;
        Trace::decode_parts(&bytes).map_err(|(offset, detail)| Error::BadTrace {
            path: path.to_path_buf(),
            offset,
            detail,
        })
    }

    /// Decode a whole trace from memory; `Err((offset, what))` on bad bytes,
    /// a torn last record included.
    pub fn decode(bytes: &[u8]) -> std::result::Result<Trace, (u64, String)> {
        match Trace::decode_parts(bytes)? {
            (t, None) => Ok(t),
            (_, Some(offset)) => Err((
                offset,
                format!(
                    "a torn last record: {} of {RECORD_SIZE} bytes",
                    bytes.len() as u64 - offset
                ),
            )),
        }
    }

    /// The records of `bytes` up to a torn last record, and that record's
    /// offset if there is one.
    fn decode_parts(bytes: &[u8]) -> std::result::Result<(Trace, Option<u64>), (u64, String)> {
        if bytes.len() < HEADER_SIZE {
            return Err((
                0,
                format!(
                    "{} bytes, shorter than the {HEADER_SIZE}-byte header",
                    bytes.len()
                ),
            ));
        }
        if bytes[0..8] != MAGIC {
            return Err((0, "not a trace file (bad magic)".into()));
        }
        let version = u16::from_le_bytes([bytes[8], bytes[9]]);
        if version != VERSION {
            return Err((8, format!("version {version}, this reader knows {VERSION}")));
        }
        let size = u16::from_le_bytes([bytes[10], bytes[11]]) as usize;
        if size != RECORD_SIZE {
            return Err((10, format!("record size {size}, expected {RECORD_SIZE}")));
        }
        let pool_buffers = u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]);
        let body = &bytes[HEADER_SIZE..];
        let whole = body.len() / RECORD_SIZE * RECORD_SIZE;
        let mut events = Vec::with_capacity(body.len() / RECORD_SIZE);
        for (i, chunk) in body[..whole].chunks_exact(RECORD_SIZE).enumerate() {
            let offset = (HEADER_SIZE + i * RECORD_SIZE) as u64;
            let rec: &[u8; RECORD_SIZE] = chunk.try_into().expect("chunks_exact");
            events.push(TraceEvent::decode(rec).map_err(|d| (offset, d))?);
        }
        let torn = (whole != body.len()).then_some((HEADER_SIZE + whole) as u64);
        Ok((
            Trace {
                pool_buffers,
                events,
            },
            torn,
        ))
    }
}

fn read_all(path: &Path) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| Error::io("read", "trace", path, e))?;
    Ok(bytes)
}

/// The file a pool's threads write their batches to.
#[derive(Debug)]
pub(crate) struct TraceSink {
    path: PathBuf,
    /// Set by [`BufferPool::stop_trace`](crate::BufferPool::stop_trace):
    /// nothing is recorded after it (rule 6). Relaxed: a record made by
    /// another thread just as the flag is set may go either way.
    stopped: AtomicBool,
    /// Time zero of the records' `nanos`.
    start: std::time::Instant,
    /// Written a whole batch at a time (no buffering of its own: a batch
    /// is already 96 KiB, and nothing is left behind in a buffer that only
    /// a drop would flush).
    file: Mutex<File>,
    /// The first write error; reported by `flush_trace`.
    failed: Mutex<Option<String>>,
}

impl TraceSink {
    /// Create (truncate) `path` and write the header.
    pub fn create(path: &Path, pool_buffers: usize) -> Result<Arc<TraceSink>> {
        let io = |e| Error::io("create", "trace", path, e);
        let mut f = File::create(path).map_err(io)?;
        let mut h = [0u8; HEADER_SIZE];
        h[0..8].copy_from_slice(&MAGIC);
        h[8..10].copy_from_slice(&VERSION.to_le_bytes());
        h[10..12].copy_from_slice(&(RECORD_SIZE as u16).to_le_bytes());
        h[12..16].copy_from_slice(
            &u32::try_from(pool_buffers)
                .unwrap_or(u32::MAX)
                .to_le_bytes(),
        );
        f.write_all(&h).map_err(io)?;
        Ok(Arc::new(TraceSink {
            path: path.to_path_buf(),
            stopped: AtomicBool::new(false),
            start: std::time::Instant::now(),
            file: Mutex::new(f),
            failed: Mutex::new(None),
        }))
    }

    /// Record nothing more (rule 6).
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
    }

    fn write_batch(&self, bytes: &[u8]) {
        if let Err(e) = self.file.lock().write_all(bytes) {
            self.failed.lock().get_or_insert_with(|| e.to_string());
        }
    }

    /// The first error of any write so far.
    pub fn flush(&self) -> Result<()> {
        match self.failed.lock().clone() {
            None => Ok(()),
            Some(msg) => Err(Error::io(
                "write",
                "trace",
                &self.path,
                std::io::Error::other(msg),
            )),
        }
    }
}

thread_local! {
    static THREAD_ID: Cell<Option<u32>> = const { Cell::new(None) };
}

/// Name this thread `id` in traces of pools it has not used yet (rule 4).
pub fn set_thread_id(id: u32) {
    THREAD_ID.with(|c| c.set(Some(id)));
}

/// Forget this thread's [`set_thread_id`]: pools it uses from now on name it
/// as an unnamed thread (a program that runs several measured runs on one
/// thread clears the id between them, so a later run's opening thread does
/// not take a worker's id).
pub fn clear_thread_id() {
    THREAD_ID.with(|c| c.set(None));
}

/// Trace ids of threads that did not [`set_thread_id`] start here (so they
/// never collide with the small ids the benchmarks give their workers).
pub const UNNAMED_THREAD_BASE: u32 = 1 << 31;

/// The trace id of a thread whose pool ordinal is `ordinal`.
pub(crate) fn thread_id(ordinal: usize) -> u32 {
    THREAD_ID.with(|c| c.get()).unwrap_or_else(|| {
        UNNAMED_THREAD_BASE.saturating_add(u32::try_from(ordinal).unwrap_or(u32::MAX))
    })
}

/// One thread's batch of records for one pool.
#[derive(Debug)]
pub(crate) struct TraceBuf {
    sink: Arc<TraceSink>,
    thread: u32,
    bytes: Vec<u8>,
}

impl TraceBuf {
    pub fn new(sink: Arc<TraceSink>, thread: u32) -> TraceBuf {
        TraceBuf {
            sink,
            thread,
            bytes: Vec::with_capacity(BATCH_RECORDS * RECORD_SIZE),
        }
    }

    /// Record an access to `tag` in `buffer`.
    #[cold]
    #[inline(never)]
    pub fn access(&mut self, tag: BufferTag, buffer: u32, hit: bool, ring: Option<RingKind>) {
        let thread = self.thread;
        let nanos = self.now();
        self.push(TraceEvent::Access(Access {
            tag,
            thread,
            hit,
            ring,
            buffer,
            nanos,
        }));
    }

    /// Record the eviction of `tag` from `buffer`.
    #[cold]
    #[inline(never)]
    pub fn evict(&mut self, tag: BufferTag, buffer: u32, ticks: u64, ring: Option<RingKind>) {
        let thread = self.thread;
        let nanos = self.now();
        self.push(TraceEvent::Evict(Eviction {
            tag,
            thread,
            buffer,
            ticks: u32::try_from(ticks).unwrap_or(u32::MAX),
            ring,
            nanos,
        }));
    }

    fn now(&self) -> u64 {
        u64::try_from(self.sink.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn push(&mut self, e: TraceEvent) {
        if self.sink.stopped.load(Ordering::Relaxed) {
            return;
        }
        self.bytes.extend_from_slice(&e.encode());
        if self.bytes.len() >= BATCH_RECORDS * RECORD_SIZE {
            self.write_out();
        }
    }

    /// Write the batch to the file (rule 2).
    pub fn write_out(&mut self) {
        if !self.bytes.is_empty() {
            self.sink.write_batch(&self.bytes);
            self.bytes.clear();
        }
    }
}

impl Drop for TraceBuf {
    fn drop(&mut self) {
        self.write_out();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<TraceEvent> {
        let t = |rel, fork, block| {
            BufferTag::new(
                RelFork {
                    rel: RelId(rel),
                    fork,
                },
                block,
            )
        };
        vec![
            TraceEvent::Access(Access {
                tag: t(7, Fork::Main, 3),
                thread: 2,
                hit: true,
                ring: None,
                buffer: 11,
                nanos: 5,
            }),
            TraceEvent::Access(Access {
                tag: t(u32::MAX, Fork::FreeSpace, u32::MAX),
                thread: u32::MAX,
                hit: false,
                ring: Some(RingKind::Vacuum),
                buffer: 0,
                nanos: u64::MAX,
            }),
            TraceEvent::Evict(Eviction {
                tag: t(1, Fork::Main, 0),
                thread: 0,
                buffer: 5,
                ticks: 17,
                ring: Some(RingKind::BulkRead),
                nanos: 0,
            }),
        ]
    }

    fn file_of(events: &[TraceEvent]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&MAGIC);
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.extend_from_slice(&(RECORD_SIZE as u16).to_le_bytes());
        b.extend_from_slice(&64u32.to_le_bytes());
        for e in events {
            b.extend_from_slice(&e.encode());
        }
        b
    }

    #[test]
    fn records_round_trip() {
        let ev = sample();
        let t = Trace::decode(&file_of(&ev)).unwrap();
        assert_eq!(t.pool_buffers, 64);
        assert_eq!(t.events, ev);
    }

    #[test]
    fn damage_is_an_error_naming_the_offset() {
        let good = file_of(&sample());
        let mut torn = good.clone();
        torn.pop();
        assert_eq!(
            Trace::decode(&torn).unwrap_err().0,
            (HEADER_SIZE + 2 * RECORD_SIZE) as u64
        );
        let mut bad_kind = good.clone();
        bad_kind[HEADER_SIZE + RECORD_SIZE] = 9;
        let (off, msg) = Trace::decode(&bad_kind).unwrap_err();
        assert_eq!(off, (HEADER_SIZE + RECORD_SIZE) as u64);
        assert!(msg.contains("kind 9"), "{msg}");
        let mut bad_fork = good.clone();
        bad_fork[16 + 2] = 4;
        assert_eq!(Trace::decode(&bad_fork).unwrap_err().0, 16);
        let mut bad_magic = good.clone();
        bad_magic[0] = b'X';
        assert_eq!(Trace::decode(&bad_magic).unwrap_err().0, 0);
        let mut bad_version = good.clone();
        bad_version[8] = 2;
        assert_eq!(Trace::decode(&bad_version).unwrap_err().0, 8);
        assert_eq!(Trace::decode(&good[..5]).unwrap_err().0, 0);
    }

    #[test]
    fn a_torn_file_keeps_its_whole_records_and_names_the_tear() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("torn.trace");
        let ev = sample();
        let mut b = file_of(&ev);
        b.truncate(b.len() - 5);
        std::fs::write(&p, &b).unwrap();
        let torn_at = (HEADER_SIZE + 2 * RECORD_SIZE) as u64;
        let msg = Trace::read(&p).unwrap_err().to_string();
        assert!(
            msg.contains("torn.trace") && msg.contains(&format!("offset {torn_at}")),
            "{msg}"
        );
        let (t, torn) = Trace::read_torn(&p).unwrap();
        assert_eq!(torn, Some(torn_at));
        assert_eq!(t.events, ev[..2]);
        std::fs::write(&p, file_of(&ev)).unwrap();
        assert_eq!(
            Trace::read_torn(&p).unwrap(),
            (Trace::read(&p).unwrap(), None)
        );
        // Damage before the tear is still an error.
        b[HEADER_SIZE] = 9;
        std::fs::write(&p, &b).unwrap();
        assert!(Trace::read_torn(&p).is_err());
    }

    #[test]
    fn a_damaged_file_names_path_and_offset() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.trace");
        let mut b = file_of(&sample());
        b[16 + 3] = 1;
        std::fs::write(&p, b).unwrap();
        let msg = Trace::read(&p).unwrap_err().to_string();
        assert!(
            msg.contains("t.trace") && msg.contains("offset 16"),
            "{msg}"
        );
    }
}

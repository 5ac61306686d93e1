//! Deterministic concurrency tests of the buffer descriptor's state machine
//! under the shuttle model checker (`--features shuttle`).
//!
//! Shuttle runs the model threads of a test one at a time, switching between
//! them at every atomic operation, lock, condition variable and yield, and
//! chooses the switches with a seeded random scheduler and with PCT
//! (probabilistic concurrency testing, which finds bugs of depth `d` with a
//! known probability). A failing run prints its *schedule*, a string that
//! [`shuttle::replay`] runs again step for step, so a race seen once is a
//! test case forever (`shuttle-seeds/` holds one).
//!
//! What runs is the real [`BufferDesc`]: its state word, header lock,
//! unpin, I/O sleep (`wait_io_unless`, `unlock_header_end_io`) and content
//! lock, built on shuttle's primitives through `crate::sync`. The pool
//! around it (mapping table, arena, storage) is not modelled: the few
//! lines of pool protocol the scenarios need, which call those primitives in
//! a fixed order, are restated here, each naming the function it mirrors:
//!
//! | here                 | mirrors                                   |
//! |----------------------|-------------------------------------------|
//! | [`pin`]              | `PoolShared::pin` (`PinBuffer`)           |
//! | [`pin_if_tagged`]    | `PoolShared::pin_if_tagged` (the hit path)|
//! | [`start_io`]         | `PoolShared::start_io` (`StartBufferIO`)  |
//! | [`terminate_io`]     | `PoolShared::terminate_io`                |
//! | [`mark_dirty`]       | `PageWrite::mark_dirty`                   |
//! | `lock_content_exclusive` / `unlock_content_exclusive` | `PageWrite`'s lock and release (desc rule 4) |
//!
//! # Invariants checked
//! 1. A refcount never goes below zero (desc's `unpin` asserts it) or above
//!    the number of pins taken, and never wraps past `REFCOUNT_MASK`; a pin
//!    never lands while the header lock is held, and the holder sees only
//!    unpins (desc rule 2).
//! 2. The header lock excludes: two holders never overlap.
//! 3. At most one thread owns a buffer's I/O (`IO_IN_PROGRESS`) at a time.
//! 4. A waiter never returns while `IO_IN_PROGRESS` is set; after a
//!    successful read it finds `VALID` and never reads again; after a
//!    failed read every waiter finds `IO_ERROR` and owns a retry.
//! 5. No lost wakeup and no deadlock: a sleeping waiter is always woken,
//!    also when a stream's read is registered after it fell asleep; shuttle
//!    fails a run in which every thread is blocked, and a run that exceeds
//!    [`MAX_STEPS`], which catches a spin that never ends. A stream's read
//!    is reaped exactly once, by the stream or by a waiter.
//! 6. A page never changes while it is written (share-exclusive excludes
//!    exclusive), and a change is never lost: once all threads are done the
//!    page's last version is on "disk" or the buffer is `DIRTY`.
//! 7. A pin taken on a `TAG_VALID` state and confirmed by the tag keeps that
//!    tag until unpinned (desc rule 3): eviction cannot retag under a pin.
//! 8. An optimistic read that validates (desc rule 4) saw one version of
//!    the page it asked for: never a page half-rewritten under the
//!    exclusive lock (a split), never the bytes of the page read into the
//!    buffer after an eviction; and it writes nothing.
//!
//! # Running
//! `cargo test -p bufmgr --features shuttle --lib model_check` runs each
//! scenario for [`DEFAULT_ITERATIONS`] random and as many PCT schedules
//! with fixed seeds. `BUFMGR_SHUTTLE_ITERATIONS=N` sets the count and
//! `BUFMGR_SHUTTLE_SEED=S` the seed, for a long pass; each test prints how
//! many schedules it ran.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use parking_lot::lock_api::RawRwLockUpgrade as _;
use shuttle::scheduler::{PctScheduler, RandomScheduler};
use shuttle::sync::atomic::AtomicU64 as ModelU64;
use shuttle::{Config, MaxSteps, Runner, thread};

use crate::desc::*;
use crate::replacement::evictor::Evictor;
use crate::tag::{BufferTag, RelFork, RelId};

/// Schedules per scheduler per test in the short (CI) pass: enough to find
/// the lost wakeup of [`broken_end_io`] in every run (it shows up within
/// the first few dozen random schedules), small enough that the whole
/// module runs in well under a minute on two cores.
const DEFAULT_ITERATIONS: usize = 1000;
/// The seed of the short pass, fixed so CI explores the same schedules.
const DEFAULT_SEED: u64 = 0x05ee_db0f;
/// PCT's bug depth: the number of priority change points per run. Depth 3
/// covers the orderings the invariants above depend on (a waiter's look
/// between an ender's load and its CAS is depth 2).
const PCT_DEPTH: usize = 3;
/// A run longer than this fails: every scenario here finishes in a few
/// hundred steps, so this bounds a livelock (a spin that never ends) rather
/// than letting the test hang.
const MAX_STEPS: usize = 20_000;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        Err(_) => default,
    }
}

fn config() -> Config {
    let mut config = Config::new();
    config.max_steps = MaxSteps::FailAfter(MAX_STEPS);
    // Shuttle warns that its atomics are sequentially consistent (sync.rs,
    // shortcut 1); said once there.
    config.silence_warnings = true;
    config
}

/// Run `scenario` under the random scheduler and then PCT; returns the
/// number of schedules run by each.
fn explore(name: &str, scenario: fn()) -> (usize, usize) {
    let n = env_or("BUFMGR_SHUTTLE_ITERATIONS", DEFAULT_ITERATIONS);
    let seed = env_or("BUFMGR_SHUTTLE_SEED", DEFAULT_SEED);
    let random = Runner::new(RandomScheduler::new_from_seed(seed, n), config()).run(scenario);
    let pct = Runner::new(PctScheduler::new_from_seed(seed, PCT_DEPTH, n), config()).run(scenario);
    eprintln!("model_check {name}: {random} random + {pct} PCT schedules (seed {seed:#x})");
    assert_eq!((random, pct), (n, n), "{name}: a scheduler stopped early");
    (random, pct)
}

fn tag(block: u32) -> BufferTag {
    BufferTag::new(RelFork::main(RelId(7)), block)
}

/// A descriptor holding `tag(0)`, in the given state.
fn desc_with(state: u64) -> Arc<BufferDesc> {
    let d = BufferDesc::new();
    d.set_tag(Some(tag(0)));
    d.state.store(state, Ordering::Relaxed);
    Arc::new(d)
}

// ----- the pool protocol, restated (see the table in the module docs) -----

/// `PoolShared::pin` with the clock evictor.
fn pin(d: &BufferDesc) -> Option<u64> {
    let mut s = d.load();
    loop {
        if s & LOCKED != 0 {
            s = d.wait_header_unlocked();
            continue;
        }
        if refcount(s) == REFCOUNT_MASK {
            return None;
        }
        let new = Evictor::Clock.on_pin(s, false);
        match d
            .state
            .compare_exchange_weak(s, new, Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => return Some(new),
            Err(actual) => s = actual,
        }
    }
}

/// `PoolShared::pin_if_tagged`: pin only a `TAG_VALID` state, and keep the
/// pin only if the tag, read again once pinned, is `want`.
fn pin_if_tagged(d: &BufferDesc, want: BufferTag) -> bool {
    if !d.has_tag(want) {
        return false;
    }
    let mut s = d.load();
    loop {
        if s & TAG_VALID == 0 || refcount(s) == REFCOUNT_MASK {
            return false;
        }
        if s & LOCKED != 0 {
            s = d.wait_header_unlocked();
            continue;
        }
        let new = Evictor::Clock.on_pin(s, false);
        match d
            .state
            .compare_exchange_weak(s, new, Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => break,
            Err(actual) => s = actual,
        }
    }
    if !d.has_tag(want) {
        d.unpin();
        return false;
    }
    true
}

#[derive(Debug, PartialEq, Eq)]
enum StartIo {
    AlreadyDone,
    /// Ours, with the state word seen when we claimed it.
    Ready(u64),
}

/// `PoolShared::start_io` with no stream reads in flight (`wait_io`'s
/// check finds none). `no_new_io`: the scenario starts no I/O once this one
/// ends (see [`wait_io`]).
fn start_io(d: &BufferDesc, for_input: bool, no_new_io: bool) -> StartIo {
    start_io_waiting(d, for_input, &|d| wait_io(d, no_new_io))
}

/// `PoolShared::start_io`, waiting for another thread's I/O with `wait`.
fn start_io_waiting(d: &BufferDesc, for_input: bool, wait: &dyn Fn(&BufferDesc)) -> StartIo {
    loop {
        let s = d.lock_header();
        if s & IO_IN_PROGRESS == 0 {
            let done = if for_input {
                s & VALID != 0
            } else {
                s & DIRTY == 0
            };
            if done {
                d.unlock_header(0, 0);
                return StartIo::AlreadyDone;
            }
            d.unlock_header(IO_IN_PROGRESS, 0);
            return StartIo::Ready(s);
        }
        d.unlock_header(0, 0);
        wait(d);
    }
}

/// `PoolShared::wait_io`, and invariant 4's first half: back from the
/// sleep, the I/O is over. Checked only where no new I/O can start once it
/// is (`no_new_io`): elsewhere another thread may rightly claim the next
/// I/O before this one looks, and `start_io`'s loop looks again.
fn wait_io(d: &BufferDesc, no_new_io: bool) {
    assert_eq!(d.wait_io_unless(|| None::<()>), None);
    if no_new_io {
        assert_eq!(
            d.load() & IO_IN_PROGRESS,
            0,
            "a waiter returned while the I/O is in progress"
        );
    }
}

/// `PoolShared::terminate_io`.
fn terminate_io(d: &BufferDesc, set: u64, unset: u64) {
    d.lock_header();
    d.unlock_header_end_io(set, unset);
}

/// `PageWrite::mark_dirty`.
fn mark_dirty(d: &BufferDesc) {
    let mut s = d.load();
    loop {
        if s & LOCKED != 0 {
            s = d.wait_header_unlocked();
            continue;
        }
        match d.state.compare_exchange_weak(
            s,
            (s | DIRTY) & !HINT_DIRTY,
            Ordering::AcqRel,
            Ordering::Relaxed,
        ) {
            Ok(_) => return,
            Err(a) => s = a,
        }
    }
}

/// Counts the threads inside a section that at most one may be in.
struct OneAtATime {
    inside: ModelU64,
    what: &'static str,
}

impl OneAtATime {
    fn new(what: &'static str) -> OneAtATime {
        OneAtATime {
            inside: ModelU64::new(0),
            what,
        }
    }

    fn enter(&self) {
        let before = self.inside.fetch_add(1, Ordering::SeqCst);
        assert_eq!(before, 0, "two threads inside: {}", self.what);
    }

    fn leave(&self) {
        self.inside.fetch_sub(1, Ordering::SeqCst);
    }
}

fn join_all(handles: Vec<thread::JoinHandle<()>>) {
    for h in handles {
        h.join().expect("a model thread panicked");
    }
}

// ----- scenarios -----

/// Invariants 1 and 2: three pinners (two pins each, then both unpins) and
/// a header-lock holder that, twice, checks under the lock that nobody else
/// holds it and that the word changes only by unpins while it is held.
fn pins_and_header_lock() {
    const PINNERS: u64 = 3;
    let d = desc_with(TAG_VALID | VALID);
    let holder = Arc::new(OneAtATime::new("the header lock"));
    let mut handles = Vec::new();
    for _ in 0..PINNERS {
        let d = d.clone();
        handles.push(thread::spawn(move || {
            for _ in 0..2 {
                let s = pin(&d).expect("far from the refcount limit");
                assert!(refcount(s) >= 1 && refcount(s) <= 2 * PINNERS);
                assert!(usage(s) <= MAX_USAGE_COUNT);
            }
            d.unpin();
            d.unpin();
        }));
    }
    for _ in 0..2 {
        let d = d.clone();
        let holder = holder.clone();
        handles.push(thread::spawn(move || {
            for _ in 0..2 {
                let s = d.lock_header();
                holder.enter();
                thread::yield_now();
                let later = d.load();
                assert!(later & LOCKED != 0);
                assert!(
                    refcount(later) <= refcount(s),
                    "a pin landed under the header lock"
                );
                assert_eq!(later & !REFCOUNT_MASK, s & !REFCOUNT_MASK);
                holder.leave();
                d.unlock_header(0, 0);
            }
        }));
    }
    join_all(handles);
    let s = d.load();
    assert_eq!(refcount(s), 0);
    assert_eq!(s & LOCKED, 0);
}

/// Invariant 1 at the top of the refcount field: one pin short of
/// `REFCOUNT_MASK`, three threads try to pin (and unpin at once); at most
/// one holds a pin at any time, the others are refused (`TooManyPins` in
/// the pool), and the count never wraps into the usage bits.
fn refcount_saturates() {
    let start = TAG_VALID | VALID | (REFCOUNT_MASK - 1);
    let d = desc_with(start);
    let last_pin = Arc::new(OneAtATime::new("the last pin the refcount can count"));
    let granted = Arc::new(ModelU64::new(0));
    let handles = (0..3)
        .map(|_| {
            let (d, last_pin, granted) = (d.clone(), last_pin.clone(), granted.clone());
            thread::spawn(move || {
                if let Some(s) = pin(&d) {
                    last_pin.enter();
                    assert_eq!(refcount(s), REFCOUNT_MASK);
                    granted.fetch_add(1, Ordering::SeqCst);
                    thread::yield_now();
                    last_pin.leave();
                    d.unpin();
                }
            })
        })
        .collect();
    join_all(handles);
    // The first to try always succeeds.
    assert!(granted.load(Ordering::SeqCst) >= 1);
    let s = d.load();
    assert_eq!(refcount(s), REFCOUNT_MASK - 1);
    assert_eq!(s & !(REFCOUNT_MASK | USAGE_MASK), TAG_VALID | VALID);
}

/// Invariants 3-5 for a read that succeeds: the reader tagged the buffer
/// with `IO_IN_PROGRESS` (as `start_locked` does); two threads that found
/// the tag wait and must find the page valid, never reading it themselves.
fn read_succeeds_waiters_see_valid() {
    read_scenario(true);
}

/// Invariants 3-5 for a read that fails, and whose retries fail too (the
/// block is unreadable): every thread that waited must come back owning a
/// retry with `IO_ERROR` in the state it claimed, never with the page
/// taken as valid.
fn read_fails_every_waiter_sees_error() {
    read_scenario(false);
}

fn read_scenario(succeeds: bool) {
    let d = desc_with(TAG_VALID | IO_IN_PROGRESS | REFCOUNT_ONE);
    let io = Arc::new(OneAtATime::new("the buffer's I/O"));
    let reads = Arc::new(ModelU64::new(0));
    let read = {
        let (d, io, reads) = (d.clone(), io.clone(), reads.clone());
        move || {
            io.enter();
            reads.fetch_add(1, Ordering::SeqCst);
            thread::yield_now();
            io.leave();
            if succeeds {
                terminate_io(&d, VALID, IO_ERROR);
            } else {
                terminate_io(&d, IO_ERROR, 0);
            }
        }
    };
    let mut handles = vec![thread::spawn(read.clone())];
    for _ in 0..2 {
        let (d, read) = (d.clone(), read.clone());
        handles.push(thread::spawn(move || {
            pin(&d).expect("far from the refcount limit");
            // After a successful read no I/O starts again (the page is valid).
            match start_io(&d, true, succeeds) {
                StartIo::AlreadyDone => {
                    assert!(succeeds, "a failed read was taken as a valid page");
                    assert!(d.load() & VALID != 0);
                }
                StartIo::Ready(seen) => {
                    assert!(!succeeds, "a second read of a page read successfully");
                    assert!(seen & IO_ERROR != 0, "a waiter did not see the failed read");
                    read();
                }
            }
            d.unpin();
        }));
    }
    join_all(handles);
    let s = d.load();
    // Not IO_WAITERS: a waiter that announces itself after the I/O ended
    // leaves the bit set until the next end (README, "Deterministic
    // concurrency tests": harmless).
    assert_eq!(s & (IO_IN_PROGRESS | LOCKED), 0);
    assert_eq!(refcount(s), 1);
    if succeeds {
        assert_eq!(reads.load(Ordering::SeqCst), 1);
        assert_eq!(s & (VALID | IO_ERROR), VALID);
    } else {
        assert_eq!(reads.load(Ordering::SeqCst), 3);
        assert_eq!(s & (VALID | IO_ERROR), IO_ERROR);
    }
}

/// Invariants 3, 5 and 6: a modifier changes the page twice under the
/// exclusive content lock (the page is two words that must agree), and two
/// flushers (the bgwriter and a checkpoint, say) write it under the
/// share-exclusive lock with `start_io(for_output)`.
fn flush_and_modify() {
    let d = desc_with(TAG_VALID | VALID);
    // The page: a version number written in two halves; and the version on disk.
    let page = Arc::new((ModelU64::new(0), ModelU64::new(0)));
    let disk = Arc::new(ModelU64::new(0));
    let io = Arc::new(OneAtATime::new("the buffer's I/O"));
    let mut handles = Vec::new();
    {
        let (d, page) = (d.clone(), page.clone());
        handles.push(thread::spawn(move || {
            pin(&d).expect("far from the refcount limit");
            for _ in 0..2 {
                let mark = d.lock_content_exclusive();
                let v = page.0.load(Ordering::SeqCst) + 1;
                page.0.store(v, Ordering::SeqCst);
                thread::yield_now();
                page.1.store(v, Ordering::SeqCst);
                mark_dirty(&d);
                // SAFETY: `mark` is this thread's exclusive hold, from
                // `lock_content_exclusive`, released once.
                unsafe { d.unlock_content_exclusive(mark) };
            }
            d.unpin();
        }));
    }
    for _ in 0..2 {
        let (d, page, disk, io) = (d.clone(), page.clone(), disk.clone(), io.clone());
        handles.push(thread::spawn(move || {
            pin(&d).expect("far from the refcount limit");
            let mark = d.content.lock_upgradable();
            if let StartIo::Ready(_) = start_io(&d, false, false) {
                io.enter();
                let first = page.0.load(Ordering::SeqCst);
                thread::yield_now();
                assert_eq!(
                    first,
                    page.1.load(Ordering::SeqCst),
                    "the page changed while being written"
                );
                disk.store(first, Ordering::SeqCst);
                io.leave();
                terminate_io(&d, 0, DIRTY | HINT_DIRTY | CHECKPOINT_NEEDED | IO_ERROR);
            }
            // SAFETY: `mark` is this thread's share-exclusive hold, released once.
            unsafe { d.content.unlock_upgradable(mark) };
            d.unpin();
        }));
    }
    join_all(handles);
    let s = d.load();
    assert_eq!(refcount(s), 0);
    assert!(!d.content_locked());
    let (last, written) = (page.1.load(Ordering::SeqCst), disk.load(Ordering::SeqCst));
    assert!(
        written == last || s & DIRTY != 0,
        "a change was lost: page at version {last}, disk at {written}, buffer clean"
    );
}

/// Invariant 7: an evictor holding the one pin invalidates and retags the
/// buffer (`invalidate_victim`, then `start_locked`'s tagging) while two
/// threads try the optimistic hit on the old tag.
fn retag_under_optimistic_pins() {
    let d = desc_with(TAG_VALID | VALID | REFCOUNT_ONE);
    let mut handles = Vec::new();
    {
        let d = d.clone();
        handles.push(thread::spawn(move || {
            let s = d.lock_header();
            if refcount(s) != 1 {
                // Someone pinned it meanwhile: not a victim (victim.rs gives up).
                d.unlock_header(0, 0);
            } else {
                d.set_tag(None);
                d.unlock_header(0, USAGE_MASK | FLAG_MASK);
                d.lock_header();
                d.set_tag(Some(tag(1)));
                d.unlock_header(TAG_VALID | IO_IN_PROGRESS, 0);
                terminate_io(&d, VALID, 0);
            }
            d.unpin();
        }));
    }
    for _ in 0..2 {
        let d = d.clone();
        handles.push(thread::spawn(move || {
            if pin_if_tagged(&d, tag(0)) {
                for _ in 0..2 {
                    assert_eq!(d.tag(), Some(tag(0)), "retagged under a pin");
                    assert!(d.load() & TAG_VALID != 0);
                    thread::yield_now();
                }
                d.unpin();
            }
        }));
    }
    join_all(handles);
    assert_eq!(refcount(d.load()), 0);
}

/// Invariant 8: optimistic reads (desc rule 4, `BufferPool::read_optimistic`)
/// of a two-word page whose words must agree (a pivot and its downlink)
/// while a splitter rewrites both words under the exclusive content lock
/// and an evictor takes the buffer (when it holds the one pin), retags it
/// and fills it with another page's words, as a read does after
/// `start_locked`'s tagging. A read that validates saw both words of one
/// version of the page it asked for.
fn optimistic_read_against_split_and_eviction() {
    let d = desc_with(TAG_VALID | VALID);
    // Page words: 1 + the split count for tag(0); FOREIGN for tag(1).
    const FOREIGN: u64 = 1000;
    let page = Arc::new((ModelU64::new(1), ModelU64::new(1)));
    let mut handles = Vec::new();
    {
        let (d, page) = (d.clone(), page.clone());
        handles.push(thread::spawn(move || {
            if !pin_if_tagged(&d, tag(0)) {
                return;
            }
            let mark = d.lock_content_exclusive();
            let v = page.0.load(Ordering::SeqCst) + 1;
            page.0.store(v, Ordering::SeqCst);
            thread::yield_now();
            page.1.store(v, Ordering::SeqCst);
            mark_dirty(&d);
            // SAFETY: `mark` is this thread's exclusive hold, from
            // `lock_content_exclusive`, released once.
            unsafe { d.unlock_content_exclusive(mark) };
            d.unpin();
        }));
    }
    {
        let (d, page) = (d.clone(), page.clone());
        handles.push(thread::spawn(move || {
            if !pin_if_tagged(&d, tag(0)) {
                return;
            }
            let s = d.lock_header();
            if refcount(s) != 1 || s & DIRTY != 0 {
                // Pinned by the splitter too, or dirty: not a clean victim.
                d.unlock_header(0, 0);
            } else {
                d.set_tag(None);
                d.unlock_header(0, USAGE_MASK | FLAG_MASK);
                d.lock_header();
                d.set_tag(Some(tag(1)));
                d.unlock_header(TAG_VALID | IO_IN_PROGRESS, 0);
                // The read of the new page into the buffer.
                page.0.store(FOREIGN, Ordering::SeqCst);
                thread::yield_now();
                page.1.store(FOREIGN, Ordering::SeqCst);
                terminate_io(&d, VALID, 0);
            }
            d.unpin();
        }));
    }
    for _ in 0..2 {
        let (d, page) = (d.clone(), page.clone());
        handles.push(thread::spawn(move || {
            let Some((version, _)) = d.optimistic_begin(tag(0)) else {
                return;
            };
            let first = page.0.load(Ordering::SeqCst);
            thread::yield_now();
            let second = page.1.load(Ordering::SeqCst);
            if d.optimistic_validate(version, tag(0)) {
                assert_eq!(first, second, "a validated read saw a torn page");
                assert!(first < FOREIGN, "a validated read saw another page's words");
            }
        }));
    }
    join_all(handles);
    assert_eq!(refcount(d.load()), 0);
    assert_eq!(d.version() % 2, 0, "no write left open");
}

/// A stream's submitted read (`pool::stream::InFlight`): `pending` until
/// someone reaps it; reaping ends the buffer's I/O under the op's lock.
struct StreamRead {
    pending: shuttle::sync::Mutex<bool>,
}

/// `InFlight::complete`: the first caller reaps and ends the I/O; a later
/// one finds nothing to do. Returns whether this call reaped.
fn complete(op: &StreamRead, d: &BufferDesc, reads: &ModelU64) -> bool {
    let mut pending = op
        .pending
        .lock()
        .expect("no model thread panics holding it");
    if !*pending {
        return false;
    }
    *pending = false;
    reads.fetch_add(1, Ordering::SeqCst);
    terminate_io(d, VALID, IO_ERROR);
    true
}

/// Invariants 3-5 for a read stream (`pool::stream`): the stream owns the
/// buffer's I/O from its start step, registers the submitted read in the
/// pool's `in_flight` map and wakes sleepers so they look again, and later
/// reaps it. Two threads that want the page meanwhile wait in
/// `wait_io_unless` with the check `PoolShared::wait_io` uses (is the read
/// in `in_flight`?) and, if it is, reap it themselves rather than wait for
/// the stream's consumer. The read is reaped exactly once, whoever does it,
/// and nobody sleeps forever.
fn stream_read_finished_by_whoever_needs_it() {
    let d = desc_with(TAG_VALID | IO_IN_PROGRESS | REFCOUNT_ONE);
    let in_flight: Arc<shuttle::sync::Mutex<Option<Arc<StreamRead>>>> =
        Arc::new(shuttle::sync::Mutex::new(None));
    let reads = Arc::new(ModelU64::new(0));
    let mut handles = Vec::new();
    {
        let (d, in_flight, reads) = (d.clone(), in_flight.clone(), reads.clone());
        handles.push(thread::spawn(move || {
            let op = Arc::new(StreamRead {
                pending: shuttle::sync::Mutex::new(true),
            });
            *in_flight.lock().expect("no panics") = Some(op.clone());
            d.wake_io_waiters();
            thread::yield_now();
            complete(&op, &d, &reads);
            in_flight.lock().expect("no panics").take();
            d.unpin();
        }));
    }
    for _ in 0..2 {
        let (d, in_flight, reads) = (d.clone(), in_flight.clone(), reads.clone());
        handles.push(thread::spawn(move || {
            pin(&d).expect("far from the refcount limit");
            let wait = |d: &BufferDesc| {
                let found = d.wait_io_unless(|| in_flight.lock().expect("no panics").clone());
                if let Some(op) = found {
                    complete(&op, d, &reads);
                }
            };
            assert_eq!(start_io_waiting(&d, true, &wait), StartIo::AlreadyDone);
            assert!(d.load() & VALID != 0);
            d.unpin();
        }));
    }
    join_all(handles);
    let s = d.load();
    assert_eq!(
        reads.load(Ordering::SeqCst),
        1,
        "the read was reaped twice or never"
    );
    assert_eq!(s & (IO_IN_PROGRESS | LOCKED | VALID), VALID);
    assert_eq!(refcount(s), 0);
}

// ----- a deliberately broken variant, to show the checker finds bugs -----

/// `unlock_header_end_io` with a plausible-looking bug: it decides whether
/// to wake the sleepers from the state read *before* its CAS, not from the
/// state the CAS replaced. A waiter that announces itself (`IO_WAITERS`)
/// between that read and the CAS, and then sleeps, is never woken.
fn broken_end_io(d: &BufferDesc, set: u64, unset: u64) {
    let first = d.state.load(Ordering::Relaxed);
    let mut cur = first;
    loop {
        let new = ((cur & !(unset | IO_IN_PROGRESS | IO_WAITERS)) | set) & !LOCKED;
        match d
            .state
            .compare_exchange_weak(cur, new, Ordering::Release, Ordering::Relaxed)
        {
            Ok(_) => break,
            Err(actual) => cur = actual,
        }
    }
    if first & IO_WAITERS != 0 {
        d.wake_io_waiters();
    }
}

/// One reader ends its I/O with `end`; one thread waits for it.
fn wakeup_scenario(end: fn(&BufferDesc, u64, u64)) {
    let d = desc_with(TAG_VALID | IO_IN_PROGRESS | REFCOUNT_ONE);
    let reader = {
        let d = d.clone();
        thread::spawn(move || {
            d.lock_header();
            end(&d, VALID, IO_ERROR);
        })
    };
    let waiter = {
        let d = d.clone();
        thread::spawn(move || {
            pin(&d).expect("far from the refcount limit");
            assert_eq!(start_io(&d, true, true), StartIo::AlreadyDone);
            d.unpin();
        })
    };
    join_all(vec![reader, waiter]);
}

fn lost_wakeup() {
    wakeup_scenario(broken_end_io);
}

fn no_lost_wakeup() {
    wakeup_scenario(|d, set, unset| d.unlock_header_end_io(set, unset));
}

/// The schedule string of a shuttle failure message.
fn schedule_of(message: &str) -> Option<String> {
    let (_, rest) = message.split_once("failing schedule:\n\"\n")?;
    let (schedule, _) = rest.split_once("\n\"")?;
    Some(schedule.to_owned())
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(payload) => payload
            .downcast::<&str>()
            .map(|s| s.to_string())
            .unwrap_or_default(),
    }
}

/// Run `f`, which must panic; its message.
fn must_fail(what: &str, f: impl FnOnce()) -> String {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(()) => panic!("{what}: expected a failure, but every schedule passed"),
        Err(payload) => panic_message(payload),
    }
}

/// The regression seed: a schedule of `lost_wakeup` that loses the wakeup.
const LOST_WAKEUP_SEED: &str = include_str!("../shuttle-seeds/lost_wakeup.txt");

#[test]
fn model_check_pins_and_header_lock() {
    explore("pins_and_header_lock", pins_and_header_lock);
}

#[test]
fn model_check_refcount_saturates() {
    explore("refcount_saturates", refcount_saturates);
}

#[test]
fn model_check_read_succeeds_waiters_see_valid() {
    explore(
        "read_succeeds_waiters_see_valid",
        read_succeeds_waiters_see_valid,
    );
}

#[test]
fn model_check_read_fails_every_waiter_sees_error() {
    explore(
        "read_fails_every_waiter_sees_error",
        read_fails_every_waiter_sees_error,
    );
}

#[test]
fn model_check_flush_and_modify() {
    explore("flush_and_modify", flush_and_modify);
}

#[test]
fn model_check_retag_under_optimistic_pins() {
    explore("retag_under_optimistic_pins", retag_under_optimistic_pins);
}

#[test]
fn model_check_optimistic_read_against_split_and_eviction() {
    explore(
        "optimistic_read_against_split_and_eviction",
        optimistic_read_against_split_and_eviction,
    );
}

/// The same scenario with the version check taken out (only the tag is
/// checked after the read) must fail: the model can see a torn page.
#[test]
fn model_check_finds_a_torn_read_without_the_version_check() {
    let message = must_fail("an optimistic read without the version check", || {
        Runner::new(
            RandomScheduler::new_from_seed(DEFAULT_SEED, DEFAULT_ITERATIONS),
            config(),
        )
        .run(unversioned_read);
    });
    assert!(
        message.contains("torn") || message.contains("another page"),
        "{message}"
    );
}

/// [`optimistic_read_against_split_and_eviction`]'s splitter and reader
/// with a validation that checks only the tag and `VALID`.
fn unversioned_read() {
    let d = desc_with(TAG_VALID | VALID);
    let page = Arc::new((ModelU64::new(1), ModelU64::new(1)));
    let writer = {
        let (d, page) = (d.clone(), page.clone());
        thread::spawn(move || {
            let mark = d.lock_content_exclusive();
            page.0.store(2, Ordering::SeqCst);
            thread::yield_now();
            page.1.store(2, Ordering::SeqCst);
            // SAFETY: `mark` is this thread's exclusive hold, from
            // `lock_content_exclusive`, released once.
            unsafe { d.unlock_content_exclusive(mark) };
        })
    };
    let first = page.0.load(Ordering::SeqCst);
    thread::yield_now();
    let second = page.1.load(Ordering::SeqCst);
    if d.has_tag(tag(0)) && d.load() & VALID != 0 {
        assert_eq!(first, second, "a validated read saw a torn page");
    }
    writer.join().expect("writer");
}

#[test]
fn model_check_stream_read_finished_by_whoever_needs_it() {
    explore(
        "stream_read_finished_by_whoever_needs_it",
        stream_read_finished_by_whoever_needs_it,
    );
}

#[test]
fn model_check_no_lost_wakeup() {
    explore("no_lost_wakeup", no_lost_wakeup);
}

/// The checker finds the broken variant's lost wakeup, prints a schedule,
/// and replaying that schedule fails the same way; the real
/// `unlock_header_end_io` passes every schedule of the same seeded
/// scheduler. (Replaying the broken schedule on the real code is not
/// possible: the real code's wakeup is an extra step, so the two runs part
/// at exactly the point where the bug was.)
#[test]
fn model_check_finds_lost_wakeup_and_replays_it() {
    let n = env_or("BUFMGR_SHUTTLE_ITERATIONS", DEFAULT_ITERATIONS);
    let seed = env_or("BUFMGR_SHUTTLE_SEED", DEFAULT_SEED);
    let message = must_fail("the broken end_io", || {
        Runner::new(RandomScheduler::new_from_seed(seed, n), config()).run(lost_wakeup);
    });
    assert!(message.contains("deadlock"), "not a deadlock: {message}");
    let schedule = schedule_of(&message).unwrap_or_else(|| panic!("no schedule in: {message}"));
    eprintln!("model_check lost_wakeup: found, schedule {schedule}");
    let again = must_fail("the replayed schedule", || {
        shuttle::replay(lost_wakeup, &schedule)
    });
    assert!(
        again.contains("deadlock"),
        "replay failed differently: {again}"
    );
    let ran = Runner::new(RandomScheduler::new_from_seed(seed, n), config()).run(no_lost_wakeup);
    assert_eq!(ran, n);
}

/// The checked-in seed still reproduces the lost wakeup in the broken
/// variant: the replay machinery works on this code, and the seed is the
/// regression case for any future change to how an I/O's end wakes waiters
/// (re-record it with `model_check_finds_lost_wakeup_and_replays_it`'s
/// printed schedule if `desc`'s steps change).
#[test]
fn model_check_replays_checked_in_lost_wakeup_seed() {
    let schedule = LOST_WAKEUP_SEED.trim();
    let message = must_fail("the checked-in seed", || {
        shuttle::replay(lost_wakeup, schedule)
    });
    assert!(message.contains("deadlock"), "not a deadlock: {message}");
}

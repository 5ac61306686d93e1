//! Replaying a page-access trace ([`bufmgr::trace`]) through replacement
//! policies, single-threaded, to compare their hit ratios on the same
//! sequence: the engine's three evictors, textbook LRU, ARC, S3-FIFO, SIEVE and 2Q, and
//! Belady's OPT, the bound none of them can beat.
//!
//! # The engine's evictors: the same rules, a simpler pool
//! [`ReplayPool`] is a pool of state words without pages, locks or I/O: one
//! partition, one thread, a sweep batch of 1. It keeps the pool's state word
//! layout ([`bufmgr::desc`]) and calls the very rule functions the live pool
//! calls ([`Evictor::admit_bits`], [`Evictor::on_pin`], [`Evictor::on_tick`],
//! [`Evictor::on_pop`], [`Evictor::ring_reusable`]), and the probation
//! queue's [`Evictor::probation_target`] and ghost set ([`Ghost`], one per
//! mapping partition, sized as the pool sizes them). What it writes out
//! again is only the loop around them: the victim search of
//! `pool::victim::clock_sweep` for one partition with nothing pinned. With
//! one partition, one thread and a batch of 1 the live pool makes the same
//! decisions (tested in `tests/tests/trace_replay_matches_the_pool.rs`).
//!
//! # Watching the rules work: the step observer
//! [`ReplayPool::observed`] makes a pool that reports every decision its
//! rules take to a [`StepObserver`], as a [`StepEvent`]: a hit and what the
//! pin rule did to the state word, each tick of the hand (buffer, state
//! before and after, [`Tick`]), each pop of the probation queue, each ring
//! slot looked at, the victim chosen and the page loaded. The events are
//! sent from inside [`ReplayPool::access`] and the sweep, queue and ring
//! paths it calls, so what an observer sees is what the replay did: there
//! is no second copy of the loop. `bench step` prints them.
//!
//! The plain pool ([`ReplayPool::new`]) has the observer [`NoObserver`],
//! whose [`StepObserver::ON`] is `false`: every `if O::ON` is decided at
//! compile time and the events are never built, so the replay of a big
//! trace runs the same code as before the observer existed.
//!
//! # Rings
//! A ring access (bulk read, bulk write, vacuum) is replayed through a ring
//! as the pool would: for the engine's evictors each (thread, ring kind)
//! has one ring of the size the pool gives it (capped at pages / 8), the
//! ring pin rule applies, and a miss reuses the ring's current slot if
//! [`Evictor::ring_reusable`] allows. The live pool creates a new ring per
//! scan; the replay keeps one per thread and kind for the whole trace.
//! The textbook policies and OPT have no rings: they see a ring access as an
//! ordinary one (which is what they would do as a pool's only policy).
//!
//! # The textbook policies
//! LRU, ARC, S3-FIFO, SIEVE, 2Q and OPT are in [`crate::policy`], each
//! online (one access at a time) over dense keys.

use std::collections::{HashMap, HashSet, VecDeque};

use bufmgr::config::RingSizes;
use bufmgr::desc::{PROBATION, REFCOUNT_ONE, TAG_VALID, VALID, refcount};
use bufmgr::evictor::{Evictor, PROBATION_DIVISOR, Tick};
use bufmgr::probation::Ghost;
use bufmgr::ring::RingKind;
use bufmgr::table::{HashedTag, NUM_MAPPING_PARTITIONS};
use bufmgr::tag::{BufferTag, PAGE_SIZE, RelFork};
use bufmgr::trace::{Access, Trace};

use crate::formats::{self, FormatError, ReadOptions, Reader};
use crate::policy::{self, Cache};
use std::path::Path;

/// The hasher of the replay's maps (tag or object id to dense key or
/// buffer): foldhash, fixed-seeded so that a replay's speed does not vary
/// with a random seed. std's SipHash cost more than a textbook policy's
/// whole access.
type FastState = foldhash::fast::FixedState;
type FastMap<K, V> = HashMap<K, V, FastState>;

/// A replacement policy a trace can be replayed through.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Hash)]
pub enum Policy {
    /// One of the engine's evictors, through [`ReplayPool`].
    Engine(Evictor),
    Lru,
    Arc,
    S3Fifo,
    Sieve,
    TwoQ,
    /// Belady's optimal policy (needs the future: a bound, not a policy).
    Opt,
}

impl Policy {
    /// All of them, in the order the replay table lists them.
    pub const ALL: [Policy; 9] = [
        Policy::Engine(Evictor::Clock),
        Policy::Engine(Evictor::HotCool),
        Policy::Engine(Evictor::Probation),
        Policy::Lru,
        Policy::Arc,
        Policy::S3Fifo,
        Policy::Sieve,
        Policy::TwoQ,
        Policy::Opt,
    ];

    /// The name the command line and the table use.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Engine(e) => e.name(),
            Policy::Lru => "lru",
            Policy::Arc => "arc",
            Policy::S3Fifo => "s3fifo",
            Policy::Sieve => "sieve",
            Policy::TwoQ => "2q",
            Policy::Opt => "opt",
        }
    }
}

impl std::str::FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Policy, String> {
        match s {
            "clock" => Ok(Policy::Engine(Evictor::Clock)),
            "hotcool" => Ok(Policy::Engine(Evictor::HotCool)),
            "probation" => Ok(Policy::Engine(Evictor::Probation)),
            "lru" => Ok(Policy::Lru),
            "arc" => Ok(Policy::Arc),
            "s3fifo" => Ok(Policy::S3Fifo),
            "sieve" => Ok(Policy::Sieve),
            "2q" => Ok(Policy::TwoQ),
            "opt" => Ok(Policy::Opt),
            other => Err(format!(
                "unknown policy {other:?}: expected clock, hotcool, probation, lru, arc, s3fifo, \
                 sieve, 2q or opt"
            )),
        }
    }
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One access as the replay sees it.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct Ref {
    pub tag: BufferTag,
    pub thread: u32,
    pub ring: Option<RingKind>,
}

impl From<&Access> for Ref {
    fn from(a: &Access) -> Ref {
        Ref {
            tag: a.tag,
            thread: a.thread,
            ring: a.ring,
        }
    }
}

/// Replay `refs` through `policy` with a pool of `pages` (at least 1);
/// whether each access was a hit.
pub fn replay(policy: Policy, refs: &[Ref], pages: usize, rings: &RingSizes) -> Vec<bool> {
    let keys = intern(refs);
    let next = (policy == Policy::Opt).then(|| policy::next_uses(&keys));
    let mut hits = Vec::with_capacity(refs.len());
    replay_keyed(
        policy,
        refs,
        &keys,
        next.as_deref(),
        pages,
        rings,
        |_, h| hits.push(h),
    );
    hits
}

/// Replay `refs` (with their dense `keys`, and for OPT each access's
/// `next` use) through `policy` with a pool of `pages`; `each(i, hit)` for
/// every access in order. The textbook policies are called through their
/// concrete types, so the per-access call is inlined.
fn replay_keyed(
    policy: Policy,
    refs: &[Ref],
    keys: &[u32],
    next: Option<&[u64]>,
    pages: usize,
    rings: &RingSizes,
    mut each: impl FnMut(usize, bool),
) {
    fn run<C: Cache>(
        mut c: C,
        keys: &[u32],
        next: Option<&[u64]>,
        each: &mut impl FnMut(usize, bool),
    ) {
        match next {
            Some(next) => {
                for (i, (&k, &n)) in keys.iter().zip(next).enumerate() {
                    each(i, c.access(k, n));
                }
            }
            None => {
                for (i, &k) in keys.iter().enumerate() {
                    each(i, c.access(k, policy::NEVER));
                }
            }
        }
    }
    let pages = pages.max(1);
    match policy {
        Policy::Engine(e) => {
            let pages = engine_pool_pages(pages, refs.len() as u64, rings);
            let mut pool = ReplayPool::new(e, pages, *rings);
            for (i, (r, &k)) in refs.iter().zip(keys).enumerate() {
                each(i, pool.access_keyed(r, k));
            }
        }
        Policy::Lru => run(policy::Lru::new(pages), keys, next, &mut each),
        Policy::Arc => run(policy::Arc::new(pages), keys, next, &mut each),
        Policy::S3Fifo => run(policy::S3Fifo::new(pages), keys, next, &mut each),
        Policy::Sieve => run(policy::Sieve::new(pages), keys, next, &mut each),
        Policy::TwoQ => run(policy::TwoQ::new(pages), keys, next, &mut each),
        Policy::Opt => {
            let next = next.expect("OPT is replayed with each access's next use");
            run(policy::Opt::new(pages), keys, Some(next), &mut each)
        }
    }
}

/// The buffers a [`ReplayPool`] needs to replay `accesses` accesses as a
/// pool of `pages` would: `pages`, or fewer when that many could never all
/// be used. The replay pool holds a state word, a tag and a key per
/// buffer (and probation's ghost sets grow with it), so a pool far larger
/// than the trace (a sweep's top size, `usize::MAX`) would fail to
/// allocate; the textbook policies only count against `pages` and need no
/// such cap.
///
/// Exact: in a pool of `n` buffers every miss that sweeps takes the empty
/// buffer the hand reaches first (state 0 is the bottom step), the hand
/// moving one buffer per miss, so while fewer than `n` misses have swept
/// nothing is evicted by the hand and the probation queue is never popped
/// (it waits for the hand's first lap). A trace of `accesses` accesses
/// sweeps at most that often, so any `n >= accesses` makes the same
/// decisions, provided `n` also leaves each ring its full size (rings are
/// capped at `n / 8`): hence at least 8 times the largest ring.
pub fn engine_pool_pages(pages: usize, accesses: u64, rings: &RingSizes) -> usize {
    let largest_ring = [rings.bulk_read_kib, rings.bulk_write_kib, rings.vacuum_kib]
        .into_iter()
        .max()
        .unwrap_or(0)
        .saturating_mul(1024)
        / PAGE_SIZE;
    let enough = usize::try_from(accesses)
        .unwrap_or(usize::MAX)
        .max(largest_ring.saturating_mul(8))
        .max(1);
    pages.min(enough)
}

/// A textbook policy's cache of `pages`; `Err(evictor)` for the engine's
/// own, which are replayed through [`ReplayPool`].
pub fn textbook(policy: Policy, pages: usize) -> Result<Box<dyn Cache + Send>, Evictor> {
    Ok(match policy {
        Policy::Engine(e) => return Err(e),
        Policy::Lru => Box::new(policy::Lru::new(pages)),
        Policy::Arc => Box::new(policy::Arc::new(pages)),
        Policy::S3Fifo => Box::new(policy::S3Fifo::new(pages)),
        Policy::Sieve => Box::new(policy::Sieve::new(pages)),
        Policy::TwoQ => Box::new(policy::TwoQ::new(pages)),
        Policy::Opt => Box::new(policy::Opt::new(pages)),
    })
}

/// Blocks of one relation fork [`intern`] keys through an array: past
/// this block number (a relation of over 32 GiB), a hash map.
const DENSE_BLOCKS: usize = 1 << 22;

/// [`intern`]'s array slot of a block not seen yet.
const UNSEEN: u32 = u32::MAX;

/// Dense keys 0..n for the tags of `refs`, in access order (a tag's key is
/// the number of distinct tags before its first access).
///
/// An engine trace's tags are the blocks of a few relation forks, each
/// numbered from 0 up: each fork gets an array indexed by block number
/// (grown to the largest block seen), found through a small map of forks
/// with the last one kept at hand (accesses run in one relation for a
/// while). Only blocks past [`DENSE_BLOCKS`] go through a map of tags.
fn intern(refs: &[Ref]) -> Vec<u32> {
    let mut forks: FastMap<RelFork, usize> = FastMap::default();
    let mut dense: Vec<Vec<u32>> = Vec::new();
    let mut sparse: FastMap<BufferTag, u32> = FastMap::default();
    let mut n: u32 = 0;
    let mut last: Option<(RelFork, usize)> = None;
    let mut fresh = || {
        let k = n;
        n += 1;
        k
    };
    refs.iter()
        .map(|r| {
            let tag = r.tag;
            let block = tag.block as usize;
            if block >= DENSE_BLOCKS {
                return *sparse.entry(tag).or_insert_with(&mut fresh);
            }
            let rf = RelFork {
                rel: tag.rel,
                fork: tag.fork,
            };
            let f = match last {
                Some((l, f)) if l == rf => f,
                _ => {
                    let f = *forks.entry(rf).or_insert_with(|| {
                        dense.push(Vec::new());
                        dense.len() - 1
                    });
                    last = Some((rf, f));
                    f
                }
            };
            let blocks = &mut dense[f];
            if block >= blocks.len() {
                blocks.resize((block + 1).next_power_of_two().min(DENSE_BLOCKS), UNSEEN);
            }
            if blocks[block] == UNSEEN {
                blocks[block] = fresh();
            }
            blocks[block]
        })
        .collect()
}

// ---------------------------------------------------------------------------
// The engine's evictors
// ---------------------------------------------------------------------------

/// [`ReplayPool`]'s `buffer_of` for a key whose page is not resident.
const NO_BUFFER: u32 = u32::MAX;

/// A ring of the replay: its slots (buffer ids) and the current slot.
type ReplayRing = (Vec<Option<usize>>, usize);

/// Where the buffer a miss got came from.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum VictimSource {
    /// The clock hand's tick took it (an empty buffer is taken on the
    /// hand's first visit: its state is 0, the bottom step).
    Hand,
    /// The head of the probation queue (probation only).
    Queue,
    /// The access's ring reused its current slot.
    Ring,
}

/// One decision of [`ReplayPool`]'s rules, as a [`StepObserver`] sees it.
/// States are the pool's state words ([`bufmgr::desc`]); refcount 0 (the
/// replay never holds a pin between accesses).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum StepEvent {
    /// The page was resident in `buffer`: the pin rule took its state from
    /// `before` to `after` (pin and unpin).
    Hit {
        buffer: usize,
        tag: BufferTag,
        before: u64,
        after: u64,
    },
    /// A ring access looked at its ring's next slot, holding `buffer` in
    /// `state`: reused if [`Evictor::ring_reusable`], else the miss sweeps.
    /// (An empty slot sends no event: the miss sweeps.)
    RingSlot {
        buffer: usize,
        tag: Option<BufferTag>,
        state: u64,
        reusable: bool,
    },
    /// The hand's tick number `hand` (counting from 0; the buffer is
    /// `hand % len`) visited `buffer`: [`Evictor::on_tick`] said `tick`,
    /// and the state went from `before` to `after`.
    Tick {
        hand: u64,
        buffer: usize,
        tag: Option<BufferTag>,
        before: u64,
        after: u64,
        tick: Tick,
    },
    /// The probation queue's head `buffer` was popped: [`Evictor::on_pop`]
    /// said `tick` (`Cool`: promoted to main; `Victim`: taken, its tag
    /// hash to the ghost set). `forced`: the main hand found nothing.
    Pop {
        buffer: usize,
        tag: Option<BufferTag>,
        before: u64,
        after: u64,
        tick: Tick,
        forced: bool,
    },
    /// The miss takes `buffer`, from `source`; `evicted` is the page it
    /// held (`None`: it was empty).
    Victim {
        buffer: usize,
        evicted: Option<BufferTag>,
        source: VictimSource,
    },
    /// `tag` was loaded into `buffer` with `state`; `queued`: it went to
    /// the tail of the probation queue; `ghost_hit`: the ghost set sent it
    /// straight to main (probation only).
    Load {
        buffer: usize,
        tag: BufferTag,
        state: u64,
        queued: bool,
        ghost_hit: bool,
    },
}

impl StepEvent {
    /// The buffer the event is about.
    pub fn buffer(&self) -> usize {
        match *self {
            StepEvent::Hit { buffer, .. }
            | StepEvent::RingSlot { buffer, .. }
            | StepEvent::Tick { buffer, .. }
            | StepEvent::Pop { buffer, .. }
            | StepEvent::Victim { buffer, .. }
            | StepEvent::Load { buffer, .. } => buffer,
        }
    }
}

/// Receives [`ReplayPool`]'s decisions as they are taken.
pub trait StepObserver {
    /// Whether events are built and sent at all: `false` only for
    /// [`NoObserver`], so the plain replay compiles the events away.
    const ON: bool = true;
    /// One decision, in the order the rules took them.
    fn event(&mut self, e: StepEvent);
}

/// The plain replay's observer: nothing is built or sent.
#[derive(Copy, Clone, Debug, Default)]
pub struct NoObserver;

impl StepObserver for NoObserver {
    const ON: bool = false;
    #[inline(always)]
    fn event(&mut self, _: StepEvent) {}
}

/// Collect the events (drain them after each access to see that access's).
impl StepObserver for Vec<StepEvent> {
    fn event(&mut self, e: StepEvent) {
        self.push(e);
    }
}

/// Send `$e` to the pool's observer, if it has one (decided at compile time).
macro_rules! observe {
    ($pool:expr, $e:expr) => {
        if O::ON {
            $pool.observer.event($e);
        }
    };
}

/// A single-threaded, one-partition pool of state words driven by the
/// engine's evictor rules (see the module docs), reporting its decisions
/// to the observer `O` ([`NoObserver`]: none).
#[derive(Debug)]
pub struct ReplayPool<O: StepObserver = NoObserver> {
    evictor: Evictor,
    /// Each buffer's state word (refcount 0 between accesses).
    states: Vec<u64>,
    tags: Vec<Option<BufferTag>>,
    /// Tag -> dense key, for the accesses [`ReplayPool::access`] is given
    /// without one.
    keys: FastMap<BufferTag, u32>,
    /// Dense key -> the buffer holding its page ([`NO_BUFFER`]: none).
    buffer_of: Vec<u32>,
    /// Buffer -> the dense key of its page (meaningful while `tags` holds
    /// one).
    key_of: Vec<u32>,
    /// Ticks the hand has made (batch 1: one claimed tick each).
    hand: u64,
    queue: VecDeque<usize>,
    ghosts: Vec<Ghost>,
    ring_sizes: RingSizes,
    /// (thread, kind) -> its ring.
    rings: FastMap<(u32, RingKind), ReplayRing>,
    observer: O,
}

impl ReplayPool {
    /// An empty pool of `pages` buffers under `evictor`, unobserved.
    pub fn new(evictor: Evictor, pages: usize, ring_sizes: RingSizes) -> ReplayPool {
        ReplayPool::observed(evictor, pages, ring_sizes, NoObserver)
    }
}

impl<O: StepObserver> ReplayPool<O> {
    /// An empty pool of `pages` buffers under `evictor` that sends each
    /// decision of its rules to `observer`.
    pub fn observed(
        evictor: Evictor,
        pages: usize,
        ring_sizes: RingSizes,
        observer: O,
    ) -> ReplayPool<O> {
        // As `BufferPool::with_wal` sizes the probation ghost sets.
        let ghosts = if evictor.has_probation() {
            (pages - pages / PROBATION_DIVISOR as usize).div_ceil(NUM_MAPPING_PARTITIONS)
        } else {
            0
        };
        ReplayPool {
            evictor,
            states: vec![0; pages],
            tags: vec![None; pages],
            keys: FastMap::default(),
            buffer_of: Vec::new(),
            key_of: vec![0; pages],
            hand: 0,
            queue: VecDeque::new(),
            ghosts: (0..NUM_MAPPING_PARTITIONS)
                .map(|_| Ghost::new(ghosts))
                .collect(),
            ring_sizes,
            rings: FastMap::default(),
            observer,
        }
    }

    /// The observer (to drain what it collected).
    pub fn observer_mut(&mut self) -> &mut O {
        &mut self.observer
    }

    /// The evictor whose rules the pool runs.
    pub fn evictor(&self) -> Evictor {
        self.evictor
    }

    /// Each buffer's state word.
    pub fn states(&self) -> &[u64] {
        &self.states
    }

    /// The buffer the hand visits next.
    pub fn hand_buffer(&self) -> usize {
        (self.hand % self.len() as u64) as usize
    }

    /// Buffers in the pool.
    pub fn len(&self) -> usize {
        self.states.len()
    }

    /// Is the pool empty of buffers (never: `new` makes at least one)?
    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }

    /// The page in each buffer.
    pub fn resident(&self) -> &[Option<BufferTag>] {
        &self.tags
    }

    /// Read `r.tag`: a pin and an unpin. True if it was resident.
    pub fn access(&mut self, r: &Ref) -> bool {
        let n = self.keys.len() as u32;
        let key = *self.keys.entry(r.tag).or_insert(n);
        self.access_keyed(r, key)
    }

    /// [`ReplayPool::access`] with `r.tag`'s dense key already known (the
    /// replay interns a trace once for all its jobs). A pool is given keys
    /// either always by its caller or never.
    fn access_keyed(&mut self, r: &Ref, key: u32) -> bool {
        let ring = r.ring.is_some();
        let k = key as usize;
        if k >= self.buffer_of.len() {
            self.buffer_of
                .resize((k + 1).max(self.buffer_of.len() * 2), NO_BUFFER);
        }
        if self.buffer_of[k] != NO_BUFFER {
            let id = self.buffer_of[k] as usize;
            let before = self.states[id];
            self.states[id] = self.evictor.on_pin(before, ring) - REFCOUNT_ONE;
            observe!(
                self,
                StepEvent::Hit {
                    buffer: id,
                    tag: r.tag,
                    before,
                    after: self.states[id],
                }
            );
            return true;
        }
        let (id, source) = match r.ring.and_then(|k| self.ring_slot(r.thread, k)) {
            Some(id) => (id, VictimSource::Ring),
            None => self.sweep(),
        };
        if let Some(k) = r.ring {
            self.set_ring_current(r.thread, k, id);
        }
        observe!(
            self,
            StepEvent::Victim {
                buffer: id,
                evicted: self.tags[id],
                source,
            }
        );
        // Invalidate the old identity (the pool's `invalidate_victim`: the
        // flags and usage go, the probation region bit stays).
        let s = self.states[id];
        if self.tags[id].take().is_some() {
            self.buffer_of[self.key_of[id] as usize] = NO_BUFFER;
        }
        let ht = HashedTag::new(r.tag);
        let mut bits = self.evictor.admit_bits();
        let (mut queued, mut ghost_hit) = (false, false);
        if self.evictor.has_probation() && s & PROBATION == 0 {
            ghost_hit = self.ghosts[ht.partition()].take(ht.hash);
            if !ghost_hit {
                bits |= PROBATION;
                self.queue.push_back(id);
                queued = true;
            }
        }
        self.states[id] = (s & PROBATION) | TAG_VALID | VALID | bits;
        observe!(
            self,
            StepEvent::Load {
                buffer: id,
                tag: r.tag,
                state: self.states[id],
                queued,
                ghost_hit,
            }
        );
        // The read's pin and unpin: the miss path admits, it does not pin
        // by the pin rule.
        self.tags[id] = Some(r.tag);
        self.key_of[id] = key;
        self.buffer_of[k] = id as u32;
        false
    }

    fn ring_len(&self, kind: RingKind) -> usize {
        let kib = match kind {
            RingKind::BulkRead => self.ring_sizes.bulk_read_kib,
            RingKind::BulkWrite => self.ring_sizes.bulk_write_kib,
            RingKind::Vacuum => self.ring_sizes.vacuum_kib,
        };
        (kib * 1024 / PAGE_SIZE).min(self.len() / 8)
    }

    /// `ring_next`: advance the ring; its buffer if reusable.
    fn ring_slot(&mut self, thread: u32, kind: RingKind) -> Option<usize> {
        let n = self.ring_len(kind);
        if n == 0 {
            return None;
        }
        let (slots, cur) = self
            .rings
            .entry((thread, kind))
            .or_insert_with(|| (vec![None; n], n - 1));
        *cur = (*cur + 1) % slots.len();
        let id = slots[*cur]?;
        let reusable = self.evictor.ring_reusable(self.states[id]);
        observe!(
            self,
            StepEvent::RingSlot {
                buffer: id,
                tag: self.tags[id],
                state: self.states[id],
                reusable,
            }
        );
        reusable.then_some(id)
    }

    fn set_ring_current(&mut self, thread: u32, kind: RingKind, id: usize) {
        if let Some((slots, cur)) = self.rings.get_mut(&(thread, kind)) {
            slots[*cur] = Some(id);
        }
    }

    /// The victim search of `pool::victim::clock_sweep` for one partition
    /// with nothing pinned.
    fn sweep(&mut self) -> (usize, VictimSource) {
        let n = self.len();
        if self.evictor.has_probation()
            && self.hand >= n as u64
            && let Some(v) = self.probation_pop(false)
        {
            return (v, VictimSource::Queue);
        }
        let mut try_counter = n;
        while try_counter > 0 {
            let id = (self.hand % n as u64) as usize;
            let before = self.states[id];
            let tick = self.evictor.on_tick(before);
            match tick {
                Tick::Victim => {
                    self.take(id);
                }
                Tick::Cool(s) => {
                    self.states[id] = s;
                    try_counter = n;
                }
                Tick::Pinned | Tick::Skip => try_counter -= 1,
            }
            observe!(
                self,
                StepEvent::Tick {
                    hand: self.hand,
                    buffer: id,
                    tag: self.tags[id],
                    before,
                    after: self.states[id],
                    tick,
                }
            );
            self.hand += 1;
            if tick == Tick::Victim {
                return (id, VictimSource::Hand);
            }
        }
        let v = self
            .probation_pop(true)
            .expect("single-threaded replay: nothing is pinned, the queue holds the pool");
        (v, VictimSource::Queue)
    }

    /// The victim `id`: its region bit cleared, as the pool's CAS does.
    fn take(&mut self, id: usize) {
        self.states[id] &= !PROBATION;
    }

    /// `probation_pop`: at most as many pops as the queue held.
    fn probation_pop(&mut self, forced: bool) -> Option<usize> {
        let target = Evictor::probation_target(self.len() as u32) as usize;
        let mut left = None;
        loop {
            let held = self.queue.len();
            if held == 0 || (!forced && held < target) {
                return None;
            }
            let id = self.queue.pop_front().expect("held > 0");
            let left = left.get_or_insert(held);
            let before = self.states[id];
            let tick = self.evictor.on_pop(before, forced);
            match tick {
                Tick::Victim => {
                    if let Some(tag) = self.tags[id] {
                        let ht = HashedTag::new(tag);
                        self.ghosts[ht.partition()].remember(ht.hash);
                    }
                    self.take(id);
                }
                Tick::Cool(s) => self.states[id] = s,
                Tick::Pinned | Tick::Skip => self.queue.push_back(id),
            }
            observe!(
                self,
                StepEvent::Pop {
                    buffer: id,
                    tag: self.tags[id],
                    before,
                    after: self.states[id],
                    tick,
                    forced,
                }
            );
            if tick == Tick::Victim {
                return Some(id);
            }
            debug_assert_eq!(refcount(self.states[id]), 0);
            *left -= 1;
            if *left == 0 {
                return None;
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Comparing policies on one trace
// ---------------------------------------------------------------------------

/// One policy at one pool size.
#[derive(Clone, Debug)]
pub struct ReplayRow {
    pub policy: Policy,
    pub pages: usize,
    pub hits: u64,
    pub subset_hits: u64,
    /// Wall time of this job's replay (the jobs share the cores; a
    /// streamed job's time includes reading and decoding the file; an
    /// engine trace's dense keys and OPT's next uses are computed once
    /// before the jobs, outside every job's time).
    pub seconds: f64,
}

/// What [`run_replay`] found.
#[derive(Clone, Debug)]
pub struct ReplayResult {
    pub accesses: u64,
    pub subset_accesses: u64,
    /// Hits the recording pool had (the trace's hit flags).
    pub recorded_hits: u64,
    pub recorded_subset_hits: u64,
    pub recorded_pages: u32,
    pub rows: Vec<ReplayRow>,
}

/// `h / n`, or 0 for no accesses.
pub fn ratio(h: u64, n: u64) -> f64 {
    if n == 0 { 0.0 } else { h as f64 / n as f64 }
}

impl ReplayResult {
    /// The row of `p` at `pages`, if it was replayed.
    pub fn find(&self, p: Policy, pages: usize) -> Option<&ReplayRow> {
        self.rows.iter().find(|r| r.policy == p && r.pages == pages)
    }

    /// The share of the clock-to-OPT gap `row` closes on the subset (or
    /// overall): (h - h_clock) / (h_opt - h_clock); `None` without both.
    pub fn gap_closed(&self, row: &ReplayRow, subset: bool) -> Option<f64> {
        let h = |r: &ReplayRow| {
            if subset {
                ratio(r.subset_hits, self.subset_accesses)
            } else {
                ratio(r.hits, self.accesses)
            }
        };
        let clock = h(self.find(Policy::Engine(Evictor::Clock), row.pages)?);
        let opt = h(self.find(Policy::Opt, row.pages)?);
        (opt - clock > 1e-12).then(|| (h(row) - clock) / (opt - clock))
    }
}

/// Replay `trace`'s accesses through each policy at each size; `subset`
/// says which accesses the subset column counts. The (policy, size) jobs
/// run on one thread per core; the rows come back in job order (sizes
/// outer, policies inner).
pub fn run_replay(
    trace: &Trace,
    policies: &[Policy],
    sizes: &[usize],
    subset: impl Fn(&Access) -> bool,
) -> ReplayResult {
    let accesses = trace.accesses_by_time();
    let refs: Vec<Ref> = accesses.iter().map(|a| Ref::from(*a)).collect();
    let in_subset: Vec<bool> = accesses.iter().map(|a| subset(a)).collect();
    let count = |hits: &[bool]| {
        let all = hits.iter().filter(|&&h| h).count() as u64;
        let sub = hits
            .iter()
            .zip(&in_subset)
            .filter(|&(&h, &s)| h && s)
            .count() as u64;
        (all, sub)
    };
    let recorded: Vec<bool> = accesses.iter().map(|a| a.hit).collect();
    let (recorded_hits, recorded_subset_hits) = count(&recorded);
    // Dense keys once for all the jobs, and the next uses once if OPT is
    // among them.
    let keys = intern(&refs);
    let next_uses = policies
        .contains(&Policy::Opt)
        .then(|| policy::next_uses(&keys));
    let jobs: Vec<(Policy, usize)> = sizes
        .iter()
        .flat_map(|&n| policies.iter().map(move |&p| (p, n)))
        .collect();
    // One thread per core, each taking the next job.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let rows = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..cores.min(jobs.len()).max(1) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(&(policy, pages)) = jobs.get(i) else {
                        break;
                    };
                    let t = std::time::Instant::now();
                    let (mut h, mut sh) = (0u64, 0u64);
                    replay_keyed(
                        policy,
                        &refs,
                        &keys,
                        next_uses.as_deref().filter(|_| policy == Policy::Opt),
                        pages,
                        &RingSizes::default(),
                        |i, hit| {
                            h += u64::from(hit);
                            sh += u64::from(hit & in_subset[i]);
                        },
                    );
                    let seconds = t.elapsed().as_secs_f64();
                    rows.lock().expect("no panics hold it").push((
                        i,
                        ReplayRow {
                            policy,
                            pages,
                            hits: h,
                            subset_hits: sh,
                            seconds,
                        },
                    ));
                }
            });
        }
    });
    let mut rows = rows.into_inner().expect("no panics hold it");
    rows.sort_by_key(|r| r.0);
    ReplayResult {
        accesses: refs.len() as u64,
        subset_accesses: in_subset.iter().filter(|&&s| s).count() as u64,
        recorded_hits,
        recorded_subset_hits,
        recorded_pages: trace.pool_buffers,
        rows: rows.into_iter().map(|r| r.1).collect(),
    }
}

/// What one pass over a streamed trace found: its accesses and footprint
/// (distinct objects).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Footprint {
    pub accesses: u64,
    pub objects: u64,
}

/// Count a streamed trace's accesses and distinct objects (memory: one
/// entry per distinct object).
pub fn footprint(path: &Path, o: &ReadOptions) -> formats::Result<Footprint> {
    let mut seen: HashSet<u64, FastState> = HashSet::default();
    let mut accesses = 0;
    for r in Reader::open(path, o)? {
        seen.insert(r?.obj);
        accesses += 1;
    }
    Ok(Footprint {
        accesses,
        objects: seen.len() as u64,
    })
}

/// Each access's next use, for OPT over a format that does not carry it:
/// one pass storing a dense key (`u32`) per access, then the backward
/// pass, a `u64` per access. This is the one part of a streamed replay
/// whose memory grows with the trace's length (12 bytes per access).
pub fn next_uses_of(path: &Path, o: &ReadOptions) -> formats::Result<Vec<u64>> {
    let mut ids: FastMap<u64, u32> = FastMap::default();
    let mut keys = Vec::new();
    for r in Reader::open(path, o)? {
        let obj = r?.obj;
        let n = ids.len() as u32;
        keys.push(*ids.entry(obj).or_insert(n));
    }
    Ok(policy::next_uses(&keys))
}

/// Dense keys for a stream's object ids, as they appear.
#[derive(Debug, Default)]
struct Interner(FastMap<u64, u32>);

impl Interner {
    #[inline]
    fn key(&mut self, obj: u64) -> formats::Result<u32> {
        let n = self.0.len();
        let n = u32::try_from(n).map_err(|_| {
            FormatError::Usage("more than 2^32 distinct objects: too many to replay".into())
        })?;
        Ok(*self.0.entry(obj).or_insert(n))
    }
}

/// Replay one policy at one size over the stream of `path`; the hits.
/// `next`: each access's next use when the format does not carry it (OPT).
pub fn replay_stream(
    path: &Path,
    o: &ReadOptions,
    policy: Policy,
    pages: usize,
    next: Option<&[u64]>,
) -> formats::Result<u64> {
    let pages = pages.max(1);
    let reader = Reader::open(path, o)?;
    if policy == Policy::Opt && !reader.has_next() && next.is_none() {
        return Err(FormatError::Usage(format!(
            "OPT over a {} trace needs each access's next use (next_uses_of)",
            o.format
        )));
    }
    let mut stream = Stream {
        path,
        reader,
        batch: Vec::with_capacity(STREAM_BATCH),
        keyed: Vec::with_capacity(STREAM_BATCH),
        keys: Interner::default(),
        next,
        done: 0,
    };
    match policy {
        Policy::Engine(e) => {
            let mut pool = ReplayPool::new(e, pages, RingSizes::default());
            let mut hits = 0u64;
            loop {
                let reqs = stream.batch()?;
                if reqs.is_empty() {
                    break;
                }
                for q in reqs {
                    let r = Ref {
                        tag: formats::tag_of(q.obj),
                        thread: 0,
                        ring: None,
                    };
                    hits += u64::from(pool.access_keyed(&r, q.key));
                }
            }
            Ok(hits)
        }
        Policy::Lru => stream.replay(policy::Lru::new(pages)),
        Policy::Arc => stream.replay(policy::Arc::new(pages)),
        Policy::S3Fifo => stream.replay(policy::S3Fifo::new(pages)),
        Policy::Sieve => stream.replay(policy::Sieve::new(pages)),
        Policy::TwoQ => stream.replay(policy::TwoQ::new(pages)),
        Policy::Opt => stream.replay(policy::Opt::new(pages)),
    }
}

/// Accesses decoded per call of [`Reader::next_batch`] in a streamed
/// replay: 64 Ki (1.5 MiB of oracleGeneral records).
const STREAM_BATCH: usize = 1 << 16;

/// One access of a streamed replay: its object, dense key and next use.
#[derive(Copy, Clone, Debug)]
struct Keyed {
    obj: u64,
    key: u32,
    next: u64,
}

/// A streamed trace read a batch at a time, each access given its dense
/// key and next use (from the records, or from `next`).
struct Stream<'a> {
    path: &'a Path,
    reader: Reader,
    batch: Vec<formats::Req>,
    keyed: Vec<Keyed>,
    keys: Interner,
    next: Option<&'a [u64]>,
    /// Accesses handed out so far.
    done: usize,
}

impl Stream<'_> {
    /// The next batch of keyed accesses; empty at the end.
    fn batch(&mut self) -> formats::Result<&[Keyed]> {
        let first = self.done;
        self.reader.next_batch(&mut self.batch, STREAM_BATCH)?;
        self.keyed.clear();
        for (i, q) in self.batch.iter().enumerate() {
            let next = match self.next {
                Some(v) => *v.get(first + i).ok_or_else(|| {
                    FormatError::Usage(format!(
                        "{}: longer than when its next uses were computed",
                        self.path.display()
                    ))
                })?,
                None => q.next,
            };
            self.keyed.push(Keyed {
                obj: q.obj,
                key: self.keys.key(q.obj)?,
                next,
            });
        }
        self.done += self.keyed.len();
        Ok(&self.keyed)
    }

    /// Replay the stream through `cache` (its concrete type: the
    /// per-access call is inlined); the hits.
    fn replay<C: Cache>(mut self, mut cache: C) -> formats::Result<u64> {
        let mut hits = 0u64;
        loop {
            let reqs = self.batch()?;
            if reqs.is_empty() {
                return Ok(hits);
            }
            for q in reqs {
                hits += u64::from(cache.access(q.key, q.next));
            }
        }
    }
}

/// Replay a streamed trace through each policy at each size (sizes outer,
/// policies inner; one thread per core, each job reading the file anew).
/// `fp` is the trace's [`footprint`]; `next` as in [`replay_stream`].
/// Every access is in the subset (the public formats have no threads or
/// relations); there is no recorded row. The engine's evictors replay a
/// pool larger than the footprint as one of the footprint's size: a
/// public-format stream has no rings, so its misses that sweep are its
/// distinct pages at most, and [`engine_pool_pages`]'s argument applies
/// with the footprint in place of the accesses.
pub fn run_stream(
    path: &Path,
    o: &ReadOptions,
    fp: Footprint,
    policies: &[Policy],
    sizes: &[usize],
    next: Option<&[u64]>,
) -> formats::Result<ReplayResult> {
    let jobs: Vec<(Policy, usize)> = sizes
        .iter()
        .flat_map(|&n| policies.iter().map(move |&p| (p, n)))
        .collect();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let at = std::sync::atomic::AtomicUsize::new(0);
    let rows = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..cores.min(jobs.len()).max(1) {
            s.spawn(|| {
                loop {
                    let i = at.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(&(policy, pages)) = jobs.get(i) else {
                        break;
                    };
                    let t = std::time::Instant::now();
                    let replayed = match policy {
                        Policy::Engine(_) => {
                            let no_rings = RingSizes {
                                bulk_read_kib: 0,
                                bulk_write_kib: 0,
                                vacuum_kib: 0,
                            };
                            engine_pool_pages(pages, fp.objects, &no_rings)
                        }
                        _ => pages,
                    };
                    let r = replay_stream(path, o, policy, replayed, next).map(|h| ReplayRow {
                        policy,
                        pages,
                        hits: h,
                        subset_hits: h,
                        seconds: t.elapsed().as_secs_f64(),
                    });
                    rows.lock().expect("no panics hold it").push((i, r));
                }
            });
        }
    });
    let mut rows = rows.into_inner().expect("no panics hold it");
    rows.sort_by_key(|r| r.0);
    Ok(ReplayResult {
        accesses: fp.accesses,
        subset_accesses: fp.accesses,
        recorded_hits: 0,
        recorded_subset_hits: 0,
        recorded_pages: 0,
        rows: rows
            .into_iter()
            .map(|r| r.1)
            .collect::<formats::Result<Vec<_>>>()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bufmgr::tag::{RelFork, RelId};
    use proptest::prelude::*;

    /// Accesses to pages named by letters (block = letter - 'a').
    fn refs(s: &str) -> Vec<Ref> {
        s.bytes()
            .map(|b| Ref {
                tag: BufferTag::new(RelFork::main(RelId(1)), u32::from(b - b'a')),
                thread: 0,
                ring: None,
            })
            .collect()
    }

    // The per-fork arrays give every tag the key a map of tags gives it
    // (its first appearance's rank), across forks, far blocks and an array
    // grown many times.
    #[test]
    fn interned_keys_are_first_appearance_ranks_across_forks_and_far_blocks() {
        let fork = |rel, fsm: bool| RelFork {
            rel: RelId(rel),
            fork: if fsm {
                bufmgr::tag::Fork::FreeSpace
            } else {
                bufmgr::tag::Fork::Main
            },
        };
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let refs: Vec<Ref> = (0..20_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let block = match x % 10 {
                    0 => DENSE_BLOCKS as u32 + (x >> 50) as u32 % 5,
                    1 => u32::MAX - (x >> 60) as u32,
                    _ => ((x >> 20) % 5_000) as u32,
                };
                Ref {
                    tag: BufferTag::new(fork(1 + (x >> 40) as u32 % 3, x.is_multiple_of(7)), block),
                    thread: 0,
                    ring: None,
                }
            })
            .collect();
        let mut naive: HashMap<BufferTag, u32> = HashMap::new();
        let want: Vec<u32> = refs
            .iter()
            .map(|r| {
                let n = naive.len() as u32;
                *naive.entry(r.tag).or_insert(n)
            })
            .collect();
        assert_eq!(intern(&refs), want);
        assert!(naive.len() > 1_000, "{} distinct tags", naive.len());
    }

    fn hits(p: Policy, s: &str, pages: usize) -> usize {
        replay(p, &refs(s), pages, &RingSizes::default())
            .iter()
            .filter(|&&h| h)
            .count()
    }

    /// A loop over 3 pages in a pool of 2, by thread 0, then thread 1
    /// reading page 9 over and over.
    fn loop_trace() -> Trace {
        use bufmgr::trace::TraceEvent;
        let mut events = Vec::new();
        let mut at = |rel: u32, block: u32, thread: u32, nanos: u64| {
            events.push(TraceEvent::Access(Access {
                tag: BufferTag::new(RelFork::main(RelId(rel)), block),
                thread,
                hit: false,
                ring: None,
                buffer: 0,
                nanos,
            }))
        };
        for i in 0..30u32 {
            at(1, i % 3, 0, u64::from(i));
        }
        for i in 0..10u32 {
            at(2, 9, 1, 100 + u64::from(i));
        }
        Trace {
            pool_buffers: 2,
            events,
        }
    }

    #[test]
    fn gap_closed_is_measured_from_clock_to_opt_and_subsets_count_apart() {
        let r = run_replay(&loop_trace(), &Policy::ALL, &[2], |a| a.thread == 0);
        assert_eq!((r.accesses, r.subset_accesses), (40, 30));
        assert_eq!(r.recorded_hits, 0, "the trace's own flags");
        let row = |p| r.find(p, 2).unwrap().clone();
        // LRU never hits a loop larger than the pool; thread 1's page stays.
        assert_eq!(row(Policy::Lru).subset_hits, 0);
        assert_eq!(row(Policy::Lru).hits, 9);
        let (clock, opt) = (row(Policy::Engine(Evictor::Clock)), row(Policy::Opt));
        assert!(opt.hits > clock.hits, "{opt:?} vs {clock:?}");
        assert_eq!(r.gap_closed(&clock, false), Some(0.0));
        assert_eq!(r.gap_closed(&opt, false), Some(1.0));
        // One row per policy, in the order asked for.
        let order: Vec<Policy> = r.rows.iter().map(|x| x.policy).collect();
        assert_eq!(order, Policy::ALL);
    }

    // run_replay interns the trace once for all its jobs and counts hits
    // as they come; each row must still be what replaying the policy alone
    // finds, overall and on the subset.
    #[test]
    fn run_replay_rows_count_what_each_policy_replayed_alone_hits() {
        let trace = loop_trace();
        let accesses = trace.accesses_by_time();
        let refs: Vec<Ref> = accesses.iter().map(|a| Ref::from(*a)).collect();
        for pages in [1, 2, 3] {
            let r = run_replay(&trace, &Policy::ALL, &[pages], |a| a.thread == 0);
            for row in &r.rows {
                let hits = replay(row.policy, &refs, pages, &RingSizes::default());
                let sub = hits
                    .iter()
                    .zip(&accesses)
                    .filter(|&(&h, a)| h && a.thread == 0)
                    .count() as u64;
                let all = hits.iter().filter(|&&h| h).count() as u64;
                assert_eq!((row.hits, row.subset_hits), (all, sub), "{row:?}");
            }
        }
    }

    // The trace "aabcabc" in a pool of 2, worked out by hand:
    //   LRU:   a- a+ b- c-(out a) a-(out b) b-(out c) c-(out a)         1
    //   OPT:   a- a+ b- c-(out b: next b is after next a) a+
    //          b-(out a: never again) c+                                3
    //   S3-FIFO (S holds 1, M 1): a- a+(freq 1) b- ; c-: evictS moves a
    //          (freq 1) to M, then b (freq 0) to the ghost; c into S;
    //          a+ (freq 2); b-: evictS sends c to the ghost, b is in the
    //          ghost so into M; c-: evictM reinserts a (freq 2 -> 1), takes
    //          b; c from the ghost into M                               2
    //   clock: a- a+(u2) b-(buffer 1) c-: the hand lowers a 2->1, b 1->0,
    //          a 1->0, takes b's buffer; a+(u1) b-: a 1->0, c 1->0, takes
    //          a's buffer; c+                                           3
    //   HOT/COOL: a- a+(HOT|REF) b- c-: a loses REF, b (COOL) goes; a+
    //          (HOT|REF) b-: a loses REF, c goes; c-: a is demoted, b goes 2
    //   ARC: a- a+(a to T2) b-(T1) c-(T1's b to B1) a+ b-(a B1 hit: p=1;
    //          |T1| = 1 is not > p, so T2's a goes to B2; b to T2) c+    3
    #[test]
    fn hand_worked_hits_on_a_tiny_trace() {
        let t = "aabcabc";
        assert_eq!(hits(Policy::Lru, t, 2), 1);
        assert_eq!(hits(Policy::Opt, t, 2), 3);
        assert_eq!(hits(Policy::S3Fifo, t, 2), 2);
        assert_eq!(hits(Policy::Engine(Evictor::Clock), t, 2), 3);
        assert_eq!(hits(Policy::Engine(Evictor::HotCool), t, 2), 2);
        assert_eq!(hits(Policy::Arc, t, 2), 3);
    }

    // ARC in a pool of 2 on "abacbab": a- b- a+(T2) c-(T1's b to B1)
    // b-(B1 hit: p=1, T2's a to B2, b to T2) a-(B2 hit: p=0, T1's c to B1,
    // a to T2) b+.                                                     2 hits
    // LRU: a- b- a+ c-(out b) b-(out a) a-(out c) b+                   2 hits
    // and on a loop of 3 pages in 2 buffers LRU never hits, OPT hits
    // every other access after the first pass.
    #[test]
    fn hand_worked_arc_lru_and_a_loop() {
        assert_eq!(hits(Policy::Arc, "abacbab", 2), 2);
        assert_eq!(hits(Policy::Lru, "abacbab", 2), 2);
        assert_eq!(hits(Policy::Lru, "abcabcabc", 2), 0);
        // OPT on abcabcabc, 2 pages: a- b- c-(out c? no: out the furthest,
        // a is next at 3, b at 4: out b) a+ b-(out a: next a at 6, c at 5)
        // c+ a-(out: b next at 7, c at 8: out c) b+ c-                  3 hits
        assert_eq!(hits(Policy::Opt, "abcabcabc", 2), 3);
        // Everything fits: every policy misses each page once only.
        for p in Policy::ALL {
            assert_eq!(hits(p, "abcabc", 3), 3, "{p}");
        }
    }

    #[test]
    fn probation_keeps_a_twice_read_page_through_a_scan() {
        // 20 buffers (probation target 2): page a read twice, then a
        // one-pass scan of 60 pages, then a again.
        let mut s = String::from("aa");
        let scan: String = (0..60u8).map(|i| (b'b' + i) as char).collect();
        s.push_str(&scan);
        s.push('a');
        let last = |p| {
            *replay(p, &refs(&s), 20, &RingSizes::default())
                .last()
                .unwrap()
        };
        assert!(last(Policy::Engine(Evictor::Probation)));
        assert!(!last(Policy::Engine(Evictor::Clock)));
        assert!(!last(Policy::Lru));
    }

    #[test]
    fn ring_reads_reuse_their_ring_in_the_engine_replay() {
        // 64 buffers: a bulk-read ring of 8 (pages / 8). A hot page read
        // twice, then 200 ring reads of other pages: the ring recycles its
        // 8 buffers and the hot page stays (clock and HOT/COOL alike).
        let mut v = refs("aa");
        for b in 0..200u32 {
            v.push(Ref {
                tag: BufferTag::new(RelFork::main(RelId(2)), b),
                thread: 0,
                ring: Some(RingKind::BulkRead),
            });
        }
        v.extend(refs("a"));
        for e in Evictor::ALL {
            let h = replay(Policy::Engine(e), &v, 64, &RingSizes::default());
            assert!(*h.last().unwrap(), "{e}");
        }
        // LRU sees them as ordinary reads: the hot page is gone.
        assert!(
            !*replay(Policy::Lru, &v, 64, &RingSizes::default())
                .last()
                .unwrap()
        );
    }

    /// Every event of an observed replay of `s` in a pool of `pages`.
    fn observed(e: Evictor, s: &str, pages: usize) -> Vec<Vec<StepEvent>> {
        let mut pool = ReplayPool::observed(e, pages, RingSizes::default(), Vec::new());
        refs(s)
            .iter()
            .map(|r| {
                pool.access(r);
                std::mem::take(pool.observer_mut())
            })
            .collect()
    }

    fn tag(c: char) -> BufferTag {
        refs(&c.to_string())[0].tag
    }

    const V: u64 = TAG_VALID | VALID;

    fn tick(hand: u64, buffer: usize, page: Option<char>, before: u64, after: u64) -> StepEvent {
        let t = if before == after {
            Tick::Victim
        } else {
            Tick::Cool(after)
        };
        StepEvent::Tick {
            hand,
            buffer,
            tag: page.map(tag),
            before,
            after,
            tick: t,
        }
    }

    fn victim(buffer: usize, evicted: Option<char>) -> StepEvent {
        StepEvent::Victim {
            buffer,
            evicted: evicted.map(tag),
            source: VictimSource::Hand,
        }
    }

    fn load(buffer: usize, page: char, state: u64) -> StepEvent {
        StepEvent::Load {
            buffer,
            tag: tag(page),
            state,
            queued: false,
            ghost_hit: false,
        }
    }

    fn hit(buffer: usize, page: char, before: u64, after: u64) -> StepEvent {
        StepEvent::Hit {
            buffer,
            tag: tag(page),
            before,
            after,
        }
    }

    // The clock on "aabc" in 2 buffers, worked out by hand: an empty
    // buffer (state 0) is taken on the hand's first visit; a loads at u1 and
    // its hit makes u2; c's miss is a cooling pass: the hand lowers a 2->1,
    // b 1->0, a 1->0, and takes b (u0) on its fourth tick.
    #[test]
    fn observer_sees_the_clock_ticks_worked_out_by_hand() {
        let u = |n: u64| V | (n * bufmgr::desc::USAGE_ONE);
        let ev = observed(Evictor::Clock, "aabc", 2);
        assert_eq!(
            ev,
            vec![
                vec![tick(0, 0, None, 0, 0), victim(0, None), load(0, 'a', u(1))],
                vec![hit(0, 'a', u(1), u(2))],
                vec![tick(1, 1, None, 0, 0), victim(1, None), load(1, 'b', u(1))],
                vec![
                    tick(2, 0, Some('a'), u(2), u(1)),
                    tick(3, 1, Some('b'), u(1), u(0)),
                    tick(4, 0, Some('a'), u(1), u(0)),
                    tick(5, 1, Some('b'), u(0), u(0)),
                    victim(1, Some('b')),
                    load(1, 'c', u(1)),
                ],
            ]
        );
    }

    // HOT/COOL on "aabcadef" in 2 buffers, by hand: a loads COOL, its hit
    // makes it HOT+REF; c's miss clears a's REF and takes b (COOL); a's
    // second hit sets REF again; d's miss clears it again and takes c; e's
    // miss demotes a to COOL and takes d; f's miss takes a.
    #[test]
    fn observer_sees_the_hotcool_ticks_worked_out_by_hand() {
        use bufmgr::desc::{HOT, REFBIT};
        let hr = V | HOT | REFBIT;
        let ev = observed(Evictor::HotCool, "aabcadef", 2);
        assert_eq!(
            ev,
            vec![
                vec![tick(0, 0, None, 0, 0), victim(0, None), load(0, 'a', V)],
                vec![hit(0, 'a', V, hr)],
                vec![tick(1, 1, None, 0, 0), victim(1, None), load(1, 'b', V)],
                vec![
                    tick(2, 0, Some('a'), hr, V | HOT),
                    tick(3, 1, Some('b'), V, V),
                    victim(1, Some('b')),
                    load(1, 'c', V),
                ],
                vec![hit(0, 'a', V | HOT, hr)],
                vec![
                    tick(4, 0, Some('a'), hr, V | HOT),
                    tick(5, 1, Some('c'), V, V),
                    victim(1, Some('c')),
                    load(1, 'd', V),
                ],
                vec![
                    tick(6, 0, Some('a'), V | HOT, V),
                    tick(7, 1, Some('d'), V, V),
                    victim(1, Some('d')),
                    load(1, 'e', V),
                ],
                vec![
                    tick(8, 0, Some('a'), V, V),
                    victim(0, Some('a')),
                    load(0, 'f', V)
                ],
            ]
        );
    }

    // Probation in 10 buffers (target 1): a..j fill the pool, each taking
    // an empty buffer on the hand's first lap and joining the queue; a is
    // read again (HOT+REF, still queued). k's miss comes after a whole lap
    // (hand = 10), so it pops the queue: a, referenced, is promoted to main
    // (region bit and REF cleared, not requeued), then b, read once, is
    // taken. The hand does not move.
    #[test]
    fn observer_sees_probation_pops_promote_and_take() {
        let ev = observed(Evictor::Probation, "abcdefghijak", 10);
        assert!(ev[0].contains(&StepEvent::Load {
            buffer: 0,
            tag: tag('a'),
            state: V | PROBATION,
            queued: true,
            ghost_hit: false,
        }));
        let last = ev.last().unwrap();
        let pops: Vec<_> = last
            .iter()
            .filter_map(|e| match *e {
                StepEvent::Pop {
                    tag,
                    tick,
                    forced: false,
                    ..
                } => Some((tag, tick)),
                _ => None,
            })
            .collect();
        // a (referenced) is promoted, then b (read once) is taken.
        assert_eq!(pops.len(), 2, "{last:?}");
        assert!(!last.iter().any(|e| matches!(e, StepEvent::Tick { .. })));
        assert_eq!(pops[0].0, Some(tag('a')));
        assert!(matches!(pops[0].1, Tick::Cool(s) if s & PROBATION == 0));
        assert_eq!(pops[1], (Some(tag('b')), Tick::Victim));
        assert!(last.contains(&StepEvent::Victim {
            buffer: 1,
            evicted: Some(tag('b')),
            source: VictimSource::Queue,
        }));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn opt_is_never_beaten(
            seq in proptest::collection::vec((0u32..40, any::<bool>()), 1..600),
            pages in 1usize..24,
        ) {
            let v: Vec<Ref> = seq.iter().map(|&(b, ring)| Ref {
                tag: BufferTag::new(RelFork::main(RelId(1)), b),
                thread: 0,
                ring: ring.then_some(RingKind::BulkRead),
            }).collect();
            let count = |p| replay(p, &v, pages, &RingSizes::default())
                .iter().filter(|&&h| h).count();
            for e in Evictor::ALL {
                // The observed pool makes the plain pool's decisions, and
                // its events account for every miss.
                let mut pool = ReplayPool::observed(e, pages, RingSizes::default(), Vec::new());
                let hits: Vec<bool> = v.iter().map(|r| pool.access(r)).collect();
                prop_assert_eq!(&hits, &replay(Policy::Engine(e), &v, pages, &RingSizes::default()));
                let loads = pool.observer_mut().iter()
                    .filter(|e| matches!(e, StepEvent::Load { .. })).count();
                prop_assert_eq!(loads, hits.iter().filter(|&&h| !h).count());
            }
            let best = count(Policy::Opt);
            for p in Policy::ALL {
                prop_assert!(count(p) <= best, "{} beat OPT", p);
            }
        }
    }
}

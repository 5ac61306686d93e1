//! The three replacement policies, as rules over one sweep.
//!
//! An evictor decides only what a pin does to a buffer's usage bits, what one
//! tick of the clock hand does to them, and (the probation policy only) what
//! taking a buffer off the head of its partition's probation queue does. The
//! sweep loop, the hand, the queue, pinning and invalidation are shared
//! ([`super::sweep`], [`super::probation`], [`crate::pool`]).
//!
//! ```text
//! clock (PostgreSQL, G-CLOCK with a 0..5 count)
//!   admit:      usage = 1
//!   pin:        usage = min(usage + 1, 5)       ring pin: 0 -> 1 only
//!   tick:       pinned -> skip; usage > 0 -> usage - 1; usage 0 -> victim
//!
//! HOT/COOL (cf/7000 v8, LeanStore / 2Q-A1)
//!   admit:      COOL
//!   pin:        HOT | REF                        ring pin: no change
//!   tick:       pinned -> skip
//!               HOT+REF -> HOT        (clear the reference bit)
//!               HOT     -> COOL       (demote; not claimed on this tick)
//!               COOL    -> victim
//!
//! probation (S3-FIFO-shaped: a probation FIFO, a main clock, a ghost set)
//!   admit:      tag hash in the ghost set -> main, COOL
//!               otherwise                 -> probation (PB), COOL, queued
//!   pin:        HOT | REF (as HOT/COOL)      ring pin: no change
//!   pop:        (head of the probation queue, while it holds >= 1/10 of
//!               the partition)
//!               pinned, not referenced -> back to the tail
//!               HOT or REF             -> promote: clear PB and REF (the
//!                                         pop is the page's first tick)
//!               COOL                   -> victim, its tag hash to the ghost set
//!   tick:       (the main region: the clock hand)
//!               PB -> skip (it belongs to the queue)
//!               otherwise the HOT/COOL tick
//! ```
//!
//! So with the clock and HOT/COOL a page touched once is evicted the next time
//! the hand reaches it, and the hand reaches it only after a whole lap of
//! the partition: a fast scan turns the hand fast, and each lap cools the hot
//! set once. With probation a page touched once lives only as long as it takes
//! the queue to turn over, and the main region's hand does not move at all
//! while the queue supplies the victims: a scan, however fast, churns the
//! queue and never cools the main region. The queue holds every page that has
//! not earned main (so it is more than a tenth while main holds less than
//! nine tenths: only promotions and ghost hits move buffers to main), and it
//! is popped down to a tenth of the partition, below which main gives up
//! victims too. A
//! page that comes back soon after being evicted from the queue is found in
//! the ghost set and goes straight to main. The clock needs up to six passes
//! to free a page at usage 5, which is what makes its ticks per victim climb
//! under a skewed load (bench/SCENARIOS.md, `ticks`).
//!
//! Ring pins (bulk read, bulk write, vacuum) never raise a page above the first
//! step: for the clock usage goes 0 -> 1 only; for HOT/COOL and probation a
//! ring pin never makes a page HOT (so a ring page in probation is never
//! promoted by its ring's pins). A ring slot may be reused only if the page is
//! still at that first step ([`Evictor::ring_reusable`]).

use crate::desc::{
    BufferState, HOT, MAX_USAGE_COUNT, PROBATION, REFBIT, USAGE_MASK, USAGE_ONE, refcount, usage,
};

/// Which replacement policy a pool runs.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Hash)]
pub enum Evictor {
    /// PostgreSQL's clock sweep with a usage count of 0..=5.
    Clock,
    /// The 1-bit HOT/COOL cooling evictor with a reference bit.
    HotCool,
    /// S3-FIFO-shaped: new pages enter a small per-partition probation FIFO,
    /// a page referenced again while there is promoted to the main region,
    /// which is swept with the HOT/COOL rules; pages evicted from probation
    /// leave their tag hash in a ghost set, and a miss found there is
    /// admitted straight to main. Scan resistance without rings.
    Probation,
}

/// What a tick of the hand (or a pop of the probation queue) decided about
/// one buffer.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Tick {
    /// Pinned: no progress; counts toward "no unpinned buffers".
    Pinned,
    /// Not this sweep's to judge (probation: a queued buffer under the main
    /// hand): no progress, no change.
    Skip,
    /// Usage lowered (clock), reference bit cleared / demoted (HOT/COOL), or
    /// promoted to main (probation pop): the new state to CAS in.
    Cool(u64),
    /// Unpinned and at the bottom step: take it (CAS in a pin, clearing
    /// [`PROBATION`]).
    Victim,
}

/// The probation region is a tenth of its partition
/// ([`Evictor::probation_target`]): the queue is popped for victims while it
/// holds at least `len / PROBATION_DIVISOR` buffers. S3-FIFO's figure; a
/// smaller queue gives a page less time to be referenced a second time, a
/// larger one gives a scan more of the pool.
pub const PROBATION_DIVISOR: u32 = 10;

impl Evictor {
    /// All three, in the order reports list them.
    pub const ALL: [Evictor; 3] = [Evictor::Clock, Evictor::HotCool, Evictor::Probation];

    /// Usage bits a newly loaded page starts with (probation: the region bit
    /// [`PROBATION`] is added by the miss path unless the ghost set says main).
    #[inline]
    pub const fn admit_bits(self) -> u64 {
        match self {
            Evictor::Clock => USAGE_ONE,
            Evictor::HotCool | Evictor::Probation => 0,
        }
    }

    /// Does this policy keep a probation queue and a ghost set?
    #[inline]
    pub const fn has_probation(self) -> bool {
        matches!(self, Evictor::Probation)
    }

    /// The probation region's size in a partition of `len` buffers: the queue
    /// is popped for victims while it holds at least this many.
    pub const fn probation_target(len: u32) -> u32 {
        let t = len / PROBATION_DIVISOR;
        if t == 0 { 1 } else { t }
    }

    /// The state after a pin: refcount + 1, usage raised by this policy's rule.
    #[inline]
    pub fn on_pin(self, state: u64, ring: bool) -> u64 {
        let pinned = state + 1;
        let u = usage(state);
        let new_usage = match (self, ring) {
            (Evictor::Clock, false) => (u + 1).min(MAX_USAGE_COUNT),
            (Evictor::Clock, true) => u.max(1),
            (Evictor::HotCool | Evictor::Probation, false) => {
                (HOT | REFBIT) >> crate::desc::USAGE_SHIFT
            }
            (Evictor::HotCool | Evictor::Probation, true) => u,
        };
        (pinned & !USAGE_MASK) | (new_usage << crate::desc::USAGE_SHIFT)
    }

    /// What one tick of the (main) hand does to a buffer in `state`.
    #[inline]
    pub fn on_tick(self, state: u64) -> Tick {
        if refcount(state) != 0 {
            return Tick::Pinned;
        }
        match self {
            Evictor::Clock => {
                if state & USAGE_MASK != 0 {
                    Tick::Cool(state - USAGE_ONE)
                } else {
                    Tick::Victim
                }
            }
            Evictor::HotCool => hotcool_tick(state),
            Evictor::Probation => {
                if state & PROBATION != 0 {
                    Tick::Skip
                } else {
                    hotcool_tick(state)
                }
            }
        }
    }

    /// What taking a buffer in `state` off the head of the probation queue
    /// does (probation only). `forced`: the main region of the partition
    /// was found all pinned, so a referenced page is taken rather than
    /// promoted (the alternative is "no unpinned buffers").
    #[inline]
    pub fn on_pop(self, state: u64, forced: bool) -> Tick {
        debug_assert!(self.has_probation());
        let referenced = state & (HOT | REFBIT) != 0;
        if referenced && !forced {
            // The pop is this page's first tick: it clears the reference
            // bit as the hand's tick would, so a page read twice takes three
            // visits in all (pop, demote, take) as under HOT/COOL.
            Tick::Cool(state & !(PROBATION | REFBIT))
        } else if refcount(state) != 0 {
            Tick::Pinned
        } else {
            Tick::Victim
        }
    }

    /// Would the next tick (or pop) take a buffer in `state`: unpinned and
    /// at the bottom step? The background writer's `skip_recently_used`
    /// test (`SyncOneBuffer`): it writes such buffers ahead of the sweep.
    #[inline]
    pub fn reusable(self, state: u64) -> bool {
        refcount(state) == 0 && state & USAGE_MASK == 0
    }

    /// May a ring reuse its slot holding a buffer in `state`? Only if unpinned
    /// and nobody outside the ring has touched it since (clock: usage <= 1,
    /// HOT/COOL and probation: still COOL).
    #[inline]
    pub fn ring_reusable(self, state: u64) -> bool {
        refcount(state) == 0
            && match self {
                Evictor::Clock => usage(state) <= 1,
                Evictor::HotCool | Evictor::Probation => state & HOT == 0,
            }
    }

    /// The usage level a person would read in a buffercache row: the count for
    /// the clock, 1 for HOT and 0 for COOL (the reference bit is not shown,
    /// as in the cf/7000 patch's pg_buffercache; probation membership is a
    /// column of its own).
    #[inline]
    pub fn usage_level(self, state: u64) -> u8 {
        match self {
            Evictor::Clock => usage(state) as u8,
            Evictor::HotCool | Evictor::Probation => u8::from(state & HOT != 0),
        }
    }

    /// The highest [`usage_level`](Self::usage_level).
    pub const fn max_level(self) -> u8 {
        match self {
            Evictor::Clock => MAX_USAGE_COUNT as u8,
            Evictor::HotCool | Evictor::Probation => 1,
        }
    }

    /// The policy's name as the command line and reports spell it.
    pub const fn name(self) -> &'static str {
        match self {
            Evictor::Clock => "clock",
            Evictor::HotCool => "hotcool",
            Evictor::Probation => "probation",
        }
    }
}

/// The HOT/COOL tick of an unpinned buffer.
#[inline]
fn hotcool_tick(state: u64) -> Tick {
    if state & REFBIT != 0 {
        Tick::Cool(state & !REFBIT)
    } else if state & HOT != 0 {
        Tick::Cool(state & !USAGE_MASK)
    } else {
        Tick::Victim
    }
}

impl std::str::FromStr for Evictor {
    type Err = String;
    fn from_str(s: &str) -> Result<Evictor, String> {
        match s {
            "clock" => Ok(Evictor::Clock),
            "hotcool" | "hot-cool" | "cooling" => Ok(Evictor::HotCool),
            "probation" | "s3fifo" | "s3-fifo" => Ok(Evictor::Probation),
            other => Err(format!(
                "unknown evictor {other:?}: expected \"clock\", \"hotcool\" or \"probation\""
            )),
        }
    }
}

impl std::fmt::Display for Evictor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl BufferState {
    /// Decode a state word under `evictor`'s meaning of the usage bits
    /// ([`Evictor::usage_level`]; the other marks by [`BufferState::decode`]).
    pub fn from_word(state: u64, evictor: Evictor) -> BufferState {
        BufferState::decode(state, evictor.usage_level(state))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desc::{DIRTY, IO_IN_PROGRESS, PROBATION, REFCOUNT_ONE, TAG_VALID, VALID};

    /// Drive one unpinned buffer through ticks until it is a victim; count them.
    fn ticks_to_victim(e: Evictor, mut state: u64) -> usize {
        for n in 1..100 {
            match e.on_tick(state) {
                Tick::Victim => return n,
                Tick::Cool(s) => state = s,
                Tick::Pinned => panic!("unpinned buffer reported pinned"),
                Tick::Skip => panic!("a main-region buffer skipped"),
            }
        }
        panic!("never became a victim")
    }

    #[test]
    fn clock_pin_adds_one_up_to_five() {
        let e = Evictor::Clock;
        let mut s = VALID | e.admit_bits();
        assert_eq!(usage(s), 1);
        for expect in [2, 3, 4, 5, 5, 5] {
            s = e.on_pin(s, false) - REFCOUNT_ONE;
            assert_eq!(usage(s), expect);
        }
        assert_eq!(s & VALID, VALID, "flags survive");
    }

    #[test]
    fn clock_ring_pin_only_raises_zero_to_one() {
        let e = Evictor::Clock;
        assert_eq!(usage(e.on_pin(0, true)), 1);
        assert_eq!(usage(e.on_pin(USAGE_ONE, true)), 1);
        assert_eq!(usage(e.on_pin(3 * USAGE_ONE, true)), 3);
        assert_eq!(refcount(e.on_pin(3 * USAGE_ONE, true)), 1);
    }

    #[test]
    fn clock_tick_lowers_then_takes() {
        let e = Evictor::Clock;
        assert_eq!(ticks_to_victim(e, 0), 1);
        assert_eq!(ticks_to_victim(e, USAGE_ONE), 2);
        assert_eq!(ticks_to_victim(e, (5 * USAGE_ONE) | DIRTY), 6);
        assert_eq!(e.on_tick(REFCOUNT_ONE), Tick::Pinned);
    }

    #[test]
    fn hotcool_admits_cool_and_pin_makes_hot_with_refbit() {
        let e = Evictor::HotCool;
        let s = VALID | e.admit_bits();
        assert_eq!(s & (HOT | REFBIT), 0, "admitted COOL");
        let pinned = e.on_pin(s, false);
        assert_eq!(pinned & (HOT | REFBIT), HOT | REFBIT);
        assert_eq!(refcount(pinned), 1);
    }

    #[test]
    fn hotcool_ring_pin_never_makes_hot() {
        let e = Evictor::HotCool;
        assert_eq!(e.on_pin(0, true) & (HOT | REFBIT), 0);
        // An already-HOT page stays as it is.
        assert_eq!(e.on_pin(HOT, true) & USAGE_MASK, HOT);
    }

    #[test]
    fn hotcool_tick_clears_ref_then_demotes_then_takes() {
        let e = Evictor::HotCool;
        let s = HOT | REFBIT | VALID;
        assert_eq!(e.on_tick(s), Tick::Cool(HOT | VALID));
        assert_eq!(e.on_tick(HOT | VALID), Tick::Cool(VALID));
        assert_eq!(e.on_tick(VALID), Tick::Victim);
        assert_eq!(ticks_to_victim(e, HOT | REFBIT), 3);
        assert_eq!(
            ticks_to_victim(e, 0),
            1,
            "a page loaded once goes in one pass"
        );
        assert_eq!(e.on_tick(HOT | REFCOUNT_ONE), Tick::Pinned);
    }

    #[test]
    fn ring_reuse_rules() {
        assert!(Evictor::Clock.ring_reusable(USAGE_ONE));
        assert!(Evictor::Clock.ring_reusable(0));
        assert!(
            !Evictor::Clock.ring_reusable(2 * USAGE_ONE),
            "touched outside the ring"
        );
        assert!(
            !Evictor::Clock.ring_reusable(USAGE_ONE | REFCOUNT_ONE),
            "pinned"
        );
        assert!(Evictor::HotCool.ring_reusable(0));
        assert!(!Evictor::HotCool.ring_reusable(HOT));
        assert!(!Evictor::HotCool.ring_reusable(REFCOUNT_ONE));
    }

    #[test]
    fn probation_main_hand_skips_queued_and_follows_hotcool_otherwise() {
        let e = Evictor::Probation;
        assert_eq!(e.admit_bits(), 0, "COOL; the miss path adds PB");
        assert_eq!(e.on_tick(PROBATION | VALID), Tick::Skip);
        assert_eq!(e.on_tick(PROBATION | HOT | REFBIT), Tick::Skip);
        assert_eq!(e.on_tick(PROBATION | REFCOUNT_ONE), Tick::Pinned);
        for s in [0, HOT, HOT | REFBIT, HOT | REFBIT | DIRTY, REFCOUNT_ONE] {
            assert_eq!(e.on_tick(s), Evictor::HotCool.on_tick(s), "state {s:#x}");
        }
        assert_eq!(ticks_to_victim(e, HOT | REFBIT), 3);
        // Pins: exactly HOT/COOL's, and the region bit survives them.
        for ring in [false, true] {
            for s in [PROBATION, PROBATION | HOT, 0] {
                assert_eq!(e.on_pin(s, ring), Evictor::HotCool.on_pin(s, ring));
            }
        }
        assert_eq!(e.on_pin(PROBATION, false) & PROBATION, PROBATION);
    }

    #[test]
    fn probation_pop_promotes_referenced_requeues_pinned_takes_cool() {
        let e = Evictor::Probation;
        let q = PROBATION | VALID;
        assert_eq!(e.on_pop(q, false), Tick::Victim, "loaded once");
        assert_eq!(e.on_pop(q | REFCOUNT_ONE, false), Tick::Pinned);
        // Referenced again (a second pin): to main, HOT, the pop having
        // cleared the reference bit as a tick does; even while pinned.
        let hot = e.on_pin(q, false) - REFCOUNT_ONE;
        assert_eq!(e.on_pop(hot, false), Tick::Cool(VALID | HOT));
        assert_eq!(
            e.on_pop(hot + REFCOUNT_ONE, false),
            Tick::Cool(VALID | HOT | REFCOUNT_ONE)
        );
        // So a page read twice takes three visits, as under HOT/COOL.
        let Tick::Cool(promoted) = e.on_pop(hot, false) else {
            unreachable!()
        };
        assert_eq!(ticks_to_victim(e, promoted), 2);
        assert_eq!(ticks_to_victim(Evictor::HotCool, hot), 3);
        // A ring pin does not count as a reference.
        let ringed = e.on_pin(q, true) - REFCOUNT_ONE;
        assert_eq!(e.on_pop(ringed, false), Tick::Victim);
        // Forced (main all pinned): referenced pages are taken too.
        assert_eq!(e.on_pop(hot, true), Tick::Victim);
        assert_eq!(e.on_pop(hot + REFCOUNT_ONE, true), Tick::Pinned);
    }

    #[test]
    fn reusable_means_the_next_visit_takes_it() {
        for e in Evictor::ALL {
            for s in [0, USAGE_ONE, HOT, HOT | REFBIT, REFCOUNT_ONE, DIRTY, VALID] {
                let next = e.on_tick(s);
                assert_eq!(e.reusable(s), next == Tick::Victim, "{e} {s:#x}");
            }
        }
        assert!(Evictor::Probation.reusable(PROBATION | DIRTY));
        assert_eq!(
            Evictor::Probation.on_pop(PROBATION | DIRTY, false),
            Tick::Victim
        );
    }

    #[test]
    fn probation_target_is_a_tenth_at_least_one() {
        assert_eq!(Evictor::probation_target(1000), 100);
        assert_eq!(Evictor::probation_target(15), 1);
        assert_eq!(Evictor::probation_target(1), 1);
    }

    #[test]
    fn parses_names() {
        assert_eq!("clock".parse::<Evictor>().unwrap(), Evictor::Clock);
        assert_eq!("hotcool".parse::<Evictor>().unwrap(), Evictor::HotCool);
        assert_eq!("probation".parse::<Evictor>().unwrap(), Evictor::Probation);
        for e in Evictor::ALL {
            assert_eq!(e.name().parse::<Evictor>().unwrap(), e);
        }
        let err = "lru".parse::<Evictor>().unwrap_err();
        assert!(err.contains("lru"));
    }

    #[test]
    fn a_state_word_decodes_into_its_marks() {
        let w = VALID | TAG_VALID | DIRTY | IO_IN_PROGRESS | 2 | (3 << crate::desc::USAGE_SHIFT);
        let b = BufferState::from_word(w, Evictor::Clock);
        assert_eq!(
            b,
            BufferState {
                valid: true,
                usage: 3,
                dirty: true,
                pins: 2,
                io_in_progress: true,
                probation: false
            }
        );
        let hot = BufferState::from_word(VALID | TAG_VALID | crate::desc::HOT, Evictor::HotCool);
        assert_eq!((hot.usage, hot.dirty, hot.pins), (1, false, 0));
        let p = BufferState::from_word(VALID | TAG_VALID | PROBATION, Evictor::Probation);
        assert!(p.probation && p.usage == 0);
        assert!(!BufferState::from_word(VALID, Evictor::Clock).valid);
    }
}

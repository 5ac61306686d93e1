//! The two replacement policies, as pairs of rules.
//!
//! An evictor decides only two things: what a pin does to a buffer's usage
//! bits, and what one tick of the clock hand does to them. The sweep loop, the
//! hand, pinning and invalidation are shared ([`crate::sweep`], [`crate::pool`]).
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
//! ```
//!
//! So a page touched once is evicted the next time the hand reaches it; a page
//! touched again survives two more visits. The clock needs up to six passes to
//! free a page at usage 5, which is what makes its ticks per victim climb under
//! a skewed load (seed 000).
//!
//! Ring pins (bulk read, bulk write, vacuum) never raise a page above the first
//! step: for the clock usage goes 0 -> 1 only; for HOT/COOL a ring pin never
//! makes a page HOT. A ring slot may be reused only if the page is still at
//! that first step ([`Evictor::ring_reusable`]).

use crate::desc::{HOT, MAX_USAGE_COUNT, REFBIT, USAGE_MASK, USAGE_ONE, refcount, usage};

/// Which replacement policy a pool runs.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Hash)]
pub enum Evictor {
    /// PostgreSQL's clock sweep with a usage count of 0..=5.
    Clock,
    /// The 1-bit HOT/COOL cooling evictor with a reference bit.
    HotCool,
}

/// What a tick of the hand decided about one buffer.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Tick {
    /// Pinned: no progress; counts toward "no unpinned buffers".
    Pinned,
    /// Usage lowered (clock) or reference bit cleared / demoted (HOT/COOL): the
    /// new state to CAS in.
    Cool(u64),
    /// Unpinned and at the bottom step: take it (CAS in a pin).
    Victim,
}

impl Evictor {
    /// Usage bits a newly loaded page starts with.
    #[inline]
    pub const fn admit_bits(self) -> u64 {
        match self {
            Evictor::Clock => USAGE_ONE,
            Evictor::HotCool => 0,
        }
    }

    /// The state after a pin: refcount + 1, usage raised by this policy's rule.
    #[inline]
    pub fn on_pin(self, state: u64, ring: bool) -> u64 {
        let pinned = state + 1;
        let u = usage(state);
        let new_usage = match (self, ring) {
            (Evictor::Clock, false) => (u + 1).min(MAX_USAGE_COUNT),
            (Evictor::Clock, true) => u.max(1),
            (Evictor::HotCool, false) => (HOT | REFBIT) >> crate::desc::USAGE_SHIFT,
            (Evictor::HotCool, true) => u,
        };
        (pinned & !USAGE_MASK) | (new_usage << crate::desc::USAGE_SHIFT)
    }

    /// What one tick of the hand does to a buffer in `state`.
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
            Evictor::HotCool => {
                if state & REFBIT != 0 {
                    Tick::Cool(state & !REFBIT)
                } else if state & HOT != 0 {
                    Tick::Cool(state & !USAGE_MASK)
                } else {
                    Tick::Victim
                }
            }
        }
    }

    /// May a ring reuse its slot holding a buffer in `state`? Only if unpinned
    /// and nobody outside the ring has touched it since (clock: usage <= 1,
    /// HOT/COOL: still COOL).
    #[inline]
    pub fn ring_reusable(self, state: u64) -> bool {
        refcount(state) == 0
            && match self {
                Evictor::Clock => usage(state) <= 1,
                Evictor::HotCool => state & HOT == 0,
            }
    }

    /// The usage level a person would read in a buffercache row: the count for
    /// the clock, 1 for HOT and 0 for COOL (the reference bit is not shown,
    /// as in the cf/7000 patch's pg_buffercache).
    #[inline]
    pub fn usage_level(self, state: u64) -> u8 {
        match self {
            Evictor::Clock => usage(state) as u8,
            Evictor::HotCool => u8::from(state & HOT != 0),
        }
    }

    /// The highest [`usage_level`](Self::usage_level).
    pub const fn max_level(self) -> u8 {
        match self {
            Evictor::Clock => MAX_USAGE_COUNT as u8,
            Evictor::HotCool => 1,
        }
    }

    /// The policy's name as the command line and reports spell it.
    pub const fn name(self) -> &'static str {
        match self {
            Evictor::Clock => "clock",
            Evictor::HotCool => "hotcool",
        }
    }
}

impl std::str::FromStr for Evictor {
    type Err = String;
    fn from_str(s: &str) -> Result<Evictor, String> {
        match s {
            "clock" => Ok(Evictor::Clock),
            "hotcool" | "hot-cool" | "cooling" => Ok(Evictor::HotCool),
            other => Err(format!(
                "unknown evictor {other:?}: expected \"clock\" or \"hotcool\""
            )),
        }
    }
}

impl std::fmt::Display for Evictor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desc::{DIRTY, REFCOUNT_ONE, VALID};

    /// Drive one unpinned buffer through ticks until it is a victim; count them.
    fn ticks_to_victim(e: Evictor, mut state: u64) -> usize {
        for n in 1..100 {
            match e.on_tick(state) {
                Tick::Victim => return n,
                Tick::Cool(s) => state = s,
                Tick::Pinned => panic!("unpinned buffer reported pinned"),
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
    fn parses_names() {
        assert_eq!("clock".parse::<Evictor>().unwrap(), Evictor::Clock);
        assert_eq!("hotcool".parse::<Evictor>().unwrap(), Evictor::HotCool);
        let err = "lru".parse::<Evictor>().unwrap_err();
        assert!(err.contains("lru"));
    }
}

//! Victim selection (`GetVictimBuffer`): the ring, the clock sweep, and
//! forgetting the victim's old identity. Steps 2-4 of a miss (see `read`).

use super::PoolShared;
use super::write::Writer;
use std::sync::atomic::Ordering;

use parking_lot::lock_api::RawRwLockUpgrade as _;

use super::local::Local;
use crate::desc::*;
use crate::error::{Error, Result};
use crate::replacement::evictor::Tick;
use crate::replacement::ring::Ring;
use crate::stats::bump;
use crate::table::{HashedTag, PartitionWrite};

impl PoolShared {
    /// `GetVictimBuffer`: a buffer pinned by us alone, clean, with no tag.
    pub(super) fn get_victim(
        &self,
        local: &mut Local,
        mut ring: Option<&mut Ring>,
    ) -> Result<BufferId> {
        loop {
            let from_ring = match ring.as_deref_mut() {
                Some(r) => self.ring_next(r),
                None => None,
            };
            // `from_probation`: off the probation queue's head (its old tag
            // then goes to the ghost set).
            let (id, from_ring, from_probation) = match from_ring {
                Some(id) => (id, true, false),
                None => {
                    let (id, from_probation) = self.clock_sweep(local)?;
                    if let Some(r) = ring.as_deref_mut() {
                        r.set_current(id);
                    }
                    (id, false, from_probation)
                }
            };
            let d = self.desc(id);
            let part = self.desc(id).partition();
            let s = d.load();
            if s & TAG_VALID != 0
                && let Some(old) = d.tag()
            {
                // Step 4's first lines, loaded together (`BufTable::touch`).
                self.table.touch(&HashedTag::new(old));
            }
            if s & DIRTY != 0 {
                let Some(mark) = d.content.try_lock_upgradable() else {
                    d.unpin();
                    continue;
                };
                let needs_wal = s & PERMANENT != 0 && self.wal.needs_flush(self.arena.lsn(id));
                if from_ring
                    && let Some(r) = ring.as_deref_mut()
                    && r.reject(id, needs_wal)
                {
                    // SAFETY: we took the upgradable lock just above.
                    unsafe { d.content.unlock_upgradable(mark) };
                    d.unpin();
                    bump(&local.stats.parts[part].ring_rejects, 1);
                    continue;
                }
                let writer = if from_ring {
                    Writer::Ring
                } else {
                    Writer::Backend
                };
                let r = self.flush_buffer(id, writer, Some(local));
                // SAFETY: as above.
                unsafe { d.content.unlock_upgradable(mark) };
                if let Err(e) = r {
                    d.unpin();
                    return Err(e);
                }
            }
            // The evicted page's tag, for its relation's count (and the trace).
            let old_tag = if s & VALID != 0 { d.tag() } else { None };
            if s & TAG_VALID != 0 && !self.invalidate_victim(id, from_probation) {
                d.unpin();
                continue;
            }
            let c = &local.stats.parts[part];
            if from_ring {
                bump(&c.ring_reuses, 1);
            }
            if s & VALID != 0 {
                bump(&c.evictions, 1);
                if let Some(old) = old_tag {
                    bump(&local.stats.rels.get(old.rel).evictions, 1);
                }
                if let (Some(t), Some(old)) = (local.trace.as_mut(), old_tag) {
                    let ring_kind = ring.as_deref().filter(|_| from_ring).map(Ring::kind);
                    let ticks = if from_ring { 0 } else { local.last_sweep_ticks };
                    t.evict(old, id, ticks, ring_kind);
                }
            }
            return Ok(id);
        }
    }

    /// `GetBufferFromRing`: the current slot's buffer pinned, if reusable.
    pub(super) fn ring_next(&self, ring: &mut Ring) -> Option<BufferId> {
        let id = ring.advance()?;
        let d = self.desc(id);
        let mut s = d.load();
        loop {
            if !self.evictor.ring_reusable(s) {
                return None;
            }
            if s & LOCKED != 0 {
                s = d.wait_header_unlocked();
                continue;
            }
            match d.state.compare_exchange_weak(
                s,
                s + REFCOUNT_ONE,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(id),
                Err(a) => s = a,
            }
        }
    }

    /// The victim search (`StrategyGetBuffer`), one sweep for all three
    /// evictors. Per partition, starting at the chosen one:
    /// 1. probation only, once the hand has made a whole pass (until then
    ///    it is taking never-used buffers): take buffers off the head of the
    ///    partition's probation queue while it holds at least its target,
    ///    each judged by [`Evictor::on_pop`], each queued buffer at most once;
    /// 2. tick the partition's hand, each buffer judged by
    ///    [`Evictor::on_tick`], until a victim; after a partition's worth of
    ///    consecutive pinned (or skipped) buffers give up on the hand;
    /// 3. probation only: then take any unpinned buffer off the queue
    ///    (`forced`), as the main region is all pinned;
    /// 4. move to the next partition; fail only when every partition has
    ///    been tried (rule 8).
    ///
    /// Returns the victim, pinned by us, and whether it came off the
    /// probation queue (its old tag then goes to the ghost set).
    pub(super) fn clock_sweep(&self, local: &mut Local) -> Result<(BufferId, bool)> {
        if self.bgwriter_sleeping.load(Ordering::Relaxed) {
            super::bgwriter::wake(self);
        }
        let nparts = self.parts.len();
        local.recheck_home(self);
        let first = self.parts.choose(local.home, &mut local.budget);
        let batch = self.batch_size();
        let probation = self.evictor.has_probation();
        let mut ticks = 0u64;
        for k in 0..nparts {
            let p = (first + k) % nparts;
            let hand = &self.hands[p];
            let mut part_ticks = 0u64;
            let mut found = None;
            if probation && self.probation[p].filled(|| hand.position().0) {
                found = self.probation_pop(p, false, &mut part_ticks);
            }
            if found.is_none() {
                let cursor = &mut local.cursors[p];
                let mut try_counter = hand.len();
                while try_counter > 0 {
                    let id = hand.buffer_at(cursor.next_tick(hand, batch));
                    part_ticks += 1;
                    match self.visit(id, |s| self.evictor.on_tick(s)) {
                        Visit::Taken => {
                            found = Some((id, false));
                            break;
                        }
                        Visit::Changed => try_counter = hand.len(),
                        Visit::NoProgress => try_counter -= 1,
                    }
                }
            }
            if found.is_none() && probation {
                found = self.probation_pop(p, true, &mut part_ticks);
            }
            ticks += part_ticks;
            let c = &local.stats.parts[p];
            bump(&c.sweep_ticks, part_ticks);
            if let Some((victim, _)) = found {
                // The buffer after the victim is the next tick's (this
                // thread's, or the next claimer's): load its state word now,
                // so the next search does not wait for it alone.
                let next = hand.first() + (victim - hand.first() + 1) % hand.len();
                std::hint::black_box(self.desc(next).load());
            }
            if let Some(victim) = found {
                hand.count_alloc();
                bump(&c.victims, 1);
                local.stats.record_victim(ticks);
                local.last_sweep_ticks = ticks;
                return Ok(victim);
            }
        }
        Err(Error::NoUnpinnedBuffers {
            pool_size: self.descs.len(),
        })
    }

    /// The victim-candidate step shared by the hand and the probation queue:
    /// look at buffer `id`'s state (waiting out a header lock), ask `rule`,
    /// and CAS in what it decided: a lowered state, or our pin (clearing
    /// [`PROBATION`]) for a victim. Retries while the state moves under us.
    #[inline]
    fn visit(&self, id: BufferId, rule: impl Fn(u64) -> Tick) -> Visit {
        let d = self.desc(id);
        let mut s = d.load();
        loop {
            if s & LOCKED != 0 {
                s = d.wait_header_unlocked();
                continue;
            }
            let (new, ordering, visit) = match rule(s) {
                Tick::Pinned | Tick::Skip => return Visit::NoProgress,
                Tick::Cool(new) => (new, Ordering::Relaxed, Visit::Changed),
                Tick::Victim => (
                    (s & !PROBATION) + REFCOUNT_ONE,
                    Ordering::Acquire,
                    Visit::Taken,
                ),
            };
            match d
                .state
                .compare_exchange_weak(s, new, ordering, Ordering::Relaxed)
            {
                Ok(_) => return visit,
                Err(a) => s = a,
            }
        }
    }

    /// Take buffers off the head of partition `p`'s probation queue (while it
    /// holds its target, or with `forced` while it holds any) until one is a
    /// victim: a referenced one is promoted to main (not `forced`), a pinned
    /// one goes back to the tail. At most as many pops as the queue held
    /// when we began, so no buffer is looked at twice in one search; each
    /// pop counts as a tick. A promotion is paid for once per admission, so
    /// the mean stays near one pop per victim.
    fn probation_pop(&self, p: usize, forced: bool, ticks: &mut u64) -> Option<(BufferId, bool)> {
        let q = &self.probation[p];
        // Pops left: set from what the queue held at the first pop.
        let mut left = None;
        loop {
            let (id, held) = q.pop(forced)?;
            let left = left.get_or_insert(held);
            *ticks += 1;
            match self.visit(id, |s| self.evictor.on_pop(s, forced)) {
                Visit::Taken => return Some((id, true)),
                Visit::Changed => {} // promoted: the main hand's now
                Visit::NoProgress => q.push(id),
            }
            *left -= 1;
            if *left == 0 {
                return None;
            }
        }
    }

    /// Put a newly tagged buffer we hold the one pin of in the region the
    /// evictor chooses, under the mapping lock of its new tag `ht` (held
    /// exclusive as `map`; `state` is its header-locked state). Returns the
    /// usage and region bits to set as its header is unlocked; then call
    /// [`admitted`](Self::admitted) with them.
    #[inline]
    pub(super) fn admit(&self, map: &mut PartitionWrite<'_>, ht: &HashedTag, state: u64) -> u64 {
        let bits = self.evictor.admit_bits();
        if !self.evictor.has_probation() || state & PROBATION != 0 {
            // Not probation, or still queued (a ring reused a queued buffer):
            // it stays where it is.
            return bits;
        }
        if map.ghost_take(ht) {
            bits
        } else {
            bits | PROBATION
        }
    }

    /// After [`admit`](Self::admit) and the header unlock: queue the buffer
    /// if it newly entered probation (rule 1 of [`crate::replacement::probation`]).
    #[inline]
    pub(super) fn admitted(&self, id: BufferId, state_before: u64, bits: u64) {
        if bits & PROBATION != 0 && state_before & PROBATION == 0 {
            let d = self.desc(id);
            self.probation[d.partition()].push(id);
        }
    }

    /// `InvalidateVictimBuffer`: forget the identity of a buffer we alone have
    /// pinned. False if someone else pinned or dirtied it meanwhile.
    /// With `ghost` (a probation victim) its old tag goes to the ghost set.
    pub(super) fn invalidate_victim(&self, id: BufferId, ghost: bool) -> bool {
        let d = self.desc(id);
        let Some(tag) = d.tag() else {
            return true;
        };
        let ht = HashedTag::new(tag);
        let mut map = self.table.write(ht.partition());
        let s = d.lock_header();
        if refcount(s) != 1 || s & DIRTY != 0 {
            d.unlock_header(0, 0);
            return false;
        }
        d.set_tag(None);
        d.unlock_header(0, FLAG_MASK | USAGE_MASK);
        map.remove(&ht);
        if ghost && s & VALID != 0 {
            map.ghost_remember(&ht);
        }
        true
    }
}

/// What [`PoolShared::visit`] did to a buffer.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
enum Visit {
    /// Pinned, or not this sweep's: nothing changed.
    NoProgress,
    /// Usage lowered, or promoted out of probation.
    Changed,
    /// A victim: pinned by us.
    Taken,
}

//! Victim selection (`GetVictimBuffer`): the ring, the clock sweep, and
//! forgetting the victim's old identity. Steps 2-4 of a miss (see `read`).

use super::PoolShared;
use super::write::Writer;
use std::sync::atomic::Ordering;

use parking_lot::lock_api::RawRwLockUpgrade as _;

use crate::desc::*;
use crate::error::{Error, Result};
use crate::evictor::Tick;
use crate::local::Local;
use crate::ring::Ring;
use crate::stats::bump;
use crate::table::HashedTag;

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
            let (id, from_ring) = match from_ring {
                Some(id) => (id, true),
                None => {
                    let id = self.clock_sweep(local)?;
                    if let Some(r) = ring.as_deref_mut() {
                        r.set_current(id);
                    }
                    (id, false)
                }
            };
            let d = self.desc(id);
            let part = self.desc(id).partition();
            let s = d.load();
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
            if s & TAG_VALID != 0 && !self.invalidate_victim(id) {
                d.unpin();
                continue;
            }
            let c = &local.stats.parts[part];
            if from_ring {
                bump(&c.ring_reuses, 1);
            }
            if s & VALID != 0 {
                bump(&c.evictions, 1);
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

    /// The clock sweep (`StrategyGetBuffer`): tick the hand of the chosen
    /// partition until the evictor names a victim; after a partition's worth
    /// of consecutive pinned buffers move to the next partition; fail only
    /// when every partition has been tried (rule 8).
    pub(super) fn clock_sweep(&self, local: &mut Local) -> Result<BufferId> {
        if self.bgwriter_sleeping.load(Ordering::Relaxed) {
            crate::bgwriter::wake(self);
        }
        let nparts = self.parts.len();
        local.recheck_home(self);
        let first = self.parts.choose(local.home, &mut local.budget);
        let batch = self.batch_size();
        let mut ticks = 0u64;
        for k in 0..nparts {
            let p = (first + k) % nparts;
            let hand = &self.hands[p];
            let cursor = &mut local.cursors[p];
            let mut try_counter = hand.len();
            let mut part_ticks = 0u64;
            'tick: loop {
                let id = hand.buffer_at(cursor.next_tick(hand, batch));
                part_ticks += 1;
                let d = self.desc(id);
                let mut s = d.load();
                loop {
                    if s & LOCKED != 0 {
                        s = d.wait_header_unlocked();
                        continue;
                    }
                    match self.evictor.on_tick(s) {
                        Tick::Pinned => {
                            try_counter -= 1;
                            if try_counter == 0 {
                                break 'tick;
                            }
                            continue 'tick;
                        }
                        Tick::Cool(new) => {
                            match d.state.compare_exchange_weak(
                                s,
                                new,
                                Ordering::Relaxed,
                                Ordering::Relaxed,
                            ) {
                                Ok(_) => {
                                    try_counter = hand.len();
                                    continue 'tick;
                                }
                                Err(a) => s = a,
                            }
                        }
                        Tick::Victim => {
                            match d.state.compare_exchange_weak(
                                s,
                                s + REFCOUNT_ONE,
                                Ordering::Acquire,
                                Ordering::Relaxed,
                            ) {
                                Ok(_) => {
                                    hand.count_alloc();
                                    ticks += part_ticks;
                                    let c = &local.stats.parts[p];
                                    bump(&c.sweep_ticks, part_ticks);
                                    bump(&c.victims, 1);
                                    local.stats.record_victim(ticks);
                                    return Ok(id);
                                }
                                Err(a) => s = a,
                            }
                        }
                    }
                }
            }
            ticks += part_ticks;
            bump(&local.stats.parts[p].sweep_ticks, part_ticks);
        }
        Err(Error::NoUnpinnedBuffers {
            pool_size: self.descs.len(),
        })
    }

    /// `InvalidateVictimBuffer`: forget the identity of a buffer we alone have
    /// pinned. False if someone else pinned or dirtied it meanwhile.
    pub(super) fn invalidate_victim(&self, id: BufferId) -> bool {
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
        true
    }
}

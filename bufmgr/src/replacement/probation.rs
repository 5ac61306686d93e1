//! The probation evictor's two structures: the per-partition probation queue
//! and the ghost set (see [`super::evictor`] for the rules).
//!
//! ```text
//!  sweep partition p:   probation queue (FIFO of buffer ids, capacity = the
//!                       partition's buffers)
//!      head -> [ 17 | 3 | 40 | ... | 22 ] <- tail      PB set on each of them
//!                 |
//!                 +-- popped: pinned -> back to the tail; referenced -> promoted
//!                     (PB cleared, now under the main hand); else the victim
//!
//!  mapping partition m (one of 128, beside its map, under its lock):
//!      ghost set: buckets of 8 tag fingerprints, each bucket a ring
//!      bucket = (hash >> 7) % buckets, fingerprint = hash >> 32 (0 = empty)
//! ```
//!
//! # Rules
//! 1. A buffer id is in its partition's queue at most once. `PB` set means
//!    the buffer is in the queue, or was taken off its head by a thread that
//!    will put it back or clear `PB`. Only the miss path sets `PB` (on a
//!    buffer it holds the one pin of, whose `PB` was clear), and pushes the
//!    id; only a thread that popped the id clears it. So the queue never holds
//!    more ids than the partition has buffers, and a push never finds it full.
//! 2. The queue lock is a leaf: nothing else is locked or waited for while it
//!    is held (the state word is looked at after the pop, not under the lock).
//! 3. The ghost set of a mapping partition is read and written only under
//!    that partition's lock held exclusive, which the two places that use it
//!    already hold: the miss path inserting the new tag (check and forget)
//!    and the invalidation of a probation victim's old tag (remember).
//! 4. The ghost set is a hint: a fingerprint collision admits an unrelated
//!    page to main, a forgotten entry admits a returning page to probation.
//!    Either costs only a little hit ratio, never correctness.

use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use super::sweep::CachePadded;
use crate::desc::BufferId;

/// The probation queue of one sweep partition: a ring of buffer ids.
#[derive(Debug)]
pub struct ProbationQueue {
    inner: CachePadded<Mutex<Fifo>>,
    /// Pop for victims while the queue holds at least this many.
    target: u32,
    /// The partition's hand has made a whole pass: every buffer has held a
    /// page once. Until then the hand's tick takes the never-used buffers
    /// ahead of it, and the queue is not popped (a pool filling up evicts
    /// nothing, as S3-FIFO inserts without evicting while it has room).
    filled: AtomicBool,
}

#[derive(Debug)]
struct Fifo {
    ids: Box<[BufferId]>,
    head: usize,
    len: usize,
}

impl ProbationQueue {
    /// A queue for a partition of `capacity` buffers (0 for the other
    /// evictors: no memory, never used) that is popped while it holds at
    /// least `target` ids.
    pub fn new(capacity: u32, target: u32) -> ProbationQueue {
        ProbationQueue {
            inner: CachePadded(Mutex::new(Fifo {
                ids: vec![0; capacity as usize].into_boxed_slice(),
                head: 0,
                len: 0,
            })),
            target,
            filled: AtomicBool::new(false),
        }
    }

    /// Has the partition filled up (see `filled`)? `hand_passes` is the
    /// hand's completed passes, read only until the answer is yes.
    #[inline]
    pub fn filled(&self, hand_passes: impl FnOnce() -> u64) -> bool {
        if self.filled.load(Ordering::Relaxed) {
            return true;
        }
        if hand_passes() > 0 {
            self.filled.store(true, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Append `id` at the tail (rule 1: it is not in the queue).
    pub fn push(&self, id: BufferId) {
        let mut f = self.inner.lock();
        let cap = f.ids.len();
        assert!(f.len < cap, "probation queue overflow (rule 1 broken)");
        let at = (f.head + f.len) % cap;
        f.ids[at] = id;
        f.len += 1;
    }

    /// Take the head if the queue holds at least `target` ids (or, with
    /// `forced`, any). Returns it and how many ids the queue held before.
    pub fn pop(&self, forced: bool) -> Option<(BufferId, usize)> {
        let mut f = self.inner.lock();
        let held = f.len;
        if held == 0 || (!forced && held < self.target as usize) {
            return None;
        }
        let id = f.ids[f.head];
        f.head = (f.head + 1) % f.ids.len();
        f.len -= 1;
        Some((id, held))
    }

    /// Ids in the queue now.
    pub fn len(&self) -> usize {
        self.inner.lock().len
    }

    /// Is the queue empty?
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The size the queue is kept at.
    pub fn target(&self) -> u32 {
        self.target
    }
}

/// Fingerprints per ghost bucket: one 32-byte bucket, compared in one go.
pub const GHOST_WAYS: usize = 8;

/// The ghost set of one mapping partition: fingerprints of the tags of pages
/// recently evicted from probation. Fixed size, no allocation after open.
#[derive(Debug, Default)]
pub struct Ghost {
    buckets: Box<[[u32; GHOST_WAYS]]>,
    /// Next way to overwrite in each bucket (each bucket is a ring, so the
    /// oldest fingerprint of a bucket is forgotten first).
    next: Box<[u8]>,
}

impl Ghost {
    /// A ghost set of at least `entries` fingerprints (0: none, for the
    /// other evictors).
    pub fn new(entries: usize) -> Ghost {
        let n = entries.div_ceil(GHOST_WAYS);
        Ghost {
            buckets: vec![[0; GHOST_WAYS]; n].into_boxed_slice(),
            next: vec![0; n].into_boxed_slice(),
        }
    }

    #[inline]
    fn locate(&self, hash: u64) -> Option<(usize, u32)> {
        if self.buckets.is_empty() {
            return None;
        }
        let b = ((hash >> 7) % self.buckets.len() as u64) as usize;
        let fp = ((hash >> 32) as u32).max(1);
        Some((b, fp))
    }

    /// Remember the tag hash `hash` (overwriting its bucket's oldest).
    pub fn remember(&mut self, hash: u64) {
        let Some((b, fp)) = self.locate(hash) else {
            return;
        };
        if self.buckets[b].contains(&fp) {
            return;
        }
        let w = self.next[b] as usize;
        self.buckets[b][w] = fp;
        self.next[b] = ((w + 1) % GHOST_WAYS) as u8;
    }

    /// Was `hash` remembered (and not yet overwritten)? Forgets it if so: one
    /// ghost hit per eviction.
    pub fn take(&mut self, hash: u64) -> bool {
        let Some((b, fp)) = self.locate(hash) else {
            return false;
        };
        match self.buckets[b].iter().position(|&x| x == fp) {
            Some(w) => {
                self.buckets[b][w] = 0;
                true
            }
            None => false,
        }
    }

    /// Fingerprints the set can hold.
    pub fn capacity(&self) -> usize {
        self.buckets.len() * GHOST_WAYS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_is_fifo_and_pops_only_above_its_target() {
        let q = ProbationQueue::new(4, 2);
        q.push(7);
        assert_eq!(q.pop(false), None, "below the target");
        assert_eq!(q.pop(true), Some((7, 1)), "forced takes any");
        for id in [1, 2, 3, 4] {
            q.push(id);
        }
        assert_eq!(q.pop(false), Some((1, 4)));
        q.push(5); // wraps around the ring
        assert_eq!(q.pop(false), Some((2, 4)));
        assert_eq!(q.pop(false), Some((3, 3)));
        assert_eq!(
            q.pop(false),
            Some((4, 2)),
            "two left = the target: still popped"
        );
        assert_eq!(q.pop(false), None, "one left, below the target: stop");
        assert_eq!(q.len(), 1);
        assert_eq!(q.pop(true), Some((5, 1)));
        assert!(q.is_empty());
    }

    #[test]
    #[should_panic(expected = "probation queue overflow")]
    fn pushing_past_capacity_is_a_bug() {
        let q = ProbationQueue::new(1, 1);
        q.push(1);
        q.push(2);
    }

    #[test]
    fn ghost_remembers_forgets_on_take_and_forgets_oldest_first() {
        let mut g = Ghost::new(GHOST_WAYS);
        assert_eq!(g.capacity(), GHOST_WAYS);
        let h = |i: u64| (i << 32) | 5;
        g.remember(h(1));
        assert!(g.take(h(1)));
        assert!(!g.take(h(1)), "one hit per eviction");
        for i in 1..=GHOST_WAYS as u64 + 1 {
            g.remember(h(i));
        }
        assert!(!g.take(h(1)), "the oldest was overwritten");
        for i in 2..=GHOST_WAYS as u64 + 1 {
            assert!(g.take(h(i)), "fingerprint {i}");
        }
    }

    #[test]
    fn an_empty_ghost_set_never_hits() {
        let mut g = Ghost::new(0);
        g.remember(42);
        assert!(!g.take(42));
        assert_eq!(g.capacity(), 0);
    }
}

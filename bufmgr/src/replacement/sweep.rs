//! The clock hand of one partition, with batched claims.
//!
//! ```text
//!   partition buffers:  first ............................ first+n-1
//!                         0   1   2   3   4   5   6   7 ... n-1
//!   hand (u64):          ticks ever made; buffer = first + hand % n,
//!                        passes = hand / n
//!
//!   batch = 1:   fetch_add(1) per tick              (stock PostgreSQL)
//!   batch = 16:  fetch_add(16) claims ticks h..h+16 for the calling thread,
//!                which then visits them one by one without touching the
//!                shared cache line again (cf/7000 patch 0001)
//! ```
//!
//! PostgreSQL keeps a 32-bit `nextVictimBuffer` that must be wrapped back below
//! `NBuffers` by a CAS under a spinlock, and a separate `completePasses`
//! counter updated there; the batched patch adds a second path for a batch
//! that spans the wrap. Here the hand is a 64-bit count of ticks that never
//! wraps (at a billion ticks a second it would take 584 years), so the buffer
//! and the pass number are both derived from it exactly: `hand % n` and
//! `hand / n`. A batch that spans the end of the partition simply continues
//! at buffer 0 and the pass count follows. There is no wrap CAS, no spinlock
//! and no second counter to keep consistent with the first.
//!
//! A claimed batch is the thread's private stretch of the clock; a thread that
//! stops sweeping part-way abandons the rest of its batch, which only means
//! those buffers are skipped on this lap. That unfairness is the price seed
//! 000 measured against the saved cache-line traffic.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::desc::BufferId;

/// Pads a value to its own cache line (128 bytes: two lines, as PostgreSQL's
/// `PG_CACHE_LINE_SIZE`, because adjacent-line prefetch pairs them on x86).
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct CachePadded<T>(pub T);

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// The clock hand of one partition.
#[derive(Debug)]
pub struct ClockHand {
    /// Ticks ever claimed in this partition. The hot cache line.
    next: CachePadded<AtomicU64>,
    /// Victims taken from this partition since the background writer last
    /// asked (PostgreSQL's `numBufferAllocs`); ring reuses are not counted.
    allocs: CachePadded<AtomicU64>,
    first: BufferId,
    n: u32,
}

impl ClockHand {
    pub fn new(first: BufferId, n: u32) -> ClockHand {
        assert!(n > 0, "a partition needs at least one buffer");
        ClockHand {
            next: CachePadded(AtomicU64::new(0)),
            allocs: CachePadded(AtomicU64::new(0)),
            first,
            n,
        }
    }

    /// Claim `batch` consecutive ticks with one atomic; returns the first.
    #[inline]
    pub fn claim(&self, batch: u32) -> u64 {
        self.next.fetch_add(batch as u64, Ordering::Relaxed)
    }

    /// The buffer a tick lands on.
    #[inline]
    pub fn buffer_at(&self, tick: u64) -> BufferId {
        self.first + (tick % self.n as u64) as BufferId
    }

    /// Number of buffers under this hand.
    pub fn len(&self) -> u32 {
        self.n
    }

    /// Is this hand over an empty partition? (Never: `new` refuses.)
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// First buffer of the partition.
    pub fn first(&self) -> BufferId {
        self.first
    }

    /// Completed passes over the partition, and the buffer (relative to
    /// `first`) the hand will visit next: PostgreSQL's `StrategySyncStart`
    /// without the reset of the allocation count.
    pub fn position(&self) -> (u64, u32) {
        let h = self.next.load(Ordering::Relaxed);
        (h / self.n as u64, (h % self.n as u64) as u32)
    }

    /// Count one victim taken by the sweep.
    #[inline]
    pub fn count_alloc(&self) {
        self.allocs.fetch_add(1, Ordering::Relaxed);
    }

    /// Victims since the last call (read and reset), for the background writer.
    pub fn take_allocs(&self) -> u64 {
        self.allocs.swap(0, Ordering::Relaxed)
    }
}

/// A thread's claimed stretch of one hand: ticks `pos..end`.
#[derive(Copy, Clone, Debug, Default)]
pub struct BatchCursor {
    pos: u64,
    end: u64,
}

impl BatchCursor {
    /// The next tick for this thread, claiming a new batch when the current
    /// one is used up.
    #[inline]
    pub fn next_tick(&mut self, hand: &ClockHand, batch: u32) -> u64 {
        if self.pos >= self.end {
            let start = hand.claim(batch);
            self.pos = start;
            self.end = start + batch as u64;
        }
        let t = self.pos;
        self.pos += 1;
        t
    }

    /// Forget the claimed batch (the configuration changed, or the pool did).
    pub fn reset(&mut self) {
        *self = BatchCursor::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn batch_one_visits_in_order_and_counts_passes() {
        let hand = ClockHand::new(10, 4);
        let mut c = BatchCursor::default();
        let seen: Vec<_> = (0..9)
            .map(|_| hand.buffer_at(c.next_tick(&hand, 1)))
            .collect();
        assert_eq!(seen, [10, 11, 12, 13, 10, 11, 12, 13, 10]);
        assert_eq!(hand.position(), (2, 1));
    }

    #[test]
    fn a_batch_spanning_the_end_continues_at_zero_and_counts_the_pass() {
        let hand = ClockHand::new(0, 10);
        hand.claim(8); // another thread took ticks 0..8
        let mut c = BatchCursor::default();
        let seen: Vec<_> = (0..4)
            .map(|_| hand.buffer_at(c.next_tick(&hand, 4)))
            .collect();
        assert_eq!(seen, [8, 9, 0, 1]);
        // The hand itself moved by whole batches: 8 + 4 = 12 ticks = 1 pass + 2.
        assert_eq!(hand.position(), (1, 2));
    }

    #[test]
    fn concurrent_batched_claims_cover_every_tick_exactly_once() {
        let n = 37; // not a multiple of the batch, so batches straddle the wrap
        let hand = Arc::new(ClockHand::new(0, n));
        let per_thread_batches = 10_000u64;
        let batch = 16;
        let visits: Vec<Vec<u64>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    let hand = hand.clone();
                    s.spawn(move || {
                        let mut c = BatchCursor::default();
                        let mut v = vec![0u64; n as usize];
                        for _ in 0..per_thread_batches * batch as u64 {
                            v[hand.buffer_at(c.next_tick(&hand, batch)) as usize] += 1;
                        }
                        v
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let total_ticks = 4 * per_thread_batches * batch as u64;
        let mut per_buffer = vec![0u64; n as usize];
        for v in &visits {
            for (i, x) in v.iter().enumerate() {
                per_buffer[i] += x;
            }
        }
        assert_eq!(per_buffer.iter().sum::<u64>(), total_ticks);
        let (passes, pos) = hand.position();
        assert_eq!(passes, total_ticks / n as u64);
        assert_eq!(pos as u64, total_ticks % n as u64);
        // Whole claims: every buffer is visited either floor or ceil of the average.
        let lo = total_ticks / n as u64;
        assert!(per_buffer.iter().all(|&x| x == lo || x == lo + 1));
    }

    #[test]
    fn allocation_count_is_read_and_reset() {
        let hand = ClockHand::new(0, 8);
        hand.count_alloc();
        hand.count_alloc();
        assert_eq!(hand.take_allocs(), 2);
        assert_eq!(hand.take_allocs(), 0);
    }
}

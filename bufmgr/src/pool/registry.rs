//! The open-pool registry: a process-wide list of the pools opened while
//! watching was on, which the live view ([`crate::watch`]) reads.
//!
//! ```text
//!   enable_watching(true)          (once, before any pool opens)
//!        │
//!   BufferPool::with_wal ── WATCHING? ──no──> nothing (one relaxed load)
//!        │ yes
//!        └─> LIVE: [(id 3, Weak), (id 7, Weak), ...]   (a mutex, taken only
//!                                                       at open and drop)
//!   BufferPool::drop ─> removes its entry
//! ```
//!
//! The rules are [`crate::watch`]'s rules 1 to 3: with watching off a pool's
//! open costs one relaxed load; a pool is registered from the end of its open
//! to the start of its drop, and only if watching was on when it opened; the
//! registry holds [`Weak`] handles only.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::PoolShared;

/// Whether pools opened from now on register themselves (rule 1).
static WATCHING: AtomicBool = AtomicBool::new(false);

/// The live pools that registered, oldest first: (pool id, handle).
static LIVE: Mutex<Vec<(u64, Weak<PoolShared>)>> = Mutex::new(Vec::new());

/// Turn registration of newly opened pools on or off (pools already open
/// keep their state). `bench --watch` turns it on before the scenario runs.
pub fn enable_watching(on: bool) {
    WATCHING.store(on, Ordering::Relaxed);
}

/// Is registration on?
pub fn watching_enabled() -> bool {
    WATCHING.load(Ordering::Relaxed)
}

fn live() -> std::sync::MutexGuard<'static, Vec<(u64, Weak<PoolShared>)>> {
    // A panic while holding this lock cannot leave the Vec half-changed
    // (push and retain either happen or not), so a poisoned lock is usable.
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Called at the end of a pool's open: register it if watching is on.
/// Returns whether it did (the pool remembers, to unregister on drop).
pub(crate) fn register_if_watching(shared: &Arc<PoolShared>) -> bool {
    if !WATCHING.load(Ordering::Relaxed) {
        return false;
    }
    live().push((shared.id, Arc::downgrade(shared)));
    true
}

/// Called at the start of a registered pool's drop.
pub(crate) fn unregister(id: u64) {
    live().retain(|(i, _)| *i != id);
}

/// Is the pool `id` registered (opened while watching, not yet dropped)?
pub(crate) fn is_registered(id: u64) -> bool {
    live().iter().any(|(i, _)| *i == id)
}

/// The registered pools whose memory is still alive, oldest first.
pub(crate) fn registered() -> Vec<(u64, Weak<PoolShared>)> {
    live()
        .iter()
        .filter(|(_, w)| w.strong_count() > 0)
        .cloned()
        .collect()
}

//! The synchronisation primitives of the buffer descriptor, from one place,
//! so that the descriptor's state machine can be run under a model checker.
//!
//! ```text
//!                      default build            --features shuttle
//!   AtomicU32/U64,     std::sync::atomic        shuttle::sync::atomic
//!   fence
//!   Mutex, Condvar     parking_lot              shuttle::sync, behind parking_lot's API
//!   RawRwLock          parking_lot::RawRwLock   ModelRwLock (below), on shuttle atomics
//!   spin_loop          std::hint::spin_loop     shuttle::hint::spin_loop (a yield)
//!   yield_now, sleep   std::thread              shuttle::thread (a context switch)
//! ```
//!
//! In the default build every name here *is* the std or parking_lot item (a
//! `pub use`, not a wrapper), so the descriptor and the hit path compile to
//! exactly what they did before this module existed.
//!
//! With the `shuttle` feature the descriptor (`crate::desc`) is built on
//! shuttle's primitives, whose every operation is a point at which the
//! shuttle scheduler may switch threads; the model tests in
//! `crate::model_check` then run many schedules of pins, header locks, I/O
//! starts and ends, I/O waits and content locks, and replay a failing one
//! from its schedule string. Only `desc` imports from here: the rest of the
//! pool (mapping table, arena, I/O) keeps std and parking_lot, so under the
//! feature the crate compiles but only the model tests may be run.
//!
//! Shortcuts of the model build:
//! 1. Shuttle's atomics are sequentially consistent whatever `Ordering` is
//!    passed: the model explores interleavings, not weak-memory reorderings.
//!    (loom would, but it cannot model parking_lot's raw lock either.)
//! 2. [`ModelRwLock`] has parking_lot's three modes and their exclusion, but
//!    not its fairness (parking_lot stops new readers once a writer waits):
//!    the model can only show more schedules than the real lock allows.

#[cfg(not(feature = "shuttle"))]
pub(crate) use parking_lot::{Condvar, Mutex, RawRwLock};
#[cfg(not(feature = "shuttle"))]
pub(crate) use std::hint::spin_loop;
#[cfg(not(feature = "shuttle"))]
pub(crate) use std::sync::atomic::{AtomicU32, AtomicU64, fence};
#[cfg(not(feature = "shuttle"))]
pub(crate) use std::thread::{sleep, yield_now};

#[cfg(feature = "shuttle")]
pub(crate) use model::{Condvar, ModelRwLock as RawRwLock, Mutex};
#[cfg(feature = "shuttle")]
pub(crate) use shuttle::hint::spin_loop;
#[cfg(feature = "shuttle")]
pub(crate) use shuttle::sync::atomic::{AtomicU32, AtomicU64, fence};
#[cfg(feature = "shuttle")]
pub(crate) use shuttle::thread::{sleep, yield_now};

#[cfg(feature = "shuttle")]
mod model {
    use std::sync::PoisonError;
    use std::sync::atomic::Ordering;

    use parking_lot::lock_api::{RawRwLock, RawRwLockUpgrade};
    use shuttle::sync::atomic::AtomicUsize;

    /// A mutex with parking_lot's API (`lock` returns the guard; no poisoning)
    /// over shuttle's, so `desc` is written once for both builds.
    #[derive(Debug)]
    pub(crate) struct Mutex<T>(shuttle::sync::Mutex<T>);

    /// Its guard. The `Option` is `None` only inside [`Condvar::wait`].
    #[derive(Debug)]
    pub(crate) struct MutexGuard<'a, T>(Option<shuttle::sync::MutexGuard<'a, T>>);

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Mutex<T> {
            Mutex(shuttle::sync::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            // A panicking model thread fails the whole execution; poisoning
            // carries no extra information here.
            MutexGuard(Some(self.0.lock().unwrap_or_else(PoisonError::into_inner)))
        }
    }

    /// A condition variable with parking_lot's API (`wait(&mut guard)`).
    #[derive(Debug)]
    pub(crate) struct Condvar(shuttle::sync::Condvar);

    impl Condvar {
        pub(crate) fn new() -> Condvar {
            Condvar(shuttle::sync::Condvar::new())
        }

        pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
            let inner = guard.0.take().expect("a guard is only empty inside wait");
            guard.0 = Some(self.0.wait(inner).unwrap_or_else(PoisonError::into_inner));
        }

        pub(crate) fn notify_all(&self) {
            self.0.notify_all();
        }
    }

    /// The content lock of the model build: parking_lot's three modes on one
    /// shuttle atomic word, spinning with `shuttle::hint::spin_loop` (a yield
    /// to the scheduler) while the wanted mode is unavailable.
    ///
    /// ```text
    ///   bit 0 = EXCLUSIVE    bit 1 = UPGRADABLE (share-exclusive)
    ///   bits 2.. = number of shared holders
    /// ```
    /// Shared excludes exclusive; share-exclusive excludes exclusive and
    /// share-exclusive, admits shared; exclusive excludes everything.
    #[derive(Debug)]
    pub(crate) struct ModelRwLock {
        word: AtomicUsize,
    }

    const EXCLUSIVE: usize = 1;
    const UPGRADABLE: usize = 2;
    const READER: usize = 4;

    /// Marker of a shared hold (parking_lot 0.13's raw API hands one out).
    #[derive(Debug)]
    pub(crate) struct SharedMark(());
    /// Marker of an exclusive hold.
    #[derive(Debug)]
    pub(crate) struct ExclusiveMark(());
    /// Marker of a share-exclusive hold.
    #[derive(Debug)]
    pub(crate) struct UpgradableMark(());

    impl ModelRwLock {
        /// CAS `word` from a value `may(word)` accepts to `next(word)`.
        fn try_acquire(&self, may: impl Fn(usize) -> bool, next: impl Fn(usize) -> usize) -> bool {
            let mut cur = self.word.load(Ordering::Acquire);
            while may(cur) {
                match self.word.compare_exchange_weak(
                    cur,
                    next(cur),
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return true,
                    Err(actual) => cur = actual,
                }
            }
            false
        }

        fn acquire(&self, may: impl Fn(usize) -> bool, next: impl Fn(usize) -> usize) {
            while !self.try_acquire(&may, &next) {
                shuttle::hint::spin_loop();
            }
        }

        fn release(&self, bits: usize) {
            let old = self.word.fetch_sub(bits, Ordering::Release);
            assert!(
                old & bits == bits || bits == READER && old >= READER,
                "content lock released in a mode it was not held in (word {old:#x}, releasing {bits:#x})"
            );
        }
    }

    // SAFETY: the word's bits implement the exclusion documented on the type:
    // an exclusive hold is granted only on a zero word (no holder of any
    // mode), a shared one only without EXCLUSIVE, a share-exclusive one only
    // without EXCLUSIVE or UPGRADABLE, each by one CAS on the word.
    unsafe impl RawRwLock for ModelRwLock {
        #[allow(clippy::declare_interior_mutable_const)]
        const INIT: ModelRwLock = ModelRwLock {
            word: AtomicUsize::new(0),
        };
        type SharedGuard = SharedMark;
        type ExclusiveGuard = ExclusiveMark;

        fn lock_shared(&self) -> SharedMark {
            self.acquire(|w| w & EXCLUSIVE == 0, |w| w + READER);
            SharedMark(())
        }

        fn try_lock_shared(&self) -> Option<SharedMark> {
            self.try_acquire(|w| w & EXCLUSIVE == 0, |w| w + READER)
                .then_some(SharedMark(()))
        }

        unsafe fn unlock_shared(&self, _guard: SharedMark) {
            self.release(READER);
        }

        fn lock_exclusive(&self) -> ExclusiveMark {
            self.acquire(|w| w == 0, |_| EXCLUSIVE);
            ExclusiveMark(())
        }

        fn try_lock_exclusive(&self) -> Option<ExclusiveMark> {
            self.try_acquire(|w| w == 0, |_| EXCLUSIVE)
                .then_some(ExclusiveMark(()))
        }

        unsafe fn unlock_exclusive(&self, _guard: ExclusiveMark) {
            self.release(EXCLUSIVE);
        }

        fn is_locked(&self) -> bool {
            self.word.load(Ordering::Relaxed) != 0
        }

        fn is_locked_exclusive(&self) -> bool {
            self.word.load(Ordering::Relaxed) & EXCLUSIVE != 0
        }
    }

    // SAFETY: as above; an upgrade waits for the shared holders to leave
    // and then swaps UPGRADABLE for EXCLUSIVE in one CAS on a word that
    // holds nothing else.
    unsafe impl RawRwLockUpgrade for ModelRwLock {
        type UpgradableGuard = UpgradableMark;

        fn lock_upgradable(&self) -> UpgradableMark {
            self.acquire(|w| w & (EXCLUSIVE | UPGRADABLE) == 0, |w| w | UPGRADABLE);
            UpgradableMark(())
        }

        fn try_lock_upgradable(&self) -> Option<UpgradableMark> {
            self.try_acquire(|w| w & (EXCLUSIVE | UPGRADABLE) == 0, |w| w | UPGRADABLE)
                .then_some(UpgradableMark(()))
        }

        unsafe fn unlock_upgradable(&self, _guard: UpgradableMark) {
            self.release(UPGRADABLE);
        }

        unsafe fn upgrade(&self, _guard: UpgradableMark) -> ExclusiveMark {
            self.acquire(|w| w == UPGRADABLE, |_| EXCLUSIVE);
            ExclusiveMark(())
        }

        unsafe fn try_upgrade(
            &self,
            guard: UpgradableMark,
        ) -> Result<ExclusiveMark, UpgradableMark> {
            if self.try_acquire(|w| w == UPGRADABLE, |_| EXCLUSIVE) {
                Ok(ExclusiveMark(()))
            } else {
                Err(guard)
            }
        }
    }
}

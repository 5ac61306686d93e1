//! Retrying transactions: [`Database::transaction`] and
//! [`Database::read_transaction`].
//!
//! Under snapshot isolation a transaction that loses a race (first updater
//! wins, a unique key held by a transaction in progress, a pool whose every
//! buffer is pinned by other work) fails with an error for which
//! [`EngineError::is_retryable`] is true: the right answer is to roll back
//! and run the whole transaction again, from a new snapshot. These helpers
//! are that loop, written once:
//!
//! 1. Begin (a writing transaction in the database's commit mode, or a
//!    read-only one), run the closure with it.
//! 2. `Ok(v)`: commit; a successful commit returns `v`.
//! 3. An error (from the closure or from the commit): roll back (a failed
//!    commit has rolled back already). A retryable error with attempts left
//!    sleeps a jittered exponential backoff ([`Options::transaction_backoff`])
//!    and goes back to 1; any other error, or the error of the last of
//!    [`Options::transaction_attempts`] attempts, is returned as it is.
//!
//! The closure may run several times, so it must not have effects outside
//! the transaction that cannot be repeated (or must undo them itself); what
//! it returns is only used from the attempt that committed. Retries are
//! counted in [`TxnStats::retries`](crate::TxnStats) (and calls whose last
//! attempt still failed retryably in `retries_exhausted`).
//!
//! [`Options::transaction_backoff`]: crate::Options::transaction_backoff
//! [`Options::transaction_attempts`]: crate::Options::transaction_attempts

use std::time::Duration;

use rand::RngExt;

use crate::database::Database;
use crate::error::{EngineError, Result};
use crate::transaction::Transaction;

impl Database {
    /// Run `f` in a transaction and commit it, running it again on a
    /// retryable error: returns what `f` returned in the attempt that
    /// committed, or the error that ended the retries.
    ///
    /// Each attempt begins a transaction (in the database's commit mode)
    /// and runs `f` with it. `Ok(v)` commits; an error from `f` or from the
    /// commit rolls the attempt back. If the error is retryable
    /// ([`EngineError::is_retryable`]: a write conflict, a unique key held
    /// by a transaction in progress, a pool with every buffer pinned) and
    /// attempts are left ([`Options::transaction_attempts`], default 10),
    /// it sleeps a jittered exponential backoff
    /// ([`Options::transaction_backoff`]) and runs `f` again from a new
    /// snapshot; any other error, or the last attempt's, is returned as it
    /// is. If `f` panics, its transaction is rolled back as the panic
    /// unwinds.
    ///
    /// **`f` may run several times**: effects outside the transaction must
    /// be repeatable (or undone by `f` itself). A transaction begun inside
    /// `f` (another `transaction` call) is independent of the attempt's: it
    /// commits on its own, and a conflict with the attempt's uncommitted
    /// writes fails it rather than waiting. Retries are counted in
    /// [`TxnStats`](crate::TxnStats).
    ///
    /// [`Options::transaction_attempts`]: crate::Options::transaction_attempts
    /// [`Options::transaction_backoff`]: crate::Options::transaction_backoff
    ///
    /// ```
    /// # use engine::{Column, ColumnType, Database, Options, Value};
    /// # let db = Database::open_temporary(Options::new().pool_buffers(64))?;
    /// # db.create_table("counters", vec![Column::new("id", ColumnType::I64)])?;
    /// let row_id = db.transaction(|txn| txn.insert("counters", vec![Value::I64(1)]))?;
    /// # let _ = row_id;
    /// # Ok::<(), engine::EngineError>(())
    /// ```
    pub fn transaction<T>(&self, f: impl FnMut(&Transaction) -> Result<T>) -> Result<T> {
        self.run_retrying(false, f)
    }

    /// [`transaction`](Self::transaction) for read-only work: each attempt
    /// is a read-only transaction ([`Database::read`]), so a write in `f` is
    /// [`EngineError::ReadOnlyTransaction`] (not retried).
    pub fn read_transaction<T>(&self, f: impl FnMut(&Transaction) -> Result<T>) -> Result<T> {
        self.run_retrying(true, f)
    }

    fn run_retrying<T>(
        &self,
        read_only: bool,
        mut f: impl FnMut(&Transaction) -> Result<T>,
    ) -> Result<T> {
        let opts = self.options();
        let attempts = opts.transaction_attempts.max(1);
        let (first, max) = (opts.transaction_backoff, opts.transaction_backoff_max);
        let tm = self.transaction_manager();
        let mut attempt = 1;
        loop {
            let err = match attempt_once(self, read_only, &mut f) {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            if !err.is_retryable() {
                return Err(err);
            }
            if attempt >= attempts {
                tm.note_retries_exhausted();
                return Err(err);
            }
            std::thread::sleep(backoff(attempt, first, max));
            tm.note_retry();
            attempt += 1;
        }
    }
}

/// One attempt: begin, run, commit; on an error the transaction is rolled
/// back (a rollback that fails is returned instead: the state of the
/// transaction is then unknown, and retrying would hide that).
fn attempt_once<T>(
    db: &Database,
    read_only: bool,
    f: &mut impl FnMut(&Transaction) -> Result<T>,
) -> Result<T> {
    let txn = if read_only { db.read()? } else { db.begin()? };
    match f(&txn) {
        Ok(v) => txn.commit().map(|_| v),
        Err(e) => match txn.rollback() {
            Ok(()) => Err(e),
            Err(rb) => Err(rollback_failed(e, rb)),
        },
    }
}

/// The error to return when the rollback after `e` failed with `rb`: the
/// rollback's, unless it is retryable itself (then `e` stands).
fn rollback_failed(e: EngineError, rb: EngineError) -> EngineError {
    if rb.is_retryable() { e } else { rb }
}

/// The sleep before retry `retry` (1 for the first): uniform in
/// `0 ..= min(max, first * 2^(retry-1))`.
fn backoff(retry: u32, first: Duration, max: Duration) -> Duration {
    let shift = retry.saturating_sub(1).min(31);
    let cap = first.checked_mul(1u32 << shift).map_or(max, |d| d.min(max));
    if cap.is_zero() {
        return Duration::ZERO;
    }
    let nanos = u64::try_from(cap.as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(rand::rng().random_range(0..=nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_maximum_and_stays_inside_its_bound() {
        let (first, max) = (Duration::from_millis(2), Duration::from_millis(20));
        for retry in 1..40 {
            let cap = (first * 2u32.pow((retry - 1).min(20))).min(max);
            for _ in 0..50 {
                assert!(backoff(retry, first, max) <= cap, "retry {retry}");
            }
        }
        // Jittered: not always the bound itself.
        let draws: Vec<Duration> = (0..50).map(|_| backoff(5, first, max)).collect();
        assert!(draws.iter().any(|d| *d != draws[0]), "{draws:?}");
        assert_eq!(backoff(3, Duration::ZERO, Duration::ZERO), Duration::ZERO);
    }
}

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
//! A transaction that must end in a rollback as one of its normal outcomes
//! (a business rule says no, as TPC-C's New-Order naming an unused item)
//! uses [`Database::transaction_or_rollback`]: its closure returns
//! [`Decision::Commit`] or [`Decision::Rollback`], both successes, and an
//! error of any type that implements [`RetryableError`] (the caller's own
//! error type, holding engine errors), so only errors are retried.
//!
//! [`Options::transaction_backoff`]: crate::Options::transaction_backoff
//! [`Options::transaction_attempts`]: crate::Options::transaction_attempts

use std::time::Duration;

use rand::RngExt;

use crate::database::Database;
use crate::error::{EngineError, Result};
use crate::transaction::Transaction;

/// How a transaction run by [`Database::transaction_or_rollback`] ends:
/// both are successes, each carrying the closure's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Decision<T> {
    /// Commit the transaction, then return the value.
    Commit(T),
    /// Roll the transaction back (none of its writes stays), then return
    /// the value. Not retried: a rollback asked for is an outcome.
    Rollback(T),
}

impl<T> Decision<T> {
    /// The value, however the transaction ended.
    pub fn into_inner(self) -> T {
        match self {
            Decision::Commit(v) | Decision::Rollback(v) => v,
        }
    }

    /// Whether the transaction committed.
    pub fn is_commit(&self) -> bool {
        matches!(self, Decision::Commit(_))
    }
}

/// An error type a retrying transaction can return: it holds the engine's
/// errors (`From<EngineError>`) and says which of its values are worth a
/// rerun (normally: an engine error that [`EngineError::is_retryable`]).
pub trait RetryableError: From<EngineError> {
    /// Whether rolling back and running the transaction again may succeed.
    fn is_retryable(&self) -> bool;
}

impl RetryableError for EngineError {
    fn is_retryable(&self) -> bool {
        EngineError::is_retryable(self)
    }
}

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
    pub fn transaction<T>(&self, mut f: impl FnMut(&Transaction) -> Result<T>) -> Result<T> {
        self.run_retrying(false, |txn| f(txn).map(Decision::Commit))
            .map(Decision::into_inner)
    }

    /// [`transaction`](Self::transaction) for read-only work: each attempt
    /// is a read-only transaction ([`Database::read`]), so a write in `f` is
    /// [`EngineError::ReadOnlyTransaction`] (not retried).
    pub fn read_transaction<T>(&self, mut f: impl FnMut(&Transaction) -> Result<T>) -> Result<T> {
        self.run_retrying(true, |txn| f(txn).map(Decision::Commit))
            .map(Decision::into_inner)
    }

    /// [`transaction`](Self::transaction) for a transaction that may end in
    /// a rollback on purpose, with an error type of the caller's own.
    ///
    /// `f` returns `Ok(Decision::Commit(v))` to commit or
    /// `Ok(Decision::Rollback(v))` to roll back; either way the call returns
    /// that decision, with `v`, once the commit or the rollback is done. A
    /// rollback asked for is an outcome, not a failure: it is not retried
    /// (it counts as an abort in [`TxnStats`](crate::TxnStats), not as a
    /// retry). An error from `f`, or from the commit, rolls the attempt back
    /// and is retried exactly as `transaction` retries, if
    /// [`RetryableError::is_retryable`] says so; any other error is
    /// returned as it is. `E` is any error type holding engine errors:
    /// [`EngineError`] itself, or the caller's (implement
    /// [`RetryableError`] for it).
    ///
    /// ```
    /// # use engine::{Column, ColumnType, Database, Decision, Options, Value};
    /// # let db = Database::open_temporary(Options::new().pool_buffers(64))?;
    /// # db.create_table("orders", vec![Column::new("qty", ColumnType::I64)])?;
    /// let qty = 0;
    /// let d = db.transaction_or_rollback(|txn| {
    ///     txn.insert("orders", vec![Value::I64(qty)])?;
    ///     if qty <= 0 {
    ///         // A business rule refuses the order: undo the insert.
    ///         return Ok(Decision::Rollback("refused"));
    ///     }
    ///     Ok::<_, engine::EngineError>(Decision::Commit("placed"))
    /// })?;
    /// assert_eq!(d, Decision::Rollback("refused"));
    /// assert_eq!(db.read()?.scan("orders")?.count(), 0);
    /// # Ok::<(), engine::EngineError>(())
    /// ```
    pub fn transaction_or_rollback<T, E: RetryableError>(
        &self,
        f: impl FnMut(&Transaction) -> std::result::Result<Decision<T>, E>,
    ) -> std::result::Result<Decision<T>, E> {
        self.run_retrying(false, f)
    }

    /// [`transaction_or_rollback`](Self::transaction_or_rollback) for
    /// read-only work ([`Database::read`]): for a caller's error type on a
    /// transaction that writes nothing (`Decision::Rollback` and
    /// `Decision::Commit` then differ only in the value's label).
    pub fn read_transaction_or_rollback<T, E: RetryableError>(
        &self,
        f: impl FnMut(&Transaction) -> std::result::Result<Decision<T>, E>,
    ) -> std::result::Result<Decision<T>, E> {
        self.run_retrying(true, f)
    }

    fn run_retrying<T, E: RetryableError>(
        &self,
        read_only: bool,
        mut f: impl FnMut(&Transaction) -> std::result::Result<Decision<T>, E>,
    ) -> std::result::Result<Decision<T>, E> {
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
fn attempt_once<T, E: RetryableError>(
    db: &Database,
    read_only: bool,
    f: &mut impl FnMut(&Transaction) -> std::result::Result<Decision<T>, E>,
) -> std::result::Result<Decision<T>, E> {
    let txn = if read_only { db.read()? } else { db.begin()? };
    match f(&txn) {
        Ok(Decision::Commit(v)) => Ok(txn.commit().map(|_| Decision::Commit(v))?),
        Ok(Decision::Rollback(v)) => Ok(txn.rollback().map(|()| Decision::Rollback(v))?),
        Err(e) => match txn.rollback() {
            Ok(()) => Err(e),
            Err(rb) => Err(rollback_failed(e, rb)),
        },
    }
}

/// The error to return when the rollback after `e` failed with `rb`: the
/// rollback's, unless it is retryable itself (then `e` stands).
fn rollback_failed<E: RetryableError>(e: E, rb: EngineError) -> E {
    if rb.is_retryable() { e } else { E::from(rb) }
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

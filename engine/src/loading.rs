//! Reads of a table from inside its own bulk load fail at once.
//!
//! [`Database::bulk_load`](crate::Database::bulk_load) into an empty table
//! holds the table exclusively (its drop lock, written) while it pulls rows
//! from the caller's iterator and calls the caller's progress callback. A
//! read or write of that table from either of them, on the loading thread,
//! would wait for that lock forever. Instead:
//!
//! 1. While it holds the table, the loader marks it in a per-thread list
//!    ([`Loading`], removed when dropped, also on an error or a panic).
//! 2. Every operation that takes a table's drop lock first calls
//!    [`check`]: on a marked table it returns
//!    [`EngineError::TableBeingLoaded`] naming the table, and notes the
//!    refusal.
//! 3. A load during which a refusal was noted fails with that error before
//!    it commits (nothing of it becomes visible), even if the caller's
//!    iterator swallowed the error: the rows it produced may not be the
//!    ones the caller meant.
//!
//! Other threads are not marked: their operations on the table wait for
//! the load to end, as documented on `bulk_load`.

use std::cell::RefCell;

use bufmgr::RelId;

use crate::catalog::TableHandle;
use crate::error::{EngineError, Result};

thread_local! {
    /// Tables this thread is bulk-loading while holding them exclusively,
    /// each with whether a read of it was refused.
    static LOADING: RefCell<Vec<(RelId, bool)>> = const { RefCell::new(Vec::new()) };
}

/// The mark of rule 1; dropping it removes the mark.
#[derive(Debug)]
pub(crate) struct Loading {
    rel: RelId,
    table: String,
}

impl Loading {
    pub(crate) fn begin(t: &TableHandle) -> Loading {
        LOADING.with(|l| l.borrow_mut().push((t.info.rel, false)));
        Loading {
            rel: t.info.rel,
            table: t.info.name.clone(),
        }
    }

    /// Rule 3: the error to fail the load with, if a read was refused.
    pub(crate) fn refused(&self) -> Result<()> {
        let refused = LOADING.with(|l| {
            l.borrow()
                .iter()
                .rev()
                .find(|(rel, _)| *rel == self.rel)
                .is_some_and(|(_, r)| *r)
        });
        if refused {
            return Err(EngineError::TableBeingLoaded {
                table: self.table.clone(),
            });
        }
        Ok(())
    }
}

impl Drop for Loading {
    fn drop(&mut self) {
        LOADING.with(|l| {
            let mut l = l.borrow_mut();
            if let Some(i) = l.iter().rposition(|(rel, _)| *rel == self.rel) {
                l.remove(i);
            }
        });
    }
}

/// Rule 2: `Err(TableBeingLoaded)` if this thread is bulk-loading `t`.
pub(crate) fn check(t: &TableHandle) -> Result<()> {
    let loading = LOADING.with(|l| {
        let mut l = l.borrow_mut();
        match l.iter_mut().find(|(rel, _)| *rel == t.info.rel) {
            Some((_, refused)) => {
                *refused = true;
                true
            }
            None => false,
        }
    });
    if loading {
        return Err(EngineError::TableBeingLoaded {
            table: t.info.name.clone(),
        });
    }
    Ok(())
}

//! A filter (`RowIter::matching`) that panics unwinds out of the
//! iterator's `next` part-way through reading a page. A caller may catch
//! the panic and call `next` again; the iterator must not then go on from
//! the next page as if the interrupted page had no more rows: it reports
//! what happened, as an error, and ends.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{Database, EngineError};

const ROWS: i64 = 2_000;
const PANICS_AT: i64 = 1_234;

#[test]
fn a_caught_panic_in_a_filter_is_an_error_then_the_end() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("t", two_columns()).unwrap();
        let t = db.begin().unwrap();
        for id in 0..ROWS {
            t.insert("t", row(id, "some name long enough to fill pages"))
                .unwrap();
        }
        t.commit().unwrap();

        let txn = db.read().unwrap();
        let table = db.table_handle("t").unwrap();
        let id = table.column("id").unwrap();
        let mut it = txn.scan("t").unwrap().matching(move |r| {
            let v = r.i64(id)?;
            assert_ne!(v, PANICS_AT, "the filter panics on row {PANICS_AT}");
            Ok(true)
        });
        let mut seen = Vec::new();
        let mut panics = 0;
        let mut after_panic = Vec::new();
        loop {
            match catch_unwind(AssertUnwindSafe(|| it.next())) {
                Err(_) => panics += 1,
                Ok(None) => break,
                Ok(Some(item)) if panics > 0 => after_panic.push(item),
                Ok(Some(item)) => seen.push(item.unwrap().1[0].clone()),
            }
            assert!(panics <= 1, "the iterator ran the filter again");
        }
        assert_eq!(panics, 1);
        assert!(
            seen.len() < PANICS_AT as usize,
            "rows before the panic: {}",
            seen.len()
        );
        // One item after the panic, an error naming it; no rows.
        assert_eq!(after_panic.len(), 1, "items after the panic");
        match after_panic.pop().unwrap() {
            Err(EngineError::ScanInterrupted { table }) => assert_eq!(table, "t"),
            other => panic!("expected the interruption, got {other:?}"),
        }
        // Ended for good.
        assert!(it.next().is_none());
    });
}

//! Iterators (`scan`'s `RowIter`, `index_range`'s `IndexRange`) read on
//! after their transaction ends:
//! - committed: with their snapshot, the transaction's own changes of the
//!   commands before the iterator began included, and no later ones, even
//!   once other readers have set hint bits on those rows;
//! - rolled back: from the next row on, exactly the committed state as of
//!   their snapshot, the same whether or not another reader set hint bits
//!   meanwhile and whether or not a vacuum ran.

mod common;

use std::collections::BTreeSet;
use std::ops::Bound;
use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{Database, HintMode, Value};

const ROWS: i64 = 300;

fn filled(hints: HintMode) -> (tempfile::TempDir, Database) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), small_options().hint_mode(hints)).unwrap();
    db.create_table("t", two_columns()).unwrap();
    db.create_index("t_id", "t", "id", true).unwrap();
    let t = db.begin().unwrap();
    for id in 0..ROWS {
        t.insert("t", row(id, "committed")).unwrap();
    }
    t.commit().unwrap();
    (dir, db)
}

fn id_of(r: engine::Result<(engine::RowId, engine::OwnedRow)>) -> i64 {
    match r.unwrap().1[0] {
        Value::I64(id) => id,
        ref v => panic!("id {v:?}"),
    }
}

/// What another session may do between the rollback and the next read.
#[derive(Copy, Clone, Debug)]
enum Meanwhile {
    Nothing,
    /// A reader scans the table, hinting the aborted changes.
    HintingReader,
    /// A reader scans, then the table is vacuumed.
    Vacuum,
}

#[test]
fn a_rolled_back_transactions_iterators_return_the_committed_state() {
    watchdog(Duration::from_secs(120), || {
        for hints in [HintMode::PerPage, HintMode::Never] {
            for meanwhile in [
                Meanwhile::Nothing,
                Meanwhile::HintingReader,
                Meanwhile::Vacuum,
            ] {
                let what = format!("hints {hints:?}, meanwhile {meanwhile:?}");
                let (_dir, db) = filled(hints);
                let t = db.begin().unwrap();
                // Delete every even committed row, insert new ones (ids
                // from 1000), then open the iterators.
                let all: Vec<_> = t.scan("t").unwrap().map(|r| r.unwrap()).collect();
                for (id, r) in &all {
                    if matches!(r[0], Value::I64(i) if i % 2 == 0) {
                        t.delete("t", *id).unwrap();
                    }
                }
                for i in 0..100 {
                    t.insert("t", row(1000 + i, "aborted")).unwrap();
                }
                let untouched = t.scan("t").unwrap();
                let mut started = t.scan("t").unwrap();
                let mut range = t
                    .index_range("t_id", Bound::Unbounded, Bound::Unbounded)
                    .unwrap();
                // Read as the transaction's own view: id 1 first (0 is
                // deleted), with the rest of its page (or batch) in hand.
                assert_eq!(id_of(started.next().unwrap()), 1, "{what}");
                assert_eq!(id_of(range.next().unwrap()), 1, "{what}");
                t.rollback().unwrap();
                match meanwhile {
                    Meanwhile::Nothing => {}
                    Meanwhile::HintingReader => {
                        assert_eq!(db.read().unwrap().scan("t").unwrap().count() as i64, ROWS);
                    }
                    Meanwhile::Vacuum => {
                        assert_eq!(db.read().unwrap().scan("t").unwrap().count() as i64, ROWS);
                        db.vacuum("t").unwrap();
                    }
                }
                let untouched: Vec<i64> = untouched.map(id_of).collect();
                assert_eq!(
                    untouched,
                    (0..ROWS).collect::<Vec<_>>(),
                    "{what}: an iterator read after the rollback"
                );
                let rest: BTreeSet<i64> = started.map(id_of).collect();
                assert_eq!(
                    rest,
                    (2..ROWS).collect::<BTreeSet<_>>(),
                    "{what}: the rest of a scan begun before the rollback"
                );
                let rest: Vec<i64> = range.map(id_of).collect();
                assert_eq!(
                    rest,
                    (2..ROWS).collect::<Vec<_>>(),
                    "{what}: the rest of a range begun before the rollback"
                );
            }
        }
    });
}

#[test]
fn a_committed_transactions_iterators_keep_their_snapshot_whatever_the_hints() {
    watchdog(Duration::from_secs(60), || {
        let (_dir, db) = filled(HintMode::PerPage);
        let t = db.begin().unwrap();
        for i in 0..50 {
            t.insert("t", row(1000 + i, "before")).unwrap();
        }
        let scan = t.scan("t").unwrap();
        let range = t
            .index_range("t_id", Bound::Unbounded, Bound::Unbounded)
            .unwrap();
        // Later commands: an insert and a delete the iterators must not see.
        for i in 0..50 {
            t.insert("t", row(2000 + i, "after")).unwrap();
        }
        let (first, _) = t
            .get_by_key("t", "id", &Value::I64(0))
            .unwrap()
            .expect("row 0");
        t.delete("t", first).unwrap();
        t.commit().unwrap();
        // Another reader hints every row (xmin / xmax committed).
        assert_eq!(
            db.read().unwrap().scan("t").unwrap().count() as i64,
            ROWS + 100 - 1
        );
        db.vacuum("t").unwrap();
        let want: Vec<i64> = (0..ROWS).chain(1000..1050).collect();
        let got: BTreeSet<i64> = scan.map(id_of).collect();
        assert_eq!(got, want.iter().copied().collect::<BTreeSet<_>>(), "scan");
        let got: Vec<i64> = range.map(id_of).collect();
        assert_eq!(got, want, "range");
    });
}

//! `verify` with the heap's rows: an entry pointing to no heap row is a
//! violation; one pointing to a dead line pointer (a row without storage,
//! `key: None`, waiting for vacuum's index pass) is not; a live row without
//! an entry is; an entry whose heap row has another key is.

mod common;

use std::time::Duration;

use btree::{AssumeLive, HeapRow, Key, KeyType};
use common::{create, db, within};
use heap::tuple::Tid;

#[test]
fn entries_and_rows_must_agree() {
    within(Duration::from_secs(30), || {
        let db = db(16, false);
        let index = create(&db, KeyType::I64, false);
        let (a, b) = (Tid::new(1, 1), Tid::new(1, 2));
        index.insert(&Key::I64(10), a, &AssumeLive).unwrap();
        index.insert(&Key::I64(20), b, &AssumeLive).unwrap();
        let row = |key: Option<i64>, tid, live| HeapRow {
            key: key.map(Key::I64),
            tid,
            live,
        };
        let check = |rows: Vec<HeapRow>| index.verify(Some(&move || rows.clone())).unwrap();

        assert!(check(vec![row(Some(10), a, true), row(Some(20), b, true)]).is_empty());
        let v = check(vec![row(Some(10), a, true)]);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].what.contains("points to no heap row"), "{v:?}");
        assert!(
            check(vec![row(Some(10), a, true), row(None, b, false)]).is_empty(),
            "a dead line pointer may still have entries"
        );
        assert_eq!(
            check(vec![row(Some(10), a, true), row(None, b, true)]).len(),
            1
        );
        let v = check(vec![
            row(Some(10), a, true),
            row(Some(20), b, true),
            row(Some(30), Tid::new(2, 1), true),
        ]);
        assert!(
            v.iter().any(|v| v.what.contains("has no index entry")),
            "{v:?}"
        );
        let v = check(vec![row(Some(11), a, true), row(Some(20), b, true)]);
        assert!(v.iter().any(|v| v.what.contains("has key")), "{v:?}");
    });
}

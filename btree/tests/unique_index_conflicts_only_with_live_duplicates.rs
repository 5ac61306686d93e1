//! A unique index: a duplicate of a live entry is a `UniqueViolation`; of a
//! dead (deleted or aborted) one it is not; of one whose transaction is in
//! progress it is `UniqueInProgress` naming that transaction. Equal keys
//! spread over several leaves are all checked.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use btree::{AssumeLive, BtreeError, ErrorKind, Key, KeyType, Liveness};
use common::{assert_clean, create, db, within};
use heap::tuple::Tid;

#[test]
fn duplicate_of_live_is_a_violation_of_dead_is_not() {
    within(Duration::from_secs(30), || {
        let db = db(16, true);
        let index = create(&db, KeyType::I64, true);
        let mut heap: HashMap<Tid, Liveness> = HashMap::new();
        for i in 0..2000i64 {
            let tid = Tid::new(i as u32 + 1, 1);
            index.insert(&Key::I64(i), tid, &AssumeLive).unwrap();
            heap.insert(tid, Liveness::Live);
        }
        let vis = |heap: &HashMap<Tid, Liveness>| {
            let h = heap.clone();
            move |t: Tid| h.get(&t).copied().unwrap_or(Liveness::Dead)
        };

        // Live duplicate.
        let err = index
            .insert(&Key::I64(700), Tid::new(9000, 1), &vis(&heap))
            .unwrap_err();
        assert!(matches!(err, BtreeError::UniqueViolation { .. }), "{err}");
        assert_eq!(err.kind(), ErrorKind::Conflict);
        assert!(err.to_string().contains("(700)"), "{err}");

        // Dead duplicate: allowed.
        heap.insert(Tid::new(701, 1), Liveness::Dead);
        index
            .insert(&Key::I64(700), Tid::new(9001, 1), &vis(&heap))
            .unwrap();
        heap.insert(Tid::new(9001, 1), Liveness::Live);
        assert_eq!(
            index.lookup(&Key::I64(700)).unwrap(),
            [Tid::new(701, 1), Tid::new(9001, 1)]
        );

        // In progress.
        heap.insert(Tid::new(801, 1), Liveness::InProgress(77));
        let err = index
            .insert(&Key::I64(800), Tid::new(9002, 1), &vis(&heap))
            .unwrap_err();
        assert!(
            matches!(err, BtreeError::UniqueInProgress { xid: 77, .. }),
            "{err}"
        );

        // Many dead duplicates of one key, spanning leaves: the live one at
        // the far end is still found.
        for n in 0..1500u32 {
            let tid = Tid::new(20_000 + n, 1);
            index
                .insert(&Key::I64(-5), tid, &|_t: Tid| Liveness::Dead)
                .unwrap();
            heap.insert(tid, Liveness::Dead);
        }
        heap.insert(Tid::new(20_000 + 1499, 1), Liveness::Live);
        let err = index
            .insert(&Key::I64(-5), Tid::new(1, 9), &vis(&heap))
            .unwrap_err();
        assert!(matches!(err, BtreeError::UniqueViolation { .. }), "{err}");
        assert_eq!(index.lookup(&Key::I64(-5)).unwrap().len(), 1500);
        assert_clean(index.verify(None).unwrap());
    });
}

#[test]
fn racing_inserts_of_one_key_let_exactly_one_win() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    within(Duration::from_secs(60), || {
        let db = db(64, false);
        let index = Arc::new(create(&db, KeyType::I64, true));
        let wins = Arc::new(AtomicUsize::new(0));
        let keys = 3000i64;
        let threads: Vec<_> = (0..4u32)
            .map(|t| {
                let (index, wins) = (index.clone(), wins.clone());
                std::thread::spawn(move || {
                    for k in 0..keys {
                        // Each thread walks the keys in its own order.
                        let k = if t % 2 == 0 { k } else { keys - 1 - k };
                        match index.insert(
                            &Key::I64(k),
                            Tid::new(k as u32 + 1, t as u16 + 1),
                            &AssumeLive,
                        ) {
                            Ok(()) => {
                                wins.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(BtreeError::UniqueViolation { .. }) => {}
                            Err(e) => panic!("{e}"),
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(wins.load(Ordering::Relaxed), keys as usize);
        for k in 0..keys {
            assert_eq!(index.lookup(&Key::I64(k)).unwrap().len(), 1, "key {k}");
        }
        assert_clean(index.verify(None).unwrap());
    });
}

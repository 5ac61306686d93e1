//! A non-unique `i64` index (FIXED leaves, searched by interpolation and
//! galloping, until duplicates form posting lists) holding keys at
//! `i64::MIN`, `i64::MAX` and around 0 with thousands of entries each,
//! among spread single keys, inserted in random order on a small pool:
//! every lookup (present and absent keys) and every range read at the
//! extremes matches a model, before and after a vacuum removes half the
//! entries.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::time::Duration;

use btree::{AssumeLive, Direction, Index, Key, KeyBounds, KeyType};
use common::{create, db, within};
use heap::tuple::Tid;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};

const HEAVY: [i64; 5] = [i64::MIN, i64::MIN + 1, 0, i64::MAX - 1, i64::MAX];

fn check(index: &Index, model: &BTreeMap<i64, Vec<Tid>>, probes: &[i64]) {
    for &k in probes {
        let want = model.get(&k).cloned().unwrap_or_default();
        assert_eq!(index.lookup(&Key::I64(k)).unwrap(), want, "lookup of {k}");
    }
    // Range reads at both ends, both directions.
    for (l, u) in [
        (i64::MIN, i64::MIN + 1),
        (i64::MAX - 1, i64::MAX),
        (i64::MIN, i64::MAX),
    ] {
        let (lower, upper) = (Key::I64(l).encode(), Key::I64(u).encode());
        let want: Vec<Tid> = model
            .range(l..=u)
            .flat_map(|(_, t)| t.iter().copied())
            .collect();
        for dir in [Direction::Forward, Direction::Backward] {
            let mut got = Vec::new();
            let mut after: Option<(Vec<u8>, Tid)> = None;
            loop {
                let mut batch = Vec::new();
                let more = index
                    .read_range(
                        KeyBounds {
                            lower: Bound::Included(lower.as_slice()),
                            upper: Bound::Included(upper.as_slice()),
                        },
                        dir,
                        after.as_ref().map(|(k, t)| (k.as_slice(), *t)),
                        997,
                        |k, t| batch.push((k.to_vec(), t)),
                    )
                    .unwrap();
                after = batch.last().cloned();
                got.extend(batch.into_iter().map(|(_, t)| t));
                if !more {
                    break;
                }
            }
            if dir == Direction::Backward {
                got.reverse();
            }
            assert_eq!(got.len(), want.len(), "{dir:?} range count");
            assert!(got == want, "{dir:?} range differs from the model");
        }
    }
}

#[test]
fn lookups_and_ranges_at_the_key_limits_with_thousands_of_duplicates_match_a_model() {
    within(Duration::from_secs(300), || {
        let db = db(32, false);
        let index = create(&db, KeyType::I64, false);
        let mut rng = SmallRng::seed_from_u64(164);
        let mut entries: Vec<(i64, Tid)> = Vec::new();
        let mut n = 0u32;
        let mut tid = || {
            n += 1;
            Tid::new(n / 40, (n % 40 + 1) as u16)
        };
        for &k in &HEAVY {
            for _ in 0..2500 {
                entries.push((k, tid()));
            }
        }
        for _ in 0..6000 {
            let k = rng.random_range(i64::MIN / 2..i64::MAX / 2);
            entries.push((k, tid()));
        }
        entries.shuffle(&mut rng);
        let mut model: BTreeMap<i64, Vec<Tid>> = BTreeMap::new();
        for &(k, t) in &entries {
            index.insert(&Key::I64(k), t, &AssumeLive).unwrap();
            model.entry(k).or_default().push(t);
        }
        model.values_mut().for_each(|v| v.sort());
        let mut probes: Vec<i64> = HEAVY.to_vec();
        probes.extend([i64::MIN + 2, -1, 1, i64::MAX - 2]);
        probes.extend(entries.iter().step_by(37).map(|&(k, _)| k));
        check(&index, &model, &probes);
        // Vacuum every entry of an even heap block.
        index.vacuum(|t| t.block % 2 == 0).unwrap();
        for v in model.values_mut() {
            v.retain(|t| t.block % 2 != 0);
        }
        model.retain(|_, v| !v.is_empty());
        check(&index, &model, &probes);
    });
}

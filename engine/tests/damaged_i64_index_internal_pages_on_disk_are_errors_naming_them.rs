//! Internal pages of `i64` indexes (pivots of 8-byte keys, which the
//! optimistic descent reads as words) damaged on disk with checksums off:
//! every lookup, key lookup and range through the damaged page is an
//! error naming the index and the block, asked again and again (so the
//! page, once resident, is read optimistically as well as under its lock),
//! failing the same reads every time, and never a panic, a wrong row or a
//! missing one.

mod common;

use std::ops::Bound;
use std::path::Path;
use std::time::Duration;

use common::{small_options, watchdog};
use engine::{Column, ColumnType, Database, EngineError, ErrorKind, Value};

const PAGE: usize = 8192;
const ROWS: i64 = 20_000;
/// Rows per value of `grp`: pivots of the `grp` index tie on keys.
const GROUP: i64 = 50;

fn u16_at(p: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([p[at], p[at + 1]])
}

fn id_of(i: i64) -> i64 {
    // Both signs and both extremes.
    match i {
        0 => i64::MIN,
        i if i == ROWS - 1 => i64::MAX,
        i => (i - ROWS / 2) * 7_777_777,
    }
}

fn grp_of(i: i64) -> i64 {
    i / GROUP - ROWS / GROUP / 2
}

fn options() -> engine::Options {
    small_options().checksums(false)
}

/// The table and its two indexes, written and closed; the index files.
fn build(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let db = Database::open(dir, options()).unwrap();
    db.create_table(
        "t",
        vec![
            Column::new("id", ColumnType::I64),
            Column::new("grp", ColumnType::I64),
        ],
    )
    .unwrap();
    let id = db.create_index("t_id", "t", "id", true).unwrap();
    let grp = db.create_index("t_grp", "t", "grp", false).unwrap();
    let t = db.begin().unwrap();
    for i in 0..ROWS {
        t.insert("t", vec![Value::I64(id_of(i)), Value::I64(grp_of(i))])
            .unwrap();
    }
    t.commit().unwrap();
    db.checkpoint().unwrap();
    db.close().unwrap();
    let file = |rel: engine::RelId| dir.join("base").join(rel.0.to_string());
    (file(id.rel), file(grp.rel))
}

/// The internal pages of an index file: (block, is root).
fn internal_pages(bytes: &[u8]) -> Vec<(usize, bool)> {
    (1..bytes.len() / PAGE)
        .filter_map(|b| {
            let p = &bytes[b * PAGE..(b + 1) * PAGE];
            let flags = u16_at(p, 14);
            (u16_at(p, 12) == 0xB7EE && flags & 0x1 == 0).then_some((b, flags & 0x2 != 0))
        })
        .collect()
}

/// Damage every internal page of both indexes with `damage`, then read
/// every row through them three times.
fn damaged(what: &str, damage: fn(&mut [u8])) {
    let what = what.to_string();
    watchdog(Duration::from_secs(60), move || {
        let dir = tempfile::tempdir().unwrap();
        let (id_file, grp_file) = build(dir.path());
        let mut damaged_blocks = Vec::new();
        for (file, name) in [(&id_file, "t_id"), (&grp_file, "t_grp")] {
            let mut bytes = std::fs::read(file).unwrap();
            let internal = internal_pages(&bytes);
            assert!(!internal.is_empty(), "{name}: no internal page");
            for &(b, _) in &internal {
                damage(&mut bytes[b * PAGE..(b + 1) * PAGE]);
                damaged_blocks.push((name, b));
            }
            std::fs::write(file, &bytes).unwrap();
        }
        let db = Database::open(dir.path(), options()).unwrap();
        let t = db.read().unwrap();
        let names_it = |how: &str, e: &EngineError| {
            let msg = e.to_string();
            assert_eq!(e.kind(), ErrorKind::CorruptData, "{what}, {how}: {msg}");
            assert!(
                damaged_blocks
                    .iter()
                    .any(|(name, b)| msg.contains(name) && msg.contains(&format!("block {b}"))),
                "{what}, {how}: {msg} names no damaged block of {damaged_blocks:?}"
            );
        };
        let mut errors = 0;
        let mut rounds: Vec<Vec<bool>> = Vec::new();
        for _ in 0..3 {
            let mut failed = Vec::new();
            for i in (0..ROWS).step_by(97).chain([ROWS - 1]) {
                let before = errors;
                match t.get_by_key("t", "id", &Value::I64(id_of(i))) {
                    Ok(Some((_, row))) => {
                        assert_eq!(*row, [Value::I64(id_of(i)), Value::I64(grp_of(i))])
                    }
                    Ok(None) => panic!("{what}: id {} not found", id_of(i)),
                    Err(e) => {
                        names_it("get_by_key", &e);
                        errors += 1;
                    }
                }
                let g = grp_of(i);
                match t.index_lookup("t_grp", &Value::I64(g)) {
                    Ok(rows) => {
                        assert_eq!(rows.len(), GROUP as usize, "{what}: grp {g}");
                        assert!(rows.iter().all(|(_, r)| r[1] == Value::I64(g)));
                    }
                    Err(e) => {
                        names_it("index_lookup", &e);
                        errors += 1;
                    }
                }
                let range = t.index_range(
                    "t_grp",
                    Bound::Included(Value::I64(g)),
                    Bound::Excluded(Value::I64(g + 1)),
                );
                match range.and_then(|r| r.collect::<Result<Vec<_>, _>>()) {
                    Ok(rows) => assert_eq!(rows.len(), GROUP as usize, "{what}: range {g}"),
                    Err(e) => {
                        names_it("index_range", &e);
                        errors += 1;
                    }
                }
                failed.push(errors > before);
            }
            rounds.push(failed);
        }
        assert!(
            rounds.windows(2).all(|w| w[0] == w[1]),
            "{what}: reads failed in one round and answered in another"
        );
        assert!(errors > 0, "{what}: no read went through a damaged page");
        drop(t);
        db.close().unwrap();
    });
}

fn pointers(p: &mut [u8], f: impl Fn(&mut [u8])) {
    let lower = usize::from(u16_at(p, 24));
    for ptr in (28..lower).step_by(4) {
        f(&mut p[ptr..ptr + 4]);
    }
}

#[test]
fn pivot_offsets_below_the_item_area_are_errors() {
    damaged("offsets below upper", |p| {
        pointers(p, |ptr| ptr[0..2].copy_from_slice(&40u16.to_le_bytes()))
    });
}

#[test]
fn pivots_running_off_the_page_are_errors() {
    damaged("offsets off the page", |p| {
        pointers(p, |ptr| ptr[0..2].copy_from_slice(&8180u16.to_le_bytes()))
    });
}

#[test]
fn pivot_lengths_too_short_for_a_tid_and_child_are_errors() {
    damaged("short lengths", |p| {
        pointers(p, |ptr| ptr[2..4].copy_from_slice(&9u16.to_le_bytes()))
    });
}

#[test]
fn downlinks_to_the_meta_page_are_errors() {
    damaged("children zeroed", |p| {
        let lower = usize::from(u16_at(p, 24));
        for ptr in (28..lower).step_by(4) {
            let (off, len) = (usize::from(u16_at(p, ptr)), usize::from(u16_at(p, ptr + 2)));
            p[off + len - 4..off + len].fill(0);
        }
    });
}

#[test]
fn leaf_only_flags_on_internal_pages_are_errors() {
    damaged("FIXED set", |p| p[14] |= 0x40);
    damaged("DEDUP set", |p| p[14] |= 0x80);
}

#[test]
fn internal_pages_at_the_wrong_level_are_errors() {
    damaged("level raised", |p| p[16] = p[16].wrapping_add(1));
}

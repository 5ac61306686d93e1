//! A line pointer of a row in the middle of a table damaged on disk, read
//! by every read path: the borrowed scans (`scan_each`, `scan_until`), the
//! owned scan, `get`, and the index lookups (`index_lookup`,
//! `get_by_key`). With checksums off the page is read as it is; each
//! damage breaks a line pointer invariant and must be an error naming the
//! table and the block, never a panic, a silently skipped row or an early
//! end. Among them, a pointer whose state bits say unused or dead while it
//! still holds its tuple's place (invariant 3: those have no storage). With
//! checksums on, each is a checksum error naming them.

mod common;

use std::time::Duration;

use common::{line_pointer_of, row, small_options, victim_table, watchdog};
use engine::{Database, EngineError, ErrorKind, RowId, ScanOptions, Value};

const PAGE: usize = 8192;

/// A line pointer word made of its three fields.
fn word(offset: u32, state: u32, len: u32) -> u32 {
    offset | (state << 15) | (len << 17)
}

/// A damage's name and the word it writes, given the old word and the
/// page's `upper`.
type Damage = (&'static str, fn(u32, u32) -> u32);

const DAMAGES: [Damage; 8] = [
    ("unused, its storage kept", |w, _| w & !(3 << 15)),
    ("dead, its storage kept", |w, _| w | (3 << 15)),
    ("a redirect", |w, _| (w & !(3 << 15)) | (2 << 15)),
    ("below upper", |w, upper| word(upper - 8, 1, w >> 17)),
    ("misaligned", |w, _| w + 4),
    ("past the page end", |_, _| word(8184, 1, 64)),
    ("shorter than a tuple header", |w, _| {
        (w & !(0x7FFF << 17)) | (8 << 17)
    }),
    ("longer than the page", |w, _| w | (0x7FFF << 17)),
];

#[test]
fn a_damaged_line_pointer_is_an_error_naming_table_and_block_in_every_read_path() {
    watchdog(Duration::from_secs(120), || {
        for checksums in [false, true] {
            for (what, damage) in DAMAGES {
                one_damage(checksums, what, damage);
            }
        }
    });
}

fn one_damage(checksums: bool, what: &str, damage: fn(u32, u32) -> u32) {
    let what = format!("{what} (checksums {checksums})");
    let options = || small_options().checksums(checksums);
    let dir = tempfile::tempdir().unwrap();
    let marker = "MARKER-damaged-pointer-77c1";
    let (file, rids) = victim_table(dir.path(), options(), marker, true);
    let victim = rids[150];
    assert!(victim.block >= 1, "{what}: the damaged row is past block 0");
    let mut bytes = std::fs::read(&file).unwrap();
    let base = victim.block as usize * PAGE;
    let page = &bytes[base..base + PAGE];
    let upper = u32::from(u16::from_le_bytes([page[16], page[17]]));
    let at = page
        .windows(marker.len())
        .position(|w| w == marker.as_bytes())
        .expect("the marker is on its page");
    let (p, w) = line_pointer_of(page, at);
    bytes[base + p..base + p + 4].copy_from_slice(&damage(w, upper).to_le_bytes());
    std::fs::write(&file, &bytes).unwrap();

    let db = Database::open(dir.path(), options()).unwrap();
    let t = db.read().unwrap();
    let names_it = |how: &str, e: &EngineError| {
        let msg = e.to_string();
        assert_eq!(e.kind(), ErrorKind::CorruptData, "{what}, {how}: {msg}");
        assert!(
            msg.contains("victim") && msg.contains(&format!("block {}", victim.block)),
            "{what}, {how}: {msg}"
        );
    };
    // The rows a scan handed out before its error: the table's first
    // ones, in order, none skipped, none of the damaged row's or after.
    let a_prefix = |how: &str, seen: &[RowId]| {
        assert_eq!(seen, &rids[..seen.len()], "{what}, {how}");
        assert!(seen.len() <= 150, "{what}, {how}: {} rows", seen.len());
    };

    let mut seen = Vec::new();
    let e = t
        .scan_each("victim", |r| {
            seen.push(r.id());
            Ok(())
        })
        .expect_err(&format!("{what}: scan_each ended without an error"));
    names_it("scan_each", &e);
    a_prefix("scan_each", &seen);

    let mut seen = Vec::new();
    let e = t
        .scan_until("victim", ScanOptions::default(), |r| {
            seen.push(r.id());
            Ok(true)
        })
        .expect_err(&format!("{what}: scan_until ended without an error"));
    names_it("scan_until", &e);
    a_prefix("scan_until", &seen);

    let out: Vec<_> = t.scan("victim").unwrap().collect();
    let first_err = out
        .iter()
        .position(Result::is_err)
        .unwrap_or_else(|| panic!("{what}: the owned scan ended without an error"));
    names_it("owned scan", out[first_err].as_ref().unwrap_err());
    let seen: Vec<RowId> = out[..first_err]
        .iter()
        .map(|r| r.as_ref().unwrap().0)
        .collect();
    a_prefix("owned scan", &seen);

    match t.get("victim", victim) {
        Err(e) => names_it("get", &e),
        Ok(got) => panic!("{what}: get of {victim} gave {got:?}"),
    }
    match t.index_lookup("victim_id", &Value::I64(150)) {
        Err(e) => names_it("index_lookup", &e),
        Ok(got) => panic!("{what}: index_lookup gave {got:?}"),
    }
    match t.get_by_key("victim", "id", &Value::I64(150)) {
        Err(e) => names_it("get_by_key", &e),
        Ok(got) => panic!("{what}: get_by_key gave {got:?}"),
    }
    // The rows of the other pages still read.
    assert_eq!(
        t.get("victim", rids[0]).unwrap().unwrap()[..],
        row(0, "row 0000 and some bytes")[..],
        "{what}"
    );
    drop(t);
    db.close().unwrap();
}

/// The page header's `lower` of a mid-table page damaged on disk
/// (checksums off): the pointer array cut short by one pointer, or down
/// to none, hides the rows of the pointers past the cut, which no line
/// pointer check sees; each scan (`scan_each`, `scan_until`, the owned
/// scan) must end in an error naming the table and the block, never hand
/// out the table without those rows. `lower` raised to `upper` (the free
/// space read as a full pointer array: all unused) loses nothing: every
/// row, exactly.
#[test]
fn a_pointer_array_cut_short_is_an_error_in_every_scan() {
    watchdog(Duration::from_secs(60), || {
        for cut in ["by one pointer", "to no pointers", "raised to upper"] {
            let options = || small_options().checksums(false);
            let dir = tempfile::tempdir().unwrap();
            let (file, rids) =
                victim_table(dir.path(), options(), "row 0150 and some bytes", false);
            let block = rids[150].block;
            assert!(
                block >= 1 && rids[299].block > block,
                "{cut}: a middle page"
            );
            let mut bytes = std::fs::read(&file).unwrap();
            let base = block as usize * PAGE;
            let lower = u16::from_le_bytes([bytes[base + 14], bytes[base + 15]]);
            let upper = u16::from_le_bytes([bytes[base + 16], bytes[base + 17]]);
            let damaged: u16 = match cut {
                "by one pointer" => lower - 4,
                "to no pointers" => 28,
                _ => upper - (upper - 28) % 4,
            };
            bytes[base + 14..base + 16].copy_from_slice(&damaged.to_le_bytes());
            std::fs::write(&file, &bytes).unwrap();

            let db = Database::open(dir.path(), options()).unwrap();
            let t = db.read().unwrap();
            let mut each = Vec::new();
            let r_each = t.scan_each("victim", |r| {
                each.push(r.id());
                Ok(())
            });
            let mut until = Vec::new();
            let r_until = t.scan_until("victim", ScanOptions::default(), |r| {
                until.push(r.id());
                Ok(true)
            });
            let owned: Vec<_> = t.scan("victim").unwrap().collect();
            if cut == "raised to upper" {
                r_each.unwrap();
                r_until.unwrap();
                assert_eq!(each, rids, "{cut}: scan_each");
                assert_eq!(until, rids, "{cut}: scan_until");
                let got: Vec<RowId> = owned.into_iter().map(|r| r.unwrap().0).collect();
                assert_eq!(got, rids, "{cut}: owned scan");
                continue;
            }
            let owned_err = owned
                .iter()
                .position(Result::is_err)
                .unwrap_or_else(|| panic!("{cut}: the owned scan handed out {} rows", owned.len()));
            let handed: Vec<RowId> = owned[..owned_err]
                .iter()
                .map(|r| r.as_ref().unwrap().0)
                .collect();
            let e_each = r_each.expect_err(&format!("{cut}: scan_each ended without an error"));
            let e_until = r_until.expect_err(&format!("{cut}: scan_until ended without an error"));
            for (how, e, seen) in [
                ("scan_each", &e_each, &each),
                ("scan_until", &e_until, &until),
                (
                    "owned scan",
                    owned[owned_err].as_ref().unwrap_err(),
                    &handed,
                ),
            ] {
                let msg = e.to_string();
                assert_eq!(e.kind(), ErrorKind::CorruptData, "{cut}, {how}: {msg}");
                assert!(
                    msg.contains("victim") && msg.contains(&format!("block {block}")),
                    "{cut}, {how}: {msg}"
                );
                // What came out is the table's first rows, none skipped.
                assert_eq!(seen[..], rids[..seen.len()], "{cut}, {how}");
            }
            drop(t);
            db.close().unwrap();
        }
    });
}

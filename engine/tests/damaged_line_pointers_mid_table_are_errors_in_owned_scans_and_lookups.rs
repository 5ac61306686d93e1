//! A line pointer damaged on disk (checksums off, so the page is read as it
//! is) on a page in the middle of a table: a redirect (never made by this
//! heap), one pointing past the page's end, one pointing into the page
//! header, and one of zero length. An owned scan (plain, filtered,
//! projected and filtered) hands out the rows before the damaged page,
//! each exactly, then an error naming the table and the block, never a
//! panic, an early end or a wrong row; a lookup of the damaged row id is
//! an error naming them too.

mod common;

use std::time::Duration;

use common::{line_pointer_of, row, small_options, victim_table, watchdog};
use engine::{Database, ErrorKind};

const PAGE: usize = 8192;

/// A damage's name and how it changes a line pointer word.
type Damage = (&'static str, fn(u32) -> u32);

#[test]
fn a_damaged_line_pointer_mid_table_is_an_error_naming_table_and_block() {
    watchdog(Duration::from_secs(60), || {
        let options = || small_options().checksums(false);
        let damages: [Damage; 4] = [
            ("redirect", |w| (w & !(3 << 15)) | (2 << 15)),
            ("past the page end", |w| {
                (w & !0x7FFF & !(0x7FFF << 17)) | 8184 | (64 << 17)
            }),
            ("into the header", |w| (w & !0x7FFF) | 8),
            ("zero length", |w| w & !(0x7FFF << 17)),
        ];
        for (what, damage) in damages {
            let dir = tempfile::tempdir().unwrap();
            let marker = "MARKER-damaged-lp-5a1f";
            let (file, rids) = victim_table(dir.path(), options(), marker, false);
            let victim = rids[150];
            assert!(victim.block >= 1, "{what}: the damaged row is past block 0");
            let mut bytes = std::fs::read(&file).unwrap();
            let base = victim.block as usize * PAGE;
            let page = &bytes[base..base + PAGE];
            let at = page
                .windows(marker.len())
                .position(|w| w == marker.as_bytes())
                .expect("the marker is on its page");
            let (p, w) = line_pointer_of(page, at);
            bytes[base + p..base + p + 4].copy_from_slice(&damage(w).to_le_bytes());
            std::fs::write(&file, &bytes).unwrap();

            let db = Database::open(dir.path(), options()).unwrap();
            let t = db.read().unwrap();
            let name_col = db.table_handle("victim").unwrap().column("name").unwrap();
            let scans: [(&str, Vec<_>); 3] = [
                ("plain", t.scan("victim").unwrap().collect()),
                (
                    "filtered",
                    t.scan("victim")
                        .unwrap()
                        .matching(|r| Ok(r.i64("id")? % 2 == 0))
                        .collect(),
                ),
                (
                    "projected and filtered",
                    t.scan("victim")
                        .unwrap()
                        .project(&[name_col])
                        .matching(|r| Ok(r.i64("id")? % 3 != 1))
                        .collect(),
                ),
            ];
            for (how, out) in scans {
                let first_err = out
                    .iter()
                    .position(|r| r.is_err())
                    .unwrap_or_else(|| panic!("{what}, {how} scan: no error in {out:?}"));
                let e = out[first_err].as_ref().unwrap_err();
                let msg = e.to_string();
                assert_eq!(e.kind(), ErrorKind::CorruptData, "{what}, {how}: {msg}");
                assert!(
                    msg.contains("victim") && msg.contains(&format!("block {}", victim.block)),
                    "{what}, {how}: {msg}"
                );
                // Every row before the damaged page came out, exactly.
                let before: Vec<_> = rids.iter().filter(|r| r.block < victim.block).collect();
                let keep = |i: i64| match how {
                    "plain" => true,
                    "filtered" => i % 2 == 0,
                    _ => i % 3 != 1,
                };
                let mut n = 0;
                for (i, rid) in before.iter().enumerate() {
                    if !keep(i as i64) {
                        continue;
                    }
                    let (got, values) = out[n].as_ref().unwrap();
                    assert_eq!(got, *rid, "{what}, {how}");
                    let want = row(i as i64, &format!("row {i:04} and some bytes"));
                    match how {
                        "projected and filtered" => assert_eq!(**values, want[1..]),
                        _ => assert_eq!(**values, want),
                    }
                    n += 1;
                }
                assert!(
                    n > 0 && first_err >= n,
                    "{what}, {how}: {n} rows, error at {first_err}"
                );
                // No row of the damaged page at or after the damage.
                for r in &out[..first_err] {
                    let (rid, _) = r.as_ref().unwrap();
                    assert!(*rid < victim, "{what}, {how}: {rid} handed out");
                }
            }
            // The lookup of the damaged row id.
            match t.get("victim", victim) {
                Err(e) => {
                    let msg = e.to_string();
                    assert_eq!(e.kind(), ErrorKind::CorruptData, "{what}: {msg}");
                    assert!(
                        msg.contains("victim") && msg.contains(&format!("block {}", victim.block)),
                        "{what}: {msg}"
                    );
                }
                Ok(got) => panic!("{what}: lookup of {victim} gave {got:?}"),
            }
            drop(t);
            db.close().unwrap();
        }
    });
}

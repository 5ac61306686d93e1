//! Damage inside durable WAL is an error, not the end of the log: commits
//! acknowledged one by one (each flushed), the process killed, then one
//! 8 KiB page of the WAL between the redo point and the end zeroed. The
//! reopen fails naming the segment and the LSN of the first record the page
//! destroyed, instead of opening without every commit after the page.

mod common;

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::time::Duration;

use common::{small_options, two_columns, watchdog};
use engine::{Database, Value};
use wal::segment::{segment_path, wal_dir};
use wal::{Lsn, WalReader, read_control};

const CHILD_DIR: &str = "ENGINE_TEST_ZEROED_WAL_CHILD_DIR";
const SEGMENT: u64 = 1 << 20;
const WAL_PAGE: u64 = 8192;

#[test]
fn a_zeroed_page_inside_durable_wal_fails_the_open_naming_segment_and_lsn() {
    watchdog(Duration::from_secs(90), || {
        let dir = tempfile::tempdir().unwrap();
        let committed = common::committed_before_sigkill(
            "zeroed_wal_child",
            CHILD_DIR,
            dir.path(),
            400,
            Duration::from_secs(60),
        );
        let redo = read_control(dir.path()).unwrap().unwrap().redo_lsn;
        let records = WalReader::new(dir.path(), redo, SEGMENT)
            .unwrap()
            .read_to_end()
            .unwrap();
        let end = {
            let (lsn, rec) = records.last().unwrap();
            Lsn(lsn.0 + rec.encoded_len() as u64)
        };
        // A whole WAL page in the middle of what was replayed.
        let page = Lsn((redo.0 + end.0) / 2 / WAL_PAGE * WAL_PAGE);
        assert!(
            page.0 > redo.0 && page.0 + 2 * WAL_PAGE < end.0,
            "{redo} {page} {end}"
        );
        // The first record the zeros destroy.
        let (victim, _) = records
            .iter()
            .find(|(lsn, rec)| lsn.0 + rec.encoded_len() as u64 > page.0)
            .unwrap();
        let segment = segment_path(&wal_dir(dir.path()), Lsn(page.0 / SEGMENT * SEGMENT));
        OpenOptions::new()
            .write(true)
            .open(&segment)
            .unwrap()
            .write_all_at(&[0u8; WAL_PAGE as usize], page.0 % SEGMENT)
            .unwrap();

        let e = Database::open(dir.path(), small_options())
            .err()
            .unwrap_or_else(|| {
                panic!(
                    "opened with a zeroed durable WAL page ({} commits acknowledged)",
                    committed.len()
                )
            });
        let text = format!("{e:#}");
        let chain = std::iter::successors(Some(&e as &dyn std::error::Error), |e| e.source())
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join(": ");
        let all = format!("{text} {chain}");
        assert!(all.contains(&segment.display().to_string()), "{all}");
        assert!(
            all.contains(&victim.to_string()),
            "{all} (expected {victim})"
        );
        assert!(all.contains("durable"), "{all}");
    });
}

/// The child: a table, a checkpoint, then rows committed one at a time
/// (each commit flushes the WAL), each printed, until it is killed.
#[test]
#[ignore = "run as a child process by a_zeroed_page_inside_durable_wal_fails_the_open_naming_segment_and_lsn"]
fn zeroed_wal_child() {
    let Some(dir) = std::env::var_os(CHILD_DIR) else {
        return;
    };
    let db = Database::open(&dir, small_options()).unwrap();
    db.create_table("t", two_columns()).unwrap();
    db.checkpoint().unwrap();
    let mut out = std::io::stdout();
    for i in 0.. {
        let t = db.begin().unwrap();
        t.insert("t", vec![Value::I64(i), Value::Null]).unwrap();
        t.commit().unwrap();
        writeln!(out, "COMMITTED {i}").unwrap();
        out.flush().unwrap();
    }
    std::mem::forget(db);
}

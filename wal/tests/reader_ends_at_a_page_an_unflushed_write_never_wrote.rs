//! Regression (found by the power-loss model, `engine/tests/
//! power_loss_keeps_every_acknowledged_commit.rs`): a power loss during an
//! un-flushed write may persist a later 4 kB page of it and not an earlier
//! one (the page cache writes back in any order). The log then reads as
//! zeros up to a page boundary, with valid records after. That is the end
//! of the log, not damage: `Wal::open` used to refuse to open it
//! ("damage in the middle of the log"). Now it ends at the hole, keeps
//! every record flushed before, and clears the stray records after it.
//! A page that is only partly zero (a flipped bit, garbage) is still damage.

mod common;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Duration;

use common::{payload_record, read_from, small_segments, within};
use wal::segment::{SegmentSize, segment_path, wal_dir};
use wal::{ErrorKind, Lsn, MIN_SEGMENT_SIZE, Wal};

const PAGE: u64 = 4096;

/// Writes 20 flushed records, then 60 more in one flush; returns the end
/// of the first batch and the start of every record of the second.
fn write_log(datadir: &Path) -> (Lsn, Vec<Lsn>) {
    let wal = Wal::open(datadir, small_segments()).unwrap();
    let mut end = Lsn::ZERO;
    for xid in 1..=20 {
        end = wal.insert(&payload_record(xid, 100)).unwrap().1;
    }
    wal.flush(end).unwrap();
    let mut second = Vec::new();
    for xid in 21..=80 {
        second.push(wal.insert(&payload_record(xid, 150)).unwrap().0);
    }
    wal.close().unwrap();
    (end, second)
}

fn write_at(datadir: &Path, at: u64, bytes: &[u8]) {
    let size = SegmentSize::new(MIN_SEGMENT_SIZE).unwrap();
    let path = segment_path(&wal_dir(datadir), size.segment_start(Lsn(at)));
    let f = OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, size.offset_in_segment(Lsn(at)))
        .unwrap();
}

/// The first record of the second batch that starts at or after `at`.
fn first_at_or_after(records: &[Lsn], at: u64) -> Lsn {
    *records.iter().find(|l| l.0 >= at).unwrap()
}

#[test]
fn a_never_written_page_of_the_last_write_is_the_end_of_the_log() {
    within(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let (flushed, second) = write_log(dir.path());
        // Lose the cache page holding the middle of the second batch: from
        // the record starting in it, or the page start, to the page end.
        let middle = second[second.len() / 2].0;
        let page_start = middle / PAGE * PAGE;
        let lost_from = first_at_or_after(&second, page_start);
        assert!(
            lost_from.0 < page_start + PAGE,
            "a record starts in the page"
        );
        let hole = page_start.max(flushed.0)..page_start + PAGE;
        write_at(
            dir.path(),
            hole.start,
            &vec![0; (hole.end - hole.start) as usize],
        );
        assert!(
            second.last().unwrap().0 > hole.end,
            "valid records follow the lost page"
        );

        let wal = Wal::open(dir.path(), small_segments()).unwrap();
        let end = wal.startup().end.lsn;
        assert!(
            end >= flushed,
            "every flushed record is kept: {end} < {flushed}"
        );
        assert!(
            end <= Lsn(hole.start.max(lost_from.0)),
            "the log ends at the hole: {end}"
        );
        drop(wal);
        // The records after the hole were cleared by the open.
        let (records, end_again) = read_from(dir.path(), Lsn::ZERO, MIN_SEGMENT_SIZE).unwrap();
        assert_eq!(end_again.lsn, end);
        assert!(records.iter().all(|(l, _)| *l < end));
    });
}

#[test]
fn a_partly_zeroed_page_followed_by_valid_records_is_still_damage() {
    within(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let (_, second) = write_log(dir.path());
        // Zero 100 bytes inside one record: not the shape of an unwritten page.
        let victim = second[10];
        write_at(dir.path(), victim.0 + 30, &[0; 100]);
        let e = Wal::open(dir.path(), small_segments()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::CorruptData, "{e}");
        assert!(e.to_string().contains(&victim.to_string()), "{e}");
    });
}

//! Recovery reader, torn tails: cut the log at every byte offset within its
//! last few records, either by truncating the files (the bytes are gone) or
//! by zeroing them (the space was preallocated but the write never reached
//! it), and check that the reader yields exactly the records that end at or
//! before the cut, stops at the end of the last of them, and says why.
//! A segment is zero-filled to its full size before it is named, so a cut
//! inside a segment file (a short file) is damage, not a crash: an error
//! naming the file. So is a cut at a segment boundary (the later segment
//! files deleted): the log reaches that segment (a record runs into it, or
//! ends at its start), and a write creates every segment it reaches before
//! any of its bytes are written, so no crash leaves it missing.

mod common;

use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Duration;

use common::{payload_record, read_from, restore, small_segments, snapshot, within};
use wal::segment::{SegmentSize, segment_path, wal_dir};
use wal::{EndReason, Lsn, MIN_SEGMENT_SIZE, Wal};

const SEG: u64 = MIN_SEGMENT_SIZE;

/// Write a log whose last three records straddle a segment boundary, and
/// return every record's (start, end).
fn write_log(datadir: &Path) -> Vec<(Lsn, Lsn)> {
    let wal = Wal::open(datadir, small_segments()).unwrap();
    let mut places = Vec::new();
    let mut xid = 1;
    // Fill the first segment until fewer than 250 bytes are left.
    while wal.insert_lsn().0 < SEG - 250 {
        places.push(wal.insert(&payload_record(xid, 200)).unwrap());
        xid += 1;
    }
    // The next record crosses into the second segment; two more follow.
    for len in [300, 120, 90] {
        places.push(wal.insert(&payload_record(xid, len)).unwrap());
        xid += 1;
    }
    wal.close().unwrap();
    let (crossing_start, crossing_end) = places[places.len() - 3];
    assert!(crossing_start.0 < SEG && crossing_end.0 > SEG);
    places
}

/// How to damage the log from a position on.
#[derive(Copy, Clone, Debug)]
enum Cut {
    /// The files end at the position (later segments removed; the segment
    /// holding it too if it starts there).
    Truncate,
    /// Every byte from the position on is zero.
    Zero,
}

fn cut_log(datadir: &Path, at: Lsn, how: Cut) {
    let size = SegmentSize::new(SEG).unwrap();
    let dir = wal_dir(datadir);
    let seg = size.segment_start(at);
    let offset = size.offset_in_segment(at);
    let f = OpenOptions::new()
        .write(true)
        .open(segment_path(&dir, seg))
        .unwrap();
    match how {
        Cut::Truncate if offset == 0 => fs::remove_file(segment_path(&dir, seg)).unwrap(),
        Cut::Truncate => f.set_len(offset).unwrap(),
        Cut::Zero => f
            .write_all_at(&vec![0u8; (SEG - offset) as usize], offset)
            .unwrap(),
    }
    let mut later = Lsn(seg.0 + SEG);
    while segment_path(&dir, later).exists() {
        match how {
            Cut::Truncate => fs::remove_file(segment_path(&dir, later)).unwrap(),
            Cut::Zero => fs::write(segment_path(&dir, later), vec![0u8; SEG as usize]).unwrap(),
        }
        later = Lsn(later.0 + SEG);
    }
}

fn check_every_cut(how: Cut) {
    let dir = tempfile::tempdir().unwrap();
    let places = write_log(dir.path());
    let original = snapshot(dir.path());
    let first_cut = places[places.len() - 4].0; // the start of the 4th-last record
    let last_end = places.last().unwrap().1;
    let mut cuts = 0;
    for at in first_cut.0..=last_end.0 {
        let at = Lsn(at);
        cut_log(dir.path(), at, how);
        let result = read_from(dir.path(), Lsn::ZERO, SEG);
        let size = SegmentSize::new(SEG).unwrap();
        if matches!(how, Cut::Truncate) {
            let e = result
                .err()
                .unwrap_or_else(|| panic!("files cut at {at} read without an error"));
            let file = segment_path(&wal_dir(dir.path()), size.segment_start(at));
            assert!(e.to_string().contains(&file.display().to_string()), "{e}");
            let why = if size.offset_in_segment(at) == 0 {
                "is missing"
            } else {
                "truncated"
            };
            assert!(e.to_string().contains(why), "at {at}: {e}");
            restore(dir.path(), &original);
            cuts += 1;
            continue;
        }
        let (records, end) = result.unwrap_or_else(|e| panic!("{how:?} at {at}: {e}"));
        let whole: Vec<&(Lsn, Lsn)> = places.iter().filter(|(_, e)| *e <= at).collect();
        assert_eq!(
            records.len(),
            whole.len(),
            "{how:?} at {at}: wrong record count"
        );
        let expected_end = whole.last().map_or(Lsn::ZERO, |(_, e)| *e);
        assert_eq!(end.lsn, expected_end, "{how:?} at {at}: wrong end");
        let at_boundary = at == expected_end;
        if at_boundary {
            assert_eq!(end.reason, EndReason::ZeroedTail, "at {at}");
        } else {
            assert!(end.reason.is_torn(), "at {at}: {:?}", end.reason);
        }
        restore(dir.path(), &original);
        cuts += 1;
    }
    assert!(cuts > 500, "only {cuts} cuts tried");
}

#[test]
fn truncating_the_files_at_every_offset_of_the_last_records_is_an_error_naming_the_file() {
    within(Duration::from_secs(120), || check_every_cut(Cut::Truncate));
}

#[test]
fn zeroing_the_tail_at_every_offset_of_the_last_records_stops_at_the_last_whole_record() {
    within(Duration::from_secs(120), || check_every_cut(Cut::Zero));
}

#[test]
fn reopening_after_a_torn_tail_clears_it_and_continues_the_chain() {
    within(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let places = write_log(dir.path());
        let original = snapshot(dir.path());
        // Cut inside the record that crosses the segment boundary, and inside
        // the last record.
        for victim in [places.len() - 3, places.len() - 1] {
            let (start, end) = places[victim];
            for how in [Cut::Truncate, Cut::Zero] {
                let at = Lsn((start.0 + end.0) / 2);
                cut_log(dir.path(), at, how);
                if matches!(how, Cut::Truncate) {
                    // A short segment file: an error naming it, and the log
                    // is left as it was.
                    let e = Wal::open(dir.path(), small_segments()).unwrap_err();
                    let file = segment_path(&wal_dir(dir.path()), Lsn(at.0 / SEG * SEG));
                    assert!(e.to_string().contains(&file.display().to_string()), "{e}");
                    restore(dir.path(), &original);
                    continue;
                }
                let wal = Wal::open(dir.path(), small_segments()).unwrap();
                assert_eq!(wal.startup().end.lsn, start, "{how:?}");
                assert_eq!(wal.startup().records, victim as u64);
                assert_eq!(wal.startup().last_record, Some(places[victim - 1].0));
                let (s, e) = wal.insert(&payload_record(999_999, 5000)).unwrap();
                assert_eq!(s, start);
                wal.flush(e).unwrap();
                drop(wal);
                let (records, end) = read_from(dir.path(), Lsn::ZERO, SEG).unwrap();
                assert_eq!(records.len(), victim + 1);
                assert_eq!(records.last().unwrap().1.xid(), 999_999);
                assert_eq!(records.last().unwrap().1.prev_lsn(), places[victim - 1].0);
                assert_eq!((end.lsn, end.reason), (e, EndReason::ZeroedTail));
                restore(dir.path(), &original);
            }
        }
    });
}

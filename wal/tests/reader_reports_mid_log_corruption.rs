//! Recovery reader, damage: a flipped bit in a record in the middle of the log
//! (valid records follow it) is an error naming the segment file and the LSN;
//! the same flip in the last record is a torn tail and a clean stop, unless
//! it makes the record's length run past the segment files: a record that
//! runs into a segment proves the segment was created, so that is an error
//! naming the missing segment (a crash never tears a length into a longer
//! one: unwritten bytes are zeros).

mod common;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Duration;

use common::{page, payload_record, read_from, small_segments, tag, within};
use wal::segment::{SegmentSize, segment_file_name, segment_path, wal_dir};
use wal::{BlockRef, ErrorKind, Hole, Lsn, MIN_SEGMENT_SIZE, Record, RmgrKind, Wal};

const SEG: u64 = MIN_SEGMENT_SIZE;

fn write_log(datadir: &Path) -> Vec<(Lsn, Lsn)> {
    let wal = Wal::open(datadir, small_segments()).unwrap();
    let mut places = Vec::new();
    for xid in 1..=20u64 {
        let rec = if xid == 10 {
            // One record with a block and an image, so flips hit those fields too.
            Record::builder(RmgrKind::Btree, 1, xid)
                .block(
                    BlockRef::with_image(tag(4, 2), &page(2), Hole::new(1000, 7000).unwrap())
                        .unwrap(),
                )
                .block(BlockRef::new(tag(4, 3)))
                .payload(vec![7; 33])
                .build()
                .unwrap()
        } else {
            payload_record(xid, 60 + xid as usize)
        };
        places.push(wal.insert(&rec).unwrap());
    }
    wal.close().unwrap();
    places
}

fn flip_bit(datadir: &Path, at: Lsn, bit: u8) {
    let size = SegmentSize::new(SEG).unwrap();
    let path = segment_path(&wal_dir(datadir), size.segment_start(at));
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8];
    let offset = size.offset_in_segment(at);
    f.read_exact_at(&mut b, offset).unwrap();
    b[0] ^= 1 << bit;
    f.write_all_at(&b, offset).unwrap();
}

#[test]
fn a_flipped_bit_anywhere_in_a_middle_record_is_reported_as_corruption() {
    within(Duration::from_secs(120), || {
        let dir = tempfile::tempdir().unwrap();
        let places = write_log(dir.path());
        for victim in [0usize, 5, 9, 18] {
            let (start, end) = places[victim];
            for at in start.0..end.0 {
                let bit = (at % 8) as u8;
                flip_bit(dir.path(), Lsn(at), bit);
                let e = read_from(dir.path(), Lsn::ZERO, SEG)
                    .expect_err(&format!("record {victim}: bit {bit} at {at} not detected"));
                assert_eq!(e.kind(), ErrorKind::CorruptData, "{e}");
                let msg = e.to_string();
                assert!(
                    msg.contains(&start.to_string()),
                    "message lacks the LSN: {msg}"
                );
                assert!(
                    msg.contains(&segment_file_name(Lsn::ZERO)),
                    "message lacks the file: {msg}"
                );
                flip_bit(dir.path(), Lsn(at), bit);
            }
        }
        // Undamaged again.
        assert_eq!(read_from(dir.path(), Lsn::ZERO, SEG).unwrap().0.len(), 20);
    });
}

#[test]
fn a_flipped_bit_anywhere_in_the_last_record_is_a_torn_tail() {
    within(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let places = write_log(dir.path());
        let (start, end) = *places.last().unwrap();
        for at in start.0..end.0 {
            for bit in [0u8, 7] {
                flip_bit(dir.path(), Lsn(at), bit);
                let read = read_from(dir.path(), Lsn::ZERO, SEG);
                let in_length = at < start.0 + 4;
                if in_length && let Err(e) = &read {
                    let next = segment_path(&wal_dir(dir.path()), Lsn(SEG));
                    let msg = e.to_string();
                    assert_eq!(e.kind(), ErrorKind::CorruptData, "{e}");
                    assert!(msg.contains(&next.display().to_string()), "{msg}");
                    assert!(msg.contains("runs into it"), "{msg}");
                    assert!(msg.contains(&start.to_string()), "{msg}");
                    flip_bit(dir.path(), Lsn(at), bit);
                    continue;
                }
                let (records, wal_end) = read.unwrap_or_else(|e| panic!("bit {bit} at {at}: {e}"));
                assert_eq!(records.len(), 19);
                assert_eq!(wal_end.lsn, start);
                assert!(
                    wal_end.reason.is_torn(),
                    "bit {bit} at {at}: {:?}",
                    wal_end.reason
                );
                flip_bit(dir.path(), Lsn(at), bit);
            }
        }
    });
}

#[test]
fn a_valid_record_with_a_wrong_prev_lsn_is_a_broken_chain() {
    within(Duration::from_secs(30), || {
        let dir = tempfile::tempdir().unwrap();
        let places = write_log(dir.path());
        // Re-encode record 5 with a prev LSN pointing elsewhere, CRC intact.
        let (records, _) = read_from(dir.path(), Lsn::ZERO, SEG).unwrap();
        let (start, _) = places[5];
        let forged = records[5].1.clone().with_prev_lsn(places[3].0).encode();
        let f = OpenOptions::new()
            .write(true)
            .open(segment_path(&wal_dir(dir.path()), Lsn::ZERO))
            .unwrap();
        f.write_all_at(&forged, start.0).unwrap();
        let e = read_from(dir.path(), Lsn::ZERO, SEG).unwrap_err();
        assert!(e.to_string().contains("broken chain"), "{e}");
        assert!(e.to_string().contains(&start.to_string()), "{e}");
    });
}

//! A checkpoint names itself in `<datadir>/control`, removes the segments
//! wholly before its redo point, and a reopened log starts at that redo point
//! and finds the checkpoint record. A damaged control file is refused with an
//! error naming it; an interrupted control-file write (only `control.tmp`
//! written) leaves the old one in force. A failed page flush abandons the
//! checkpoint and leaves the previous one standing.

mod common;

use std::fs;
use std::io;
use std::time::Duration;

use common::{payload_record, segment_files, small_segments, within, writer_made_segments};
use wal::segment::segment_file_name;
use wal::{
    CheckpointPayload, ControlData, ErrorKind, Lsn, MIN_SEGMENT_SIZE, RmgrKind, Wal, WalError,
    WalReader, control_path, read_control,
};

/// Insert about `bytes` of WAL and flush it.
fn fill(wal: &Wal, first_xid: u64, bytes: u64) {
    let mut xid = first_xid;
    let target = wal.insert_lsn().as_u64() + bytes;
    while wal.insert_lsn().as_u64() < target {
        wal.insert(&payload_record(xid, 900)).unwrap();
        xid += 1;
    }
    wal.flush_all().unwrap();
}

fn segment_start(lsn: Lsn) -> Lsn {
    Lsn(lsn.as_u64() / MIN_SEGMENT_SIZE * MIN_SEGMENT_SIZE)
}

#[test]
fn checkpoint_names_itself_removes_old_segments_and_reopens_at_redo() {
    within(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let wal = Wal::open(dir.path(), small_segments()).unwrap();
        assert_eq!(wal.last_checkpoint(), None);
        assert_eq!(read_control(dir.path()).unwrap(), None);
        fill(&wal, 1, 5 * MIN_SEGMENT_SIZE);
        assert!(segment_files(dir.path()).len() >= 6);
        assert_eq!(wal.bytes_since_checkpoint(), wal.insert_lsn().as_u64());

        let mut seen_redo = None;
        let info = wal
            .checkpoint(
                |redo| {
                    seen_redo = Some(redo);
                    Ok::<_, io::Error>(())
                },
                42,
            )
            .unwrap();
        assert_eq!(seen_redo, Some(info.redo_lsn));
        assert!(info.redo_lsn <= info.checkpoint_lsn);
        assert_eq!(wal.redo_lsn(), info.redo_lsn);
        assert!(wal.flushed_lsn() >= info.checkpoint_end);
        assert_eq!(
            wal.bytes_since_checkpoint(),
            info.checkpoint_end.distance_from(info.redo_lsn)
        );

        // The control file names the checkpoint.
        let control = read_control(dir.path()).unwrap().expect("written");
        assert_eq!(control.checkpoint_lsn, info.checkpoint_lsn);
        assert_eq!(control.redo_lsn, info.redo_lsn);
        assert_eq!(control.next_xid, 42);
        assert_eq!(control.segment_size, MIN_SEGMENT_SIZE);
        assert_eq!(wal.last_checkpoint(), Some(control));

        // Every segment before the redo segment is gone, the rest is there.
        let redo_segment = segment_start(info.redo_lsn);
        assert_eq!(
            info.segments_removed as u64,
            redo_segment.as_u64() / MIN_SEGMENT_SIZE
        );
        assert!(info.segments_removed >= 4);
        let first = segment_files(dir.path())[0].clone();
        assert_eq!(
            first.file_name().unwrap().to_str().unwrap(),
            segment_file_name(redo_segment)
        );

        // More work after the checkpoint, then reopen.
        fill(&wal, 10_000, 1000);
        let end = wal.insert_lsn();
        drop(wal);
        let wal = Wal::open(dir.path(), small_segments()).unwrap();
        assert_eq!(wal.startup().start, info.redo_lsn);
        assert_eq!(wal.startup().end.lsn, end);
        assert_eq!(wal.last_checkpoint(), Some(control));
        assert_eq!(wal.redo_lsn(), info.redo_lsn);

        // Reading from the redo point finds the checkpoint record.
        let records = WalReader::new(dir.path(), control.redo_lsn, MIN_SEGMENT_SIZE)
            .unwrap()
            .read_to_end()
            .unwrap();
        let (_, rec) = records
            .iter()
            .find(|(lsn, _)| *lsn == control.checkpoint_lsn)
            .expect("the checkpoint record is where the control file says");
        assert_eq!(rec.kind(), RmgrKind::Checkpoint);
        let payload = CheckpointPayload::from_record(rec).unwrap();
        assert_eq!((payload.redo_lsn, payload.next_xid), (info.redo_lsn, 42));

        // A second checkpoint replaces the first.
        let info2 = wal.checkpoint(|_| Ok::<_, io::Error>(()), 43).unwrap();
        assert!(info2.redo_lsn > info.redo_lsn);
        let c2 = read_control(dir.path()).unwrap().unwrap();
        assert_eq!((c2.checkpoint_lsn, c2.next_xid), (info2.checkpoint_lsn, 43));
    });
}

fn checkpointed_datadir() -> (tempfile::TempDir, ControlData) {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(dir.path(), small_segments()).unwrap();
    fill(&wal, 1, 2 * MIN_SEGMENT_SIZE);
    wal.checkpoint(|_| Ok::<_, io::Error>(()), 7).unwrap();
    fill(&wal, 1000, 500);
    let control = wal.last_checkpoint().unwrap();
    drop(wal);
    (dir, control)
}

#[test]
fn a_control_file_with_a_flipped_byte_is_rejected_naming_the_file() {
    within(Duration::from_secs(60), || {
        let (dir, _) = checkpointed_datadir();
        let path = control_path(dir.path());
        let good = fs::read(&path).unwrap();
        for i in [0, 5, 9, 17, 25, 33, 41, good.len() - 1] {
            let mut bad = good.clone();
            bad[i] ^= 0x20;
            fs::write(&path, &bad).unwrap();
            let err = Wal::open(dir.path(), small_segments()).unwrap_err();
            assert!(
                matches!(err, WalError::CorruptControlFile { .. }),
                "byte {i}: {err}"
            );
            assert_eq!(err.kind(), ErrorKind::CorruptData);
            assert!(
                err.to_string().contains(&path.display().to_string()),
                "the error names the file: {err}"
            );
            assert!(read_control(dir.path()).is_err());
        }
        // Truncated.
        fs::write(&path, &good[..20]).unwrap();
        let err = Wal::open(dir.path(), small_segments()).unwrap_err();
        assert!(
            err.to_string().contains(&path.display().to_string()),
            "{err}"
        );
    });
}

#[test]
fn an_interrupted_control_file_write_leaves_the_old_one_in_force() {
    within(Duration::from_secs(60), || {
        let (dir, control) = checkpointed_datadir();
        let tmp = dir.path().join("control.tmp");
        // A crash after writing part of the new file, before the rename.
        let newer = ControlData::now(Lsn(1 << 40), Lsn(1 << 40), 99, MIN_SEGMENT_SIZE);
        fs::write(&tmp, &newer.encode()[..30]).unwrap();
        assert_eq!(read_control(dir.path()).unwrap(), Some(control));
        let wal = Wal::open(dir.path(), small_segments()).unwrap();
        assert_eq!(wal.last_checkpoint(), Some(control));
        assert_eq!(wal.startup().start, control.redo_lsn);
        assert!(!tmp.exists(), "the stale temp file is removed at open");
        drop(wal);

        // Only a temp file, no control file: a data directory that never
        // completed a checkpoint.
        let fresh = tempfile::tempdir().unwrap();
        fs::write(fresh.path().join("control.tmp"), newer.encode()).unwrap();
        let wal = Wal::open(fresh.path(), small_segments()).unwrap();
        assert_eq!(wal.last_checkpoint(), None);
        assert_eq!(wal.startup().start, Lsn::ZERO);
    });
}

#[test]
fn a_failed_page_flush_abandons_the_checkpoint() {
    within(Duration::from_secs(60), || {
        let (dir, control) = checkpointed_datadir();
        // Without segments made ahead: the background thread's `.tmp`
        // renamed to `.next` meanwhile would read as a change of the
        // directory that the checkpoint did not make.
        let wal = Wal::open(dir.path(), writer_made_segments()).unwrap();
        fill(&wal, 5000, 3 * MIN_SEGMENT_SIZE);
        let segments = segment_files(dir.path());
        let records = wal.stats().records;
        let err = wal
            .checkpoint(|_| Err::<(), _>(io::Error::other("disk on fire")), 8)
            .unwrap_err();
        assert!(matches!(err, WalError::CheckpointFlush { .. }), "{err}");
        assert!(err.to_string().contains("disk on fire"), "{err}");
        assert_eq!(wal.stats().records, records, "no checkpoint record");
        assert_eq!(wal.last_checkpoint(), Some(control));
        assert_eq!(read_control(dir.path()).unwrap(), Some(control));
        assert_eq!(segment_files(dir.path()), segments, "nothing removed");
        // The log still works, and the next checkpoint succeeds.
        let info = wal.checkpoint(|_| Ok::<_, io::Error>(()), 9).unwrap();
        assert!(info.segments_removed >= 3);
    });
}

#[test]
fn opening_with_another_segment_size_than_the_control_file_is_refused() {
    within(Duration::from_secs(60), || {
        let (dir, _) = checkpointed_datadir();
        let config = wal::WalConfig {
            segment_size: 2 * MIN_SEGMENT_SIZE,
            ..small_segments()
        };
        let err = Wal::open(dir.path(), config).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::BadInput, "{err}");
    });
}

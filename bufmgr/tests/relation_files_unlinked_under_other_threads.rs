//! Relation files unlinked while other threads use the storage.
//!
//! - A relation unlinked and made again under the same number while other
//!   threads read it (and close and reopen its file, the cap at one): the
//!   new relation is the new file. A descriptor of the unlinked file opened
//!   by a reader while the unlink ran must never become the relation's open
//!   file: reads would see the old pages with the old block count, writes
//!   would go into a file no longer in the directory (lost at its close),
//!   and a `create` of the number would find it "known" and make no file.
//! - `sync_all` while relations are made and unlinked: a fork unlinked
//!   after `sync_all` listed it has nothing left to sync; it is not an
//!   error (the file cannot be opened again to be synced).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bufmgr::tag::{BufferTag, PAGE_SIZE, RelFork, RelId};
use bufmgr::{FileStorage, StorageBackend};
use common::with_timeout;

/// Descriptors of this process open on `path` after it was unlinked.
fn deleted_descriptors_of(path: &std::path::Path) -> usize {
    let deleted = format!("{} (deleted)", path.display());
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter(|l| l.to_string_lossy() == deleted)
        .count()
}

#[test]
fn a_relation_unlinked_and_made_again_under_readers_is_its_new_file() {
    with_timeout(60, || {
        let dir = tempfile::tempdir().unwrap();
        let s = Arc::new(FileStorage::open(dir.path()).unwrap());
        let rf = RelFork::main(RelId(1));
        let other = RelFork::main(RelId(2));
        let path = s.path(rf);
        for r in [rf, other] {
            s.create(r).unwrap();
            s.write(BufferTag::new(r, 0), &vec![0u8; PAGE_SIZE])
                .unwrap();
        }
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..4)
            .map(|t| {
                let (s, stop) = (Arc::clone(&s), Arc::clone(&stop));
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; PAGE_SIZE];
                    while !stop.load(Ordering::Relaxed) {
                        // Errors are expected while the file is away.
                        let _ = s.read(BufferTag::new(rf, 0), &mut buf);
                        let _ = s.nblocks(rf);
                        if t == 0 {
                            // Close rf, so that the next use reopens it.
                            let _ = s.read(BufferTag::new(other, 0), &mut buf);
                        }
                    }
                })
            })
            .collect();
        s.set_max_open_files(1);
        let mut failure = None;
        for round in 1..=200u32 {
            let p = vec![(round % 250) as u8 + 1; PAGE_SIZE];
            let mut read = vec![0u8; PAGE_SIZE];
            let done = s
                .unlink(rf)
                .and_then(|()| s.create(rf))
                .and_then(|()| s.write(BufferTag::new(rf, 0), &p))
                .and_then(|()| s.read(BufferTag::new(rf, 0), &mut read));
            let on_disk = std::fs::read(&path).ok();
            if let Err(e) = done {
                failure = Some(format!("round {round}: {e}"));
                break;
            }
            if on_disk.as_deref() != Some(&p[..]) || read != p {
                failure = Some(format!(
                    "round {round}: the file in the directory holds {:?} (first byte), \
                     {} bytes, the storage read {} and counts {:?} blocks: \
                     the page went to another file than {}",
                    on_disk.as_ref().map(|d| d.first().copied()),
                    on_disk.as_ref().map_or(0, |d| d.len()),
                    read[0],
                    s.nblocks(rf),
                    path.display()
                ));
                break;
            }
        }
        // Unlinked for good, with the readers still at it.
        let last = s.unlink(rf);
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            r.join().unwrap();
        }
        if let Some(f) = failure {
            panic!("{f}");
        }
        last.unwrap();
        assert!(!s.exists(rf).unwrap(), "{} is known after its unlink", rf);
        assert_eq!(
            deleted_descriptors_of(&path),
            0,
            "a descriptor of unlinked {} is held: its space is not freed",
            path.display()
        );
    });
}

#[test]
fn sync_all_while_relations_are_unlinked_syncs_the_others_without_error() {
    with_timeout(60, || {
        let dir = tempfile::tempdir().unwrap();
        let s = Arc::new(FileStorage::open(dir.path()).unwrap());
        // Closed files are reopened to be synced: the window is that open.
        s.set_max_open_files(2);
        let kept = RelFork::main(RelId(1));
        s.create(kept).unwrap();
        s.write(BufferTag::new(kept, 0), &vec![1u8; PAGE_SIZE])
            .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let churn = {
            let (s, stop) = (Arc::clone(&s), Arc::clone(&stop));
            std::thread::spawn(move || -> bufmgr::Result<()> {
                let mut n = 10u32;
                while !stop.load(Ordering::Relaxed) {
                    let rf = RelFork::main(RelId(n));
                    s.create(rf)?;
                    s.write(BufferTag::new(rf, 0), &vec![2u8; PAGE_SIZE])?;
                    s.unlink(rf)?;
                    n += 1;
                }
                Ok(())
            })
        };
        let mut failure = None;
        for i in 0..1000 {
            if let Err(e) = s.sync_all() {
                failure = Some(format!("sync_all {i}: {e}"));
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        churn.join().unwrap().unwrap();
        if let Some(f) = failure {
            panic!("{f}");
        }
    });
}

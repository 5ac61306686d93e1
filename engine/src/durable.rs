//! The durable length of every relation fork, logged at each checkpoint and
//! handed back to the pool by recovery (`bufmgr`'s `durable` rules).
//!
//! Extending a relation writes a blank page without an fsync; a power loss
//! can keep the longer file and lose the page's bytes, leaving zeros that no
//! WAL record describes. Such a page is new (PostgreSQL's rule for an
//! all-zero page). An all-zero page inside what an fsync made durable is
//! damage. To tell them apart after a crash the pool must know, per fork,
//! how many blocks the last successful fsync covered:
//!
//! ```text
//!   checkpoint: redo point R ── flush_all (every fork fsynced: lengths durable)
//!               ── Storage DURABLE_LENGTHS record(s) ── checkpoint record ── control file
//!   recovery from R: the Storage records after R -> pool.note_durable_lengths
//! ```
//!
//! The records come after the redo point of the checkpoint that logged them,
//! so recovery (which starts there) always reads the last complete list.
//! A fork created or extended since is at length 0 or more in that list: its
//! blocks beyond are not durable, and read as new pages if all zeros.
//!
//! # Record
//!
//! ```text
//!   kind Storage, info 0x00 DURABLE_LENGTHS, xid 0
//!   payload: entries of 9 bytes: relation u32 LE, fork u8, blocks u32 LE
//!            (at most MAX_PAYLOAD_LEN / 9 entries a record; more records
//!            if there are more forks)
//! ```

use bufmgr::{BlockNumber, BufferPool, Fork, RelFork, RelId};
use wal::record::MAX_PAYLOAD_LEN;
use wal::{Lsn, Record, RmgrKind, Wal};

use crate::error::{EngineError, Result};

/// `info` of the record listing durable lengths.
pub const DURABLE_LENGTHS: u8 = 0x00;
/// Bytes per entry.
const ENTRY_LEN: usize = 9;
/// Entries per record at most.
const ENTRIES_PER_RECORD: usize = MAX_PAYLOAD_LEN / ENTRY_LEN;

/// Log every fork's durable length known to `pool` (after the checkpoint's
/// fsyncs); nothing if none is known.
pub fn log_durable_lengths(wal: &Wal, pool: &BufferPool) -> Result<()> {
    let lengths = pool.durable_lengths();
    for chunk in lengths.chunks(ENTRIES_PER_RECORD) {
        let mut payload = Vec::with_capacity(chunk.len() * ENTRY_LEN);
        for (rf, n) in chunk {
            payload.extend_from_slice(&rf.rel.0.to_le_bytes());
            payload.push(rf.fork as u8);
            payload.extend_from_slice(&n.to_le_bytes());
        }
        let record = Record::builder(RmgrKind::Storage, DURABLE_LENGTHS, 0)
            .payload(payload)
            .build()
            .map_err(EngineError::wal(
                "could not build the record of relation lengths",
            ))?;
        wal.insert(&record).map_err(EngineError::wal(
            "could not log the durable lengths of the relations",
        ))?;
    }
    Ok(())
}

/// Decode a `Storage` record ending at `end` (named in errors).
pub fn decode(record: &Record, end: Lsn) -> Result<Vec<(RelFork, BlockNumber)>> {
    let bad = |detail: String| EngineError::MalformedXactRecord { lsn: end, detail };
    if record.kind() != RmgrKind::Storage || record.info() != DURABLE_LENGTHS {
        return Err(bad(format!(
            "a {:?} record with info {:#04x}, not a list of durable lengths",
            record.kind(),
            record.info()
        )));
    }
    let p = record.payload();
    if !p.len().is_multiple_of(ENTRY_LEN) {
        return Err(bad(format!(
            "durable lengths: a payload of {} bytes is not a multiple of {ENTRY_LEN}",
            p.len()
        )));
    }
    p.chunks_exact(ENTRY_LEN)
        .map(|e| {
            let rel = RelId(u32::from_le_bytes(e[..4].try_into().expect("4 bytes")));
            let fork = Fork::from_u8(e[4]).ok_or_else(|| {
                bad(format!(
                    "durable lengths: relation {rel:?} has fork {}",
                    e[4]
                ))
            })?;
            let n = BlockNumber::from_le_bytes(e[5..].try_into().expect("4 bytes"));
            Ok((RelFork { rel, fork }, n))
        })
        .collect()
}

/// Replay a `Storage` record ending at `end` into `pool`.
pub fn redo_storage(record: &Record, end: Lsn, pool: &BufferPool) -> Result<()> {
    pool.note_durable_lengths(decode(record, end)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(payload: Vec<u8>) -> Record {
        Record::builder(RmgrKind::Storage, DURABLE_LENGTHS, 0)
            .payload(payload)
            .build()
            .unwrap()
    }

    #[test]
    fn entries_round_trip_and_bad_payloads_are_errors() {
        let mut p = Vec::new();
        for (rel, fork, n) in [(1u32, 0u8, 3u32), (1000, 1, 7)] {
            p.extend_from_slice(&rel.to_le_bytes());
            p.push(fork);
            p.extend_from_slice(&n.to_le_bytes());
        }
        let got = decode(&record(p.clone()), Lsn(1)).unwrap();
        assert_eq!(
            got,
            vec![
                (RelFork::main(RelId(1)), 3),
                (
                    RelFork {
                        rel: RelId(1000),
                        fork: Fork::FreeSpace
                    },
                    7
                )
            ]
        );
        let short = decode(&record(p[..10].to_vec()), Lsn(1)).unwrap_err();
        assert!(short.to_string().contains("not a multiple"), "{short}");
        let mut bad_fork = p.clone();
        bad_fork[4] = 9;
        let e = decode(&record(bad_fork), Lsn(1)).unwrap_err();
        assert!(e.to_string().contains("fork 9"), "{e}");
    }
}

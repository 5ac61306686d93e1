//! The heap's WAL records: what each change logs so that redo can repeat it.
//!
//! Every record is `RmgrKind::Heap`; the `info` byte says which change; the
//! record's xid is the transaction that made it. Block references name the
//! pages (and carry full-page images when the WAL asks for them); the
//! payload carries the rest, little-endian:
//!
//! ```text
//!  info  change   blocks                       payload
//!  0x00  INSERT   0: the page                  offset u16, init u8, tuple bytes (header included)
//!  0x10  DELETE   0: the page                  offset u16            (xmax = record xid)
//!  0x20  UPDATE   0: old page, [1: new page]   old offset u16, new offset u16, init u8, new tuple bytes
//!                 (one block when the new version is on the old page)
//!  0x30  PRUNE    0: the page                  prune_xid u64, count u16, count x (offset u16, state u8)
//!  0x40  VACUUM   0: the page                  count u16, count x offset u16 (dead -> unused)
//! ```
//!
//! `init` says the page was never initialised before this change (it was
//! just extended), so redo initialises it instead of reading what is there
//! (PostgreSQL's `XLOG_HEAP_INIT_PAGE`); such a block is registered
//! `WILL_INIT` and needs no full-page image. PRUNE is vacuum's first pass
//! (and `prune_page`): dead versions lose their storage and their pointers
//! become dead. VACUUM is its second pass, after the indexes let go of those
//! TIDs: dead pointers become unused (PostgreSQL's `XLOG_HEAP2_VACUUM`);
//! redo refuses a listed pointer that is not dead.

use crate::error::{HeapError, Result};
use crate::page::LpState;

/// `info` of an insert.
pub const XLOG_HEAP_INSERT: u8 = 0x00;
/// `info` of a delete.
pub const XLOG_HEAP_DELETE: u8 = 0x10;
/// `info` of an update.
pub const XLOG_HEAP_UPDATE: u8 = 0x20;
/// `info` of a prune or vacuum of one page.
pub const XLOG_HEAP_PRUNE: u8 = 0x30;
/// `info` of vacuum's second pass over one page (dead pointers -> unused).
pub const XLOG_HEAP_VACUUM: u8 = 0x40;

/// A decoded heap WAL record payload.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum HeapRecord {
    Insert {
        offset: u16,
        init: bool,
        tuple: Vec<u8>,
    },
    Delete {
        offset: u16,
    },
    Update {
        old_offset: u16,
        new_offset: u16,
        init: bool,
        tuple: Vec<u8>,
    },
    Prune {
        prune_xid: u64,
        changes: Vec<(u16, LpState)>,
    },
    Vacuum {
        offsets: Vec<u16>,
    },
}

fn bad(info: u8, what: &str) -> HeapError {
    HeapError::BadRecord(format!("heap record with info {info:#04x}: {what}"))
}

/// A little reader that never reads past the end.
struct Cursor<'a> {
    bytes: &'a [u8],
    info: u8,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.bytes.len() < n {
            return Err(bad(self.info, "payload is too short"));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.bytes)
    }
    fn done(&self) -> Result<()> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(bad(self.info, "trailing bytes in payload"))
        }
    }
}

impl HeapRecord {
    /// The `info` byte and payload of this record.
    pub fn encode(&self) -> (u8, Vec<u8>) {
        let mut p = Vec::new();
        let info = match self {
            HeapRecord::Insert {
                offset,
                init,
                tuple,
            } => {
                p.extend_from_slice(&offset.to_le_bytes());
                p.push(u8::from(*init));
                p.extend_from_slice(tuple);
                XLOG_HEAP_INSERT
            }
            HeapRecord::Delete { offset } => {
                p.extend_from_slice(&offset.to_le_bytes());
                XLOG_HEAP_DELETE
            }
            HeapRecord::Update {
                old_offset,
                new_offset,
                init,
                tuple,
            } => {
                p.extend_from_slice(&old_offset.to_le_bytes());
                p.extend_from_slice(&new_offset.to_le_bytes());
                p.push(u8::from(*init));
                p.extend_from_slice(tuple);
                XLOG_HEAP_UPDATE
            }
            HeapRecord::Prune { prune_xid, changes } => {
                p.extend_from_slice(&prune_xid.to_le_bytes());
                p.extend_from_slice(&(changes.len() as u16).to_le_bytes());
                for (off, state) in changes {
                    p.extend_from_slice(&off.to_le_bytes());
                    p.push(*state as u8);
                }
                XLOG_HEAP_PRUNE
            }
            HeapRecord::Vacuum { offsets } => {
                p.extend_from_slice(&(offsets.len() as u16).to_le_bytes());
                for off in offsets {
                    p.extend_from_slice(&off.to_le_bytes());
                }
                XLOG_HEAP_VACUUM
            }
        };
        (info, p)
    }

    /// Decode a payload; an error (never a panic) for anything malformed.
    pub fn decode(info: u8, payload: &[u8]) -> Result<HeapRecord> {
        let mut c = Cursor {
            bytes: payload,
            info,
        };
        let flag = |b: u8| match b {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(bad(info, "init flag is not 0 or 1")),
        };
        let rec = match info {
            XLOG_HEAP_INSERT => HeapRecord::Insert {
                offset: c.u16()?,
                init: flag(c.u8()?)?,
                tuple: c.rest().to_vec(),
            },
            XLOG_HEAP_DELETE => HeapRecord::Delete { offset: c.u16()? },
            XLOG_HEAP_UPDATE => HeapRecord::Update {
                old_offset: c.u16()?,
                new_offset: c.u16()?,
                init: flag(c.u8()?)?,
                tuple: c.rest().to_vec(),
            },
            XLOG_HEAP_PRUNE => {
                let prune_xid = c.u64()?;
                let n = c.u16()?;
                let mut changes = Vec::with_capacity(usize::from(n));
                for _ in 0..n {
                    let off = c.u16()?;
                    let state = match c.u8()? {
                        0 => LpState::Unused,
                        3 => LpState::Dead,
                        _ => return Err(bad(info, "prune may only make pointers unused or dead")),
                    };
                    changes.push((off, state));
                }
                HeapRecord::Prune { prune_xid, changes }
            }
            XLOG_HEAP_VACUUM => {
                let n = c.u16()?;
                let mut offsets = Vec::with_capacity(usize::from(n));
                for _ in 0..n {
                    offsets.push(c.u16()?);
                }
                HeapRecord::Vacuum { offsets }
            }
            _ => return Err(bad(info, "unknown heap record type")),
        };
        c.done()?;
        Ok(rec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_garbage_is_an_error() {
        let recs = [
            HeapRecord::Insert {
                offset: 3,
                init: true,
                tuple: vec![1; 40],
            },
            HeapRecord::Delete { offset: 9 },
            HeapRecord::Update {
                old_offset: 1,
                new_offset: 2,
                init: false,
                tuple: vec![2; 30],
            },
            HeapRecord::Prune {
                prune_xid: 77,
                changes: vec![(1, LpState::Dead), (4, LpState::Unused)],
            },
            HeapRecord::Vacuum {
                offsets: vec![2, 5, 9],
            },
        ];
        for r in recs {
            let (info, p) = r.encode();
            assert_eq!(HeapRecord::decode(info, &p).unwrap(), r);
            for cut in 0..p.len().min(12) {
                if let HeapRecord::Insert { .. } | HeapRecord::Update { .. } = r {
                    continue; // the tuple takes "the rest": any cut after the fixed part decodes
                }
                assert!(
                    HeapRecord::decode(info, &p[..cut]).is_err(),
                    "{r:?} cut at {cut}"
                );
            }
        }
        assert!(HeapRecord::decode(0x70, &[]).is_err());
        assert!(HeapRecord::decode(XLOG_HEAP_DELETE, &[1, 0, 0]).is_err());
    }
}

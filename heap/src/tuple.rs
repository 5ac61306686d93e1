//! Tuple identifiers and the tuple header: what MVCC needs to know per row.
//!
//! Every tuple on a heap page starts with a fixed header, then the row's
//! bytes, which are opaque to the heap (the engine encodes rows). The header
//! starts on an 8-byte boundary of the page (the page aligns every tuple), so
//! the infomask at header offset 22 is at an even page offset, as
//! [`bufmgr::PageRead::set_hints`] requires.
//!
//! ```text
//!  offset  size  field
//!  0       8     xmin: the inserting transaction
//!  8       8     xmax: the deleting / updating transaction, 0 if none
//!  16      4     ctid.block  \  this tuple's own TID, or the TID of the newer
//!  20      2     ctid.offset /  version an update made (PostgreSQL's t_ctid)
//!  22      2     infomask: hint bits and flags (below)
//!  24      4     cmin: the inserting command within xmin's transaction
//!  28      4     cmax: the deleting / updating command within xmax's transaction
//!  32      ...   the row's bytes
//! ```
//!
//! Command ids (PostgreSQL's cmin / cmax, without combo ids: both are kept)
//! matter only to the transaction that wrote them, while it runs (and to
//! its iterators): a read sees its transaction's own changes from commands
//! before the read's ([`crate::txn::Snapshot::cid`]). They are not needed
//! after a crash, so redo may leave cmax as it finds it, and
//! `page::mask_for_comparison` blanks both.
//!
//! Infomask bits, at PostgreSQL's positions (`htup_details.h`):
//!
//! ```text
//!  0x0100 HEAP_XMIN_COMMITTED   hint: xmin committed
//!  0x0200 HEAP_XMIN_INVALID     hint: xmin aborted
//!  0x0400 HEAP_XMAX_COMMITTED   hint: xmax committed
//!  0x0800 HEAP_XMAX_INVALID     hint: xmax aborted, or no xmax
//!  0x2000 HEAP_UPDATED          this tuple is the new version made by an update
//! ```
//!
//! All integers are little-endian. Shortcuts: no multixacts or row locks, no
//! null bitmap (the engine's row format is opaque bytes), no TOAST.

use std::fmt;

use bufmgr::BlockNumber;
use wal::Xid;

use crate::txn::CommandId;

/// Hint: xmin committed.
pub const HEAP_XMIN_COMMITTED: u16 = 0x0100;
/// Hint: xmin aborted (the tuple never existed).
pub const HEAP_XMIN_INVALID: u16 = 0x0200;
/// Hint: xmax committed.
pub const HEAP_XMAX_COMMITTED: u16 = 0x0400;
/// Hint: xmax aborted or unset.
pub const HEAP_XMAX_INVALID: u16 = 0x0800;
/// The tuple is the new version written by an update.
pub const HEAP_UPDATED: u16 = 0x2000;
/// All four hint bits.
pub const HINT_BITS: u16 =
    HEAP_XMIN_COMMITTED | HEAP_XMIN_INVALID | HEAP_XMAX_COMMITTED | HEAP_XMAX_INVALID;
/// The two xmax hint bits (cleared whenever xmax is set).
pub const XMAX_HINT_BITS: u16 = HEAP_XMAX_COMMITTED | HEAP_XMAX_INVALID;

/// Offset of xmin in the header.
pub const XMIN_OFFSET: usize = 0;
/// Offset of xmax in the header.
pub const XMAX_OFFSET: usize = 8;
/// Offset of ctid in the header.
pub const CTID_OFFSET: usize = 16;
/// Offset of the infomask in the header (even: tuples are 8-byte aligned).
pub const INFOMASK_OFFSET: usize = 22;
/// Offset of cmin in the header.
pub const CMIN_OFFSET: usize = 24;
/// Offset of cmax in the header.
pub const CMAX_OFFSET: usize = 28;
/// Size of the tuple header; the row's bytes follow.
pub const TUPLE_HEADER_SIZE: usize = 32;

/// A tuple identifier: block number and 1-based line pointer number
/// (PostgreSQL's `ItemPointerData`; offset 0 is never valid).
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Tid {
    pub block: BlockNumber,
    pub offset: u16,
}

impl Tid {
    pub const fn new(block: BlockNumber, offset: u16) -> Tid {
        Tid { block, offset }
    }
}

impl fmt::Display for Tid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({},{})", self.block, self.offset)
    }
}

/// A decoded tuple header.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct TupleHeader {
    pub xmin: Xid,
    pub xmax: Xid,
    pub ctid: Tid,
    pub infomask: u16,
    /// The command of xmin's transaction that inserted the tuple.
    pub cmin: CommandId,
    /// The command of xmax's transaction that deleted or updated it.
    pub cmax: CommandId,
}

impl TupleHeader {
    /// The header of a fresh tuple inserted by `xmin` at `tid` (command 0):
    /// no xmax (and, as PostgreSQL does, the XMAX_INVALID hint set from the
    /// start).
    pub fn new_insert(xmin: Xid, tid: Tid, updated: bool) -> TupleHeader {
        TupleHeader {
            xmin,
            xmax: 0,
            ctid: tid,
            infomask: HEAP_XMAX_INVALID | if updated { HEAP_UPDATED } else { 0 },
            cmin: 0,
            cmax: 0,
        }
    }

    /// Decode the header at the start of `tuple`; `None` if it is too short.
    pub fn decode(tuple: &[u8]) -> Option<TupleHeader> {
        let h = tuple.get(..TUPLE_HEADER_SIZE)?;
        let u64_at = |o: usize| u64::from_le_bytes(h[o..o + 8].try_into().expect("8 bytes"));
        let u16_at = |o: usize| u16::from_le_bytes([h[o], h[o + 1]]);
        let u32_at = |o: usize| u32::from_le_bytes(h[o..o + 4].try_into().expect("4 bytes"));
        Some(TupleHeader {
            xmin: u64_at(XMIN_OFFSET),
            xmax: u64_at(XMAX_OFFSET),
            ctid: Tid {
                block: u32_at(CTID_OFFSET),
                offset: u16_at(CTID_OFFSET + 4),
            },
            infomask: u16_at(INFOMASK_OFFSET),
            cmin: u32_at(CMIN_OFFSET),
            cmax: u32_at(CMAX_OFFSET),
        })
    }

    /// Write this header into the first [`TUPLE_HEADER_SIZE`] bytes of `out`.
    pub fn encode_into(&self, out: &mut [u8]) {
        out[XMIN_OFFSET..XMIN_OFFSET + 8].copy_from_slice(&self.xmin.to_le_bytes());
        out[XMAX_OFFSET..XMAX_OFFSET + 8].copy_from_slice(&self.xmax.to_le_bytes());
        out[CTID_OFFSET..CTID_OFFSET + 4].copy_from_slice(&self.ctid.block.to_le_bytes());
        out[CTID_OFFSET + 4..CTID_OFFSET + 6].copy_from_slice(&self.ctid.offset.to_le_bytes());
        out[INFOMASK_OFFSET..INFOMASK_OFFSET + 2].copy_from_slice(&self.infomask.to_le_bytes());
        out[CMIN_OFFSET..CMIN_OFFSET + 4].copy_from_slice(&self.cmin.to_le_bytes());
        out[CMAX_OFFSET..CMAX_OFFSET + 4].copy_from_slice(&self.cmax.to_le_bytes());
    }

    /// Record `xid` as the deleter / updater and `ctid` as the newer version
    /// (itself for a delete). Clears the xmax hints: they described the old
    /// xmax (an aborted deleter leaves XMAX_INVALID behind).
    pub fn set_xmax(&mut self, xid: Xid, ctid: Tid) {
        self.xmax = xid;
        self.ctid = ctid;
        self.infomask &= !XMAX_HINT_BITS;
    }

    pub fn has(&self, bits: u16) -> bool {
        self.infomask & bits == bits
    }
}

/// A whole tuple: header then data, as stored on the page.
pub fn build_tuple(header: &TupleHeader, data: &[u8]) -> Vec<u8> {
    let mut t = vec![0u8; TUPLE_HEADER_SIZE + data.len()];
    header.encode_into(&mut t);
    t[TUPLE_HEADER_SIZE..].copy_from_slice(data);
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_infomask_is_at_an_even_offset() {
        let h = TupleHeader {
            xmin: 7,
            xmax: 9,
            ctid: Tid::new(3, 4),
            infomask: HEAP_UPDATED | HEAP_XMIN_COMMITTED,
            cmin: 2,
            cmax: 0x0102_0304,
        };
        let t = build_tuple(&h, b"row");
        assert_eq!(TupleHeader::decode(&t), Some(h));
        assert_eq!(&t[TUPLE_HEADER_SIZE..], b"row");
        assert_eq!(INFOMASK_OFFSET % 2, 0);
        assert_eq!(TupleHeader::decode(&t[..TUPLE_HEADER_SIZE - 1]), None);
    }

    #[test]
    fn set_xmax_clears_the_old_xmax_hints() {
        let mut h = TupleHeader::new_insert(5, Tid::new(0, 1), false);
        assert!(h.has(HEAP_XMAX_INVALID));
        h.set_xmax(6, Tid::new(1, 2));
        assert_eq!(h.infomask & XMAX_HINT_BITS, 0);
        assert_eq!((h.xmax, h.ctid), (6, Tid::new(1, 2)));
    }
}

//! Log sequence numbers: byte positions in the log.
//!
//! The log is one contiguous stream of bytes that starts at position 0 and only
//! grows. An [`Lsn`] is a position in that stream, nothing more: there are no
//! page headers or other gaps, so the bytes of a record of length `n` that
//! starts at `lsn` are exactly the positions `lsn .. lsn + n`.
//!
//! Two LSNs belong to every record:
//!
//! ```text
//!        start LSN                         end LSN
//!            |                                |
//!   ... prev | len crc xid ... payload        | next record ...
//!            |<---------- len bytes --------->|
//! ```
//!
//! 1. The **start LSN** is the position of the record's first byte. It names the
//!    record: the reader yields it, the next record's `prev_lsn` points at it,
//!    and a checkpoint's redo point is one.
//! 2. The **end LSN** is the position just after its last byte, which is also
//!    where the next record starts. A caller that changes a page stores the
//!    *end* LSN as the page LSN (PostgreSQL's `PageSetLSN(page, EndRecPtr)`),
//!    so that "flush the WAL up to the page LSN" covers the whole record.
//!
//! LSN 0 as a *page* LSN means "never WAL-logged": no record ends at 0.
//!
//! Shortcut: PostgreSQL's `XLogRecPtr` counts page and segment headers as part
//! of the position and skips them when inserting ("usable bytes"); we have no
//! headers, so the conversion functions `XLogBytePosToRecPtr` and friends have no
//! counterpart here.

use std::fmt;

/// A position in the write-ahead log, in bytes from the origin of the log.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Debug)]
pub struct Lsn(pub u64);

impl Lsn {
    /// The origin of the log: where the first record of a new log starts.
    pub const ZERO: Lsn = Lsn(0);

    /// The position as a number.
    pub const fn as_u64(self) -> u64 {
        self.0
    }

    /// The position `len` bytes further on, or `None` on overflow (only
    /// possible for positions read from damaged bytes or given by a caller).
    pub fn checked_add(self, len: u64) -> Option<Lsn> {
        self.0.checked_add(len).map(Lsn)
    }

    /// Bytes from `earlier` to `self` (0 if `earlier` is not earlier).
    pub fn distance_from(self, earlier: Lsn) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

impl From<u64> for Lsn {
    fn from(v: u64) -> Lsn {
        Lsn(v)
    }
}

impl From<Lsn> for u64 {
    fn from(lsn: Lsn) -> u64 {
        lsn.0
    }
}

/// Printed the way PostgreSQL prints an `XLogRecPtr`: high and low 32 bits in
/// hexadecimal, separated by a slash (`0/16B3740`).
impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 & 0xFFFF_FFFF)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_matches_postgres_format() {
        assert_eq!(Lsn(0).to_string(), "0/0");
        assert_eq!(Lsn(0x16B3740).to_string(), "0/16B3740");
        assert_eq!(Lsn(0x1_0000_00FF).to_string(), "1/FF");
    }

    #[test]
    fn checked_add_reports_overflow() {
        assert_eq!(Lsn(5).checked_add(3), Some(Lsn(8)));
        assert_eq!(Lsn(u64::MAX).checked_add(1), None);
    }

    #[test]
    fn distance_saturates() {
        assert_eq!(Lsn(10).distance_from(Lsn(4)), 6);
        assert_eq!(Lsn(4).distance_from(Lsn(10)), 0);
    }
}

//! The part of a page's layout the buffer manager relies on, and its checksum.
//!
//! Every page the pool writes, whatever its owner (heap, B-tree, commit log),
//! starts with the same 12 bytes, like PostgreSQL's `PageHeaderData` starts
//! with `pd_lsn` and `pd_checksum`:
//!
//! ```text
//!  offset  size  field
//!  0       8     LSN: end of the last WAL record that changed this page (LE)
//!  8       4     checksum: CRC32 (IEEE, crc32fast) of the page with this
//!                field skipped, then the block number mixed in (LE)
//!  12      ...   the owner's header and contents
//! ```
//!
//! The block number is mixed into the checksum so that a page written to the
//! wrong place, or a file copied over another, fails verification (PostgreSQL
//! mixes it in the same way). A page of all zeros is a page that was extended
//! but never written (a crash between extension and the first write): it is
//! accepted as new, as PostgreSQL's `PageIsNew` is, and its owner initialises it.

use crate::tag::{BlockNumber, PAGE_SIZE};

/// Offset of the page LSN.
pub const LSN_OFFSET: usize = 0;
/// Offset of the checksum.
pub const CHECKSUM_OFFSET: usize = 8;
/// First byte the page's owner may use.
pub const OWNER_HEADER_OFFSET: usize = 12;

/// The checksum of `page` as block `block`.
pub fn checksum(page: &[u8], block: BlockNumber) -> u32 {
    debug_assert_eq!(page.len(), PAGE_SIZE);
    let mut h = crc32fast::Hasher::new();
    h.update(&page[..CHECKSUM_OFFSET]);
    h.update(&page[OWNER_HEADER_OFFSET..]);
    h.update(&block.to_le_bytes());
    h.finalize()
}

/// The checksum stored in `page`.
pub fn stored_checksum(page: &[u8]) -> u32 {
    u32::from_le_bytes(
        page[CHECKSUM_OFFSET..OWNER_HEADER_OFFSET]
            .try_into()
            .expect("4 bytes"),
    )
}

/// The LSN stored in `page`.
pub fn page_lsn(page: &[u8]) -> u64 {
    u64::from_le_bytes(
        page[LSN_OFFSET..LSN_OFFSET + 8]
            .try_into()
            .expect("8 bytes"),
    )
}

/// Is this a never-written page (all zeros)?
pub fn is_new(page: &[u8]) -> bool {
    // Compare in u64 chunks: a page read is followed by this check when
    // checksums are on, so it should cost little.
    page.chunks_exact(8).all(|c| c == [0u8; 8])
}

/// Verify a page read from disk: `Ok` if new or the checksum matches, else
/// `Err((stored, computed))`.
pub fn verify(page: &[u8], block: BlockNumber) -> Result<(), (u32, u32)> {
    let stored = stored_checksum(page);
    let computed = checksum(page, block);
    if stored == computed || is_new(page) {
        Ok(())
    } else {
        Err((stored, computed))
    }
}

/// Write the checksum into a private page image (used by tests and by code
/// that builds pages outside the pool).
pub fn set_checksum(page: &mut [u8], block: BlockNumber) {
    let sum = checksum(page, block);
    page[CHECKSUM_OFFSET..OWNER_HEADER_OFFSET].copy_from_slice(&sum.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_detects_a_flipped_bit_and_a_wrong_block() {
        let mut p = vec![0u8; PAGE_SIZE];
        p[100] = 42;
        set_checksum(&mut p, 7);
        assert!(verify(&p, 7).is_ok());
        assert!(verify(&p, 8).is_err(), "same bytes at another block");
        p[5000] ^= 0x10;
        let (stored, computed) = verify(&p, 7).unwrap_err();
        assert_ne!(stored, computed);
    }

    #[test]
    fn the_checksum_field_is_not_part_of_the_sum() {
        let mut p = vec![1u8; PAGE_SIZE];
        let a = checksum(&p, 1);
        p[CHECKSUM_OFFSET] = 0xFF;
        assert_eq!(checksum(&p, 1), a);
    }

    #[test]
    fn a_zero_page_is_new_and_valid() {
        let p = vec![0u8; PAGE_SIZE];
        assert!(is_new(&p));
        assert!(verify(&p, 123).is_ok());
    }
}

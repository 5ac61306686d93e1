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
//! mixes it in the same way).
//!
//! **Zeroed pages.** PostgreSQL accepts a page of all zeros as new
//! (`PageIsNew`) even with checksums on, so a page zeroed by a faulty disk
//! or a bad copy loses its rows silently. This pool does not: with checksums
//! on, extending a relation writes a *blank* page — zeros, with its
//! checksum stamped ([`stamp_blank`]) — so a page extended but never written
//! before a crash still verifies, and its owner sees it as new (everything
//! after the checksum field is zero). A page that is zero *including* the
//! checksum field was not written by this pool: [`verify`] reports it as
//! [`Damage::Zeroed`], an error naming relation and block, unless the pool
//! was opened with `zero_damaged_pages` (PostgreSQL's setting of that name),
//! which zeroes a damaged page in memory, counts it and logs it instead,
//! or unless the page lies at or beyond its fork's durable length and the
//! pool was told to read such pages as new (`pool::durable`: an extension
//! lost with the power).
//! (A blank page's checksum is the CRC of zeros and its block number; were
//! it ever 0 the page would be indistinguishable from a zeroed one and be
//! accepted: a 1 in 2^32 chance per block number, fixed by the block.)

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

/// Is this page all zeros, checksum field included (never written by this
/// pool with checksums on: see the module docs)?
pub fn is_zeroed(page: &[u8]) -> bool {
    // Compare in u64 chunks: a failed verification is followed by this
    // check, so it should cost little.
    page.chunks_exact(8).all(|c| c == [0u8; 8])
}

/// Is this a never-initialised page: zeros after the checksum field (a
/// blank page from an extension, or a zeroed one)?
pub fn is_new(page: &[u8]) -> bool {
    page[..CHECKSUM_OFFSET].iter().all(|&b| b == 0)
        && page[OWNER_HEADER_OFFSET..]
            .chunks_exact(4)
            .all(|c| c == [0u8; 4])
}

/// Make `page` the blank page of block `block`: all zeros with its checksum
/// stamped, which is what extending a relation writes when checksums are on.
pub fn stamp_blank(page: &mut [u8], block: BlockNumber) {
    page.fill(0);
    set_checksum(page, block);
}

/// What is wrong with a page that failed [`verify`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Damage {
    /// The stored checksum does not match the contents.
    Checksum { stored: u32, computed: u32 },
    /// Every byte is zero, the checksum field too: not a page this pool
    /// wrote (blank pages carry their checksum), so rows may have been lost.
    Zeroed,
}

/// Verify a page read from disk when checksums are on: `Ok` if the
/// checksum matches (a blank page's does), else what is wrong.
pub fn verify(page: &[u8], block: BlockNumber) -> Result<(), Damage> {
    let stored = stored_checksum(page);
    let computed = checksum(page, block);
    if stored == computed {
        Ok(())
    } else if is_zeroed(page) {
        Err(Damage::Zeroed)
    } else {
        Err(Damage::Checksum { stored, computed })
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
        let Err(Damage::Checksum { stored, computed }) = verify(&p, 7) else {
            panic!("a flipped bit is a checksum mismatch");
        };
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
    fn a_zeroed_page_is_damage_but_a_blank_page_is_new_and_valid() {
        let p = vec![0u8; PAGE_SIZE];
        assert!(is_new(&p));
        assert_eq!(verify(&p, 123), Err(Damage::Zeroed));
        let mut blank = vec![7u8; PAGE_SIZE];
        stamp_blank(&mut blank, 123);
        assert!(is_new(&blank));
        assert!(!is_zeroed(&blank), "the checksum field is set");
        assert_eq!(verify(&blank, 123), Ok(()));
        assert!(verify(&blank, 124).is_err(), "blank pages are per block");
    }
}

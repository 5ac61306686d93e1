//! Redo of records that carry nothing but full-page images (`RmgrKind::FullPage`,
//! e.g. the images the pool logs for hint bits, [`crate::FPI_FOR_HINT`]).
//!
//! For each block reference: the page becomes the image (zeros in the hole),
//! read with `read_buffer_zeroed` so a torn copy on disk is never read; the
//! page LSN becomes the record's end LSN and the buffer is marked dirty. A
//! block past the end of the file is created by extending the relation.

use bufmgr::{BufferPool, PAGE_SIZE};

use crate::error::{Result, WalError};
use crate::lsn::Lsn;
use crate::record::{Record, RmgrKind};

/// Replay a `FullPage` record ending at `end_lsn` into `pool`.
pub fn redo_full_page(record: &Record, end_lsn: Lsn, pool: &BufferPool) -> Result<()> {
    if record.kind() != RmgrKind::FullPage {
        return Err(WalError::InvalidRecord(format!(
            "{:?} record given to full-page redo",
            record.kind()
        )));
    }
    for (i, bref) in record.blocks().iter().enumerate() {
        let tag = bref.tag();
        let Some(image) = record.restore_page(i) else {
            return Err(WalError::InvalidRecord(format!(
                "full-page record block {i} ({tag}) carries no image"
            )));
        };
        let mut page = pool
            .read_buffer_for_redo(tag.relfork(), tag.block, true)
            .map_err(|source| WalError::Redo { tag, source })?;
        debug_assert_eq!(image.len(), PAGE_SIZE);
        page.copy_from_slice(&image[..]);
        page.set_lsn(end_lsn.as_u64());
        page.mark_dirty();
    }
    Ok(())
}

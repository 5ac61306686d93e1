//! Which pages of an index are in the buffer pool, per level.
//!
//! The buffercache snapshot names each buffer's relation; the page itself
//! says whether it is a B-tree page and its level ([`crate::page_kind`]).
//! `Index::residency` joins the two for the `index-residency` scenario.
//! Reading a resident page pins it, which counts as a use for the evictor
//! (one usage step per call); a page evicted between the snapshot and the
//! pin is read back and counted, so call it on a quiet pool.

use std::collections::BTreeMap;

use crate::error::Result;
use crate::index::Index;
use crate::page::page_kind;

/// Resident pages of one index.
#[derive(Clone, PartialEq, Eq, Default, Debug)]
pub struct Residency {
    /// Is the meta page resident?
    pub meta: bool,
    /// Resident tree pages per level (0 = leaves).
    pub levels: BTreeMap<u32, usize>,
}

impl Index {
    /// Count this index's resident pages per level.
    pub fn residency(&self) -> Result<Residency> {
        let mut r = Residency::default();
        for row in self.pool.buffercache() {
            let Some(tag) = row.tag else { continue };
            if tag.relfork() != self.relfork() {
                continue;
            }
            let page = self
                .pool
                .read_buffer(tag.relfork(), tag.block, None)?
                .lock_shared();
            match page_kind(&page) {
                Some(k) if k.is_meta => r.meta = true,
                Some(k) => *r.levels.entry(k.level).or_default() += 1,
                None => {}
            }
        }
        Ok(r)
    }
}

//! The buffer mapping table: tag -> buffer id, in 128 lock partitions.
//!
//! PostgreSQL's `buf_table.c`: one shared hash table split into
//! `NUM_BUFFER_PARTITIONS` = 128 partitions, each under its own lock; a tag's
//! partition is `hash % 128`, the hash computed once per lookup.
//!
//! # Rules (PostgreSQL's buffer README)
//! 1. Looking up a tag needs its partition lock in shared mode, and the caller
//!    pins the buffer before releasing it.
//! 2. Changing a buffer's identity (insert or delete an entry) needs the
//!    partition lock exclusive, plus the buffer's header lock.
//! 3. Several partition locks are taken in ascending partition order.
//!
//! Each partition's map is created with room for twice its fair share of the
//! pool, so an insert normally never allocates; a pathological hash skew only
//! costs a reallocation on a miss, never on a hit.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::desc::BufferId;
use crate::sweep::CachePadded;
use crate::tag::BufferTag;

/// Number of mapping lock partitions (PostgreSQL's `NUM_BUFFER_PARTITIONS`;
/// a power of two so the partition is a mask).
pub const NUM_MAPPING_PARTITIONS: usize = 128;

/// Hashes a tag with the mix in [`BufferTag::hash_code`] (SipHash would cost
/// more than the rest of a buffer hit).
#[derive(Default, Debug)]
pub struct TagHasher(u64);

impl Hasher for TagHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x100_0000_01B3);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Newtype so the map hashes the precomputed code, not the fields.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct HashedTag {
    pub tag: BufferTag,
    pub hash: u64,
}

impl HashedTag {
    #[inline]
    pub fn new(tag: BufferTag) -> HashedTag {
        HashedTag {
            tag,
            hash: tag.hash_code(),
        }
    }

    /// The mapping partition this tag belongs to.
    #[inline]
    pub fn partition(&self) -> usize {
        (self.hash as usize) & (NUM_MAPPING_PARTITIONS - 1)
    }
}

impl std::hash::Hash for HashedTag {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

type Map = HashMap<HashedTag, BufferId, BuildHasherDefault<TagHasher>>;

/// The mapping table.
#[derive(Debug)]
pub struct BufTable {
    parts: Box<[CachePadded<RwLock<Map>>]>,
}

impl BufTable {
    pub fn new(nbuffers: usize) -> BufTable {
        let per_part = (nbuffers / NUM_MAPPING_PARTITIONS) * 2 + 16;
        BufTable {
            parts: (0..NUM_MAPPING_PARTITIONS)
                .map(|_| {
                    CachePadded(RwLock::new(Map::with_capacity_and_hasher(
                        per_part,
                        Default::default(),
                    )))
                })
                .collect(),
        }
    }

    /// Lock a partition shared (rule 1).
    #[inline]
    pub fn read(&self, partition: usize) -> RwLockReadGuard<'_, Map> {
        self.parts[partition].read()
    }

    /// Lock a partition exclusive (rule 2).
    #[inline]
    pub fn write(&self, partition: usize) -> RwLockWriteGuard<'_, Map> {
        self.parts[partition].write()
    }

    /// Number of entries (takes every lock in turn, in ascending order).
    pub fn len(&self) -> usize {
        self.parts.iter().map(|p| p.read().len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tag::{RelFork, RelId};

    #[test]
    fn insert_lookup_delete() {
        let t = BufTable::new(256);
        let h = HashedTag::new(BufferTag::new(RelFork::main(RelId(3)), 99));
        assert!(t.write(h.partition()).insert(h, 7).is_none());
        assert_eq!(t.read(h.partition()).get(&h), Some(&7));
        assert_eq!(t.len(), 1);
        assert_eq!(t.write(h.partition()).remove(&h), Some(7));
        assert!(t.is_empty());
    }

    #[test]
    fn equal_hash_different_tag_is_a_different_key() {
        let t = BufTable::new(256);
        let a = HashedTag::new(BufferTag::new(RelFork::main(RelId(1)), 1));
        let b = HashedTag {
            tag: BufferTag::new(RelFork::main(RelId(2)), 2),
            hash: a.hash,
        };
        let mut m = t.write(a.partition());
        m.insert(a, 1);
        m.insert(b, 2);
        assert_eq!(m.get(&a), Some(&1));
        assert_eq!(m.get(&b), Some(&2));
    }
}

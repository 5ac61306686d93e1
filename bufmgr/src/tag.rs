//! Names of pages: relations, forks, blocks, and the buffer tag that joins them.
//!
//! A [`BufferTag`] is what PostgreSQL's `BufferTag` is: enough to find a block
//! on disk without consulting any catalog. We have one database and one
//! tablespace, so the tag is `(relation, fork, block)`.

use std::fmt;

/// Size of every page, in bytes (PostgreSQL's `BLCKSZ`).
pub const PAGE_SIZE: usize = 8192;

/// A block number within one fork of a relation.
pub type BlockNumber = u32;

/// The number of a relation: its file name in the data directory.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct RelId(pub u32);

impl fmt::Display for RelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "relation {}", self.0)
    }
}

/// A fork: one of the files that together store a relation.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
#[repr(u8)]
pub enum Fork {
    /// The relation's data pages.
    Main = 0,
    /// The free-space map.
    FreeSpace = 1,
}

impl Fork {
    /// All forks, in number order.
    pub const ALL: [Fork; 2] = [Fork::Main, Fork::FreeSpace];

    /// The fork with this number, if there is one.
    pub fn from_u8(n: u8) -> Option<Fork> {
        match n {
            0 => Some(Fork::Main),
            1 => Some(Fork::FreeSpace),
            _ => None,
        }
    }

    /// The file-name suffix PostgreSQL uses for this fork (`""` for main).
    pub fn suffix(self) -> &'static str {
        match self {
            Fork::Main => "",
            Fork::FreeSpace => "_fsm",
        }
    }
}

/// One fork of one relation: the unit of storage (one file).
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct RelFork {
    pub rel: RelId,
    pub fork: Fork,
}

impl RelFork {
    /// The main fork of `rel`.
    pub const fn main(rel: RelId) -> RelFork {
        RelFork {
            rel,
            fork: Fork::Main,
        }
    }
}

impl fmt::Display for RelFork {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.fork {
            Fork::Main => write!(f, "{}", self.rel),
            fork => write!(f, "{} fork {:?}", self.rel, fork),
        }
    }
}

/// The identity of a page in the pool: which block of which fork of which relation.
///
/// Ordered by (relation, fork, block): the order a checkpoint writes in.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct BufferTag {
    pub rel: RelId,
    pub fork: Fork,
    pub block: BlockNumber,
}

impl BufferTag {
    pub const fn new(relfork: RelFork, block: BlockNumber) -> BufferTag {
        BufferTag {
            rel: relfork.rel,
            fork: relfork.fork,
            block,
        }
    }

    pub const fn relfork(&self) -> RelFork {
        RelFork {
            rel: self.rel,
            fork: self.fork,
        }
    }

    /// The mapping-table hash of this tag (a multiply-xorshift mix: cheap, and
    /// good enough to spread consecutive blocks over the 128 lock partitions).
    #[inline]
    pub fn hash_code(&self) -> u64 {
        let a = ((self.rel.0 as u64) << 8) | self.fork as u64;
        let mut h = a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (self.block as u64);
        h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        h ^ (h >> 31)
    }
}

impl fmt::Display for BufferTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} block {}", self.relfork(), self.block)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_order_by_relation_fork_block() {
        let a = BufferTag::new(RelFork::main(RelId(1)), 9);
        let b = BufferTag::new(RelFork::main(RelId(2)), 0);
        let c = BufferTag {
            rel: RelId(1),
            fork: Fork::FreeSpace,
            block: 0,
        };
        assert!(a < b);
        assert!(a < c && c < b);
    }

    #[test]
    fn consecutive_blocks_spread_over_partitions() {
        let rf = RelFork::main(RelId(7));
        let mut seen = std::collections::HashSet::new();
        for b in 0..1024 {
            seen.insert(BufferTag::new(rf, b).hash_code() % 128);
        }
        assert!(seen.len() > 120, "only {} partitions used", seen.len());
    }

    #[test]
    fn display_names_relation_and_block() {
        let t = BufferTag::new(RelFork::main(RelId(42)), 7);
        assert_eq!(t.to_string(), "relation 42 block 7");
    }
}

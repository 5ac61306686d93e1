//! The free-space map: roughly how many bytes each block of a relation has
//! free, so inserts refill pages instead of always extending.
//!
//! PostgreSQL keeps its FSM in a separate fork of pages forming a tree of
//! maxima. We keep the same tree in memory, one per open relation:
//!
//! ```text
//!  level 0 (root)            [ 7800 ]                max of the two below
//!  level 1            [ 7800 ]        [ 120 ]
//!  leaves        [ 40 | 7800 ]    [ 120 | 0 ]         free bytes of blocks 0, 1, 2, 3
//! ```
//!
//! `find(need)` walks down from the root, always into the leftmost child
//! whose maximum is large enough: the lowest-numbered block with room, in
//! O(log n). `update(block, free)` sets a leaf and fixes the maxima above it.
//!
//! # It is only a hint
//! 1. Not WAL-logged and not stored: PostgreSQL does not WAL-log FSM changes
//!    either (it repairs the map as it goes). An insert that finds less room
//!    than the map promised corrects the entry and asks again.
//! 2. Rebuilt lazily: at open every existing block counts as full except the
//!    last one, which counts as empty (as PostgreSQL tries the last page when
//!    the map knows nothing); inserts correct entries as they touch pages and
//!    a vacuum sets every entry it visits exactly.
//! 3. Values are the page's free bytes as [`crate::page::HeapPage::free_space`]
//!    reports them, so a hit is almost always a real fit.

use bufmgr::BlockNumber;
use parking_lot::Mutex;

/// The in-memory free-space map of one relation.
#[derive(Debug, Default)]
pub struct FreeSpaceMap {
    /// Protects the tree; held for one descent or one update (no I/O).
    tree: Mutex<Tree>,
}

#[derive(Debug, Default)]
struct Tree {
    /// Number of leaves in use (blocks known).
    nblocks: usize,
    /// Leaves, a power of two (0 when empty).
    capacity: usize,
    /// `2 * capacity` nodes, node 1 the root, node i's children 2i and 2i+1,
    /// leaves at `capacity..2 * capacity`.
    nodes: Vec<u16>,
}

impl Tree {
    fn grow_to(&mut self, nblocks: usize) {
        if nblocks <= self.capacity {
            self.nblocks = self.nblocks.max(nblocks);
            return;
        }
        let capacity = nblocks.next_power_of_two().max(16);
        let mut nodes = vec![0u16; 2 * capacity];
        for b in 0..self.nblocks {
            nodes[capacity + b] = self.nodes[self.capacity + b];
        }
        for i in (1..capacity).rev() {
            nodes[i] = nodes[2 * i].max(nodes[2 * i + 1]);
        }
        self.capacity = capacity;
        self.nodes = nodes;
        self.nblocks = nblocks;
    }

    fn set(&mut self, block: usize, free: u16) {
        self.grow_to(block + 1);
        let mut i = self.capacity + block;
        self.nodes[i] = free;
        while i > 1 {
            i /= 2;
            let m = self.nodes[2 * i].max(self.nodes[2 * i + 1]);
            if self.nodes[i] == m {
                break;
            }
            self.nodes[i] = m;
        }
    }
}

impl FreeSpaceMap {
    /// A map of `nblocks` existing blocks whose free space is not known:
    /// all count as full but the last (rule 2).
    pub fn new(nblocks: BlockNumber, page_free_when_empty: usize) -> FreeSpaceMap {
        let fsm = FreeSpaceMap::default();
        if nblocks > 0 {
            fsm.update(nblocks - 1, page_free_when_empty);
        }
        fsm
    }

    /// Record that `block` has about `free` bytes free.
    pub fn update(&self, block: BlockNumber, free: usize) {
        let free = u16::try_from(free).unwrap_or(u16::MAX);
        self.tree.lock().set(block as usize, free);
    }

    /// The lowest block believed to have at least `need` bytes free.
    pub fn find(&self, need: usize) -> Option<BlockNumber> {
        let t = self.tree.lock();
        if t.capacity == 0 || usize::from(t.nodes[1]) < need {
            return None;
        }
        let mut i = 1;
        while i < t.capacity {
            i = if usize::from(t.nodes[2 * i]) >= need {
                2 * i
            } else {
                2 * i + 1
            };
        }
        Some((i - t.capacity) as BlockNumber)
    }

    /// What the map believes about `block` (0 for unknown blocks).
    pub fn get(&self, block: BlockNumber) -> usize {
        let t = self.tree.lock();
        let b = block as usize;
        if b < t.nblocks {
            usize::from(t.nodes[t.capacity + b])
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_lowest_block_with_room() {
        let fsm = FreeSpaceMap::default();
        assert_eq!(fsm.find(1), None);
        fsm.update(0, 40);
        fsm.update(1, 7800);
        fsm.update(2, 120);
        fsm.update(40, 500);
        assert_eq!(fsm.find(30), Some(0));
        assert_eq!(fsm.find(100), Some(1));
        assert_eq!(fsm.find(7801), None);
        fsm.update(1, 0);
        assert_eq!(fsm.find(100), Some(2));
        assert_eq!(fsm.find(200), Some(40));
        assert_eq!(fsm.get(40), 500);
        assert_eq!(fsm.get(1000), 0);
    }

    #[test]
    fn only_the_last_block_is_a_candidate_after_open() {
        let fsm = FreeSpaceMap::new(10, 8000);
        assert_eq!(fsm.find(1), Some(9));
        assert_eq!(FreeSpaceMap::new(0, 8000).find(1), None);
    }
}

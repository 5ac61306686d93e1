//! The buffer mapping table: tag -> buffer id, in 128 lock partitions, with a
//! lock-free read index beside each partition for the hit path.
//!
//! PostgreSQL's `buf_table.c`: one shared hash table split into
//! `NUM_BUFFER_PARTITIONS` = 128 partitions, each under its own lock; a tag's
//! partition is `hash % 128`, the hash computed once per lookup.
//!
//! # Rules
//! 1. The partition's `HashMap`, under its lock, is the authoritative map. A
//!    lookup either probes the partition's read index without any lock and
//!    *validates* what it finds after pinning (the buffer is the one only if,
//!    pinned, its state has `TAG_VALID` and its tag is the wanted one), or
//!    takes the partition lock shared and pins before releasing it. An index
//!    probe that finds nothing, or whose candidate fails validation, falls
//!    back to the locked lookup: the index may miss or be stale, never wrong
//!    after validation. (A miss may take that locked lookup as the
//!    exclusive one of its insert, see "Whether the index holds everything".)
//! 2. Changing a buffer's identity (insert or delete an entry) needs the
//!    partition lock exclusive, plus the buffer's header lock. Only holders of
//!    the exclusive lock write the partition's index ([`PartitionWrite`]
//!    keeps map and index in step), so the index has one writer at a time.
//! 3. Several partition locks are taken in ascending partition order.
//!
//! Each partition's map is created with room for twice its fair share of the
//! pool, so an insert normally never allocates; a pathological hash skew only
//! costs a reallocation on a miss, never on a hit.
//!
//! # The read index
//! Per partition a fixed power-of-two array of `AtomicU64` slots (at least
//! twice the partition's fair share, at least 64), open addressing with
//! linear probing from `(hash >> 7) & mask`. A slot is `0` (empty),
//! [`TOMBSTONE`] (deleted; probes go on), or `(hash >> 32) << 32 | (id + 1)`.
//! Readers load slots atomically and stop at an empty slot; a slot whose hash
//! half matches names a *candidate*, which the caller validates. Writers keep
//! live + tombstones at most 3/4 of the array: past that an insert first
//! rebuilds the array from the map (dropping the tombstones), and if the live
//! entries alone fill it the entry is simply not indexed (its lookups take the
//! lock). A removal that leaves an empty slot behind it turns itself and the
//! tombstones before it back into empty slots; when tombstones reach 1/4 of
//! the array it is rebuilt. A reader racing a rebuild may miss; it then takes
//! the lock.
//!
//! # Whether the index holds everything
//! Beside each partition's lock, on its cache line, a flag says whether
//! every entry of the partition's map is in its read index (no entry left
//! out by a full array): [`BufTable::all_indexed`]. The exclusive holder
//! sets it after each change. A miss reads it (relaxed, no lock) after its
//! probe found nothing: while it is set, a probe that found nothing missed
//! only if it raced a change or a rebuild of the index, and the miss skips
//! the shared lookup under the lock, since it looks again under the
//! exclusive lock before it inserts (rule 1 holds: the locked map still
//! decides). The flag is a hint for speed only: read stale, it costs a
//! locked lookup, or a victim taken for a page that was resident after all
//! (given back clean as the race of two misses on one page gives it back).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::{MappedRwLockReadGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::desc::BufferId;
use crate::replacement::probation::Ghost;
use crate::replacement::sweep::CachePadded;
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

/// An index slot for a deleted entry: probes go on past it. Its buffer half
/// is 0, which no live slot has (live slots store `id + 1`).
pub const TOMBSTONE: u64 = 1 << 32;

/// Slots per cache-padded chunk of the index (128 bytes).
const CHUNK: usize = 16;

type Chunk = CachePadded<[AtomicU64; CHUNK]>;

/// A partition: the authoritative map and the index's bookkeeping, which
/// only the holder of the exclusive lock touches.
#[derive(Debug)]
pub struct Part {
    map: Map,
    /// Live index slots.
    live: usize,
    /// Tombstones in the index.
    dead: usize,
    /// The probation evictor's ghost set for this partition's tags (empty
    /// for the other evictors); see [`crate::replacement::probation`], rule 3.
    ghost: Ghost,
}

/// A partition's lock and, on the same cache line, whether its read index
/// holds every entry of its map (module docs: written only by the holder of
/// the exclusive lock, read without it).
#[derive(Debug)]
struct PartLock {
    lock: RwLock<Part>,
    all_indexed: AtomicBool,
}

/// The mapping table.
#[derive(Debug)]
pub struct BufTable {
    parts: Box<[CachePadded<PartLock>]>,
    /// Every partition's index slots: partition `p` owns chunks
    /// `p * chunks_per_part ..`, so two partitions never share a cache line.
    slots: Box<[Chunk]>,
    /// Index slots per partition - 1 (a power of two minus one).
    mask: usize,
}

/// The slot value of an entry.
#[inline]
fn slot_value(hash: u64, id: BufferId) -> u64 {
    (hash & !0xFFFF_FFFF) | (u64::from(id) + 1)
}

/// One partition's view of the index: its slots and mask.
#[derive(Copy, Clone, Debug)]
struct Slots<'a> {
    chunks: &'a [Chunk],
    mask: usize,
}

impl<'a> Slots<'a> {
    #[inline]
    fn at(self, i: usize) -> &'a AtomicU64 {
        &self.chunks[i / CHUNK].0[i % CHUNK]
    }

    #[inline]
    fn start(self, hash: u64) -> usize {
        ((hash >> 7) as usize) & self.mask
    }

    #[inline]
    fn len(self) -> usize {
        self.mask + 1
    }

    /// Most slots that may be live or tombstones (3/4 of the array).
    #[inline]
    fn limit(self) -> usize {
        self.len() / 4 * 3
    }

    /// The candidates for `hash`, in probe order, each given to `f` until it
    /// returns `Some`. Atomic loads only.
    #[inline]
    fn find<R>(self, hash: u64, mut f: impl FnMut(BufferId) -> Option<R>) -> Option<R> {
        let want = hash >> 32;
        let mut i = self.start(hash);
        for _ in 0..self.len() {
            let v = self.at(i).load(Ordering::Acquire);
            if v == 0 {
                return None;
            }
            if v >> 32 == want
                && v as u32 != 0
                && let Some(r) = f(v as u32 - 1)
            {
                return Some(r);
            }
            i = (i + 1) & self.mask;
        }
        None
    }
}

impl Part {
    /// Index `(hash, id)` (the map already holds it). Caller: exclusive lock.
    fn index_insert(&mut self, slots: Slots<'_>, hash: u64, id: BufferId) {
        if self.live + self.dead >= slots.limit() {
            if self.dead > 0 {
                // The map already holds the new entry: the rebuild indexes it.
                self.rebuild(slots);
            }
            // Full of live entries: leave this one to the locked lookup.
            return;
        }
        let mut i = slots.start(hash);
        loop {
            let s = slots.at(i);
            let v = s.load(Ordering::Relaxed);
            if v == 0 || v == TOMBSTONE {
                if v == TOMBSTONE {
                    self.dead -= 1;
                }
                s.store(slot_value(hash, id), Ordering::Release);
                self.live += 1;
                return;
            }
            i = (i + 1) & slots.mask;
        }
    }

    /// Unindex `(hash, id)` if it is indexed. Caller: exclusive lock.
    fn index_remove(&mut self, slots: Slots<'_>, hash: u64, id: BufferId) {
        let want = slot_value(hash, id);
        let mut i = slots.start(hash);
        for _ in 0..slots.len() {
            let v = slots.at(i).load(Ordering::Relaxed);
            if v == 0 {
                return; // not indexed (the array was full when it was inserted)
            }
            if v == want {
                self.live -= 1;
                let next = slots.at((i + 1) & slots.mask).load(Ordering::Relaxed);
                if next == 0 {
                    // Nothing is probed past an empty slot, so this slot and
                    // the tombstones just before it end no chain: empty them.
                    slots.at(i).store(0, Ordering::Release);
                    let mut j = i.wrapping_sub(1) & slots.mask;
                    while j != i && slots.at(j).load(Ordering::Relaxed) == TOMBSTONE {
                        slots.at(j).store(0, Ordering::Release);
                        self.dead -= 1;
                        j = j.wrapping_sub(1) & slots.mask;
                    }
                } else {
                    slots.at(i).store(TOMBSTONE, Ordering::Release);
                    self.dead += 1;
                    if self.dead >= slots.len() / 4 {
                        self.rebuild(slots);
                    }
                }
                return;
            }
            i = (i + 1) & slots.mask;
        }
    }

    /// Refill the index from the map, without tombstones. Readers racing
    /// this may miss an entry (they then take the lock). Caller: exclusive lock.
    fn rebuild(&mut self, slots: Slots<'_>) {
        for i in 0..slots.len() {
            slots.at(i).store(0, Ordering::Release);
        }
        self.live = 0;
        self.dead = 0;
        let limit = slots.limit();
        for (ht, &id) in &self.map {
            if self.live >= limit {
                break;
            }
            let mut i = slots.start(ht.hash);
            while slots.at(i).load(Ordering::Relaxed) != 0 {
                i = (i + 1) & slots.mask;
            }
            slots
                .at(i)
                .store(slot_value(ht.hash, id), Ordering::Release);
            self.live += 1;
        }
    }
}

/// A partition locked exclusive: the map for reading, and inserts and
/// removals that keep the read index in step with it (rule 2).
#[derive(Debug)]
pub struct PartitionWrite<'a> {
    guard: RwLockWriteGuard<'a, Part>,
    slots: Slots<'a>,
    all_indexed: &'a AtomicBool,
}

impl PartitionWrite<'_> {
    #[inline]
    pub fn get(&self, ht: &HashedTag) -> Option<&BufferId> {
        self.guard.map.get(ht)
    }

    #[inline]
    pub fn contains_key(&self, ht: &HashedTag) -> bool {
        self.guard.map.contains_key(ht)
    }

    /// Map `ht` to `id`; returns the buffer it mapped to before, if any.
    pub fn insert(&mut self, ht: HashedTag, id: BufferId) -> Option<BufferId> {
        let part = &mut *self.guard;
        let old = part.map.insert(ht, id);
        if let Some(old) = old {
            part.index_remove(self.slots, ht.hash, old);
        }
        part.index_insert(self.slots, ht.hash, id);
        self.note_indexed();
        old
    }

    /// Set the partition's flag (module docs) from the map and the index,
    /// after a change under this lock.
    #[inline]
    fn note_indexed(&self) {
        let all = self.guard.map.len() == self.guard.live;
        if self.all_indexed.load(Ordering::Relaxed) != all {
            self.all_indexed.store(all, Ordering::Relaxed);
        }
    }

    /// Forget `ht`; returns the buffer it mapped to.
    pub fn remove(&mut self, ht: &HashedTag) -> Option<BufferId> {
        let part = &mut *self.guard;
        let old = part.map.remove(ht);
        if let Some(old) = old {
            part.index_remove(self.slots, ht.hash, old);
            // Entries left out while the index was full get their turn once
            // it has room again.
            if part.map.len() > part.live && part.live + part.dead < self.slots.limit() / 2 {
                part.rebuild(self.slots);
            }
            self.note_indexed();
        }
        old
    }

    /// Entries in the map.
    pub fn len(&self) -> usize {
        self.guard.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.guard.map.is_empty()
    }

    /// (live, tombstone) slots of the partition's index.
    pub fn index_counts(&self) -> (usize, usize) {
        (self.guard.live, self.guard.dead)
    }

    /// Remember `ht` in the partition's ghost set (a probation victim's old
    /// tag, being removed under this lock).
    #[inline]
    pub fn ghost_remember(&mut self, ht: &HashedTag) {
        self.guard.ghost.remember(ht.hash);
    }

    /// Was `ht` in the partition's ghost set? Forgets it (a miss inserting
    /// `ht` under this lock asks, to choose the new page's region).
    #[inline]
    pub fn ghost_take(&mut self, ht: &HashedTag) -> bool {
        self.guard.ghost.take(ht.hash)
    }

    /// Rebuild the partition's index from its map now.
    pub fn rebuild_index(&mut self) {
        let part = &mut *self.guard;
        part.rebuild(self.slots);
        self.note_indexed();
    }
}

impl BufTable {
    /// A table for a pool of `nbuffers`, without ghost sets.
    pub fn new(nbuffers: usize) -> BufTable {
        BufTable::with_ghosts(nbuffers, 0)
    }

    /// A table for a pool of `nbuffers` whose partitions hold ghost sets of
    /// `ghosts` fingerprints in all (the probation evictor).
    pub fn with_ghosts(nbuffers: usize, ghosts: usize) -> BufTable {
        let ghost_per_part = ghosts.div_ceil(NUM_MAPPING_PARTITIONS);
        let per_part = (nbuffers / NUM_MAPPING_PARTITIONS) * 2 + 16;
        let fair = nbuffers.div_ceil(NUM_MAPPING_PARTITIONS);
        let index_len = (fair * 2).next_power_of_two().max(64);
        let chunks = NUM_MAPPING_PARTITIONS * index_len / CHUNK;
        BufTable {
            parts: (0..NUM_MAPPING_PARTITIONS)
                .map(|_| {
                    CachePadded(PartLock {
                        lock: RwLock::new(Part {
                            map: Map::with_capacity_and_hasher(per_part, Default::default()),
                            live: 0,
                            dead: 0,
                            ghost: Ghost::new(ghost_per_part),
                        }),
                        // Empty: nothing left out.
                        all_indexed: AtomicBool::new(true),
                    })
                })
                .collect(),
            slots: (0..chunks)
                .map(|_| CachePadded(std::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
            mask: index_len - 1,
        }
    }

    #[inline]
    fn slots(&self, partition: usize) -> Slots<'_> {
        let per = (self.mask + 1) / CHUNK;
        Slots {
            chunks: &self.slots[partition * per..(partition + 1) * per],
            mask: self.mask,
        }
    }

    /// Index slots per partition.
    pub fn index_len(&self) -> usize {
        self.mask + 1
    }

    /// The lock-free lookup (rule 1): hand each buffer the read index names
    /// for `ht` to `validate`, which pins it and checks it, until one passes.
    /// Takes no lock and writes nothing; `None` means "ask the locked map"
    /// (not indexed, racing a change, or every candidate stale).
    #[inline]
    pub fn find_unlocked<R>(
        &self,
        ht: &HashedTag,
        validate: impl FnMut(BufferId) -> Option<R>,
    ) -> Option<R> {
        self.slots(ht.partition()).find(ht.hash, validate)
    }

    /// Lock a partition shared (rule 1).
    #[inline]
    pub fn read(&self, partition: usize) -> MappedRwLockReadGuard<'_, Map> {
        RwLockReadGuard::map(self.parts[partition].lock.read(), |p| &p.map)
    }

    /// Lock a partition exclusive (rule 2).
    #[inline]
    pub fn write(&self, partition: usize) -> PartitionWrite<'_> {
        let part = &self.parts[partition];
        PartitionWrite {
            guard: part.lock.write(),
            slots: self.slots(partition),
            all_indexed: &part.all_indexed,
        }
    }

    /// Whether `partition`'s read index held every entry of its map at its
    /// last change (module docs): a relaxed load, no lock, for a miss
    /// deciding whether a probe that found nothing is worth a locked lookup.
    #[inline]
    pub fn all_indexed(&self, partition: usize) -> bool {
        self.parts[partition].all_indexed.load(Ordering::Relaxed)
    }

    /// Load the cache lines that removing `ht` will touch first: its
    /// partition's lock word (with the flag beside it) and the index slot
    /// its probe starts at. Plain loads, no lock, nothing written: issued
    /// together before the exclusive lock is taken, their misses overlap
    /// instead of following one another (a locked instruction waits for the
    /// loads before it, so a load is as early as this can ask for a line).
    /// The values are passed to `black_box` only so the loads are kept.
    #[inline]
    pub fn touch(&self, ht: &HashedTag) {
        let p = ht.partition();
        let slots = self.slots(p);
        std::hint::black_box((
            self.parts[p].all_indexed.load(Ordering::Relaxed),
            slots.at(slots.start(ht.hash)).load(Ordering::Relaxed),
        ));
    }

    /// Number of entries (takes every lock in turn, in ascending order).
    pub fn len(&self) -> usize {
        self.parts.iter().map(|p| p.lock.read().map.len()).sum()
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

    fn tag(rel: u32, block: u32) -> HashedTag {
        HashedTag::new(BufferTag::new(RelFork::main(RelId(rel)), block))
    }

    /// Every candidate the index names for `h`, in probe order.
    fn candidates(t: &BufTable, h: &HashedTag) -> Vec<BufferId> {
        let mut v = Vec::new();
        t.find_unlocked(h, |id| {
            v.push(id);
            None::<()>
        });
        v
    }

    /// Distinct tags that all land in partition `p`.
    fn tags_in_partition(p: usize, n: usize) -> Vec<HashedTag> {
        (0..)
            .map(|b| tag(5, b))
            .filter(|h| h.partition() == p)
            .take(n)
            .collect()
    }

    #[test]
    fn index_finds_what_is_inserted_and_not_what_is_removed() {
        let t = BufTable::new(1024);
        let h = tag(3, 99);
        assert!(candidates(&t, &h).is_empty());
        t.write(h.partition()).insert(h, 7);
        assert_eq!(candidates(&t, &h), vec![7]);
        assert_eq!(t.find_unlocked(&h, Some), Some(7));
        // Another tag of the same partition is not a candidate for this one.
        let other = tags_in_partition(h.partition(), 2)
            .into_iter()
            .find(|o| o.tag != h.tag)
            .unwrap();
        assert!(candidates(&t, &other).is_empty());
        assert_eq!(t.write(h.partition()).remove(&h), Some(7));
        assert!(candidates(&t, &h).is_empty());
        assert_eq!(t.write(h.partition()).index_counts(), (0, 0));
    }

    #[test]
    fn a_rejected_candidate_sends_the_lookup_to_the_next() {
        let t = BufTable::new(1024);
        let a = tag(1, 1);
        // Same hash, different tag: both are candidates for either.
        let b = HashedTag {
            tag: BufferTag::new(RelFork::main(RelId(2)), 2),
            hash: a.hash,
        };
        let mut w = t.write(a.partition());
        w.insert(a, 1);
        w.insert(b, 2);
        drop(w);
        assert_eq!(candidates(&t, &a), vec![1, 2]);
        assert_eq!(t.find_unlocked(&a, |id| (id == 2).then_some(id)), Some(2));
        assert_eq!(t.find_unlocked(&a, |_| None::<()>), None);
    }

    #[test]
    fn tombstones_keep_later_entries_reachable_and_are_reused() {
        let t = BufTable::new(1024);
        let p = 17;
        // Same hash for all: one probe chain.
        let base = tags_in_partition(p, 1)[0];
        let same = |i: u32| HashedTag {
            tag: BufferTag::new(RelFork::main(RelId(100 + i)), i),
            hash: base.hash,
        };
        let mut w = t.write(p);
        for i in 0..4 {
            w.insert(same(i), i);
        }
        // Removing the head of the chain leaves a tombstone (the chain goes on).
        w.remove(&same(0));
        assert_eq!(w.index_counts(), (3, 1));
        drop(w);
        assert_eq!(candidates(&t, &base), vec![1, 2, 3]);
        let mut w = t.write(p);
        // An insert reuses the tombstone.
        w.insert(same(9), 9);
        assert_eq!(w.index_counts(), (4, 0));
        // Removing the tail empties its slot, and the tombstones before it.
        w.remove(&same(2));
        assert_eq!(w.index_counts(), (3, 1));
        w.remove(&same(3));
        assert_eq!(w.index_counts(), (2, 0));
        drop(w);
        assert_eq!(candidates(&t, &base), vec![9, 1]);
    }

    #[test]
    fn tombstones_trigger_a_rebuild_that_loses_nothing() {
        let t = BufTable::new(1024);
        let len = t.index_len();
        let p = 3;
        let base = tags_in_partition(p, 1)[0];
        let same = |i: u32| HashedTag {
            tag: BufferTag::new(RelFork::main(RelId(100 + i)), i),
            hash: base.hash,
        };
        let n = (len / 2) as u32;
        let mut w = t.write(p);
        for i in 0..n {
            w.insert(same(i), i);
        }
        // Remove every other entry from the front: each leaves a tombstone
        // (its successor is live) until a quarter of the array is tombstones.
        let mut removed = 0;
        for i in (0..n).step_by(2) {
            w.remove(&same(i));
            removed += 1;
            let (live, dead) = w.index_counts();
            assert_eq!(live, n as usize - removed);
            assert!(
                dead < len / 4,
                "a rebuild should have dropped the tombstones"
            );
        }
        assert_eq!(w.len(), n as usize - removed);
        drop(w);
        let mut found = candidates(&t, &base);
        found.sort_unstable();
        let want: Vec<BufferId> = (1..n).step_by(2).collect();
        assert_eq!(found, want);
        // An explicit rebuild gives the same answers and no tombstones.
        let mut w = t.write(p);
        w.rebuild_index();
        assert_eq!(w.index_counts(), (want.len(), 0));
    }

    #[test]
    fn a_full_index_leaves_entries_to_the_map_then_takes_them_back() {
        let t = BufTable::new(1024);
        let len = t.index_len();
        let p = 9;
        let tags = tags_in_partition(p, len);
        let mut w = t.write(p);
        for (i, h) in tags.iter().enumerate() {
            w.insert(*h, i as BufferId);
        }
        let (live, dead) = w.index_counts();
        assert_eq!((live, dead), (len / 4 * 3, 0));
        assert_eq!(w.len(), len);
        drop(w);
        // The map has every entry; the index the first 3/4 and no others.
        let map = t.read(p);
        for (i, h) in tags.iter().enumerate() {
            assert_eq!(map.get(h), Some(&(i as BufferId)));
        }
        drop(map);
        let indexed = |t: &BufTable, h: &HashedTag, id| candidates(t, h).contains(&id);
        assert!(
            tags[len - 1..]
                .iter()
                .all(|h| !indexed(&t, h, (len - 1) as BufferId))
        );
        // Removing most entries lets the rest back into the index.
        let mut w = t.write(p);
        for h in &tags[..len / 2 + len / 8] {
            w.remove(h);
        }
        let left = len - (len / 2 + len / 8);
        assert_eq!(w.index_counts().0, left);
        drop(w);
        for (i, h) in tags.iter().enumerate().skip(len / 2 + len / 8) {
            assert!(indexed(&t, h, i as BufferId), "{i} not back in the index");
        }
    }

    #[test]
    fn all_indexed_is_cleared_while_a_full_index_leaves_an_entry_out() {
        let t = BufTable::new(1024);
        let len = t.index_len();
        let p = 5;
        let tags = tags_in_partition(p, len);
        assert!(t.all_indexed(p), "an empty partition leaves nothing out");
        let mut w = t.write(p);
        for (i, h) in tags.iter().enumerate().take(len / 4 * 3) {
            w.insert(*h, i as BufferId);
        }
        drop(w);
        assert!(t.all_indexed(p), "3/4 of the array: every entry indexed");
        let mut w = t.write(p);
        w.insert(tags[len / 4 * 3], (len / 4 * 3) as BufferId);
        drop(w);
        assert!(!t.all_indexed(p), "one entry past the limit is left out");
        assert!(
            (0..NUM_MAPPING_PARTITIONS)
                .filter(|&q| q != p)
                .all(|q| t.all_indexed(q)),
            "the other partitions keep their flags"
        );
        // Removing the left-out entry itself gives back a complete index.
        let mut w = t.write(p);
        w.remove(&tags[len / 4 * 3]);
        drop(w);
        assert!(t.all_indexed(p));
        // Left out again, then back in by a rebuild after removals.
        let mut w = t.write(p);
        w.insert(tags[len / 4 * 3], (len / 4 * 3) as BufferId);
        assert!(!t.all_indexed(p));
        for h in &tags[..len / 2] {
            w.remove(h);
        }
        drop(w);
        assert!(t.all_indexed(p), "the rebuild indexed the left-out entry");
        assert!(candidates(&t, &tags[len / 4 * 3]).contains(&((len / 4 * 3) as BufferId)));
    }

    /// `touch` only loads: entries, index slots and the flag are as
    /// before, for a tag that is mapped and for one that is not.
    #[test]
    fn touching_a_tags_lines_changes_nothing() {
        let t = BufTable::new(1024);
        let h = tag(5, 12);
        t.write(h.partition()).insert(h, 9);
        let absent = tag(5, 13);
        let before = t.write(h.partition()).index_counts();
        for x in [&h, &absent] {
            t.touch(x);
        }
        assert_eq!(t.find_unlocked(&h, Some), Some(9));
        assert!(candidates(&t, &absent).is_empty());
        assert_eq!(t.write(h.partition()).index_counts(), before);
        assert!(t.all_indexed(h.partition()));
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn partitions_do_not_share_index_lines() {
        let t = BufTable::new(1024);
        let a = t.slots(0).at(t.index_len() - 1) as *const AtomicU64 as usize;
        let b = t.slots(1).at(0) as *const AtomicU64 as usize;
        assert_eq!(b % 128, 0);
        assert!(b - a >= 8 && a / 128 != b / 128);
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

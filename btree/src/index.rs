//! [`Index`]: one B-tree relation, its root cache, and the descent every
//! operation starts with.
//!
//! # Descent (Lehman & Yao, as PostgreSQL's `_bt_search`)
//!
//! 1. Start at the cached root (block and level). If the page found there
//!    is no longer flagged `ROOT` (a new root was made above it), re-read the
//!    meta page and start again. The cache is refreshed only then: a lookup
//!    touches root to leaf and nothing else.
//! 2. On each page, while the search key is at or beyond the page's high key,
//!    release the page and take its right sibling (a concurrent split moved
//!    the key right). Pages are never deleted, so the right link is always
//!    a valid page.
//! 3. Pick the child whose range holds the key, remember the page in the
//!    stack (a hint for finding the parent later), **release the page, then
//!    lock the child**: no lock coupling on the way down.
//! 4. Searches lock shared all the way. Inserts lock the target level
//!    exclusively, and finish any incomplete split they meet on the way
//!    (PostgreSQL's `_bt_moveright` with `forupdate`), then start again.
//! 5. Read-only descents (`Index::descend_shared`) take no pin and no
//!    lock on the pages above their target level: they read them
//!    optimistically and follow a step only once it is validated (the
//!    crate README's "Optimistic descents", rules 1-4); a declined page is
//!    read under its shared lock instead.
//!
//! # Lock order
//!
//! Locks are only ever *waited for* bottom-up (a child before its parent,
//! the meta page last) and left-to-right within a level. A search holds one
//! lock at a time. An insert holds the page it split while it inserts the
//! downlink into the parent (and so on upwards); a unique check holds the
//! first leaf while it reads right siblings. Nobody holding a page waits for
//! a page below it or to its left, so there is no deadlock.
//!
//! Splits extend the relation (`pool.extend`) while holding the page being
//! split, as PostgreSQL's `_bt_split` does: the extension lock never waits
//! for a content lock (bufmgr writes dirty victims under a try-lock).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bufmgr::{BlockNumber, BufferPool, PageRead, PageWrite, RelFork, RelId};
use wal::Wal;

use crate::error::{BtreeError, Result};
use heap::tuple::Tid;

use crate::key::{Key, KeyType, SearchKey, TID_MIN};
use crate::optimistic::{self, Next, Step};
use crate::page::{
    DEDUP, FIXED, Header, LEAF, Layout, MAX_KEY_SIZE, META_BLOCK, Meta, NO_RIGHT, PageId, ROOT,
    TreePage, build_page,
};
use crate::record;

/// What an index is created with.
#[derive(Clone, Debug)]
pub struct IndexOptions {
    /// Name used in error messages.
    pub name: String,
    /// The relation holding the index's pages.
    pub rel: RelId,
    pub key_type: KeyType,
    /// A unique index refuses a second live entry with the same key.
    pub unique: bool,
}

/// A B-tree index over one relation of the buffer pool.
#[derive(Debug)]
pub struct Index {
    pub(crate) name: String,
    pub(crate) rel: RelId,
    pub(crate) key_type: KeyType,
    pub(crate) unique: bool,
    /// The item layout of the index's pages (from the meta page).
    pub(crate) layout: Layout,
    /// Leaves merge equal keys into posting lists (meta format 3).
    pub(crate) dedup: bool,
    pub(crate) pool: Arc<BufferPool>,
    /// `None`: changes are not WAL-logged (tests, unlogged use).
    pub(crate) wal: Option<Arc<Wal>>,
    /// The root as last read from the meta page: `block << 32 | level`.
    /// An atomic, because it is only a hint: every use checks the page's
    /// `ROOT` flag under the page's lock.
    root_cache: AtomicU64,
}

/// A page locked shared or exclusive.
#[derive(Debug)]
pub(crate) enum Locked<'p> {
    Shared(PageRead<'p>),
    Exclusive(PageWrite<'p>),
}

impl Locked<'_> {
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Locked::Shared(p) => p,
            Locked::Exclusive(p) => p,
        }
    }
}

/// A page visited on the way down: where to look for a parent later.
#[derive(Copy, Clone, Debug)]
pub(crate) struct StackEntry {
    pub block: BlockNumber,
    pub level: u32,
}

/// Outcome of one descent attempt.
enum Descent<'p> {
    Found(Locked<'p>, Vec<StackEntry>),
    Restart,
}

impl Index {
    /// Create an index in the empty relation `options.rel`: the meta page
    /// (block 0) and an empty root leaf (block 1), logged as one record.
    /// Its pages use the compact item layout, and a non-unique index
    /// deduplicates equal keys into posting lists (meta format 3).
    pub fn create(
        pool: Arc<BufferPool>,
        wal: Option<Arc<Wal>>,
        options: IndexOptions,
    ) -> Result<Index> {
        Index::create_in_layout(pool, wal, options, Layout::Compact)
    }

    /// [`Index::create`] with the item layout chosen: `Layout::Headed`
    /// writes an index as the previous format did, to test that such
    /// indexes keep working. A compact non-unique index deduplicates.
    pub fn create_in_layout(
        pool: Arc<BufferPool>,
        wal: Option<Arc<Wal>>,
        options: IndexOptions,
        layout: Layout,
    ) -> Result<Index> {
        let dedup = layout == Layout::Compact;
        Index::create_in_format(pool, wal, options, layout, dedup)
    }

    /// [`Index::create`] with the layout and deduplication chosen. `dedup`
    /// asks for posting lists (meta format 3); it is ignored (no posting
    /// lists) for a unique index, whose keys are never equal among live
    /// entries, and for the headed layout, which predates posting lists.
    /// An index created with `dedup` off (format 2) stores one item per
    /// entry, as indexes did before deduplication.
    pub fn create_in_format(
        pool: Arc<BufferPool>,
        wal: Option<Arc<Wal>>,
        options: IndexOptions,
        layout: Layout,
        dedup: bool,
    ) -> Result<Index> {
        let dedup = dedup && layout == Layout::Compact && !options.unique;
        let rf = RelFork::main(options.rel);
        pool.create_fork(rf)?;
        let n = pool.nblocks(rf)?;
        if n != 0 {
            return Err(BtreeError::BadOptions {
                index: options.name,
                detail: format!("relation {} already has {n} blocks", options.rel.0),
            });
        }
        let fixed = layout == Layout::Compact && options.key_type == KeyType::I64;
        {
            let mut meta = pool.extend(rf, None)?;
            let mut root = pool.extend(rf, None)?;
            if meta.block() != META_BLOCK {
                return Err(BtreeError::BadOptions {
                    index: options.name,
                    detail: "another session extended the relation while the index was created"
                        .into(),
                });
            }
            build_page(
                &mut root,
                Header {
                    flags: LEAF
                        | ROOT
                        | if fixed { FIXED } else { 0 }
                        | if dedup { DEDUP } else { 0 },
                    level: 0,
                    right: NO_RIGHT,
                    layout,
                },
                &[],
            );
            Meta {
                root: root.block(),
                root_level: 0,
                key_type: options.key_type,
                unique: options.unique,
                layout,
                dedup,
            }
            .write(&mut meta);
            record::log(
                wal.as_deref(),
                record::CREATE,
                &mut [&mut meta, &mut root],
                &[],
                true,
            )?;
        }
        Index::open(pool, wal, &options.name, options.rel)
    }

    /// Open an existing index: its key type and uniqueness come from the meta page.
    pub fn open(
        pool: Arc<BufferPool>,
        wal: Option<Arc<Wal>>,
        name: &str,
        rel: RelId,
    ) -> Result<Index> {
        let meta = read_meta(&pool, rel)?;
        Ok(Index {
            name: name.to_string(),
            rel,
            key_type: meta.key_type,
            unique: meta.unique,
            layout: meta.layout,
            dedup: meta.dedup,
            pool,
            wal,
            root_cache: AtomicU64::new(pack(meta.root, meta.root_level)),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn rel(&self) -> RelId {
        self.rel
    }
    pub fn key_type(&self) -> KeyType {
        self.key_type
    }
    pub fn is_unique(&self) -> bool {
        self.unique
    }
    /// The item layout of the index's pages.
    pub fn layout(&self) -> Layout {
        self.layout
    }
    /// Whether leaves merge equal keys into posting lists.
    pub fn deduplicates(&self) -> bool {
        self.dedup
    }

    /// Whether new leaves are `FIXED` (an `i64` index in the compact
    /// layout: every leaf item is an 8-byte key and a TID).
    pub(crate) fn fixed_leaves(&self) -> bool {
        self.layout == Layout::Compact && self.key_type == KeyType::I64
    }
    pub fn pool(&self) -> &Arc<BufferPool> {
        &self.pool
    }

    pub(crate) fn relfork(&self) -> RelFork {
        RelFork::main(self.rel)
    }

    pub(crate) fn page_id(&self, block: BlockNumber) -> PageId {
        PageId {
            rel: self.rel,
            block,
        }
    }

    /// Check a key's type and size, and return its stored form.
    pub(crate) fn encode_key(&self, key: &Key) -> Result<Vec<u8>> {
        self.check_key(key)?;
        Ok(key.encode())
    }

    /// Check a key's type and size without encoding it.
    pub(crate) fn check_key(&self, key: &Key) -> Result<()> {
        if !self.key_type.accepts(key) {
            return Err(BtreeError::WrongKeyType {
                index: self.name.clone(),
                expected: self.key_type,
                got: key.to_string(),
            });
        }
        self.check_key_size(key.encoded_len())
    }

    pub(crate) fn check_key_size(&self, size: usize) -> Result<()> {
        if size > MAX_KEY_SIZE {
            return Err(BtreeError::KeyTooLarge {
                index: self.name.clone(),
                size,
                max: MAX_KEY_SIZE,
            });
        }
        Ok(())
    }

    pub(crate) fn decode_key(&self, bytes: &[u8], block: BlockNumber) -> Result<Key> {
        Key::decode(self.key_type, bytes).ok_or_else(|| {
            self.page_id(block).corrupt(format!(
                "a key of {} bytes is not a {:?}",
                bytes.len(),
                self.key_type
            ))
        })
    }

    /// The root (block, level): the cached one, or the meta page's.
    pub(crate) fn root(&self, refresh: bool) -> Result<(BlockNumber, u32)> {
        if !refresh {
            let c = self.root_cache.load(Ordering::Acquire);
            if c != 0 {
                return Ok(unpack(c));
            }
        }
        let meta = read_meta(&self.pool, self.rel)?;
        self.root_cache
            .store(pack(meta.root, meta.root_level), Ordering::Release);
        Ok((meta.root, meta.root_level))
    }

    pub(crate) fn set_root_cache(&self, block: BlockNumber, level: u32) {
        self.root_cache.store(pack(block, level), Ordering::Release);
    }

    pub(crate) fn lock(&self, block: BlockNumber, exclusive: bool) -> Result<Locked<'_>> {
        let pin = self.pool.read_buffer(self.relfork(), block, None)?;
        Ok(if exclusive {
            Locked::Exclusive(pin.lock_exclusive())
        } else {
            Locked::Shared(pin.lock_shared())
        })
    }

    pub(crate) fn lock_exclusive(&self, block: BlockNumber) -> Result<PageWrite<'_>> {
        Ok(self
            .pool
            .read_buffer(self.relfork(), block, None)?
            .lock_exclusive())
    }

    /// The insert-mode descent: to the page at `level` whose key range
    /// holds `skey`, locked exclusively (shared above it), finishing the
    /// incomplete splits met on the way. With `start`, begin at that page (a
    /// remembered parent; it lies at or left of the target, since pages only
    /// ever split to the right) instead of the root. Returns the page and
    /// the stack of pages above it. (Reads use [`Index::descend_shared`].)
    pub(crate) fn descend(
        &self,
        skey: &SearchKey,
        level: u32,
        start: Option<StackEntry>,
    ) -> Result<(Locked<'_>, Vec<StackEntry>)> {
        let mut refresh = false;
        loop {
            match self.try_descend(skey, level, start, refresh)? {
                Descent::Found(page, stack) => return Ok((page, stack)),
                Descent::Restart => refresh = true,
            }
        }
    }

    fn try_descend(
        &self,
        skey: &SearchKey,
        target: u32,
        start: Option<StackEntry>,
        refresh: bool,
    ) -> Result<Descent<'_>> {
        let (mut block, mut level, from_root) = match start {
            Some(s) => (s.block, s.level, false),
            _ => {
                let (b, l) = self.root(refresh)?;
                (b, l, true)
            }
        };
        if level < target {
            if refresh {
                return Err(self.page_id(block).corrupt(format!(
                    "the root is at level {level}, below the level {target} asked for"
                )));
            }
            return Ok(Descent::Restart);
        }
        let mut stack: Vec<StackEntry> = Vec::new();
        let mut page = self.lock(block, level == target)?;
        let mut first = true;
        loop {
            // Move right (step 2), finishing incomplete splits in insert mode.
            loop {
                let tp = TreePage::parse(page.bytes(), self.page_id(block))?;
                if tp.level != level {
                    return Err(self.page_id(block).corrupt(format!(
                        "page at level {} where level {level} was expected",
                        tp.level
                    )));
                }
                if first && from_root && !tp.is_root() {
                    // Step 1: the cached root has been split and a new root made.
                    return Ok(Descent::Restart);
                }
                first = false;
                if tp.is_incomplete_split() {
                    drop(page);
                    let mut w = self.lock_exclusive(block)?;
                    let tp = TreePage::parse(&w, self.page_id(block))?;
                    if tp.is_incomplete_split() {
                        self.finish_split(&mut w, &stack)?;
                    }
                    return Ok(Descent::Restart);
                }
                if tp.beyond_high_key(skey)? {
                    block = self.right_of(&tp, block)?;
                    drop(page);
                    page = self.lock(block, level == target)?;
                    continue;
                }
                break;
            }
            if level == target {
                return Ok(Descent::Found(page, stack));
            }
            let child = TreePage::parse(page.bytes(), self.page_id(block))?.child_for(skey)?;
            stack.push(StackEntry { block, level });
            drop(page);
            block = child;
            level -= 1;
            page = self.lock(block, level == target)?;
        }
    }

    /// The leftmost page of `level` (following the first downlink down).
    pub(crate) fn leftmost(&self, level: u32) -> Result<BlockNumber> {
        Ok(self.descend_shared(&[], TID_MIN, level)?.block())
    }

    /// A read-only descent to the page at `level` whose range holds the
    /// position (`key`, `tid`), `key` in stored form: no stack kept and
    /// nothing allocated (the point-lookup and scan-start path). Returns
    /// the page locked shared.
    ///
    /// The pages above `level` are read optimistically (step 5 of the
    /// descent; "Optimistic descents" rules 1 and 2 in the crate README):
    /// no pin, no lock, the step taken only once the page's version
    /// confirms the read. A page the pool declines is read pinned under its
    /// shared lock instead (rule 4), and the descent goes on optimistically
    /// below it; a page is tried optimistically once per visit, so a
    /// descent always ends.
    /// The page at `level` is pinned and locked shared, moving right past
    /// high keys with one lock held at a time.
    pub(crate) fn descend_shared(&self, key: &[u8], tid: Tid, level: u32) -> Result<PageRead<'_>> {
        let mut refresh = false;
        'restart: loop {
            let (mut block, mut at) = self.root(refresh)?;
            if at < level {
                if refresh {
                    return Err(self.page_id(block).corrupt(format!(
                        "the root is at level {at}, below the level {level} asked for"
                    )));
                }
                refresh = true;
                continue;
            }
            let mut first = true;
            while at > level {
                let step = match self.pool.read_optimistic(self.relfork(), block, |p| {
                    optimistic::inner_step(p, key, tid, at)
                }) {
                    // A right link back to the page itself is damage: the
                    // pinned read names it (it would otherwise be followed
                    // forever).
                    Some(Some(step)) if step.next != Next::Right(block) => step,
                    _ => self.inner_step_pinned(block, key, tid, at)?,
                };
                if first && !step.root {
                    // The cached root has been split and a new root made.
                    refresh = true;
                    continue 'restart;
                }
                first = false;
                block = match step.next {
                    Next::Right(right) => right,
                    Next::Child(child) => {
                        at -= 1;
                        child
                    }
                };
            }
            // The page's first line (its header, and on a leaf of fixed
            // items the high key and the first item too) is read first:
            // asked for as soon as the buffer is known, its miss overlaps
            // the pin's.
            let mut page = self
                .pool
                .read_buffer_prefetching(self.relfork(), block, &[0])?
                .lock_shared();
            loop {
                let tp = TreePage::parse(&page, self.page_id(block))?;
                if tp.level != at {
                    return Err(self.page_id(block).corrupt(format!(
                        "page at level {} where level {at} was expected",
                        tp.level
                    )));
                }
                if first && !tp.is_root() {
                    refresh = true;
                    continue 'restart;
                }
                first = false;
                if !tp.beyond_high_key_at(key, tid)? {
                    return Ok(page);
                }
                let (right, high, high_tid) = self.right_and_high(&tp, block)?;
                drop(page);
                block = right;
                page = self.read_right_shared(block, (&high, high_tid))?;
            }
        }
    }

    /// The right link of `tp` (page `block`), which a descent is about to
    /// follow; a link back to the page itself is `Corrupt` (following it
    /// would never end).
    pub(crate) fn right_of(&self, tp: &TreePage<'_>, block: BlockNumber) -> Result<BlockNumber> {
        if tp.right == block {
            return Err(self
                .page_id(block)
                .corrupt("the right link points at the page itself"));
        }
        Ok(tp.right)
    }

    /// [`optimistic::inner_step`] the pinned way: the internal page `block`
    /// at level `at` under its shared lock, released before returning.
    fn inner_step_pinned(&self, block: BlockNumber, key: &[u8], tid: Tid, at: u32) -> Result<Step> {
        let page = self.read_shared(block)?;
        let tp = TreePage::parse(&page, self.page_id(block))?;
        if tp.level != at {
            return Err(self.page_id(block).corrupt(format!(
                "page at level {} where level {at} was expected",
                tp.level
            )));
        }
        let next = if tp.beyond_high_key_at(key, tid)? {
            Next::Right(self.right_of(&tp, block)?)
        } else {
            Next::Child(tp.child_for_at(key, tid)?)
        };
        Ok(Step {
            root: tp.is_root(),
            next,
        })
    }

    /// Move right from the shared-locked `page` (of any level) while the
    /// position (`key`, `tid`) is at or beyond its high key, releasing each
    /// page before locking its right sibling.
    pub(crate) fn move_right_shared<'p>(
        &'p self,
        mut page: PageRead<'p>,
        key: &[u8],
        tid: Tid,
    ) -> Result<PageRead<'p>> {
        loop {
            let block = page.block();
            let tp = TreePage::parse(&page, self.page_id(block))?;
            if !tp.beyond_high_key_at(key, tid)? {
                return Ok(page);
            }
            let (right, high, high_tid) = self.right_and_high(&tp, block)?;
            drop(page);
            page = self.read_right_shared(right, (&high, high_tid))?;
        }
    }

    /// The right link of `tp` (page `block`), whose high key a search is at
    /// or beyond, and that high key copied out (stored key, TID), for
    /// [`Index::read_right_shared`] once the page is released. A page a
    /// search is beyond always has a high key (`beyond_high_key_at`).
    fn right_and_high(
        &self,
        tp: &TreePage<'_>,
        block: BlockNumber,
    ) -> Result<(BlockNumber, Vec<u8>, Tid)> {
        let right = self.right_of(tp, block)?;
        let hk = tp.high_key()?.ok_or_else(|| {
            self.page_id(block)
                .corrupt("a search moved right of a page without a high key")
        })?;
        Ok((right, hk.key.to_vec(), hk.tid))
    }

    pub(crate) fn read_shared(&self, block: BlockNumber) -> Result<PageRead<'_>> {
        Ok(self
            .pool
            .read_buffer(self.relfork(), block, None)?
            .lock_shared())
    }

    /// Lock shared page `right`, the right link of a page whose high key
    /// was `high` (stored key and TID, copied before that page was
    /// released), and check that its own high key, if it has one, is
    /// above `high`. High keys rise strictly along a level (a split gives
    /// the left half a separator below the old high key, which the right
    /// half keeps; pages are never removed), so a link that breaks this
    /// is damage, a link back to a page on the left (a bit flipped on a
    /// disk read without checksums): followed, a read would go round the
    /// cycle forever. [`Index::right_of`] refuses the cycle of one page
    /// before it is read; this refuses every longer one at the page that
    /// closes it.
    pub(crate) fn read_right_shared(
        &self,
        right: BlockNumber,
        high: (&[u8], Tid),
    ) -> Result<PageRead<'_>> {
        let page = self.read_shared(right)?;
        let tp = TreePage::parse(&page, self.page_id(right))?;
        if let Some(hk) = tp.high_key()?
            && (hk.key, hk.tid) <= high
        {
            return Err(self.page_id(right).corrupt(
                "reached by a right link from a page whose high key is not below this page's",
            ));
        }
        Ok(page)
    }
}

fn pack(block: BlockNumber, level: u32) -> u64 {
    (u64::from(block) << 32) | u64::from(level)
}

fn unpack(v: u64) -> (BlockNumber, u32) {
    ((v >> 32) as BlockNumber, v as u32)
}

pub(crate) fn read_meta(pool: &BufferPool, rel: RelId) -> Result<Meta> {
    let id = PageId {
        rel,
        block: META_BLOCK,
    };
    let rf = RelFork::main(rel);
    if pool.nblocks(rf)? == 0 {
        return Err(id.corrupt("the index relation is empty (no meta page)"));
    }
    let page = pool.read_buffer(rf, META_BLOCK, None)?.lock_shared();
    Meta::read(&page, id)
}

//! Decoder fuzz targets shared by the proptest pass
//! (`tests/decoders_never_panic_on_damaged_bytes.rs`) and the coverage-guided
//! `cargo fuzz` targets (`fuzz/`): valid seed objects built by each crate's
//! own encoder, re-sealing of checksums after damage, and one function per
//! decoder that runs every read accessor over (possibly damaged) bytes. A
//! target returns normally for any input; a panic is a bug, and so is an
//! error that does not name what was wrong (checked with `assert!`).

use std::path::Path;
use std::sync::OnceLock;

use bufmgr::{BufferTag, PAGE_SIZE, RelFork, RelId};
use heap::page::PageId as HeapPageId;
use heap::tuple::{Tid, TupleHeader, build_tuple};
use wal::control::ControlData;
use wal::{BlockRef, Hole, Lsn, Record, RmgrKind};

// ---- seeds: valid objects from the crates' own encoders ----

pub fn valid_heap_page() -> Vec<u8> {
    let mut page = vec![0u8; PAGE_SIZE];
    heap::page::init(&mut page);
    let id = heap_id();
    for off in 1..=12u16 {
        let header = TupleHeader::new_insert(
            100 + u64::from(off),
            Tid {
                block: 3,
                offset: off,
            },
            off % 3 == 0,
        );
        let data = vec![off as u8; 20 + 7 * off as usize];
        let tuple = build_tuple(&header, &data);
        heap::page::add_tuple(&mut page, id, off, &tuple).unwrap();
    }
    bufmgr::page::set_checksum(&mut page, 3);
    page
}

pub fn heap_id() -> HeapPageId {
    HeapPageId {
        rel: RelId(16384),
        block: 3,
    }
}

pub fn btree_id() -> btree::page::PageId {
    btree::page::PageId {
        rel: RelId(16385),
        block: 2,
    }
}

pub fn key(i: i64) -> Vec<u8> {
    ((i as u64) ^ (1 << 63)).to_be_bytes().to_vec()
}

/// Valid B-tree pages to damage: a compact leaf with a high key, a compact
/// internal root, the meta page, the same leaf and root in the headed
/// layout (indexes written by the previous format), and the leaf `FIXED`
/// (no item pointers), and a `DEDUP` leaf of posting lists.
pub fn valid_btree_pages() -> &'static [Vec<u8>; 7] {
    static PAGES: OnceLock<[Vec<u8>; 7]> = OnceLock::new();
    PAGES.get_or_init(|| {
        use btree::page::{
            DEDUP, FIXED, HAS_HIGH_KEY, Header, LEAF, Layout, ROOT, build_page, encode_item,
            encode_posting,
        };
        let tid = |i: u16| Tid {
            block: u32::from(i),
            offset: i + 1,
        };
        let leaf = |layout: Layout, fixed: u16| {
            // A leaf with a high key.
            let mut items = vec![encode_item(layout, &key(1000), tid(99), None, false)];
            items.extend(
                (0..40).map(|i| encode_item(layout, &key(i * 7), tid(i as u16), None, false)),
            );
            let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
            let mut leaf = vec![0u8; PAGE_SIZE];
            build_page(
                &mut leaf,
                Header {
                    flags: LEAF | HAS_HIGH_KEY | fixed,
                    level: 0,
                    right: 7,
                    layout,
                },
                &refs,
            );
            leaf
        };
        let internal = |layout: Layout| {
            // An internal root: a minus-infinity first item, then separators.
            let mut items = vec![encode_item(layout, &[], tid(0), Some(1), true)];
            items.extend((1..30).map(|i| {
                encode_item(
                    layout,
                    &key(i * 50),
                    tid(i as u16),
                    Some(i as u32 + 1),
                    false,
                )
            }));
            let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
            let mut internal = vec![0u8; PAGE_SIZE];
            build_page(
                &mut internal,
                Header {
                    flags: ROOT,
                    level: 1,
                    right: btree::page::NO_RIGHT,
                    layout,
                },
                &refs,
            );
            internal
        };
        let mut meta = vec![0u8; PAGE_SIZE];
        btree::page::Meta {
            root: 3,
            root_level: 1,
            key_type: btree::KeyType::I64,
            unique: true,
            layout: Layout::Compact,
            dedup: false,
        }
        .write(&mut meta);
        // Posting lists of 2 to 21 TIDs (blocks and offsets of every
        // varint width) between plain items, under a high key.
        let mut items = vec![encode_item(
            Layout::Compact,
            &key(1000),
            tid(99),
            None,
            false,
        )];
        for i in 0..30u16 {
            let n = 1 + i % 21;
            let tids: Vec<Tid> = (0..n)
                .map(|t| Tid {
                    block: u32::from(t) * 300 + u32::from(i),
                    offset: 1 + t * 13,
                })
                .collect();
            items.push(encode_posting(&key(i64::from(i) * 7), &tids));
        }
        let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
        let mut dedup_leaf = vec![0u8; PAGE_SIZE];
        build_page(
            &mut dedup_leaf,
            Header {
                flags: LEAF | HAS_HIGH_KEY | DEDUP,
                level: 0,
                right: 7,
                layout: Layout::Compact,
            },
            &refs,
        );
        [
            leaf(Layout::Compact, 0),
            internal(Layout::Compact),
            meta,
            leaf(Layout::Headed, 0),
            internal(Layout::Headed),
            leaf(Layout::Compact, FIXED),
            dedup_leaf,
        ]
    })
}

pub fn tag(rel: u32, block: u32) -> BufferTag {
    BufferTag::new(RelFork::main(RelId(rel)), block)
}

pub fn wal_records() -> &'static Vec<Vec<u8>> {
    static RECORDS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    RECORDS.get_or_init(|| {
        let page = valid_heap_page();
        let with_image = Record::builder(RmgrKind::Heap, 3, 42)
            .block(
                BlockRef::with_image(tag(16384, 3), &page, Hole::new(400, 5000).unwrap()).unwrap(),
            )
            .block(BlockRef::new(tag(16384, 4)).will_init())
            .payload(vec![1, 2, 3, 4, 5, 6, 7, 8, 9])
            .build()
            .unwrap();
        let plain = Record::builder(RmgrKind::Btree, 1, 7)
            .block(BlockRef::new(tag(16385, 2)))
            .payload(vec![0xAB; 40])
            .build()
            .unwrap();
        let xact = Record::builder(RmgrKind::Xact, 0, 9).build().unwrap();
        [with_image, plain, xact]
            .into_iter()
            .map(|r| r.with_prev_lsn(Lsn(0x1234)).encode())
            .collect()
    })
}

/// Re-seals a WAL record after damage: its length field and CRC (layout in
/// `wal::record`'s module docs: length at 0, CRC at 4 over the body, then
/// bytes 0..4 and 8..35, `wal::record::HEADER_LEN`).
pub fn reseal_record(b: &mut [u8]) {
    const HEADER: usize = wal::record::HEADER_LEN;
    if b.len() < HEADER {
        return;
    }
    let len = b.len() as u32;
    b[0..4].copy_from_slice(&len.to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&b[HEADER..]);
    crc.update(&b[..4]);
    crc.update(&b[8..HEADER]);
    let crc = crc.finalize();
    b[4..8].copy_from_slice(&crc.to_le_bytes());
}

/// Re-seals a control file: CRC of bytes 0..52 at 52.
pub fn reseal_control(b: &mut [u8]) {
    if b.len() == wal::control::CONTROL_FILE_LEN {
        let crc = crc32fast::hash(&b[..52]);
        b[52..56].copy_from_slice(&crc.to_le_bytes());
    }
}

// ---- targets ----

/// Every read accessor of a heap page, and the edits redo makes to one.
pub fn exercise_heap_page(page: &[u8]) {
    let id = heap_id();
    if let Ok(view) = heap::page::HeapPage::parse(page, id) {
        let n = view.item_count();
        let _ = (view.lower(), view.upper(), view.flags(), view.prune_xid());
        let _ = (view.free_bytes(), view.free_space(), view.is_new());
        for off in 0..=n.saturating_add(1) {
            let _ = view.item(off);
            let _ = view.tuple(off);
            let _ = view.header(off);
        }
        for (_, _, bytes) in view.tuples().flatten() {
            let _ = TupleHeader::decode(bytes);
        }
        let _ = heap::page::next_offset(&view);
    } else if let Err(e) = heap::page::HeapPage::parse(page, id) {
        let msg = e.to_string();
        assert!(
            msg.contains("16384"),
            "heap error names the relation: {msg}"
        );
        assert!(msg.contains('3'), "heap error names the block: {msg}");
    }
    let _ = heap::page::mask_for_comparison(page, id);
    let mut copy = page.to_vec();
    let _ = heap::page::compact(&mut copy, id);
    let mut copy = page.to_vec();
    let _ = heap::page::apply_vacuum(&mut copy, id, &[1, 2, 5]);
    let mut copy = page.to_vec();
    let tuple = build_tuple(
        &TupleHeader::new_insert(
            9,
            Tid {
                block: 3,
                offset: 4,
            },
            false,
        ),
        &[7; 30],
    );
    let _ = heap::page::add_tuple(&mut copy, id, 4, &tuple);
    let mut copy = page.to_vec();
    let header = TupleHeader::new_insert(
        9,
        Tid {
            block: 3,
            offset: 2,
        },
        false,
    );
    let _ = heap::page::put_header(&mut copy, id, 2, &header);
}

pub fn exercise_btree_page(page: &[u8]) {
    use btree::key::SearchKey;
    use btree::page::{Meta, TreePage, page_kind};
    let id = btree_id();
    let _ = page_kind(page);
    let _ = Meta::read(page, id);
    let _ = btree::page::free_bytes(page);
    let _ = btree::page::flags_of(page);
    let view = match TreePage::parse(page, id) {
        Ok(v) => v,
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains("16385"), "B-tree error names the index: {msg}");
            return;
        }
    };
    let _ = (view.is_leaf(), view.is_root(), view.is_incomplete_split());
    let _ = (view.has_high_key(), view.right_link(), view.free_space());
    let n = view.data_len();
    for j in 0..=n {
        if let Ok(it) = view.data(j)
            && let Ok(tids) = it.tids(id)
        {
            let _ = tids.count();
        }
        let _ = view.item(j);
    }
    let _ = view.high_key();
    let _ = view.all_items();
    for probe in [0i64, 333, 2000] {
        let skey = SearchKey::new(
            key(probe),
            Tid {
                block: 1,
                offset: 1,
            },
        );
        let _ = view.lower_bound(&skey);
        let _ = view.beyond_high_key(&skey);
        if !view.is_leaf() {
            let _ = view.child_for(&skey);
        }
    }
}

// ---- resource-manager payloads: heap and B-tree redo ----

/// A pool over a fresh directory holding the seed pages: heap relation
/// 16384 blocks 0..4, index 16385 blocks 0 (meta), 1 (internal), 2 (leaf).
pub fn redo_pool() -> (tempfile::TempDir, bufmgr::BufferPool) {
    use bufmgr::StorageBackend;
    let dir = tempfile::tempdir().unwrap();
    let storage = std::sync::Arc::new(bufmgr::FileStorage::open(dir.path()).unwrap());
    let heap_rf = RelFork::main(RelId(16384));
    storage.create(heap_rf).unwrap();
    for block in 0..4 {
        let mut page = valid_heap_page();
        bufmgr::page::set_checksum(&mut page, block);
        storage
            .write(BufferTag::new(heap_rf, block), &page)
            .unwrap();
    }
    let index_rf = RelFork::main(RelId(16385));
    storage.create(index_rf).unwrap();
    let [leaf, internal, meta, ..] = valid_btree_pages();
    for (block, page) in [(0, meta), (1, internal), (2, leaf)] {
        let mut page = page.clone();
        bufmgr::page::set_checksum(&mut page, block);
        storage
            .write(BufferTag::new(index_rf, block), &page)
            .unwrap();
    }
    let config = bufmgr::PoolConfig::new(16).partitions(1).checksums(true);
    (dir, bufmgr::BufferPool::new(config, storage).unwrap())
}

pub fn heap_payloads() -> Vec<(u8, Vec<u8>)> {
    use heap::page::LpState;
    use heap::record::HeapRecord;
    let tuple = build_tuple(
        &TupleHeader::new_insert(
            5,
            Tid {
                block: 3,
                offset: 13,
            },
            false,
        ),
        &[9; 25],
    );
    [
        HeapRecord::Insert {
            offset: 13,
            init: false,
            tuple: tuple.clone(),
        },
        HeapRecord::Delete { offset: 2 },
        HeapRecord::Update {
            old_offset: 3,
            new_offset: 13,
            init: false,
            tuple,
        },
        HeapRecord::Prune {
            prune_xid: 77,
            changes: vec![(1, LpState::Dead), (2, LpState::Unused)],
        },
        HeapRecord::Vacuum {
            offsets: vec![1, 4],
        },
    ]
    .iter()
    .map(HeapRecord::encode)
    .collect()
}

pub fn btree_payload(info_choice: usize) -> (u8, Vec<u8>) {
    use btree::record::{INSERT_DOWNLINK, INSERT_LEAF, REWRITE_LEAF, VACUUM};
    let tid = Tid {
        block: 8,
        offset: 2,
    };
    match info_choice % 4 {
        0 => (
            INSERT_LEAF,
            btree::page::encode_item(btree::page::Layout::Compact, &key(15), tid, None, false),
        ),
        1 => (
            INSERT_DOWNLINK,
            btree::page::encode_item(btree::page::Layout::Compact, &key(777), tid, Some(9), false),
        ),
        2 => (
            VACUUM,
            [2u16, 1, 3].iter().flat_map(|v| v.to_le_bytes()).collect(),
        ),
        _ => {
            // Item 1 removed, item 3 replaced by one item of 20 bytes
            // (the same key and another TID).
            let item =
                btree::page::encode_item(btree::page::Layout::Compact, &key(21), tid, None, false);
            let mut p: Vec<u8> = [1u16, 1, 1, 3, 1, item.len() as u16]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect();
            p.extend_from_slice(&item);
            (REWRITE_LEAF, p)
        }
    }
}

/// One segment written by the real log (records of every shape), and how
/// many of its bytes hold records.
pub fn wal_segment() -> &'static (Vec<u8>, usize) {
    static SEGMENT: OnceLock<(Vec<u8>, usize)> = OnceLock::new();
    SEGMENT.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let config = wal::WalConfig {
            segment_size: wal::MIN_SEGMENT_SIZE,
            ..Default::default()
        };
        let wal = wal::Wal::open(dir.path(), config).unwrap();
        let mut end = Lsn::ZERO;
        for i in 0..30u64 {
            let bytes = &wal_records()[(i % 3) as usize];
            let mut r = wal::decode(bytes).unwrap();
            if i % 3 == 1 {
                r = Record::builder(r.kind(), r.info(), 100 + i)
                    .payload(vec![i as u8; 10 + i as usize])
                    .build()
                    .unwrap();
            }
            end = wal.insert(&r).unwrap().1;
        }
        wal.flush(end).unwrap();
        drop(wal);
        let path = wal::segment::segment_path(&wal::segment::wal_dir(dir.path()), Lsn::ZERO);
        (std::fs::read(path).unwrap(), end.0 as usize)
    })
}

/// The control file a checkpoint would write.
pub fn valid_control() -> Vec<u8> {
    ControlData::now(Lsn(0x3000), Lsn(0x2000), 77, 1 << 16)
        .encode()
        .to_vec()
}

/// Every accessor of the page-header module over one page (`PAGE_SIZE`).
pub fn exercise_page_header(page: &[u8]) {
    let _ = bufmgr::page::verify(page, 3);
    let _ = (bufmgr::page::page_lsn(page), bufmgr::page::is_new(page));
    let _ = (
        bufmgr::page::checksum(page, 3),
        bufmgr::page::stored_checksum(page),
    );
}

/// `wal::decode`, and what a caller does with a record it accepted.
pub fn exercise_wal_record(bytes: &[u8]) {
    match wal::decode(bytes) {
        Ok(r) => {
            let _ = r.encode();
            for i in 0..r.blocks().len() {
                let _ = r.restore_page(i);
            }
        }
        Err(e) => assert!(e.to_string().contains("byte"), "{e}"),
    }
}

/// `ControlData::decode`; an error names the file.
pub fn exercise_control(bytes: &[u8]) {
    let file = Path::new("/data/control");
    if let Err(e) = ControlData::decode(bytes, file) {
        assert!(e.to_string().contains("/data/control"), "{e}");
    }
}

/// `VERSION`'s parser; an error names the file.
pub fn exercise_version(bytes: &[u8]) {
    let file = Path::new("/data/VERSION");
    if let Err(e) = engine::datadir::parse_stamp(bytes, file) {
        assert!(e.to_string().contains("/data/VERSION"), "{e}");
    }
}

/// A valid `VERSION` (as `check_or_stamp` writes it).
pub fn valid_version() -> Vec<u8> {
    let dir = tempfile::tempdir().expect("temporary directory");
    engine::datadir::check_or_stamp(dir.path(), true).expect("stamp");
    std::fs::read(dir.path().join(engine::datadir::VERSION_FILE)).expect("read VERSION")
}

/// The WAL reader and `Wal::open` over segment 0 holding `records` (the
/// first bytes of a segment; the rest zeros, as a fresh segment).
pub fn exercise_wal_segment(records: &[u8]) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let wal_dir = wal::segment::wal_dir(dir.path());
    std::fs::create_dir_all(&wal_dir).expect("WAL directory");
    let mut whole = vec![0u8; wal::MIN_SEGMENT_SIZE as usize];
    let n = records.len().min(whole.len());
    whole[..n].copy_from_slice(&records[..n]);
    let path = wal::segment::segment_path(&wal_dir, Lsn::ZERO);
    std::fs::write(&path, &whole).expect("write segment");
    let mut reader =
        wal::WalReader::new(dir.path(), Lsn::ZERO, wal::MIN_SEGMENT_SIZE).expect("reader");
    if let Err(e) = reader.read_to_end() {
        assert!(e.to_string().contains("0000000000000000"), "{e}");
    }
    let config = wal::WalConfig {
        segment_size: wal::MIN_SEGMENT_SIZE,
        ..Default::default()
    };
    if let Ok(wal) = wal::Wal::open(dir.path(), config) {
        // An opened log takes new records after whatever survived.
        let rec = Record::builder(RmgrKind::Xact, 0, 1)
            .build()
            .expect("record");
        let (_, end) = wal.insert(&rec).expect("insert");
        wal.flush(end).expect("flush");
    }
}

/// Heap redo of a record `(info, payload)` on block 3 (and 2 with
/// `two_blocks`) of the seed heap relation.
pub fn exercise_heap_redo(info: u8, payload: &[u8], two_blocks: bool) {
    let _ = heap::record::HeapRecord::decode(info, payload);
    let (_dir, pool) = redo_pool();
    let mut b = Record::builder(RmgrKind::Heap, info, 5).block(BlockRef::new(tag(16384, 3)));
    if two_blocks {
        b = b.block(BlockRef::new(tag(16384, 2)));
    }
    let Ok(record) = b.payload(payload.to_vec()).build() else {
        return;
    };
    let _ = heap::redo(&record, Lsn(1 << 40), &pool);
}

/// B-tree redo of `(info, payload)` on `blocks` (1..=3) of the seed index.
pub fn exercise_btree_redo(info: u8, payload: &[u8], blocks: u32) {
    let (_dir, pool) = redo_pool();
    let mut b = Record::builder(RmgrKind::Btree, info, 5);
    for i in 0..blocks.clamp(1, 3) {
        b = b.block(BlockRef::new(tag(16385, 2 - (i % 3))));
    }
    let Ok(record) = b.payload(payload.to_vec()).build() else {
        return;
    };
    let _ = btree::redo(&record, Lsn(1 << 40), &pool);
}

/// Applies `patches` (3 bytes each: offset low, offset high, value) to a
/// copy of `seed`: how the coverage-guided targets damage a valid object.
pub fn patched(seed: &[u8], patches: &[u8]) -> Vec<u8> {
    let mut out = seed.to_vec();
    if out.is_empty() {
        return out;
    }
    for p in patches.chunks_exact(3) {
        let at = usize::from(u16::from_le_bytes([p[0], p[1]])) % out.len();
        out[at] = p[2];
    }
    out
}

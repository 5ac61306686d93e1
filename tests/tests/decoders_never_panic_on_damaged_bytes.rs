//! Decoder fuzzing: every decoder of bytes that come from disk takes damaged
//! input without a panic, and its error names what was wrong.
//!
//! Random bytes rarely get past a magic number or a checksum, so most
//! targets start from a *valid* object built by the crate's own encoder (a
//! heap page with tuples, B-tree leaf, internal and meta pages, WAL records
//! with page images, a control file, a `VERSION` stamp, a whole WAL segment)
//! and damage it with a few random mutations: a byte, a 16- or 32-bit field
//! set to an edge value, a cut. Where a checksum guards the bytes, half the
//! cases re-seal it after the damage, so the decoder behind the checksum is
//! reached too. Then every read accessor runs over the result.
//!
//! Targets: page header and checksum (`bufmgr::page`), heap tuple header and
//! heap page (`heap::tuple`, `heap::page`, including the page edits redo
//! applies to a page read from disk), B-tree pages and items
//! (`btree::page`), WAL records (`wal::decode`), the WAL reader and
//! `Wal::open` over a damaged segment, the control file, and `VERSION`.
//!
//! `cargo test` runs a short pass (`FUZZ_CASES`, default 200 cases per
//! target; the file-based targets run a quarter of that). A long pass:
//! `FUZZ_CASES=100000 cargo test --release -p tests --test
//! decoders_never_panic_on_damaged_bytes`. A failing case is shrunk and
//! its seed saved under `proptest-regressions/` beside this file; check it
//! in with the fix.

use std::path::Path;
use std::sync::OnceLock;

use bufmgr::{BufferTag, PAGE_SIZE, RelFork, RelId};
use heap::page::PageId as HeapPageId;
use heap::tuple::{Tid, TupleHeader, build_tuple};
use proptest::prelude::*;
use proptest::test_runner::Config;
use wal::control::ControlData;
use wal::{BlockRef, Hole, Lsn, Record, RmgrKind};

fn cases() -> u32 {
    std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

fn config(divisor: u32) -> Config {
    Config {
        cases: (cases() / divisor).max(1),
        ..Config::default()
    }
}

/// One change to a byte string.
#[derive(Clone, Debug)]
enum Mutation {
    /// Set the byte at (offset mod len).
    Byte(usize, u8),
    /// Set a little-endian u16 at (offset mod len).
    U16(usize, u16),
    /// Set a little-endian u32 at (offset mod len).
    U32(usize, u32),
    /// Cut to (len mod current length) bytes.
    Cut(usize),
}

fn edge_u16() -> impl Strategy<Value = u16> {
    prop_oneof![
        Just(0u16),
        Just(1),
        Just(0xFFFF),
        Just(PAGE_SIZE as u16),
        Just(PAGE_SIZE as u16 - 1),
        Just(24),
        any::<u16>(),
    ]
}

fn edge_u32() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(0u32),
        Just(1),
        Just(u32::MAX),
        Just(PAGE_SIZE as u32),
        any::<u32>(),
    ]
}

fn mutation(cuts: bool) -> BoxedStrategy<Mutation> {
    let mut s = prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(o, b)| Mutation::Byte(o, b)),
        (any::<usize>(), edge_u16()).prop_map(|(o, v)| Mutation::U16(o, v)),
        (any::<usize>(), edge_u32()).prop_map(|(o, v)| Mutation::U32(o, v)),
    ]
    .boxed();
    if cuts {
        s = prop_oneof![
            6 => s,
            1 => any::<usize>().prop_map(Mutation::Cut),
        ]
        .boxed();
    }
    s
}

fn mutations(cuts: bool) -> impl Strategy<Value = Vec<Mutation>> {
    prop::collection::vec(mutation(cuts), 1..6)
}

/// Applies `ms` to `bytes` (offsets within `from..`, so a caller can spare
/// a prefix).
fn damage(bytes: &mut Vec<u8>, ms: &[Mutation], from: usize) {
    for m in ms {
        let len = bytes.len().saturating_sub(from);
        if len == 0 {
            return;
        }
        let at = |o: usize, w: usize| from + o % len.saturating_sub(w - 1).max(1);
        match *m {
            Mutation::Byte(o, b) => {
                let i = at(o, 1);
                bytes[i] = b;
            }
            Mutation::U16(o, v) if len >= 2 => {
                let i = at(o, 2);
                bytes[i..i + 2].copy_from_slice(&v.to_le_bytes());
            }
            Mutation::U32(o, v) if len >= 4 => {
                let i = at(o, 4);
                bytes[i..i + 4].copy_from_slice(&v.to_le_bytes());
            }
            Mutation::Cut(n) => bytes.truncate(from + n % len),
            _ => {}
        }
    }
}

// ---- seeds: valid objects from the crates' own encoders ----

fn valid_heap_page() -> Vec<u8> {
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

fn heap_id() -> HeapPageId {
    HeapPageId {
        rel: RelId(16384),
        block: 3,
    }
}

fn btree_id() -> btree::page::PageId {
    btree::page::PageId {
        rel: RelId(16385),
        block: 2,
    }
}

fn key(i: i64) -> Vec<u8> {
    ((i as u64) ^ (1 << 63)).to_be_bytes().to_vec()
}

fn valid_btree_pages() -> &'static [Vec<u8>; 3] {
    static PAGES: OnceLock<[Vec<u8>; 3]> = OnceLock::new();
    PAGES.get_or_init(|| {
        use btree::page::{
            HAS_HIGH_KEY, Header, LEAF, MINUS_INFINITY, ROOT, build_page, encode_item,
        };
        let tid = |i: u16| Tid {
            block: u32::from(i),
            offset: i + 1,
        };
        // A leaf with a high key.
        let mut items = vec![encode_item(&key(1000), tid(99), None, false)];
        items.extend((0..40).map(|i| encode_item(&key(i * 7), tid(i as u16), None, false)));
        let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
        let mut leaf = vec![0u8; PAGE_SIZE];
        build_page(
            &mut leaf,
            Header {
                flags: LEAF | HAS_HIGH_KEY,
                level: 0,
                right: 7,
            },
            &refs,
        );
        // An internal root: a minus-infinity first item, then separators.
        let mut items = vec![encode_item(&[], tid(0), Some(1), true)];
        items.extend(
            (1..30).map(|i| encode_item(&key(i * 50), tid(i as u16), Some(i as u32 + 1), false)),
        );
        let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
        let mut internal = vec![0u8; PAGE_SIZE];
        build_page(
            &mut internal,
            Header {
                flags: ROOT,
                level: 1,
                right: btree::page::NO_RIGHT,
            },
            &refs,
        );
        let _ = MINUS_INFINITY;
        let mut meta = vec![0u8; PAGE_SIZE];
        btree::page::Meta {
            root: 3,
            root_level: 1,
            key_type: btree::KeyType::I64,
            unique: true,
        }
        .write(&mut meta);
        [leaf, internal, meta]
    })
}

fn tag(rel: u32, block: u32) -> BufferTag {
    BufferTag::new(RelFork::main(RelId(rel)), block)
}

fn wal_records() -> &'static Vec<Vec<u8>> {
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
/// bytes 0..4 and 8..27).
fn reseal_record(b: &mut [u8]) {
    const HEADER: usize = 27;
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
fn reseal_control(b: &mut [u8]) {
    if b.len() == wal::control::CONTROL_FILE_LEN {
        let crc = crc32fast::hash(&b[..52]);
        b[52..56].copy_from_slice(&crc.to_le_bytes());
    }
}

// ---- targets ----

/// Every read accessor of a heap page, and the edits redo makes to one.
fn exercise_heap_page(page: &[u8]) {
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
        for t in view.tuples() {
            if let Ok((_, _, bytes)) = t {
                let _ = TupleHeader::decode(bytes);
            }
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

fn exercise_btree_page(page: &[u8]) {
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
        let _ = view.data(j);
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

proptest! {
    #![proptest_config(config(1))]

    #[test]
    fn page_header_and_checksum(ms in mutations(false)) {
        let mut page = valid_heap_page();
        damage(&mut page, &ms, 0);
        let _ = bufmgr::page::verify(&page, 3);
        let _ = (bufmgr::page::page_lsn(&page), bufmgr::page::is_new(&page));
        let _ = (bufmgr::page::checksum(&page, 3), bufmgr::page::stored_checksum(&page));
    }

    #[test]
    fn heap_tuple_header(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        if let Some(h) = TupleHeader::decode(&bytes) {
            let mut out = vec![0u8; bytes.len()];
            h.encode_into(&mut out);
        }
    }

    #[test]
    fn heap_page(ms in mutations(false)) {
        let mut page = valid_heap_page();
        damage(&mut page, &ms, 0);
        exercise_heap_page(&page);
    }

    #[test]
    fn heap_page_random_bytes(seed in any::<u64>(), header in prop::collection::vec(any::<u8>(), 24..=24)) {
        // A page of seeded noise (a vector strategy of 8 KiB elements would
        // spend the run generating them) under a random header.
        let mut x = seed | 1;
        let mut bytes: Vec<u8> = (0..PAGE_SIZE)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        bytes[..24].copy_from_slice(&header);
        exercise_heap_page(&bytes);
    }

    #[test]
    fn btree_pages(which in 0usize..3, ms in mutations(false)) {
        let mut page = valid_btree_pages()[which].clone();
        damage(&mut page, &ms, 0);
        exercise_btree_page(&page);
    }

    #[test]
    fn btree_item(bytes in prop::collection::vec(any::<u8>(), 0..64), internal in any::<bool>()) {
        let _ = btree::page::decode_item(&bytes, internal, btree_id());
    }

    #[test]
    fn wal_record(which in 0usize..3, ms in mutations(true), reseal in any::<bool>()) {
        let mut bytes = wal_records()[which].clone();
        damage(&mut bytes, &ms, 0);
        if reseal {
            reseal_record(&mut bytes);
        }
        match wal::decode(&bytes) {
            Ok(r) => {
                // A decoded record can be used: re-encode it, restore images.
                let _ = r.encode();
                for i in 0..r.blocks().len() {
                    let _ = r.restore_page(i);
                }
            }
            Err(e) => prop_assert!(e.to_string().contains("byte"), "{e}"),
        }
    }

    #[test]
    fn wal_record_random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..200), reseal in any::<bool>()) {
        let mut bytes = bytes;
        if reseal {
            reseal_record(&mut bytes);
        }
        let _ = wal::decode(&bytes);
    }

    #[test]
    fn control_file(ms in mutations(true), reseal in any::<bool>()) {
        let mut bytes = ControlData::now(Lsn(0x3000), Lsn(0x2000), 77, 1 << 16).encode().to_vec();
        damage(&mut bytes, &ms, 0);
        if reseal {
            reseal_control(&mut bytes);
        }
        let file = Path::new("/data/control");
        if let Err(e) = ControlData::decode(&bytes, file) {
            prop_assert!(e.to_string().contains("/data/control"), "{e}");
        }
    }
}

proptest! {
    #![proptest_config(config(4))]

    #[test]
    fn version_stamp(ms in mutations(true), text in "[ -~\n]{0,40}", raw in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        engine::datadir::check_or_stamp(dir.path(), true).unwrap();
        let path = dir.path().join(engine::datadir::VERSION_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        if raw {
            bytes = text.into_bytes();
        } else {
            damage(&mut bytes, &ms, 0);
        }
        std::fs::write(&path, &bytes).unwrap();
        if let Err(e) = engine::datadir::read_stamp(&path) {
            prop_assert!(e.to_string().contains("VERSION"), "{e}");
        }
    }

    #[test]
    fn wal_reader_and_open_over_a_damaged_segment(ms in mutations(false)) {
        let (segment, used) = wal_segment();
        let used = *used;
        let dir = tempfile::tempdir().unwrap();
        let wal_dir = wal::segment::wal_dir(dir.path());
        std::fs::create_dir_all(&wal_dir).unwrap();
        let mut bytes = segment[..used].to_vec();
        damage(&mut bytes, &ms, 0);
        let mut whole = segment.clone();
        whole[..used].copy_from_slice(&bytes);
        let path = wal::segment::segment_path(&wal_dir, Lsn::ZERO);
        std::fs::write(&path, &whole).unwrap();
        let mut reader = wal::WalReader::new(dir.path(), Lsn::ZERO, wal::MIN_SEGMENT_SIZE).unwrap();
        if let Err(e) = reader.read_to_end() {
            prop_assert!(e.to_string().contains("0000000000000000"), "{e}");
        }
        let config = wal::WalConfig { segment_size: wal::MIN_SEGMENT_SIZE, ..Default::default() };
        if let Ok(wal) = wal::Wal::open(dir.path(), config) {
            // An opened log takes new records after whatever survived.
            let rec = Record::builder(RmgrKind::Xact, 0, 1).build().unwrap();
            let (_, end) = wal.insert(&rec).unwrap();
            wal.flush(end).unwrap();
        }
    }
}

/// One segment written by the real log (records of every shape), and how
/// many of its bytes hold records.
fn wal_segment() -> &'static (Vec<u8>, usize) {
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

/// The seeds are valid before any damage: the mutations start from objects
/// the decoders accept, so they reach past the first checks.
#[test]
fn every_seed_decodes_before_damage() {
    let page = valid_heap_page();
    assert_eq!(bufmgr::page::verify(&page, 3), Ok(()));
    let view = heap::page::HeapPage::parse(&page, heap_id()).unwrap();
    assert_eq!(view.item_count(), 12);
    assert_eq!(view.tuples().filter(|t| t.is_ok()).count(), 12);
    let [leaf, internal, meta] = valid_btree_pages();
    let leaf = btree::page::TreePage::parse(leaf, btree_id()).unwrap();
    assert!(leaf.is_leaf() && leaf.has_high_key());
    assert_eq!(leaf.data_len(), 40);
    let internal = btree::page::TreePage::parse(internal, btree_id()).unwrap();
    assert!(!internal.is_leaf());
    assert_eq!(btree::page::Meta::read(meta, btree_id()).unwrap().root, 3);
    for bytes in wal_records() {
        wal::decode(bytes).unwrap();
        let mut resealed = bytes.clone();
        reseal_record(&mut resealed);
        assert_eq!(
            &resealed, bytes,
            "the re-seal computes the CRC the log writes"
        );
    }
    let control = ControlData::now(Lsn(0x3000), Lsn(0x2000), 77, 1 << 16).encode();
    let mut resealed = control.to_vec();
    reseal_control(&mut resealed);
    assert_eq!(resealed, control.to_vec());
    ControlData::decode(&control, Path::new("control")).unwrap();
    let (segment, used) = wal_segment();
    assert!(*used > 0 && segment.len() == wal::MIN_SEGMENT_SIZE as usize);
}

// ---- resource-manager payloads: heap and B-tree redo ----

/// A pool over a fresh directory holding the seed pages: heap relation
/// 16384 blocks 0..4, index 16385 blocks 0 (meta), 1 (internal), 2 (leaf).
fn redo_pool() -> (tempfile::TempDir, bufmgr::BufferPool) {
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
    let [leaf, internal, meta] = valid_btree_pages();
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

fn heap_payloads() -> Vec<(u8, Vec<u8>)> {
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

fn btree_payload(info_choice: usize) -> (u8, Vec<u8>) {
    use btree::record::{INSERT_DOWNLINK, INSERT_LEAF, VACUUM};
    let tid = Tid {
        block: 8,
        offset: 2,
    };
    match info_choice % 3 {
        0 => (
            INSERT_LEAF,
            btree::page::encode_item(&key(15), tid, None, false),
        ),
        1 => (
            INSERT_DOWNLINK,
            btree::page::encode_item(&key(777), tid, Some(9), false),
        ),
        _ => (
            VACUUM,
            [2u16, 1, 3].iter().flat_map(|v| v.to_le_bytes()).collect(),
        ),
    }
}

proptest! {
    #![proptest_config(config(4))]

    #[test]
    fn heap_redo(which in 0usize..5, ms in mutations(true), info in prop::option::of(any::<u8>()), two_blocks in any::<bool>()) {
        let (info0, mut payload) = heap_payloads()[which].clone();
        damage(&mut payload, &ms, 0);
        let _ = heap::record::HeapRecord::decode(info.unwrap_or(info0), &payload);
        let (_dir, pool) = redo_pool();
        let mut b = Record::builder(RmgrKind::Heap, info.unwrap_or(info0), 5)
            .block(BlockRef::new(tag(16384, 3)));
        if two_blocks {
            b = b.block(BlockRef::new(tag(16384, 2)));
        }
        let record = b.payload(payload).build().unwrap();
        let _ = heap::redo(&record, Lsn(1 << 40), &pool);
    }

    #[test]
    fn btree_redo(which in 0usize..3, ms in mutations(true), info in prop::option::of(any::<u8>()), blocks in 1u32..4) {
        let (info0, mut payload) = btree_payload(which);
        damage(&mut payload, &ms, 0);
        let (_dir, pool) = redo_pool();
        let mut b = Record::builder(RmgrKind::Btree, info.unwrap_or(info0), 5);
        for i in 0..blocks {
            b = b.block(BlockRef::new(tag(16385, 2 - (i % 3))));
        }
        let record = b.payload(payload).build().unwrap();
        let _ = btree::redo(&record, Lsn(1 << 40), &pool);
    }
}

/// The redo seeds replay cleanly on the seed pages before any damage.
#[test]
fn every_redo_seed_replays_before_damage() {
    for (i, (info, payload)) in heap_payloads().into_iter().enumerate() {
        heap::record::HeapRecord::decode(info, &payload).unwrap();
        let (_dir, pool) = redo_pool();
        let mut b = Record::builder(RmgrKind::Heap, info, 5).block(BlockRef::new(tag(16384, 3)));
        if i == 2 {
            b = b.block(BlockRef::new(tag(16384, 2)));
        }
        let record = b.payload(payload).build().unwrap();
        let result = heap::redo(&record, Lsn(1 << 40), &pool);
        if i == 4 {
            // Vacuum's second pass needs dead pointers; the seed page has
            // none, and says so.
            let e = result.unwrap_err().to_string();
            assert!(
                e.contains("16384") && e.contains("not a dead pointer"),
                "{e}"
            );
        } else {
            result.unwrap_or_else(|e| panic!("heap seed {i}: {e}"));
        }
    }
    for which in 0..3 {
        let (info, payload) = btree_payload(which);
        let (_dir, pool) = redo_pool();
        let blocks: &[u32] = match which {
            1 => &[1, 2],
            _ => &[2],
        };
        let mut b = Record::builder(RmgrKind::Btree, info, 5);
        for block in blocks {
            b = b.block(BlockRef::new(tag(16385, *block)));
        }
        let record = b.payload(payload).build().unwrap();
        btree::redo(&record, Lsn(1 << 40), &pool)
            .unwrap_or_else(|e| panic!("B-tree seed {which}: {e}"));
    }
}

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

use bufmgr::PAGE_SIZE;
use proptest::prelude::*;
use proptest::test_runner::Config;
use tests::decoders::*;
use wal::control::ControlData;
use wal::{BlockRef, Lsn, Record, RmgrKind};

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

proptest! {
    #![proptest_config(config(1))]

    #[test]
    fn page_header_and_checksum(ms in mutations(false)) {
        let mut page = valid_heap_page();
        damage(&mut page, &ms, 0);
        exercise_page_header(&page);
    }

    #[test]
    fn heap_tuple_header(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        if let Some(h) = heap::tuple::TupleHeader::decode(&bytes) {
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
    fn btree_pages(which in 0usize..7, ms in mutations(false)) {
        let mut page = valid_btree_pages()[which].clone();
        damage(&mut page, &ms, 0);
        exercise_btree_page(&page);
    }

    #[test]
    fn btree_item(bytes in prop::collection::vec(any::<u8>(), 0..64), internal in any::<bool>(), compact in any::<bool>()) {
        let layout = if compact { btree::page::Layout::Compact } else { btree::page::Layout::Headed };
        let _ = btree::page::decode_item(&bytes, internal, layout, btree_id());
    }

    #[test]
    fn wal_record(which in 0usize..3, ms in mutations(true), reseal in any::<bool>()) {
        let mut bytes = wal_records()[which].clone();
        damage(&mut bytes, &ms, 0);
        if reseal {
            reseal_record(&mut bytes);
        }
        exercise_wal_record(&bytes);
    }

    #[test]
    fn wal_record_random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..200), reseal in any::<bool>()) {
        let mut bytes = bytes;
        if reseal {
            reseal_record(&mut bytes);
        }
        exercise_wal_record(&bytes);
    }

    #[test]
    fn control_file(ms in mutations(true), reseal in any::<bool>()) {
        let mut bytes = valid_control();
        damage(&mut bytes, &ms, 0);
        if reseal {
            reseal_control(&mut bytes);
        }
        exercise_control(&bytes);
    }
}

proptest! {
    #![proptest_config(config(4))]

    #[test]
    fn version_stamp(ms in mutations(true), text in "[ -~\n]{0,40}", raw in any::<bool>()) {
        // Through the file, as `Database::open` reads it.
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
        exercise_version(&bytes);
    }

    #[test]
    fn wal_reader_and_open_over_a_damaged_segment(ms in mutations(false)) {
        let (segment, used) = wal_segment();
        let mut bytes = segment[..*used].to_vec();
        damage(&mut bytes, &ms, 0);
        exercise_wal_segment(&bytes);
    }
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
    let [
        leaf,
        internal,
        meta,
        headed_leaf,
        headed_internal,
        fixed_leaf,
        dedup_leaf,
    ] = valid_btree_pages();
    let dedup = btree::page::TreePage::parse(dedup_leaf, btree_id()).unwrap();
    assert!(dedup.is_dedup() && dedup.data_len() == 30);
    let posting = dedup.data(20).unwrap();
    assert!(posting.is_posting());
    let tids: Vec<heap::tuple::Tid> = posting.tids(btree_id()).unwrap().collect();
    assert_eq!(
        (tids.len(), tids[20].block, tids[20].offset),
        (21, 6020, 261)
    );
    let fixed = btree::page::TreePage::parse(fixed_leaf, btree_id()).unwrap();
    assert!(fixed.is_fixed() && fixed.data_len() == 40);
    assert_eq!(fixed.data(5).unwrap().key, key(35).as_slice());
    for (leaf, internal) in [(leaf, internal), (headed_leaf, headed_internal)] {
        let leaf = btree::page::TreePage::parse(leaf, btree_id()).unwrap();
        assert!(!leaf.is_fixed());
        assert!(leaf.is_leaf() && leaf.has_high_key());
        assert_eq!(leaf.data_len(), 40);
        assert_eq!(leaf.data(5).unwrap().key, key(35).as_slice());
        let internal = btree::page::TreePage::parse(internal, btree_id()).unwrap();
        assert!(!internal.is_leaf());
        assert!(internal.data(0).unwrap().minus_infinity);
        assert_eq!(internal.data(3).unwrap().child, 4);
    }
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
    let control = valid_control();
    let mut resealed = control.clone();
    reseal_control(&mut resealed);
    assert_eq!(resealed, control);
    ControlData::decode(&control, Path::new("control")).unwrap();
    let (segment, used) = wal_segment();
    assert!(*used > 0 && segment.len() == wal::MIN_SEGMENT_SIZE as usize);
    engine::datadir::parse_stamp(&valid_version(), Path::new("VERSION")).unwrap();
}

proptest! {
    #![proptest_config(config(4))]

    #[test]
    fn heap_redo(which in 0usize..5, ms in mutations(true), info in prop::option::of(any::<u8>()), two_blocks in any::<bool>()) {
        let (info0, mut payload) = heap_payloads()[which].clone();
        damage(&mut payload, &ms, 0);
        exercise_heap_redo(info.unwrap_or(info0), &payload, two_blocks);
    }

    #[test]
    fn btree_redo(which in 0usize..4, ms in mutations(true), info in prop::option::of(any::<u8>()), blocks in 1u32..4) {
        let (info0, mut payload) = btree_payload(which);
        damage(&mut payload, &ms, 0);
        exercise_btree_redo(info.unwrap_or(info0), &payload, blocks);
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
    for which in 0..4 {
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

/// Writes the seed corpus of the `cargo fuzz` targets (`fuzz/corpus/<target>/`)
/// from the same seeds as above, in each target's input format. Run by
/// hand when a seed changes, and check the files in:
/// `cargo test -p tests --test decoders_never_panic_on_damaged_bytes -- --ignored write_fuzz_seed_corpus`.
#[test]
#[ignore = "writes fuzz/corpus; run by hand"]
fn write_fuzz_seed_corpus() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    let put = |target: &str, name: &str, bytes: &[u8]| {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), bytes).unwrap();
    };
    // Patch inputs: empty (the seed itself) and one patch each.
    for target in ["page_header", "heap_page", "wal_segment"] {
        put(target, "seed", b"");
        put(target, "patch-header", &[12, 0, 0xFF]);
    }
    put("page_header", "whole-page", &valid_heap_page());
    put("heap_page", "whole-page", &valid_heap_page());
    put("heap_tuple", "seed", &valid_heap_page()[PAGE_SIZE - 60..]);
    for which in 0..3u8 {
        put("btree_page", &format!("seed-{which}"), &[which]);
    }
    for (i, bytes) in wal_records().iter().enumerate() {
        put("wal_record", &format!("seed-{i}"), &[i as u8]);
        put(
            "wal_record",
            &format!("raw-{i}"),
            &[[8u8].as_slice(), bytes].concat(),
        );
    }
    put("control_file", "seed", &[0]);
    put(
        "control_file",
        "raw",
        &[[2u8].as_slice(), &valid_control()].concat(),
    );
    put("version_stamp", "seed", &valid_version());
    for (i, (info, payload)) in heap_payloads().into_iter().enumerate() {
        let two = u8::from(i == 2);
        put(
            "heap_redo",
            &format!("seed-{i}"),
            &[[info, two].as_slice(), &payload].concat(),
        );
    }
    for which in 0..4 {
        let (info, payload) = btree_payload(which);
        let blocks = u8::from(which == 1);
        put(
            "btree_redo",
            &format!("seed-{which}"),
            &[[info, blocks].as_slice(), &payload].concat(),
        );
    }
}

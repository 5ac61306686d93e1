//! The public trace formats: each reader on small files written here
//! (plain and zstd-compressed), bad input as errors naming the file, the
//! line or offset and the value, and the round trip engine trace ->
//! export -> read back replaying to identical hit counts under every
//! policy.

use std::path::{Path, PathBuf};

use bufmgr::config::RingSizes;
use bufmgr::trace::{Access, Trace, TraceEvent};
use bufmgr::{BufferTag, RelFork, RelId};
use lab::formats::{
    CsvOptions, ExportFormat, Format, FormatError, ORACLE_RECORD, ReadOptions, Reader, export,
    object_id, tag_of,
};
use lab::policy::NEVER;
use lab::replay::{Policy, footprint, next_uses_of, replay_stream, run_replay, run_stream};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lab-formats-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn zst(path: &Path) -> PathBuf {
    let out = PathBuf::from(format!("{}.zst", path.display()));
    let raw = std::fs::read(path).unwrap();
    std::fs::write(&out, zstd::encode_all(&raw[..], 3).unwrap()).unwrap();
    out
}

fn opts(format: Format) -> ReadOptions {
    ReadOptions {
        format,
        ..ReadOptions::default()
    }
}

fn read(path: &Path, o: &ReadOptions) -> Result<Vec<(u64, u64)>, FormatError> {
    Reader::open(path, o)?
        .map(|r| r.map(|q| (q.obj, q.next)))
        .collect()
}

fn oracle(records: &[(u32, u64, u32, i64)]) -> Vec<u8> {
    let mut v = Vec::new();
    for &(t, obj, size, next) in records {
        v.extend_from_slice(&t.to_le_bytes());
        v.extend_from_slice(&obj.to_le_bytes());
        v.extend_from_slice(&size.to_le_bytes());
        v.extend_from_slice(&next.to_le_bytes());
    }
    v
}

#[test]
fn oracle_general_records_read_plain_and_zstd_compressed() {
    let d = dir("oracle");
    let p = d.join("t.oracleGeneral.bin");
    std::fs::write(
        &p,
        oracle(&[(1, 7, 4096, 2), (1, 9, 4096, -1), (2, 7, 4096, -1)]),
    )
    .unwrap();
    let want = vec![(7, 2), (9, NEVER), (7, NEVER)];
    assert_eq!(read(&p, &opts(Format::OracleGeneral)).unwrap(), want);
    // Found by the magic number, and by the extension.
    let z = zst(&p);
    assert_eq!(read(&z, &opts(Format::OracleGeneral)).unwrap(), want);
    let renamed = d.join("compressed-without-extension");
    std::fs::copy(&z, &renamed).unwrap();
    assert_eq!(read(&renamed, &opts(Format::OracleGeneral)).unwrap(), want);
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn a_truncated_oracle_record_is_an_error_naming_the_file_and_offset() {
    let d = dir("oracle-torn");
    let p = d.join("torn.bin");
    let mut bytes = oracle(&[(1, 7, 4096, -1), (1, 8, 4096, -1)]);
    bytes.truncate(ORACLE_RECORD + 10);
    std::fs::write(&p, &bytes).unwrap();
    let e = read(&p, &opts(Format::OracleGeneral))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("torn.bin") && e.contains("byte offset 24"),
        "{e}"
    );
    assert!(e.contains("10 of 24 bytes"), "{e}");
    // A next access below -1 is no request number.
    std::fs::write(&p, oracle(&[(1, 7, 4096, -5)])).unwrap();
    let e = read(&p, &opts(Format::OracleGeneral))
        .unwrap_err()
        .to_string();
    assert!(e.contains("byte offset 0") && e.contains("-5"), "{e}");
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn lis_lines_expand_to_count_consecutive_blocks_plain_and_zstd() {
    let d = dir("lis");
    let p = d.join("oltp.lis");
    std::fs::write(&p, "100 3 0 1\n\n7 1 0 2\n100 2 0 3\n").unwrap();
    let want: Vec<(u64, u64)> = [100, 101, 102, 7, 100, 101]
        .iter()
        .map(|&b| (b, NEVER))
        .collect();
    assert_eq!(read(&p, &opts(Format::Lis)).unwrap(), want);
    assert_eq!(read(&zst(&p), &opts(Format::Lis)).unwrap(), want);
    std::fs::write(&p, "100 3 0 1\n12x 1 0 2\n").unwrap();
    let e = read(&p, &opts(Format::Lis)).unwrap_err().to_string();
    assert!(
        e.contains("oltp.lis, line 2") && e.contains("\"12x\""),
        "{e}"
    );
    std::fs::write(&p, "100\n").unwrap();
    let e = read(&p, &opts(Format::Lis)).unwrap_err().to_string();
    assert!(e.contains("line 1") && e.contains("no block count"), "{e}");
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn csv_reads_object_columns_by_header_and_splits_byte_ranges_into_pages() {
    let d = dir("csv");
    let p = d.join("objects.csv");
    std::fs::write(
        &p,
        "time,object,size,op\n1,5,8192,read\n2,6,8192,write\n3,5,8192,read\n",
    )
    .unwrap();
    let objs = |v: Vec<(u64, u64)>| v.into_iter().map(|x| x.0).collect::<Vec<_>>();
    assert_eq!(objs(read(&p, &opts(Format::Csv)).unwrap()), [5, 6, 5]);
    assert_eq!(objs(read(&zst(&p), &opts(Format::Csv)).unwrap()), [5, 6, 5]);
    let reads = ReadOptions {
        csv: CsvOptions {
            reads_only: true,
            ..CsvOptions::default()
        },
        ..opts(Format::Csv)
    };
    assert_eq!(objs(read(&p, &reads).unwrap()), [5, 5]);
    // MSR Cambridge: no header; byte offsets and sizes. 4096-byte pages:
    // [8192, 8192 + 5000) touches pages 2 and 3; [0, 1) page 0.
    let m = d.join("msr.csv");
    std::fs::write(
        &m,
        "128166372003061629,web,0,Read,8192,5000,3000\n128166372003061630,web,0,Write,0,1,100\n",
    )
    .unwrap();
    let msr = ReadOptions {
        format: Format::Csv,
        page_size: 4096,
        csv: CsvOptions {
            columns: Some(
                ["time", "host", "disk", "type", "offset", "size", "latency"]
                    .map(String::from)
                    .to_vec(),
            ),
            reads_only: false,
        },
    };
    assert_eq!(objs(read(&m, &msr).unwrap()), [2, 3, 0]);
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn bad_csv_columns_and_fields_are_errors_naming_the_line_and_value() {
    let d = dir("csv-bad");
    let p = d.join("bad.csv");
    std::fs::write(&p, "time,size\n1,2\n").unwrap();
    let e = Reader::open(&p, &opts(Format::Csv))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("bad.csv, line 1 (the header)") && e.contains("object"),
        "{e}"
    );
    std::fs::write(&p, "object,op\n5,read\nfive,read\n").unwrap();
    let e = read(&p, &opts(Format::Csv)).unwrap_err().to_string();
    assert!(
        e.contains("bad.csv, line 3") && e.contains("\"five\""),
        "{e}"
    );
    std::fs::write(&p, "object,op\n5,delete\n").unwrap();
    let e = read(&p, &opts(Format::Csv)).unwrap_err().to_string();
    assert!(e.contains("line 2") && e.contains("\"delete\""), "{e}");
    let e = "parquet".parse::<Format>().unwrap_err();
    assert!(
        e.contains("\"parquet\"") && e.contains("oracleGeneral"),
        "{e}"
    );
    std::fs::remove_dir_all(&d).ok();
}

/// A random engine trace: one thread, no rings, pages of two relations
/// (and a few free-space-map pages), skewed toward low blocks.
fn random_trace(n: usize, seed: u64) -> Trace {
    let mut x = seed;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let events = (0..n)
        .map(|i| {
            let r = rnd();
            let block = ((r % 300) * (r % 300) / 300) as u32;
            let rel = 1 + (r >> 40) as u32 % 2;
            let fork = if r % 50 == 0 {
                RelFork {
                    rel: RelId(rel),
                    fork: bufmgr::tag::Fork::FreeSpace,
                }
            } else {
                RelFork::main(RelId(rel))
            };
            TraceEvent::Access(Access {
                tag: BufferTag::new(fork, block),
                thread: 0,
                hit: false,
                ring: None,
                buffer: 0,
                nanos: i as u64 * 1000,
            })
        })
        .collect();
    Trace {
        pool_buffers: 64,
        events,
    }
}

#[test]
fn object_ids_name_engine_pages_one_to_one() {
    for tag in [
        BufferTag::new(RelFork::main(RelId(3)), 17),
        BufferTag::new(
            RelFork {
                rel: RelId(3),
                fork: bufmgr::tag::Fork::FreeSpace,
            },
            17,
        ),
    ] {
        assert_eq!(tag_of(object_id(&tag).unwrap()), tag);
    }
    assert_eq!(
        object_id(&BufferTag::new(RelFork::main(RelId(1)), 2)).unwrap(),
        (1 << 32) | 2
    );
    let e = object_id(&BufferTag::new(RelFork::main(RelId(1 << 31)), 0)).unwrap_err();
    assert!(e.contains("2147483648"), "{e}");
}

#[test]
fn an_exported_engine_trace_replays_to_identical_hits_in_every_format_and_policy() {
    let d = dir("round-trip");
    let trace = random_trace(3000, 0x9e37_79b9_7f4a_7c15);
    let sizes = [8, 40, 150];
    let engine = run_replay(&trace, &Policy::ALL, &sizes, |_| true);
    let og = d.join("t.oracleGeneral.bin");
    let csv = d.join("t.csv");
    assert_eq!(
        export(&trace, ExportFormat::OracleGeneral, &og).unwrap(),
        3000
    );
    assert_eq!(export(&trace, ExportFormat::Csv, &csv).unwrap(), 3000);
    let og_zst = zst(&og);
    let csv_zst = zst(&csv);
    for (path, format) in [
        (&og, Format::OracleGeneral),
        (&og_zst, Format::OracleGeneral),
        (&csv, Format::Csv),
        (&csv_zst, Format::Csv),
    ] {
        let o = opts(format);
        let fp = footprint(path, &o).unwrap();
        assert_eq!(fp.accesses, 3000, "{}", path.display());
        let next = (format != Format::OracleGeneral).then(|| next_uses_of(path, &o).unwrap());
        for &n in &sizes {
            for p in Policy::ALL {
                let hits = replay_stream(path, &o, p, n, next.as_deref()).unwrap();
                assert_eq!(
                    hits,
                    engine.find(p, n).unwrap().hits,
                    "{p} at {n} pages from {}",
                    path.display()
                );
            }
        }
    }
    // The replay of the engine trace is the plain one: a sanity check
    // that the comparison is not of two empty results.
    let lru = lab::replay::replay(
        Policy::Lru,
        &trace
            .accesses_by_time()
            .iter()
            .map(|a| lab::replay::Ref::from(*a))
            .collect::<Vec<_>>(),
        40,
        &RingSizes::default(),
    );
    let h = lru.iter().filter(|&&h| h).count() as u64;
    assert!(h > 0 && h < 3000);
    assert_eq!(h, engine.find(Policy::Lru, 40).unwrap().hits);
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn opt_over_a_format_without_next_uses_must_be_given_them() {
    let d = dir("opt-next");
    let p = d.join("t.lis");
    std::fs::write(&p, "1 1 0 1\n2 1 0 2\n1 1 0 3\n").unwrap();
    let e = replay_stream(&p, &opts(Format::Lis), Policy::Opt, 1, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("OPT over a lis trace"), "{e}");
    let next = next_uses_of(&p, &opts(Format::Lis)).unwrap();
    assert_eq!(next, [2, NEVER, NEVER]);
    // In 1 page every access misses (a miss always loads its page); in 2
    // the second access to 1 hits.
    assert_eq!(
        replay_stream(&p, &opts(Format::Lis), Policy::Opt, 1, Some(&next)).unwrap(),
        0
    );
    assert_eq!(
        replay_stream(&p, &opts(Format::Lis), Policy::Opt, 2, Some(&next)).unwrap(),
        1
    );
    std::fs::remove_dir_all(&d).ok();
}

// Object ids at the top of the u64 range are ids like any other: a CSV
// row and a .lis record naming page u64::MAX read as one access to it
// (a range ending past it used to overflow: a panic, or in a release
// build an empty range and the row silently dropped).
#[test]
fn text_records_naming_the_largest_object_id_read_as_one_access_each() {
    let d = dir("max-id");
    let p = d.join("max.csv");
    std::fs::write(&p, format!("object\n{m}\n7\n{m}\n", m = u64::MAX)).unwrap();
    let want = vec![(u64::MAX, NEVER), (7, NEVER), (u64::MAX, NEVER)];
    assert_eq!(read(&p, &opts(Format::Csv)).unwrap(), want);
    let l = d.join("max.lis");
    std::fs::write(&l, format!("{} 2 0 0\n{} 1 0 1\n", u64::MAX - 1, u64::MAX)).unwrap();
    let want: Vec<(u64, u64)> = [u64::MAX - 1, u64::MAX, u64::MAX]
        .iter()
        .map(|&b| (b, NEVER))
        .collect();
    assert_eq!(read(&l, &opts(Format::Lis)).unwrap(), want);
    std::fs::write(&l, format!("{} 2 0 0\n", u64::MAX)).unwrap();
    let e = read(&l, &opts(Format::Lis)).unwrap_err().to_string();
    assert!(
        e.contains("max.lis, line 1") && e.contains("past the last"),
        "{e}"
    );
    // Byte ranges ending in the last page of the id space.
    let b = d.join("bytes.csv");
    std::fs::write(&b, format!("offset,size\n{},1\n", u64::MAX)).unwrap();
    let o = ReadOptions {
        page_size: 1,
        ..opts(Format::Csv)
    };
    assert_eq!(read(&b, &o).unwrap(), vec![(u64::MAX, NEVER)]);
    std::fs::remove_dir_all(&d).ok();
}

// A .lis record reading no blocks is a damaged record, not one to skip.
#[test]
fn a_lis_record_with_a_block_count_of_zero_is_an_error_naming_its_line() {
    let d = dir("lis-zero");
    let p = d.join("zero.lis");
    std::fs::write(&p, "5 1 0 0\n9 0 0 1\n").unwrap();
    let e = read(&p, &opts(Format::Lis)).unwrap_err().to_string();
    assert!(
        e.contains("zero.lis, line 2") && e.contains("count 0"),
        "{e}"
    );
    std::fs::remove_dir_all(&d).ok();
}

// A .lis line is four numbers; one with fewer was cut short (a torn last
// line "100 2" of "100 25 0 7" replayed 2 blocks for 25 without a word).
#[test]
fn a_lis_line_without_all_four_fields_is_an_error_naming_its_line_and_field() {
    let d = dir("lis-short");
    let p = d.join("short.lis");
    for (body, field) in [
        ("5 1 0 0\n100 2\n", "third field"),
        ("5 1 0 0\n100 25 0\n", "request number"),
        ("5 1 0 0\n100 25 0 7 9\n", "fifth field"),
    ] {
        std::fs::write(&p, body).unwrap();
        let e = read(&p, &opts(Format::Lis)).unwrap_err().to_string();
        assert!(
            e.contains("short.lis, line 2") && e.contains(field),
            "{body:?}: {e}"
        );
    }
    std::fs::write(&p, "5 1 0 0\n100 2 0 7\n").unwrap();
    assert_eq!(read(&p, &opts(Format::Lis)).unwrap().len(), 3);
    std::fs::remove_dir_all(&d).ok();
}

// OPT trusts an oracleGeneral record's next access; one that points at or
// before its own record is damaged and would replay an impossible future.
#[test]
fn an_oracle_next_access_not_after_its_own_record_is_an_error_naming_the_offset() {
    let d = dir("oracle-next");
    let p = d.join("backwards.bin");
    std::fs::write(
        &p,
        oracle(&[(1, 7, 4096, 2), (1, 9, 4096, 1), (1, 7, 4096, -1)]),
    )
    .unwrap();
    let e = read(&p, &opts(Format::OracleGeneral))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("backwards.bin, byte offset 24") && e.contains("next access 1"),
        "{e}"
    );
    // i64::MAX, libCacheSim's other "never again", reads as a request
    // number past every record.
    std::fs::write(&p, oracle(&[(1, 7, 4096, i64::MAX)])).unwrap();
    assert_eq!(
        read(&p, &opts(Format::OracleGeneral)).unwrap(),
        vec![(7, i64::MAX as u64)]
    );
    std::fs::remove_dir_all(&d).ok();
}

// A zstd frame cut short or damaged is an error naming the file and the
// record it stopped at, in every format, never a quiet early end.
#[test]
fn a_cut_or_damaged_zstd_frame_is_an_error_naming_the_file_and_record() {
    let d = dir("zstd-bad");
    let recs: Vec<(u32, u64, u32, i64)> = (0..5000u64).map(|i| (1, i % 97, 4096, -1)).collect();
    let og = d.join("t.bin");
    std::fs::write(&og, oracle(&recs)).unwrap();
    let lis = d.join("t.lis");
    let text: String = (0..5000u64)
        .map(|i| format!("{} 1 0 {i}\n", i % 97))
        .collect();
    std::fs::write(&lis, &text).unwrap();
    let csv = d.join("t.csv");
    let text: String = std::iter::once("object\n".to_string())
        .chain((0..5000u64).map(|i| format!("{}\n", i % 97)))
        .collect();
    std::fs::write(&csv, &text).unwrap();
    for (plain, format, at) in [
        (&og, Format::OracleGeneral, "byte offset"),
        (&lis, Format::Lis, "line"),
        (&csv, Format::Csv, "line"),
    ] {
        let z = zst(plain);
        let whole = std::fs::read(&z).unwrap();
        let cut = d.join("cut.zst");
        std::fs::write(&cut, &whole[..whole.len() / 2]).unwrap();
        let e = read(&cut, &opts(format)).unwrap_err().to_string();
        assert!(e.contains("cut.zst, ") && e.contains(at), "{format}: {e}");
        // The frame's checksum (its last 4 bytes) no longer matches.
        let mut bad = whole.clone();
        let n = bad.len();
        bad[n - 2] ^= 0xff;
        let damaged = d.join("damaged.zst");
        std::fs::write(&damaged, &bad).unwrap();
        let e = read(&damaged, &opts(format)).unwrap_err().to_string();
        assert!(
            e.contains("damaged.zst, ") && e.contains(at),
            "{format}: {e}"
        );
    }
    std::fs::remove_dir_all(&d).ok();
}

// The engine's evictors replay through a pool that holds a state word per
// buffer: a pool far larger than the trace (usize::MAX, 2^40) made it
// allocate that many and fail (a capacity-overflow panic, or an abort).
// Everything fits in such a pool, so every policy misses each distinct
// page once; an engine trace with ring reads replays as it does in a pool
// that is merely larger than the trace.
#[test]
fn a_pool_far_larger_than_the_trace_replays_as_everything_fits_in_every_policy() {
    let d = dir("huge-pool");
    let p = d.join("t.bin");
    let objs: Vec<u64> = (0..300u64).map(|i| (i * i * 7919) % 41).collect();
    let recs: Vec<(u32, u64, u32, i64)> = objs
        .iter()
        .enumerate()
        .map(|(i, &o)| {
            let next = objs[i + 1..]
                .iter()
                .position(|&x| x == o)
                .map_or(-1, |k| (i + 1 + k) as i64);
            (1, o, 4096, next)
        })
        .collect();
    std::fs::write(&p, oracle(&recs)).unwrap();
    let o = opts(Format::OracleGeneral);
    let fp = footprint(&p, &o).unwrap();
    let r = run_stream(&p, &o, fp, &Policy::ALL, &[usize::MAX, 1 << 40], None).unwrap();
    assert_eq!(r.rows.len(), 2 * Policy::ALL.len());
    for row in &r.rows {
        assert_eq!(row.hits, fp.accesses - fp.objects, "{row:?}");
    }
    // An engine trace with bulk-read ring accesses (which evict through
    // their ring even in a big pool).
    let mut trace = random_trace(3000, 11);
    for (i, e) in trace.events.iter_mut().enumerate() {
        if let TraceEvent::Access(a) = e
            && i % 3 == 0
        {
            a.ring = Some(bufmgr::ring::RingKind::BulkRead);
        }
    }
    let huge = run_replay(&trace, &Policy::ALL, &[usize::MAX], |_| true);
    let refs: Vec<lab::replay::Ref> = trace
        .accesses_by_time()
        .iter()
        .map(|a| lab::replay::Ref::from(*a))
        .collect();
    for e in bufmgr::evictor::Evictor::ALL {
        // A whole pool of 2^16 buffers, built as asked, uncapped.
        let mut pool = lab::replay::ReplayPool::new(e, 1 << 16, RingSizes::default());
        let hits = refs.iter().filter(|r| pool.access(r)).count() as u64;
        let row = huge.find(Policy::Engine(e), usize::MAX).unwrap();
        assert_eq!(row.hits, hits, "{e}");
        assert!(hits < fp_of(&refs), "{e}: the rings evicted nothing");
    }
    std::fs::remove_dir_all(&d).ok();
}

/// Accesses minus distinct pages: the hits of a pool nothing is evicted from.
fn fp_of(refs: &[lab::replay::Ref]) -> u64 {
    let mut tags: Vec<_> = refs.iter().map(|r| r.tag).collect();
    tags.sort_unstable_by_key(|t| (t.rel.0, t.fork as u8, t.block));
    tags.dedup();
    (refs.len() - tags.len()) as u64
}

/// Every access [`Reader::next_batch`] hands out, `max` at a time.
fn read_batches(path: &Path, o: &ReadOptions, max: usize) -> Result<Vec<(u64, u64)>, FormatError> {
    let mut r = Reader::open(path, o)?;
    let mut batch = Vec::new();
    let mut out = Vec::new();
    loop {
        r.next_batch(&mut batch, max)?;
        if batch.is_empty() {
            return Ok(out);
        }
        assert!(batch.len() <= max.max(1));
        out.extend(batch.iter().map(|q| (q.obj, q.next)));
    }
}

// oracleGeneral records are decoded many at a time from the input's
// buffer; 24-byte records straddle its 64 KiB edges. Batches of any size
// hold the iterator's accesses in its order, plain and compressed, and
// the text formats' too.
#[test]
fn batches_hold_the_iterators_accesses_in_order_across_buffer_edges() {
    let d = dir("batches");
    let records: Vec<(u32, u64, u32, i64)> = (0..10_000u64)
        .map(|i| {
            let next = if i % 3 == 0 { -1 } else { i as i64 + 5 };
            (i as u32, (i * 7919) % 1013, 8192, next)
        })
        .collect();
    let og = d.join("t.oracleGeneral.bin");
    std::fs::write(&og, oracle(&records)).unwrap();
    let og_zst = zst(&og);
    let lis = d.join("t.lis");
    std::fs::write(&lis, "5 3 0 0\n100 1 0 0\n7 2 0 0\n").unwrap();
    for (path, format) in [
        (&og, Format::OracleGeneral),
        (&og_zst, Format::OracleGeneral),
        (&lis, Format::Lis),
    ] {
        let o = opts(format);
        let want = read(path, &o).unwrap();
        assert!(!want.is_empty());
        for max in [0, 1, 7, 2731, 1 << 16] {
            assert_eq!(
                read_batches(path, &o, max).unwrap(),
                want,
                "{} in batches of {max}",
                path.display()
            );
        }
    }
    assert_eq!(
        read(&og, &opts(Format::OracleGeneral)).unwrap().len(),
        10_000
    );
    std::fs::remove_dir_all(&d).ok();
}

// A bad record read in a batch is the same error, at the same offset, as
// read one at a time.
#[test]
fn a_bad_oracle_record_in_a_batch_is_an_error_naming_its_offset() {
    let d = dir("batch-bad");
    let p = d.join("backwards.bin");
    std::fs::write(
        &p,
        oracle(&[(1, 7, 4096, 2), (1, 9, 4096, 1), (1, 7, 4096, -1)]),
    )
    .unwrap();
    let o = opts(Format::OracleGeneral);
    let one = read(&p, &o).unwrap_err().to_string();
    let batched = read_batches(&p, &o, 64).unwrap_err().to_string();
    assert_eq!(batched, one);
    assert!(batched.contains("byte offset 24"), "{batched}");
    std::fs::remove_dir_all(&d).ok();
}

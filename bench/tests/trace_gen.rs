//! `bench trace-gen`: a synthetic engine trace that is exactly what its
//! options say (length, relations, skew range, whole sequential scans), the
//! same file for the same seed, readable by the trace reader and by
//! `bench replay`, and refused options named.

use std::process::{Command, Output};

use bench::tracegen::{GenArgs, HOT_RELATION, SCAN_RELATION, generate};
use bufmgr::trace::{Trace, TraceEvent};

fn args(dir: &std::path::Path, name: &str, seed: u64) -> GenArgs {
    GenArgs {
        output: dir.join(name),
        accesses: 40_000,
        blocks: 500,
        skew: 3.0,
        scan_blocks: 100,
        scan_probability: 0.002,
        seed,
    }
}

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(args)
        .output()
        .expect("the bench binary runs")
}

#[test]
fn a_generated_trace_holds_the_accesses_relations_and_scans_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let a = args(dir.path(), "t.trace", 7);
    let g = generate(&a).unwrap();
    assert_eq!(g.accesses, a.accesses);
    assert!(
        g.scans > 0,
        "no scan started: the test says nothing of scans"
    );
    let trace = Trace::read(&a.output).unwrap();
    assert_eq!(trace.pool_buffers, 0, "a generated trace records no pool");
    let accesses: Vec<_> = trace.accesses().collect();
    assert_eq!(accesses.len() as u64, a.accesses);
    assert_eq!(trace.evictions().count(), 0);

    let mut hot = vec![0u64; a.blocks as usize];
    let mut scan_accesses = 0u64;
    let mut scans = 0u64;
    let mut next_scan_block = None;
    for (i, x) in accesses.iter().enumerate() {
        assert_eq!(x.nanos, i as u64, "records are in time order");
        assert!(!x.hit && x.ring.is_none() && x.thread == 0, "{x:?}");
        if x.tag.rel == SCAN_RELATION {
            scan_accesses += 1;
            // A scan reads 0, 1, ..., scan_blocks - 1 in a row.
            if x.tag.block == 0 {
                scans += 1;
            } else {
                assert_eq!(Some(x.tag.block), next_scan_block, "access {i}");
            }
            next_scan_block = Some(x.tag.block + 1);
        } else {
            assert_eq!(x.tag.rel, HOT_RELATION, "{x:?}");
            if let Some(b) = next_scan_block {
                assert_eq!(b, a.scan_blocks, "a scan cut short at access {i}");
            }
            next_scan_block = None;
            hot[x.tag.block as usize] += 1;
        }
    }
    assert_eq!((scan_accesses, scans), (g.scan_accesses, g.scans));
    // u^3 puts about half the accesses in the lowest eighth of the blocks
    // (P(u^3 < 1/8) = 1/2); uniform draws would put an eighth there.
    let low: u64 = hot[..hot.len() / 8].iter().sum();
    let all: u64 = hot.iter().sum();
    let share = low as f64 / all as f64;
    assert!((0.45..0.55).contains(&share), "lowest eighth: {share}");
    assert!(
        hot[hot.len() - 1] > 0 || hot[hot.len() - 2] > 0,
        "the top blocks are drawn too"
    );
}

#[test]
fn the_same_seed_writes_the_same_file_and_another_seed_another() {
    let dir = tempfile::tempdir().unwrap();
    for (name, seed) in [("a", 3), ("b", 3), ("c", 4)] {
        generate(&args(dir.path(), name, seed)).unwrap();
    }
    let read = |n: &str| std::fs::read(dir.path().join(n)).unwrap();
    assert_eq!(read("a"), read("b"));
    assert_ne!(read("a"), read("c"));
    let t = Trace::read(&dir.path().join("c")).unwrap();
    assert!(matches!(t.events[0], TraceEvent::Access(_)));
}

#[test]
fn bench_trace_gen_writes_a_trace_bench_replay_reads_given_a_pool_size() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.trace");
    let p = path.to_str().unwrap();
    let o = bench(&["trace-gen", p, "--accesses", "5000", "--blocks", "300"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("5000 accesses"));
    let o = bench(&["replay", p, "--pool-pages", "30", "--policy", "lru,opt"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("lru") && out.contains("opt"), "{out}");
    // No recorded pool: the replay asks for a size instead of replaying a
    // pool of 0 pages.
    let o = bench(&["replay", p]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("--pool-pages") && err.contains("no pool size"),
        "{err}"
    );
}

#[test]
fn options_a_trace_cannot_be_made_of_are_refused_naming_the_option() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.trace");
    let p = p.to_str().unwrap();
    for (opt, value) in [
        ("--accesses", "0"),
        ("--blocks", "0"),
        ("--skew", "0"),
        ("--skew", "NaN"),
        ("--scan-probability", "1.5"),
    ] {
        let o = bench(&["trace-gen", p, opt, value]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{opt} {value} accepted");
        assert!(err.contains(opt), "{opt} {value}: {err}");
    }
}

//! `bench replay` and `bench step` as subcommands of the `bench` program:
//! listed by `bench --help`, each with its own `--help`, the scenarios'
//! options refused after them, and `replay --json` rows.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use bufmgr::trace::{Access, HEADER_SIZE, MAGIC, RECORD_SIZE, TraceEvent, VERSION};
use bufmgr::{BufferTag, RelFork, RelId};

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(args)
        .output()
        .expect("the bench binary runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("bench-replay-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// An engine trace of `blocks` (relation 1), one thread, recorded on a pool
/// of `pool` buffers.
fn write_trace(path: &Path, pool: u32, blocks: &[u32]) {
    let mut bytes = Vec::with_capacity(HEADER_SIZE + blocks.len() * RECORD_SIZE);
    bytes.extend_from_slice(&MAGIC);
    bytes.extend_from_slice(&VERSION.to_le_bytes());
    bytes.extend_from_slice(&(RECORD_SIZE as u16).to_le_bytes());
    bytes.extend_from_slice(&pool.to_le_bytes());
    for (i, &b) in blocks.iter().enumerate() {
        let a = TraceEvent::Access(Access {
            tag: BufferTag::new(RelFork::main(RelId(1)), b),
            thread: 0,
            hit: false,
            ring: None,
            buffer: 0,
            nanos: i as u64,
        });
        bytes.extend_from_slice(&a.encode());
    }
    std::fs::write(path, bytes).expect("write trace");
}

#[test]
fn bench_help_lists_replay_and_step_and_each_has_its_own_help() {
    let top = text(&bench(&["--help"]));
    assert!(top.contains("replay") && top.contains("step"), "{top}");
    let replay = bench(&["replay", "--help"]);
    assert!(replay.status.success());
    let replay = text(&replay);
    for opt in ["--policy", "--pool-pages", "--relation", "--json", "--svg"] {
        assert!(replay.contains(opt), "{opt}: {replay}");
    }
    // The scenarios' options are not the replay's.
    assert!(
        !replay.contains("--pool-mib") && !replay.contains("--duration"),
        "{replay}"
    );
    let step = text(&bench(&["step", "--help"]));
    assert!(step.contains("--from") && step.contains("--demo"), "{step}");
    assert!(!step.contains("--pool-mib"), "{step}");
}

#[test]
fn a_scenario_option_after_replay_or_step_is_an_error_naming_it() {
    let o = bench(&["replay", "some.trace", "--duration", "3"]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("--duration is an option of the scenarios"),
        "{}",
        text(&o)
    );
    let o = bench(&["step", "--quick"]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("--quick is an option of the scenarios"),
        "{}",
        text(&o)
    );
}

// A loop over 3 pages: in 2 pages LRU never hits and OPT hits every other
// access after the first pass; in 3 pages every policy misses each page
// once only (9 accesses, 6 hits).
#[test]
fn replay_json_writes_one_row_per_policy_and_pool_size() {
    let d = dir("json");
    let trace = d.join("loop.trace");
    write_trace(&trace, 2, &[0, 1, 2, 0, 1, 2, 0, 1, 2]);
    let json = d.join("rows.json");
    let o = bench(&[
        "replay",
        trace.to_str().unwrap(),
        "--pool-pages",
        "2,3",
        "--policy",
        "clock,lru,opt",
        "--threads",
        "0",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let got: Vec<(String, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["policy"].as_str().unwrap().to_string(),
                r["pool_pages"].as_u64().unwrap(),
            )
        })
        .collect();
    let want: Vec<(String, u64)> = [2, 3]
        .into_iter()
        .flat_map(|n| ["clock", "lru", "opt"].map(|p| (p.to_string(), n)))
        .collect();
    assert_eq!(got, want);
    let row = |p: &str, n: u64| {
        rows.iter()
            .find(|r| r["policy"] == p && r["pool_pages"] == n)
            .unwrap()
            .clone()
    };
    assert_eq!(row("lru", 2)["hit_ratio"].as_f64(), Some(0.0));
    assert_eq!(row("opt", 2)["hit_ratio"].as_f64(), Some(3.0 / 9.0));
    assert_eq!(row("opt", 2)["subset_hit_ratio"].as_f64(), Some(3.0 / 9.0));
    assert_eq!(row("opt", 2)["gap_closed"].as_f64(), Some(1.0));
    for p in ["clock", "lru", "opt"] {
        assert_eq!(row(p, 3)["hit_ratio"].as_f64(), Some(6.0 / 9.0), "{p}");
        // Clock and OPT tie: no gap to close.
        assert!(row(p, 3)["gap_closed"].is_null(), "{p}");
    }
    std::fs::remove_dir_all(&d).ok();
}

fn rows(json: &Path) -> Vec<(String, u64, f64)> {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["policy"].as_str().unwrap().to_string(),
                r["pool_pages"].as_u64().unwrap(),
                r["hit_ratio"].as_f64().unwrap(),
            )
        })
        .collect()
}

// The loop touches 3 distinct pages: 0.5 of that is 1.5, rounded to 2
// pages; 1 is all 3.
#[test]
fn pool_fractions_size_the_pool_from_the_traces_footprint() {
    let d = dir("fractions");
    let trace = d.join("loop.trace");
    write_trace(&trace, 2, &[0, 1, 2, 0, 1, 2, 0, 1, 2]);
    let json = d.join("rows.json");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "replay",
            trace.to_str().unwrap(),
            "--policy",
            "lru",
            "--json",
        ];
        args.push(json.to_str().unwrap());
        args.extend_from_slice(extra);
        bench(&args)
    };
    let o = run(&["--pool", "0.5,1"]);
    assert!(o.status.success(), "{}", text(&o));
    let got: Vec<u64> = rows(&json).iter().map(|r| r.1).collect();
    assert_eq!(got, [2, 3]);
    for bad in ["0", "1.5", "-0.1"] {
        let o = run(&[&format!("--pool={bad}")]);
        assert!(!o.status.success());
        assert!(text(&o).contains(&format!("--pool {bad}")), "{}", text(&o));
    }
    let o = run(&["--pool", "0.5", "--pool-pages", "2"]);
    assert!(!o.status.success(), "{}", text(&o));
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn a_public_format_trace_replays_from_the_command_line_and_needs_a_pool_size() {
    let d = dir("lis");
    let lis = d.join("t.lis");
    std::fs::write(&lis, "0 3 0 1\n0 3 0 2\n0 3 0 3\n").unwrap();
    let json = d.join("rows.json");
    let o = bench(&[
        "replay",
        lis.to_str().unwrap(),
        "--format",
        "lis",
        "--pool-pages",
        "2,3",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("9 accesses to 3 distinct pages"), "{out}");
    assert!(out.contains("note: OPT over a lis trace"), "{out}");
    let r = rows(&json);
    assert!(r.contains(&("lru".into(), 2, 0.0)), "{r:?}");
    assert!(r.contains(&("opt".into(), 2, 3.0 / 9.0)), "{r:?}");
    assert!(r.contains(&("sieve".into(), 3, 6.0 / 9.0)), "{r:?}");
    let o = bench(&["replay", lis.to_str().unwrap(), "--format", "lis"]);
    assert!(text(&o).contains("records no pool size"), "{}", text(&o));
    let o = bench(&["replay", lis.to_str().unwrap(), "--format", "parquet"]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("unknown trace format \"parquet\""),
        "{}",
        text(&o)
    );
    let o = bench(&[
        "replay",
        lis.to_str().unwrap(),
        "--format",
        "lis",
        "--pool-pages",
        "2",
        "--threads",
        "1",
    ]);
    assert!(
        text(&o).contains("has no relations or threads"),
        "{}",
        text(&o)
    );
    std::fs::remove_dir_all(&d).ok();
}

// An engine trace exported by `bench trace-export` (oracleGeneral and
// CSV) and replayed in that format gives the engine trace's hit ratios
// under every policy and size.
#[test]
fn trace_export_writes_files_that_replay_to_the_engine_traces_hit_ratios() {
    let d = dir("export");
    let trace = d.join("t.trace");
    let blocks: Vec<u32> = (0..400u32)
        .map(|i| (i * 7919) % 37 % (1 + i % 23))
        .collect();
    write_trace(&trace, 8, &blocks);
    let replay = |file: &Path, format: &str, json: &Path| {
        let o = bench(&[
            "replay",
            file.to_str().unwrap(),
            "--format",
            format,
            "--pool-pages",
            "4,8,16",
            "--json",
            json.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", text(&o));
        rows(json)
    };
    let engine = replay(&trace, "engine", &d.join("engine.json"));
    assert_eq!(engine.len(), 3 * 9);
    for format in ["oracleGeneral", "csv"] {
        let o = bench(&["trace-export", trace.to_str().unwrap(), "--format", format]);
        assert!(o.status.success(), "{}", text(&o));
        let ext = if format == "csv" {
            "csv"
        } else {
            "oracleGeneral.bin"
        };
        let out = trace.with_extension(ext);
        assert!(text(&o).contains("(400 accesses)"), "{}", text(&o));
        assert_eq!(replay(&out, format, &d.join("x.json")), engine, "{format}");
    }
    let o = bench(&[
        "trace-export",
        trace.to_str().unwrap(),
        "--format",
        "parquet",
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("unknown export format \"parquet\""),
        "{}",
        text(&o)
    );
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn a_trace_without_a_single_access_is_an_error_not_a_row_of_zero_hit_ratios() {
    let d = dir("no-access");
    let empty = d.join("empty");
    std::fs::write(&empty, b"").unwrap();
    let header_only = d.join("header-only.csv");
    std::fs::write(&header_only, b"object\n").unwrap();
    let engine = d.join("engine.trace");
    write_trace(&engine, 8, &[]);
    let json = d.join("rows.json");
    for (file, format) in [
        (&empty, "oracleGeneral"),
        (&empty, "lis"),
        (&header_only, "csv"),
        (&engine, "engine"),
    ] {
        let o = bench(&[
            "replay",
            file.to_str().unwrap(),
            "--format",
            format,
            "--pool-pages",
            "4",
            "--json",
            json.to_str().unwrap(),
        ]);
        let t = text(&o);
        assert!(!o.status.success(), "{format}: {t}");
        assert!(t.contains("no access to replay"), "{format}: {t}");
        assert!(!t.contains("0.00"), "{format}: {t}");
        assert!(!json.exists(), "{format}: wrote {}", json.display());
    }
    std::fs::remove_dir_all(&d).unwrap();
}

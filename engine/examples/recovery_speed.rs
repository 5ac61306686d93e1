//! Recovery time and WAL replay speed after a crash with a large WAL backlog.
//!
//! A child process (this program re-run with `--load`) creates a table with
//! a unique index, bulk-loads rows in transactions of 50,000 with no
//! checkpoint (checkpointer off) until the WAL has grown by `MB` megabytes,
//! then exits without closing the database: a crash, with every dirty page
//! lost and every commit durable in the WAL. The parent then times
//! `Database::open` (recovery replays everything from the last checkpoint)
//! and prints the WAL bytes replayed, the records, the time and MB/s.
//!
//! ```text
//! cargo run --release -p engine --example recovery_speed [MB] [DIR]
//! ```
//! (MB defaults to 128; DIR to a fresh directory under the temp dir, removed
//! afterwards.)

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use engine::{Column, ColumnType, Database, Options, Value};

fn options() -> Options {
    Options::new()
        .pool_mib(64)
        .checkpointer(false)
        .wal_segment_size(16 << 20)
}

fn load(dir: &Path, mb: u64) -> Result<(), Box<dyn std::error::Error>> {
    let db = Database::open(dir, options())?;
    db.create_table(
        "accounts",
        vec![
            Column::new("aid", ColumnType::I64),
            Column::new("abalance", ColumnType::I64),
            Column::nullable("filler", ColumnType::Bytes),
        ],
    )?;
    db.create_index("accounts_pkey", "accounts", "aid", true)?;
    let start = db.wal().insert_lsn().as_u64();
    let target = mb << 20;
    let mut next = 0i64;
    while db.wal().insert_lsn().as_u64() - start < target {
        let rows = (next..next + 50_000)
            .map(|aid| vec![Value::I64(aid), Value::I64(0), Value::Bytes(vec![b'x'; 84])]);
        db.bulk_load("accounts", rows, |_| {})?;
        next += 50_000;
    }
    let wal = db.wal().insert_lsn().as_u64() - start;
    println!("LOADED {next} rows, {wal} bytes of WAL");
    // The crash: no close, no checkpoint, no destructors.
    std::process::exit(0);
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--load") {
        return load(Path::new(&args[2]), args[3].parse()?);
    }
    let mb: u64 = args.get(1).map_or(Ok(128), |a| a.parse())?;
    let (dir, remove) = match args.get(2) {
        Some(d) => (PathBuf::from(d), false),
        None => (
            std::env::temp_dir().join(format!("engine-recovery-speed-{}", std::process::id())),
            true,
        ),
    };
    let loaded = Instant::now();
    let out = Command::new(std::env::current_exe()?)
        .arg("--load")
        .arg(&dir)
        .arg(mb.to_string())
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "the loading child failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    println!(
        "child: {} (in {:.1?})",
        String::from_utf8_lossy(&out.stdout).trim(),
        loaded.elapsed()
    );
    let wal_dir_bytes: u64 = std::fs::read_dir(dir.join("wal"))?
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum();

    let t0 = Instant::now();
    let db = Database::open(&dir, options())?;
    let took = t0.elapsed();
    let rs = db.recovery_stats();
    let replayed = rs.end.as_u64() - rs.start.as_u64();
    let mib = replayed as f64 / (1 << 20) as f64;
    println!(
        "recovery: {mib:.1} MiB of WAL ({} records: {} commits, {} others) replayed in {took:.2?}: {:.1} MiB/s ({:.0} records/s); wal/ holds {:.1} MiB",
        rs.records,
        rs.commits,
        rs.other,
        mib / took.as_secs_f64(),
        rs.records as f64 / took.as_secs_f64(),
        wal_dir_bytes as f64 / (1 << 20) as f64,
    );
    let rows = db.read_transaction(|t| Ok(t.scan("accounts")?.count()))?;
    println!("after recovery: {rows} rows in accounts");
    db.close()?;
    if remove {
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(())
}

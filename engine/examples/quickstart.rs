//! Create a table, bulk-load rows, query them, and show what the buffer pool
//! holds. `cargo run -p engine --example quickstart [DIR]` (a temporary
//! directory by default).

use engine::{Column, ColumnType, Database, Options, Value};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let tmp;
    let dir = match std::env::args().nth(1) {
        Some(d) => std::path::PathBuf::from(d),
        None => {
            tmp = std::env::temp_dir().join(format!("engine-quickstart-{}", std::process::id()));
            tmp.clone()
        }
    };
    let db = Database::open(&dir, Options::new().pool_mib(8))?;
    println!(
        "opened {} (recovery: {:?})",
        dir.display(),
        db.recovery_stats()
    );

    if db.table("accounts").is_err() {
        db.create_table(
            "accounts",
            vec![
                Column::new("aid", ColumnType::I64),
                Column::new("abalance", ColumnType::I64),
                Column::nullable("filler", ColumnType::Bytes),
            ],
        )?;
    }
    let rows = (0..50_000i64)
        .map(|aid| vec![Value::I64(aid), Value::I64(0), Value::Bytes(vec![b'x'; 84])]);
    let loaded = db.bulk_load("accounts", rows, |p| {
        if !p.done {
            println!("  loaded {} rows, {} pages", p.rows, p.pages);
        }
    })?;
    println!("bulk load: {loaded:?}");

    // Query: the sum of balances after moving money between two accounts.
    let t = db.begin()?;
    let mut first = t.scan("accounts")?.take(2);
    let (a, mut ra) = first.next().expect("a row")?;
    let (b, mut rb) = first.next().expect("a row")?;
    drop(first);
    ra[1] = Value::I64(ra[1].as_i64().unwrap_or(0) - 10);
    rb[1] = Value::I64(rb[1].as_i64().unwrap_or(0) + 10);
    t.update("accounts", a, ra)?;
    t.update("accounts", b, rb)?;
    t.commit()?;
    let t = db.begin()?;
    let (mut n, mut sum) = (0u64, 0i64);
    for r in t.scan("accounts")? {
        let (_, row) = r?;
        n += 1;
        sum += row[1].as_i64().unwrap_or(0);
    }
    drop(t);
    println!("{n} rows, balance sum {sum}");

    println!("resident pages:");
    for r in db.resident_pages() {
        println!(
            "  {:<10} {:?} {:?}: {} pages",
            r.name, r.kind, r.fork, r.pages
        );
    }
    let s = db.pool_stats().totals();
    println!(
        "pool: {} accesses, {:.1}% hits; WAL: {} records, {} bytes",
        s.accesses,
        100.0 * s.hit_ratio(),
        db.wal_stats().records,
        db.wal_stats().bytes
    );
    db.close()?;
    Ok(())
}

//! Create a table and a unique index, bulk-load rows, query them by key and
//! by range, and show what the buffer pool holds. `cargo run -p engine
//! --example quickstart [DIR]`: in DIR (kept, and appended to on the next
//! run), or by default in a temporary database whose directory is removed
//! when it closes, leaving nothing behind.

use std::collections::BTreeMap;
use std::ops::Bound;

use engine::{Column, ColumnType, Database, Options, RelKind, Value};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let options = Options::new().pool_mib(8);
    let db = match std::env::args().nth(1) {
        Some(dir) => Database::open(dir, options)?,
        None => Database::open_temporary(options)?,
    };
    let dir = db.dir().to_path_buf();
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
        db.create_index("accounts_pkey", "accounts", "aid", true)?;
    }
    // Run again on the same directory, it appends the next 50,000 accounts.
    let base = db.begin()?.scan("accounts")?.count() as i64;
    let rows = (base..base + 50_000)
        .map(|aid| vec![Value::I64(aid), Value::I64(0), Value::Bytes(vec![b'x'; 84])]);
    let loaded = db.bulk_load("accounts", rows, |p| {
        if !p.done {
            println!("  loaded {} rows, {} pages", p.rows, p.pages);
        }
    })?;
    println!("bulk load: {loaded:?}");

    // Move money between two accounts found through the unique index, in
    // a transaction that is run again if a concurrent one conflicts.
    let key = |aid: i64| Value::I64(aid);
    db.transaction(|t| {
        let (_, mut ra) = t
            .get_by_key("accounts", "aid", &key(1))?
            .expect("account 1");
        let (_, mut rb) = t
            .get_by_key("accounts", "aid", &key(2))?
            .expect("account 2");
        ra[1] = Value::I64(ra[1].as_i64().unwrap_or(0) - 10);
        rb[1] = Value::I64(rb[1].as_i64().unwrap_or(0) + 10);
        t.update_by_key("accounts", "aid", &key(1), ra)?;
        t.update_by_key("accounts", "aid", &key(2), rb)?;
        Ok(())
    })?;
    // An ordered range through the index.
    let t = db.begin()?;
    let range: Vec<String> = t
        .index_range(
            "accounts_pkey",
            Bound::Included(key(0)),
            Bound::Excluded(key(4)),
        )?
        .map(|r| {
            r.map(|(_, row)| {
                format!(
                    "{}:{}",
                    row[0].as_i64().unwrap_or(0),
                    row[1].as_i64().unwrap_or(0)
                )
            })
        })
        .collect::<Result<_, _>>()?;
    println!("accounts 0..4 (aid:balance): {}", range.join(" "));
    drop(t);
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
            "  {:<14} {:?} {:?}: {} pages",
            r.name, r.kind, r.fork, r.pages
        );
    }
    let mut levels: BTreeMap<u32, usize> = BTreeMap::new();
    for b in db.buffercache() {
        if let (Some(RelKind::Index), Some(k)) = (b.kind, b.index_page)
            && !k.is_meta
        {
            *levels.entry(k.level).or_default() += 1;
        }
    }
    println!("resident index pages per level (0 = leaf): {levels:?}");
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

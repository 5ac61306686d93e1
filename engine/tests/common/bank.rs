//! A bank: accounts whose balances only move between each other, so their
//! total is conserved. Transfers read two accounts and update both (the
//! balance index moves entries between leaves and posting lists, the owner
//! index too when an owner changes), sometimes by deleting an account and
//! inserting it again under the same id in the same transaction, sometimes
//! in a transaction that writes and then rolls back. An audit reads one
//! snapshot through every read path the API offers and checks that each
//! sees every account exactly once, with the same balances, summing to the
//! constant.

use std::collections::BTreeMap;
use std::ops::Bound;

use engine::{Column, ColumnType, Database, KeyRange, RowRef, Transaction, Value};

use super::Rng;

/// The accounts table and its indexes.
pub const TABLE: &str = "acct";
pub const BY_ID: &str = "acct_id";
pub const BY_BALANCE: &str = "acct_balance";
pub const BY_OWNER: &str = "acct_owner";
/// The transfer log of the crash tests: one row per committed transfer.
pub const LEDGER: &str = "ledger";
pub const LEDGER_BY_SEQ: &str = "ledger_seq";

/// Every account starts with this balance.
pub const START: i64 = 1_000;
/// Owners are `owner-0` .. `owner-{OWNERS - 1}`.
pub const OWNERS: u64 = 5;

pub fn owner(k: u64) -> String {
    format!("owner-{k}")
}

pub fn columns() -> Vec<Column> {
    vec![
        Column::new("id", ColumnType::I64),
        Column::new("balance", ColumnType::I64),
        Column::new("owner", ColumnType::Text),
        Column::new("note", ColumnType::Text),
    ]
}

/// A note of 0 to 299 bytes: updates change the row's length, so new
/// versions land on other pages.
pub fn note(rng: &mut Rng) -> String {
    "n".repeat(rng.below(300) as usize)
}

pub fn account(id: i64, balance: i64, owner_k: u64, note: String) -> Vec<Value> {
    vec![
        Value::I64(id),
        Value::I64(balance),
        Value::Text(owner(owner_k)),
        Value::Text(note),
    ]
}

/// Creates the table, its three indexes and `accounts` accounts of
/// [`START`] (by one transaction, or by a bulk load into the empty table),
/// and the ledger if `ledger`.
pub fn create(db: &Database, accounts: i64, bulk: bool, ledger: bool) {
    db.create_table(TABLE, columns()).unwrap();
    if !bulk {
        db.create_index(BY_ID, TABLE, "id", true).unwrap();
        db.create_index(BY_BALANCE, TABLE, "balance", false)
            .unwrap();
        db.create_index(BY_OWNER, TABLE, "owner", false).unwrap();
    }
    let mut rng = Rng::new(7);
    let rows: Vec<Vec<Value>> = (0..accounts)
        .map(|id| account(id, START, id as u64 % OWNERS, note(&mut rng)))
        .collect();
    if bulk {
        // Indexes first so the load builds them bottom-up.
        db.create_index(BY_ID, TABLE, "id", true).unwrap();
        db.create_index(BY_BALANCE, TABLE, "balance", false)
            .unwrap();
        db.create_index(BY_OWNER, TABLE, "owner", false).unwrap();
        db.bulk_load(TABLE, rows, |_| {}).unwrap();
    } else {
        let t = db.begin().unwrap();
        for r in rows {
            t.insert(TABLE, r).unwrap();
        }
        t.commit().unwrap();
    }
    if ledger {
        db.create_table(
            LEDGER,
            vec![
                Column::new("seq", ColumnType::I64),
                Column::new("from", ColumnType::I64),
                Column::new("to", ColumnType::I64),
                Column::new("amount", ColumnType::I64),
            ],
        )
        .unwrap();
        db.create_index(LEDGER_BY_SEQ, LEDGER, "seq", true).unwrap();
    }
}

/// One transfer's plan, drawn from a seeded generator.
#[derive(Clone, Debug)]
pub struct Transfer {
    pub from: i64,
    pub to: i64,
    pub amount: i64,
    /// 0..10: how the transfer is written (see [`transfer`]).
    pub how: u64,
    pub owner: Option<u64>,
    pub note: String,
}

pub fn draw(rng: &mut Rng, accounts: i64) -> Transfer {
    let from = rng.below(accounts as u64) as i64;
    let mut to = rng.below(accounts as u64 - 1) as i64;
    if to >= from {
        to += 1;
    }
    Transfer {
        from,
        to,
        amount: 1 + rng.below(400) as i64,
        how: rng.below(10),
        owner: (rng.below(4) == 0).then(|| rng.below(OWNERS)),
        note: note(rng),
    }
}

/// The account `id` as this transaction sees it: (row id, balance, owner).
fn read(txn: &Transaction, id: i64) -> engine::Result<(engine::RowId, i64, String, String)> {
    let (rid, row) = txn
        .get_by_key(TABLE, "id", &Value::I64(id))?
        .unwrap_or_else(|| panic!("account {id} not found by key in a writer"));
    Ok((
        rid,
        row.i64("balance")?,
        row.text("owner")?.to_string(),
        row.text("note")?.to_string(),
    ))
}

fn with_balance(id: i64, balance: i64, owner: &str, note: &str) -> Vec<Value> {
    vec![
        Value::I64(id),
        Value::I64(balance),
        Value::Text(owner.to_string()),
        Value::Text(note.to_string()),
    ]
}

/// Writes transfer `x` in `txn` (and its ledger row `seq` if given):
/// - how 0: `from` is deleted and inserted again under its id;
/// - how 1: through `update_by_key`;
/// - how 2: in two halves, each account updated twice;
/// - otherwise: read both by key, update both by row id.
///
/// The owner of `to` changes when `x.owner` says so.
pub fn transfer(txn: &Transaction, x: &Transfer, seq: Option<i64>) -> engine::Result<()> {
    let to_owner = |old: &str| x.owner.map_or(old.to_string(), owner);
    match x.how {
        0 => {
            let (rid, bal, own, _) = read(txn, x.from)?;
            txn.delete(TABLE, rid)?;
            txn.insert(TABLE, with_balance(x.from, bal - x.amount, &own, &x.note))?;
            let (rid, bal, own, note) = read(txn, x.to)?;
            txn.update(
                TABLE,
                rid,
                with_balance(x.to, bal + x.amount, &to_owner(&own), &note),
            )?;
        }
        1 => {
            let (_, bal, own, _) = read(txn, x.from)?;
            let found = txn.update_by_key(
                TABLE,
                "id",
                &Value::I64(x.from),
                with_balance(x.from, bal - x.amount, &own, &x.note),
            )?;
            assert!(found.is_some(), "account {} vanished", x.from);
            let (_, bal, own, note) = read(txn, x.to)?;
            let found = txn.update_by_key(
                TABLE,
                "id",
                &Value::I64(x.to),
                with_balance(x.to, bal + x.amount, &to_owner(&own), &note),
            )?;
            assert!(found.is_some(), "account {} vanished", x.to);
        }
        2 => {
            let half = x.amount / 2;
            for part in [half, x.amount - half] {
                let (rid, bal, own, _) = read(txn, x.from)?;
                txn.update(TABLE, rid, with_balance(x.from, bal - part, &own, &x.note))?;
                let (rid, bal, own, note) = read(txn, x.to)?;
                txn.update(
                    TABLE,
                    rid,
                    with_balance(x.to, bal + part, &to_owner(&own), &note),
                )?;
            }
        }
        _ => {
            let (ra, ba, oa, _) = read(txn, x.from)?;
            let (rb, bb, ob, nb) = read(txn, x.to)?;
            txn.update(TABLE, ra, with_balance(x.from, ba - x.amount, &oa, &x.note))?;
            txn.update(
                TABLE,
                rb,
                with_balance(x.to, bb + x.amount, &to_owner(&ob), &nb),
            )?;
        }
    }
    if let Some(seq) = seq {
        txn.insert(
            LEDGER,
            vec![
                Value::I64(seq),
                Value::I64(x.from),
                Value::I64(x.to),
                Value::I64(x.amount),
            ],
        )?;
    }
    Ok(())
}

/// id -> balance.
pub type Balances = BTreeMap<i64, i64>;

/// Collects (id, balance) pairs of one read path; a second sighting of an
/// id is an error.
struct Seen<'a> {
    what: &'a str,
    map: Balances,
    dup: Option<String>,
}

impl<'a> Seen<'a> {
    fn new(what: &'a str) -> Self {
        Seen {
            what,
            map: Balances::new(),
            dup: None,
        }
    }
    fn add(&mut self, id: i64, balance: i64) {
        if let Some(old) = self.map.insert(id, balance)
            && self.dup.is_none()
        {
            self.dup = Some(format!(
                "{}: account {id} seen twice (balances {old} and {balance})",
                self.what
            ));
        }
    }
    fn add_row(&mut self, row: &RowRef<'_>) -> engine::Result<()> {
        self.add(row.i64("id")?, row.i64("balance")?);
        Ok(())
    }
}

fn err(what: &str) -> impl Fn(engine::EngineError) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// Reads the snapshot of `txn` through every read path and checks that
/// each sees `accounts` accounts once each, the same balances as the
/// borrowed scan, summing to `accounts * START`. Returns the balances.
pub fn audit(txn: &Transaction, accounts: i64) -> Result<Balances, String> {
    let mut paths: Vec<Seen<'_>> = Vec::new();

    let mut s = Seen::new("borrowed scan");
    txn.scan_each(TABLE, |r| s.add_row(&r))
        .map_err(err("borrowed scan"))?;
    paths.push(s);

    let mut s = Seen::new("owned scan");
    for r in txn.scan(TABLE).map_err(err("owned scan"))? {
        let (_, row) = r.map_err(err("owned scan"))?;
        s.add(
            row.i64("id").map_err(err("owned scan"))?,
            row.i64("balance").map_err(err("owned scan"))?,
        );
    }
    paths.push(s);

    // Rows held past their page (with a clone of every other one), read
    // at the end.
    let mut s = Seen::new("owned scan held whole");
    let mut held = Vec::new();
    for (i, r) in txn.scan(TABLE).map_err(err("held scan"))?.enumerate() {
        let (_, row) = r.map_err(err("held scan"))?;
        held.push((row.clone(), (i % 2 == 0).then_some(row)));
    }
    for (kept, other) in &held {
        if let Some(o) = other
            && o.values() != kept.values()
        {
            return Err(format!("held scan: a clone differs: {o:?} vs {kept:?}"));
        }
    }
    for (row, _) in held {
        s.add(
            row.i64("id").map_err(err("held scan"))?,
            row.i64("balance").map_err(err("held scan"))?,
        );
    }
    paths.push(s);

    let mut s = Seen::new("id range held whole");
    let held: Vec<_> = txn
        .range(BY_ID, KeyRange::all().desc())
        .map_err(err("held range"))?
        .collect::<engine::Result<Vec<_>>>()
        .map_err(err("held range"))?;
    for (_, row) in held {
        s.add(
            row.i64("id").map_err(err("held range"))?,
            row.i64("balance").map_err(err("held range"))?,
        );
    }
    paths.push(s);

    let mut s = Seen::new("owned scans matching both halves");
    for low in [true, false] {
        let it = txn
            .scan(TABLE)
            .map_err(err("matching"))?
            .matching(move |r| Ok((r.i64("balance")? < START) == low));
        for r in it {
            let (_, row) = r.map_err(err("matching"))?;
            let b = row.i64("balance").map_err(err("matching"))?;
            if (b < START) != low {
                return Err(format!("matching: balance {b} passed the wrong filter"));
            }
            s.add(row.i64("id").map_err(err("matching"))?, b);
        }
    }
    paths.push(s);

    let table = txn.database().table_handle(TABLE).map_err(err("handle"))?;
    let cols = [
        table.column("balance").map_err(err("handle"))?,
        table.column("id").map_err(err("handle"))?,
    ];
    let mut s = Seen::new("projected scan");
    for r in txn.scan(TABLE).map_err(err("project"))?.project(&cols) {
        let (_, row) = r.map_err(err("project"))?;
        match (&row[0], &row[1]) {
            (Value::I64(b), Value::I64(id)) => s.add(*id, *b),
            other => return Err(format!("project: {other:?}")),
        }
    }
    paths.push(s);

    let mut s = Seen::new("get_by_key of every id");
    let mut l = Seen::new("lookup_each of every id");
    for id in 0..accounts {
        if let Some((_, row)) = txn
            .get_by_key(TABLE, "id", &Value::I64(id))
            .map_err(err("get_by_key"))?
        {
            s.add(id, row.i64("balance").map_err(err("get_by_key"))?);
        }
        txn.lookup_each(BY_ID, &Value::I64(id), |r| l.add_row(&r))
            .map_err(err("lookup_each"))?;
    }
    paths.push(s);
    paths.push(l);

    let mut s = Seen::new("ascending range of the id index");
    for r in txn.range(BY_ID, KeyRange::all()).map_err(err("id range"))? {
        let (_, row) = r.map_err(err("id range"))?;
        s.add(
            row.i64("id").map_err(err("id range"))?,
            row.i64("balance").map_err(err("id range"))?,
        );
    }
    paths.push(s);

    let mut s = Seen::new("descending range_each of the id index");
    txn.range_each(BY_ID, KeyRange::all().desc(), |r| s.add_row(&r))
        .map_err(err("id range desc"))?;
    paths.push(s);

    // The balance index: whole, ascending, in order; by halves, in place;
    // descending, by `index_range`.
    let mut s = Seen::new("ascending range of the balance index");
    let mut last = i64::MIN;
    for r in txn
        .range(BY_BALANCE, KeyRange::all())
        .map_err(err("balance range"))?
    {
        let (_, row) = r.map_err(err("balance range"))?;
        let b = row.i64("balance").map_err(err("balance range"))?;
        if b < last {
            return Err(format!("balance range: {b} after {last}"));
        }
        last = b;
        s.add(row.i64("id").map_err(err("balance range"))?, b);
    }
    paths.push(s);

    let mut s = Seen::new("range_each of the balance index by halves");
    txn.range_each(BY_BALANCE, KeyRange::all().range(..START), |r| {
        s.add_row(&r)
    })
    .map_err(err("balance low half"))?;
    txn.range_each(BY_BALANCE, KeyRange::all().range(START..).desc(), |r| {
        s.add_row(&r)
    })
    .map_err(err("balance high half"))?;
    paths.push(s);

    let mut s = Seen::new("index_range of the balance index");
    for r in txn
        .index_range(
            BY_BALANCE,
            Bound::Included(Value::I64(i64::MIN)),
            Bound::Unbounded,
        )
        .map_err(err("index_range"))?
    {
        let (_, row) = r.map_err(err("index_range"))?;
        s.add(
            row.i64("id").map_err(err("index_range"))?,
            row.i64("balance").map_err(err("index_range"))?,
        );
    }
    paths.push(s);

    let mut s = Seen::new("lookups of every owner");
    let mut o = Seen::new("owned lookups of every owner");
    for k in 0..OWNERS {
        let name = owner(k);
        let mut wrong = None;
        txn.lookup_each(BY_OWNER, &Value::Text(name.clone()), |r| {
            if r.text("owner")? != name {
                wrong = Some(r.text("owner")?.to_string());
            }
            s.add_row(&r)
        })
        .map_err(err("owner lookup"))?;
        if let Some(w) = wrong {
            return Err(format!("owner lookup of {name}: a row of {w}"));
        }
        for (_, row) in txn
            .index_lookup(BY_OWNER, &Value::Text(name.clone()))
            .map_err(err("owner index_lookup"))?
        {
            o.add(
                row.i64("id").map_err(err("owner index_lookup"))?,
                row.i64("balance").map_err(err("owner index_lookup"))?,
            );
        }
    }
    paths.push(s);
    paths.push(o);

    let mut s = Seen::new("descending range of the owner index");
    for r in txn
        .range(BY_OWNER, KeyRange::all().desc())
        .map_err(err("owner range"))?
    {
        let (_, row) = r.map_err(err("owner range"))?;
        s.add(
            row.i64("id").map_err(err("owner range"))?,
            row.i64("balance").map_err(err("owner range"))?,
        );
    }
    paths.push(s);

    // The largest and smallest balances by a limited range each way.
    let mut sorted: Vec<i64> = paths[0].map.values().copied().collect();
    sorted.sort_unstable();
    let k = (accounts as usize).min(7);
    for desc in [false, true] {
        let range = if desc {
            KeyRange::all().desc().limit(k)
        } else {
            KeyRange::all().limit(k)
        };
        let mut got = Vec::new();
        for r in txn.range(BY_BALANCE, range).map_err(err("limited range"))? {
            let (_, row) = r.map_err(err("limited range"))?;
            got.push(row.i64("balance").map_err(err("limited range"))?);
        }
        let want: Vec<i64> = if desc {
            sorted.iter().rev().take(k).copied().collect()
        } else {
            sorted.iter().take(k).copied().collect()
        };
        if got != want {
            return Err(format!(
                "balance range limited to {k} (descending {desc}): {got:?}, the scan's {want:?}"
            ));
        }
    }

    let reference = paths[0].map.clone();
    for p in &paths {
        if let Some(d) = &p.dup {
            return Err(d.clone());
        }
        if p.map.len() != accounts as usize {
            let missing: Vec<i64> = (0..accounts).filter(|i| !p.map.contains_key(i)).collect();
            return Err(format!(
                "{}: {} accounts, not {accounts} (missing {missing:?})",
                p.what,
                p.map.len()
            ));
        }
        let total: i64 = p.map.values().sum();
        if total != accounts * START {
            return Err(format!(
                "{}: total {total}, not {}",
                p.what,
                accounts * START
            ));
        }
        if p.map != reference {
            let diff: Vec<_> = reference
                .iter()
                .filter(|(id, b)| p.map.get(id) != Some(b))
                .map(|(id, b)| (*id, *b, p.map.get(id).copied()))
                .take(5)
                .collect();
            return Err(format!(
                "{} disagrees with the borrowed scan (id, scan, this): {diff:?}",
                p.what
            ));
        }
    }
    Ok(reference)
}

/// The ledger as this transaction sees it: seq -> (from, to, amount).
pub fn ledger(txn: &Transaction) -> Result<BTreeMap<i64, (i64, i64, i64)>, String> {
    let mut out = BTreeMap::new();
    for r in txn.scan(LEDGER).map_err(err("ledger scan"))? {
        let (_, row) = r.map_err(err("ledger scan"))?;
        let get = |c: &str| row.i64(c).map_err(err("ledger row"));
        let seq = get("seq")?;
        if out
            .insert(seq, (get("from")?, get("to")?, get("amount")?))
            .is_some()
        {
            return Err(format!("ledger: seq {seq} twice"));
        }
    }
    Ok(out)
}

/// The balances the ledger says: each account's start plus what it
/// received minus what it sent.
pub fn replay(accounts: i64, ledger: &BTreeMap<i64, (i64, i64, i64)>) -> Balances {
    let mut b: Balances = (0..accounts).map(|id| (id, START)).collect();
    for &(from, to, amount) in ledger.values() {
        *b.get_mut(&from).unwrap() -= amount;
        *b.get_mut(&to).unwrap() += amount;
    }
    b
}

/// In a writing transaction: iterators of the table and of each index are
/// begun and read halfway, transfer `x` is written, and the iterators are
/// read to their end: each keeps the view it began with, so each sees
/// every account once and the constant total. Then a full audit sees the
/// transaction's own transfer. Returns the audit's balances.
pub fn interleaved(txn: &Transaction, accounts: i64, x: &Transfer) -> engine::Result<Balances> {
    type Iter = Box<dyn Iterator<Item = engine::Result<(engine::RowId, engine::OwnedRow)>>>;
    let mut iters: Vec<(&str, Iter, Seen<'_>)> = vec![
        ("owned scan", Box::new(txn.scan(TABLE)?), Seen::new("")),
        (
            "id range",
            Box::new(txn.range(BY_ID, KeyRange::all())?),
            Seen::new(""),
        ),
        (
            "balance range, descending",
            Box::new(txn.range(BY_BALANCE, KeyRange::all().desc())?),
            Seen::new(""),
        ),
        (
            "balance index_range",
            Box::new(txn.index_range(BY_BALANCE, Bound::Unbounded, Bound::Unbounded)?),
            Seen::new(""),
        ),
        (
            "owner range",
            Box::new(txn.range(BY_OWNER, KeyRange::all())?),
            Seen::new(""),
        ),
    ];
    let step = |it: &mut Iter, seen: &mut Seen<'_>, n: usize| -> engine::Result<()> {
        for r in it.by_ref().take(n) {
            let (_, row) = r?;
            seen.add(row.i64("id")?, row.i64("balance")?);
        }
        Ok(())
    };
    for (_, it, seen) in iters.iter_mut() {
        step(it, seen, accounts as usize / 2)?;
    }
    transfer(txn, x, None)?;
    for (what, it, seen) in iters.iter_mut() {
        step(it, seen, usize::MAX)?;
        let total: i64 = seen.map.values().sum();
        assert!(
            seen.dup.is_none() && seen.map.len() == accounts as usize && total == accounts * START,
            "{what} begun before a transfer in its transaction: {} accounts, total {total}, {:?}",
            seen.map.len(),
            seen.dup
        );
    }
    let after = audit(txn, accounts)
        .unwrap_or_else(|e| panic!("audit after the transaction's own transfer {x:?}: {e}"));
    Ok(after)
}

/// Iterators of the table and of each index, begun in a read transaction
/// and read a third of the way, then the transaction ends (committed, or
/// dropped if `drop_it`), `meanwhile` runs (commits and vacuums go on),
/// and the iterators are read to their end: each sees the snapshot it
/// began with, every account once, the constant total.
pub fn outliving(
    db: &Database,
    accounts: i64,
    drop_it: bool,
    meanwhile: impl FnOnce(),
) -> Result<(), String> {
    type Iter = Box<dyn Iterator<Item = engine::Result<(engine::RowId, engine::OwnedRow)>>>;
    let txn = db.read().map_err(err("read"))?;
    let mut iters: Vec<(&str, Iter, Seen<'_>)> = vec![
        (
            "owned scan",
            Box::new(txn.scan(TABLE).map_err(err("scan"))?),
            Seen::new(""),
        ),
        (
            "id range",
            Box::new(txn.range(BY_ID, KeyRange::all()).map_err(err("range"))?),
            Seen::new(""),
        ),
        (
            "balance range, descending",
            Box::new(
                txn.range(BY_BALANCE, KeyRange::all().desc())
                    .map_err(err("range"))?,
            ),
            Seen::new(""),
        ),
        (
            "owner index_range",
            Box::new(
                txn.index_range(BY_OWNER, Bound::Unbounded, Bound::Unbounded)
                    .map_err(err("index_range"))?,
            ),
            Seen::new(""),
        ),
    ];
    let step = |what: &str, it: &mut Iter, seen: &mut Seen<'_>, n: usize| {
        for r in it.by_ref().take(n) {
            let (_, row) = r.map_err(err(what))?;
            seen.add(
                row.i64("id").map_err(err(what))?,
                row.i64("balance").map_err(err(what))?,
            );
        }
        Ok::<(), String>(())
    };
    for (what, it, seen) in iters.iter_mut() {
        step(what, it, seen, accounts as usize / 3)?;
    }
    if drop_it {
        drop(txn);
    } else {
        txn.commit().map_err(err("commit"))?;
    }
    meanwhile();
    for (what, it, seen) in iters.iter_mut() {
        step(what, it, seen, usize::MAX)?;
        let total: i64 = seen.map.values().sum();
        if seen.dup.is_some() || seen.map.len() != accounts as usize || total != accounts * START {
            let missing: Vec<i64> = (0..accounts)
                .filter(|i| !seen.map.contains_key(i))
                .take(10)
                .collect();
            return Err(format!(
                "{what} read on after its transaction ended: {} accounts, total {total}, \
                 missing {missing:?}, {:?}",
                seen.map.len(),
                seen.dup
            ));
        }
    }
    Ok(())
}

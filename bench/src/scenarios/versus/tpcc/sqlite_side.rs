//! TPC-C on SQLite (built with `--features sqlite`): the same nine tables,
//! keys and secondary indexes as the engine's, the same initial
//! population, the five transactions as SQL with the spec's logic, the CH
//! queries as `analytic`'s SQL, and the consistency figures as SQL
//! aggregates, so the driver runs both databases on the same inputs.
//!
//! Connections come from `compare_sqlite::sqlite_side::open` (WAL,
//! `synchronous = FULL`, a page cache of the given size, a busy timeout):
//! one per terminal and per analytic thread. Statements are prepared once
//! per connection and reused (rusqlite's statement cache, sized for every
//! statement here). Transactions that write begin with `BEGIN IMMEDIATE`
//! (the write lock up front: a deferred transaction that reads and then
//! writes could find another writer in between and fail where waiting
//! would not help); read-only ones (Order-Status, Stock-Level, the CH
//! queries, the checks) with `BEGIN`. A busy or locked error that outlasts
//! the busy timeout rolls the attempt back and runs it again, up to
//! `TERMINAL_ATTEMPTS` runs, and is counted as a retry, as the engine's
//! conflicts are.
//!
//! Types: `I64` and `Timestamp` columns are INTEGER (microseconds since
//! the epoch), `F64` REAL, `Text` TEXT.

use std::path::{Path, PathBuf};

use engine::{ColumnType, Value};
use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, ErrorCode, OptionalExtension, params};

use super::analytic::{Analyst, Answer, Q1Row, Q12Row, Query, Window};
use super::backend::{Backend, LastOrder, OrderStatusLine, OrderStatusResult, Outcome, Terminal};
use super::checks::{DistrictState, WarehouseState};
use super::engine_side::{TERMINAL_ATTEMPTS, now_micros};
use super::schema::{self, HISTORY, ITEM, NEW_ORDER, ORDER_LINE, ORDERS};
use super::spec::{
    CustomerSelector, DeliveryInput, NewOrderInput, OrderStatusInput, PaymentInput, Scale,
    StockLevelInput,
};
use crate::error::{BenchError, Result};
use crate::scenarios::versus::compare_sqlite::sqlite_side::{open, remove};

/// Statements each connection keeps prepared (the terminals use about 40).
const STATEMENT_CACHE: usize = 64;

/// SQLite holding the TPC-C tables in one database file.
#[derive(Debug)]
pub struct SqliteBackend {
    path: PathBuf,
    cache_kib: i64,
}

impl SqliteBackend {
    /// The database at `path` (created by [`load`](Backend::load)), each
    /// connection with a page cache of `cache_kib` KiB.
    pub fn new(path: &Path, cache_kib: i64) -> SqliteBackend {
        SqliteBackend {
            path: path.to_path_buf(),
            cache_kib,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn connect(&self) -> Result<Connection> {
        let c = open(&self.path, self.cache_kib)?;
        c.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        Ok(c)
    }
}

fn sql_type(ty: ColumnType) -> Result<&'static str> {
    Ok(match ty {
        ColumnType::I64 | ColumnType::Timestamp => "INTEGER",
        ColumnType::F64 => "REAL",
        ColumnType::Text => "TEXT",
        other => {
            return Err(BenchError::Config(format!(
                "TPC-C on SQLite: no column type for {other:?}"
            )));
        }
    })
}

fn sql_value(v: Value) -> Result<SqlValue> {
    Ok(match v {
        Value::Null => SqlValue::Null,
        Value::I64(i) | Value::Timestamp(i) => SqlValue::Integer(i),
        Value::F64(f) => SqlValue::Real(f),
        Value::Text(s) => SqlValue::Text(s),
        other => {
            return Err(BenchError::Data(format!(
                "TPC-C on SQLite: no SQL value for {other:?}"
            )));
        }
    })
}

/// An attempt's error: SQLite's (a busy or locked one is retried) or the
/// benchmark's.
enum TxError {
    Sql(rusqlite::Error),
    Bench(BenchError),
}

impl From<rusqlite::Error> for TxError {
    fn from(e: rusqlite::Error) -> Self {
        TxError::Sql(e)
    }
}

impl From<BenchError> for TxError {
    fn from(e: BenchError) -> Self {
        TxError::Bench(e)
    }
}

impl From<TxError> for BenchError {
    fn from(e: TxError) -> Self {
        match e {
            TxError::Sql(e) => e.into(),
            TxError::Bench(e) => e,
        }
    }
}

impl TxError {
    fn is_busy(&self) -> bool {
        matches!(self, TxError::Sql(rusqlite::Error::SqliteFailure(f, _))
            if matches!(f.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
    }
}

type TxResult<T> = std::result::Result<T, TxError>;

fn missing(what: String) -> TxError {
    TxError::Bench(BenchError::Data(format!(
        "TPC-C on SQLite: {what} is missing"
    )))
}

/// What an attempt asks for at its end.
enum Finish {
    Commit,
    Rollback,
}

/// Run `f` between `begin` and COMMIT (or ROLLBACK), again after a busy or
/// locked error, up to [`TERMINAL_ATTEMPTS`] runs; `retries` counts reruns.
fn transaction(
    c: &Connection,
    begin: &str,
    retries: &mut u64,
    mut f: impl FnMut(&Connection) -> TxResult<Finish>,
) -> Result<Outcome> {
    let mut attempt = 1;
    loop {
        let result = c
            .prepare_cached(begin)
            .and_then(|mut s| s.execute([]))
            .map_err(TxError::from)
            .and_then(|_| f(c))
            .and_then(|finish| {
                let (sql, outcome) = match finish {
                    Finish::Commit => ("COMMIT", Outcome::Committed),
                    Finish::Rollback => ("ROLLBACK", Outcome::RolledBack),
                };
                c.prepare_cached(sql)?.execute([])?;
                Ok(outcome)
            });
        match result {
            Ok(outcome) => return Ok(outcome),
            Err(e) => {
                if !c.is_autocommit() {
                    c.prepare_cached("ROLLBACK")?.execute([])?;
                }
                if e.is_busy() && attempt < TERMINAL_ATTEMPTS {
                    *retries += 1;
                    attempt += 1;
                    continue;
                }
                return Err(e.into());
            }
        }
    }
}

impl Backend for SqliteBackend {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn load(&self, scale: &Scale, progress: &mut dyn FnMut(&str, u64)) -> Result<()> {
        remove(&self.path);
        let c = self.connect()?;
        c.execute_batch("BEGIN")?;
        let tables = schema::tables();
        for t in &tables {
            let mut cols = t
                .columns
                .iter()
                .map(|col| {
                    let null = if col.nullable { "" } else { " NOT NULL" };
                    Ok(format!("{} {}{null}", col.name, sql_type(col.ty)?))
                })
                .collect::<Result<Vec<_>>>()?;
            if !t.primary_key.is_empty() {
                cols.push(format!("PRIMARY KEY ({})", t.primary_key.join(", ")));
            }
            c.execute_batch(&format!("CREATE TABLE {} ({})", t.name, cols.join(", ")))?;
        }
        let now = now_micros();
        for table in schema::TABLES {
            let def = tables
                .iter()
                .find(|t| t.name == table)
                .ok_or_else(|| BenchError::Config(format!("no definition of table {table}")))?;
            let marks = (1..=def.columns.len())
                .map(|i| format!("?{i}"))
                .collect::<Vec<_>>()
                .join(", ");
            let mut ins = c.prepare(&format!("INSERT INTO {table} VALUES ({marks})"))?;
            let rows = schema::population(table, *scale, now)
                .ok_or_else(|| BenchError::Config(format!("no population for table {table}")))?;
            let mut n = 0u64;
            for row in rows {
                let values = row.into_iter().map(sql_value).collect::<Result<Vec<_>>>()?;
                ins.execute(rusqlite::params_from_iter(values))?;
                n += 1;
                if n.is_multiple_of(10_000) {
                    progress(table, n);
                }
            }
            progress(table, n);
        }
        // Built after the rows, by sorting: SQLite's fastest way.
        for ix in schema::indexes() {
            let unique = if ix.unique { "UNIQUE " } else { "" };
            c.execute_batch(&format!(
                "CREATE {unique}INDEX {} ON {} ({})",
                ix.name,
                ix.table,
                ix.columns.join(", ")
            ))?;
        }
        c.execute_batch("COMMIT; ANALYZE; PRAGMA wal_checkpoint(TRUNCATE);")?;
        Ok(())
    }

    fn terminal(&self, scale: &Scale, home: u32) -> Result<Box<dyn Terminal + '_>> {
        if home == 0 || home > scale.warehouses {
            return Err(BenchError::Config(format!(
                "terminal home warehouse {home} is not one of 1..={}",
                scale.warehouses
            )));
        }
        Ok(Box::new(SqliteTerminal {
            c: self.connect()?,
            scale: *scale,
            retries: 0,
        }))
    }

    fn analyst(&self) -> Result<Box<dyn Analyst + '_>> {
        Ok(Box::new(SqliteAnalyst { c: self.connect()? }))
    }

    fn consistency_state(&self, scale: &Scale) -> Result<Vec<WarehouseState>> {
        let c = self.connect()?;
        c.execute_batch("BEGIN")?;
        let state = consistency_state(&c, scale);
        c.execute_batch("COMMIT")?;
        state
    }
}

fn consistency_state(c: &Connection, scale: &Scale) -> Result<Vec<WarehouseState>> {
    let mut out = Vec::new();
    for w in 1..=i64::from(scale.warehouses) {
        let ytd: Option<i64> = c
            .query_row("SELECT w_ytd FROM warehouse WHERE w_id = ?1", [w], |r| {
                r.get(0)
            })
            .optional()?;
        let Some(ytd) = ytd else { continue };
        let mut ws = WarehouseState {
            warehouse: w as u32,
            ytd,
            districts: Vec::new(),
        };
        for d in 1..=i64::from(scale.districts) {
            let row: Option<(i64, i64)> = c
                .query_row(
                    "SELECT d_ytd, d_next_o_id FROM district WHERE d_w_id = ?1 AND d_id = ?2",
                    [w, d],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            let Some((ytd, next_order_id)) = row else {
                continue;
            };
            let (max_order_id, order_line_count_sum) = c.query_row(
                "SELECT max(o_id), coalesce(sum(o_ol_cnt), 0) FROM orders \
                 WHERE o_w_id = ?1 AND o_d_id = ?2",
                [w, d],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            let (max_new_order_id, min_new_order_id, new_orders) = c.query_row(
                "SELECT max(no_o_id), min(no_o_id), count(*) FROM new_order \
                 WHERE no_w_id = ?1 AND no_d_id = ?2",
                [w, d],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )?;
            let order_lines = c.query_row(
                "SELECT count(*) FROM order_line WHERE ol_w_id = ?1 AND ol_d_id = ?2",
                [w, d],
                |r| r.get(0),
            )?;
            ws.districts.push(DistrictState {
                district: d as u32,
                ytd,
                next_order_id,
                max_order_id,
                max_new_order_id,
                min_new_order_id,
                new_orders,
                order_line_count_sum,
                order_lines,
            });
        }
        out.push(ws);
    }
    Ok(out)
}

/// SQLite's analytic client: each query in a `BEGIN` .. `COMMIT` of its
/// own, the SQL of [`Query::sql`] prepared once.
struct SqliteAnalyst {
    c: Connection,
}

impl Analyst for SqliteAnalyst {
    fn run(&mut self, query: Query, window: &Window) -> Result<Answer> {
        self.c.prepare_cached("BEGIN")?.execute([])?;
        let answer = run_query(&self.c, query, window);
        self.c.prepare_cached("COMMIT")?.execute([])?;
        answer
    }
}

fn run_query(c: &Connection, query: Query, window: &Window) -> Result<Answer> {
    let mut stmt = c.prepare_cached(query.sql())?;
    // Bind the bounds the statement names (`?1`, `?2`; Q1 only `?1`).
    let bounds = [window.from, window.to];
    let n = stmt.parameter_count().min(2);
    let mut rows = stmt.query(rusqlite::params_from_iter(&bounds[..n]))?;
    let mut ints = Vec::new();
    while let Some(r) = rows.next()? {
        let width = r.as_ref().column_count();
        ints.push(
            (0..width)
                .map(|i| r.get::<_, i64>(i))
                .collect::<rusqlite::Result<Vec<i64>>>()?,
        );
    }
    let bad = |what: &str| {
        BenchError::Data(format!(
            "SQLite: {} returned {what}: {ints:?}",
            query.name()
        ))
    };
    Ok(match query {
        Query::Q1 => Answer::Q1(
            ints.iter()
                .map(|v| Q1Row {
                    number: v[0],
                    sum_quantity: v[1],
                    sum_amount: v[2],
                    count: v[3],
                })
                .collect(),
        ),
        Query::Q4 => Answer::Q4(ints.iter().map(|v| (v[0], v[1])).collect()),
        Query::Q6 => match ints.as_slice() {
            [v] => Answer::Q6 {
                revenue: v[0],
                lines: v[1],
            },
            _ => return Err(bad("not one row")),
        },
        Query::Q12 => Answer::Q12(
            ints.iter()
                .map(|v| Q12Row {
                    ol_cnt: v[0],
                    high: v[1],
                    low: v[2],
                })
                .collect(),
        ),
    })
}

struct SqliteTerminal {
    c: Connection,
    scale: Scale,
    retries: u64,
}

/// The customer a selector names in (w, d): its id. By last name, the one
/// at position ceil(n / 2) of those with the name sorted by first name
/// (clause 2.5.2.2).
fn find_customer(c: &Connection, w: i64, d: i64, who: &CustomerSelector) -> TxResult<i64> {
    match who {
        CustomerSelector::Id(id) => Ok(i64::from(*id)),
        CustomerSelector::LastName(name) => {
            let mut stmt = c.prepare_cached(
                "SELECT c_id FROM customer WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_last = ?3 \
                 ORDER BY c_first, c_id",
            )?;
            let ids = stmt
                .query_map(params![w, d, name], |r| r.get::<_, i64>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            if ids.is_empty() {
                return Err(missing(format!(
                    "a customer named {name} in warehouse {w} district {d}"
                )));
            }
            Ok(ids[ids.len().div_ceil(2) - 1])
        }
    }
}

impl Terminal for SqliteTerminal {
    fn new_order(&mut self, input: &NewOrderInput) -> Result<Outcome> {
        let now = now_micros();
        let scale = self.scale;
        let (w, d, cu) = (
            i64::from(input.warehouse),
            i64::from(input.district),
            i64::from(input.customer),
        );
        let dist_sql = format!(
            "SELECT s_quantity, s_ytd, s_order_cnt, s_remote_cnt, {} FROM stock \
             WHERE s_w_id = ?1 AND s_i_id = ?2",
            schema::dist_column(input.district)
        );
        transaction(&self.c, "BEGIN IMMEDIATE", &mut self.retries, |c| {
            let w_tax: f64 = c
                .prepare_cached("SELECT w_tax FROM warehouse WHERE w_id = ?1")?
                .query_row([w], |r| r.get(0))
                .optional()?
                .ok_or_else(|| missing(format!("warehouse {w}")))?;
            let (d_tax, o): (f64, i64) = c
                .prepare_cached(
                    "SELECT d_tax, d_next_o_id FROM district WHERE d_w_id = ?1 AND d_id = ?2",
                )?
                .query_row([w, d], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?
                .ok_or_else(|| missing(format!("district ({w}, {d})")))?;
            c.prepare_cached(
                "UPDATE district SET d_next_o_id = ?3 WHERE d_w_id = ?1 AND d_id = ?2",
            )?
            .execute([w, d, o + 1])?;
            let discount: f64 = c
                .prepare_cached(
                    "SELECT c_discount FROM customer \
                     WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
                )?
                .query_row([w, d, cu], |r| r.get(0))
                .optional()?
                .ok_or_else(|| missing(format!("customer ({w}, {d}, {cu})")))?;
            c.prepare_cached(&format!(
                "INSERT INTO {ORDERS} VALUES (?1, ?2, ?3, ?4, ?5, NULL, ?6, ?7)"
            ))?
            .execute(params![
                o,
                d,
                w,
                cu,
                now,
                input.lines.len() as i64,
                i64::from(input.all_local())
            ])?;
            c.prepare_cached(&format!("INSERT INTO {NEW_ORDER} VALUES (?1, ?2, ?3)"))?
                .execute([o, d, w])?;
            let mut total: i64 = 0;
            for (n, line) in input.lines.iter().enumerate() {
                let i = i64::from(line.item);
                let price: Option<i64> = c
                    .prepare_cached(&format!("SELECT i_price FROM {ITEM} WHERE i_id = ?1"))?
                    .query_row([i], |r| r.get(0))
                    .optional()?;
                let Some(price) = price else {
                    // The unused item id: the whole order rolls back
                    // (clause 2.4.2.3).
                    if line.item == scale.unused_item() {
                        return Ok(Finish::Rollback);
                    }
                    return Err(missing(format!("item {i}")));
                };
                let sw = i64::from(line.supply_warehouse);
                let (s_q, ytd, cnt, remote, dist_info): (i64, i64, i64, i64, String) = c
                    .prepare_cached(&dist_sql)?
                    .query_row([sw, i], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                    })
                    .optional()?
                    .ok_or_else(|| missing(format!("stock ({sw}, {i})")))?;
                let q = i64::from(line.quantity);
                let new_q = if s_q >= q + 10 { s_q - q } else { s_q - q + 91 };
                c.prepare_cached(
                    "UPDATE stock SET s_quantity = ?3, s_ytd = ?4, s_order_cnt = ?5, \
                     s_remote_cnt = ?6 WHERE s_w_id = ?1 AND s_i_id = ?2",
                )?
                .execute([
                    sw,
                    i,
                    new_q,
                    ytd + q,
                    cnt + 1,
                    remote + i64::from(sw != w),
                ])?;
                let amount = q * price;
                total += amount;
                c.prepare_cached(&format!(
                    "INSERT INTO {ORDER_LINE} VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL, ?7, ?8, ?9)"
                ))?
                .execute(params![
                    o,
                    d,
                    w,
                    n as i64 + 1,
                    i,
                    sw,
                    q,
                    amount,
                    dist_info
                ])?;
            }
            // The total the terminal would display (clause 2.4.2.2).
            let shown = total as f64 * (1.0 - discount) * (1.0 + w_tax + d_tax);
            std::hint::black_box(shown);
            Ok(Finish::Commit)
        })
    }

    fn payment(&mut self, input: &PaymentInput) -> Result<Outcome> {
        let now = now_micros();
        let (w, d) = (i64::from(input.warehouse), i64::from(input.district));
        let (cw, cd) = (
            i64::from(input.customer_warehouse),
            i64::from(input.customer_district),
        );
        let amount = input.amount;
        transaction(&self.c, "BEGIN IMMEDIATE", &mut self.retries, |c| {
            let w_name: String = c
                .prepare_cached("SELECT w_name FROM warehouse WHERE w_id = ?1")?
                .query_row([w], |r| r.get(0))
                .optional()?
                .ok_or_else(|| missing(format!("warehouse {w}")))?;
            c.prepare_cached("UPDATE warehouse SET w_ytd = w_ytd + ?2 WHERE w_id = ?1")?
                .execute([w, amount])?;
            let d_name: String = c
                .prepare_cached("SELECT d_name FROM district WHERE d_w_id = ?1 AND d_id = ?2")?
                .query_row([w, d], |r| r.get(0))
                .optional()?
                .ok_or_else(|| missing(format!("district ({w}, {d})")))?;
            c.prepare_cached(
                "UPDATE district SET d_ytd = d_ytd + ?3 WHERE d_w_id = ?1 AND d_id = ?2",
            )?
            .execute([w, d, amount])?;
            let cu = find_customer(c, cw, cd, &input.customer)?;
            let (credit, data): (String, String) = c
                .prepare_cached(
                    "SELECT c_credit, c_data FROM customer \
                     WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
                )?
                .query_row([cw, cd, cu], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?
                .ok_or_else(|| missing(format!("customer ({cw}, {cd}, {cu})")))?;
            c.prepare_cached(
                "UPDATE customer SET c_balance = c_balance - ?4, \
                 c_ytd_payment = c_ytd_payment + ?4, c_payment_cnt = c_payment_cnt + 1 \
                 WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
            )?
            .execute([cw, cd, cu, amount])?;
            if credit == "BC" {
                // Bad credit: the payment goes in front of C_DATA, which
                // keeps its first 500 characters (clause 2.5.2.2).
                let mut new = format!("{cu} {cd} {cw} {d} {w} {amount} ");
                new.push_str(&data);
                new.truncate(500);
                c.prepare_cached(
                    "UPDATE customer SET c_data = ?4 \
                     WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
                )?
                .execute(params![cw, cd, cu, new])?;
            }
            c.prepare_cached(&format!(
                "INSERT INTO {HISTORY} VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
            ))?
            .execute(params![
                cu,
                cd,
                cw,
                d,
                w,
                now,
                amount,
                format!("{w_name}    {d_name}")
            ])?;
            Ok(Finish::Commit)
        })
    }

    fn order_status(&mut self, input: &OrderStatusInput) -> Result<OrderStatusResult> {
        let (w, d) = (i64::from(input.warehouse), i64::from(input.district));
        let mut result = None;
        transaction(&self.c, "BEGIN", &mut self.retries, |c| {
            let cu = find_customer(c, w, d, &input.customer)?;
            let balance: i64 = c
                .prepare_cached(
                    "SELECT c_balance FROM customer \
                     WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
                )?
                .query_row([w, d, cu], |r| r.get(0))
                .optional()?
                .ok_or_else(|| missing(format!("customer ({w}, {d}, {cu})")))?;
            let mut status = OrderStatusResult {
                customer: cu,
                balance,
                last_order: None,
            };
            let newest: Option<(i64, i64)> = c
                .prepare_cached(
                    "SELECT o_id, o_ol_cnt FROM orders \
                     WHERE o_w_id = ?1 AND o_d_id = ?2 AND o_c_id = ?3 \
                     ORDER BY o_id DESC LIMIT 1",
                )?
                .query_row([w, d, cu], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            if let Some((o, ol_cnt)) = newest {
                let mut stmt = c.prepare_cached(
                    "SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount FROM order_line \
                     WHERE ol_w_id = ?1 AND ol_d_id = ?2 AND ol_o_id = ?3 ORDER BY ol_number",
                )?;
                let mut rows = stmt.query([w, d, o])?;
                let mut lines = Vec::new();
                while let Some(r) = rows.next()? {
                    lines.push(OrderStatusLine {
                        item: r.get(0)?,
                        supply_warehouse: r.get(1)?,
                        quantity: r.get(2)?,
                        amount: r.get(3)?,
                    });
                }
                let n = lines.len() as i64;
                if n != ol_cnt {
                    return Err(TxError::Bench(BenchError::Data(format!(
                        "TPC-C on SQLite: order ({w}, {d}, {o}) has {n} lines, \
                         O_OL_CNT says {ol_cnt}"
                    ))));
                }
                status.last_order = Some(LastOrder { id: o, lines });
            }
            result = Some(status);
            Ok(Finish::Commit)
        })?;
        result.ok_or_else(|| {
            BenchError::Data("TPC-C on SQLite: Order-Status committed without a result".into())
        })
    }

    fn delivery(&mut self, input: &DeliveryInput) -> Result<Outcome> {
        let now = now_micros();
        let districts = i64::from(self.scale.districts);
        let w = i64::from(input.warehouse);
        let carrier = i64::from(input.carrier);
        transaction(&self.c, "BEGIN IMMEDIATE", &mut self.retries, |c| {
            for d in 1..=districts {
                let oldest: Option<i64> = c
                    .prepare_cached(
                        "SELECT min(no_o_id) FROM new_order WHERE no_w_id = ?1 AND no_d_id = ?2",
                    )?
                    .query_row([w, d], |r| r.get(0))?;
                // No undelivered order in this district: skipped (clause
                // 2.7.4.2).
                let Some(o) = oldest else { continue };
                c.prepare_cached(
                    "DELETE FROM new_order WHERE no_w_id = ?1 AND no_d_id = ?2 AND no_o_id = ?3",
                )?
                .execute([w, d, o])?;
                let cu: i64 = c
                    .prepare_cached(
                        "SELECT o_c_id FROM orders WHERE o_w_id = ?1 AND o_d_id = ?2 AND o_id = ?3",
                    )?
                    .query_row([w, d, o], |r| r.get(0))
                    .optional()?
                    .ok_or_else(|| missing(format!("order ({w}, {d}, {o})")))?;
                c.prepare_cached(
                    "UPDATE orders SET o_carrier_id = ?4 \
                     WHERE o_w_id = ?1 AND o_d_id = ?2 AND o_id = ?3",
                )?
                .execute([w, d, o, carrier])?;
                c.prepare_cached(
                    "UPDATE order_line SET ol_delivery_d = ?4 \
                     WHERE ol_w_id = ?1 AND ol_d_id = ?2 AND ol_o_id = ?3",
                )?
                .execute([w, d, o, now])?;
                let sum: i64 = c
                    .prepare_cached(
                        "SELECT coalesce(sum(ol_amount), 0) FROM order_line \
                         WHERE ol_w_id = ?1 AND ol_d_id = ?2 AND ol_o_id = ?3",
                    )?
                    .query_row([w, d, o], |r| r.get(0))?;
                let changed = c
                    .prepare_cached(
                        "UPDATE customer SET c_balance = c_balance + ?4, \
                         c_delivery_cnt = c_delivery_cnt + 1 \
                         WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
                    )?
                    .execute([w, d, cu, sum])?;
                if changed != 1 {
                    return Err(missing(format!("customer ({w}, {d}, {cu})")));
                }
            }
            Ok(Finish::Commit)
        })
    }

    fn stock_level(&mut self, input: &StockLevelInput) -> Result<u32> {
        let (w, d) = (i64::from(input.warehouse), i64::from(input.district));
        let threshold = i64::from(input.threshold);
        let mut result = None;
        transaction(&self.c, "BEGIN", &mut self.retries, |c| {
            let next: i64 = c
                .prepare_cached("SELECT d_next_o_id FROM district WHERE d_w_id = ?1 AND d_id = ?2")?
                .query_row([w, d], |r| r.get(0))
                .optional()?
                .ok_or_else(|| missing(format!("district ({w}, {d})")))?;
            // The items of the district's last 20 orders (clause 2.8.2.2).
            let low: i64 = c
                .prepare_cached(
                    "SELECT count(DISTINCT s_i_id) FROM order_line, stock \
                     WHERE ol_w_id = ?1 AND ol_d_id = ?2 AND ol_o_id < ?3 AND ol_o_id >= ?4 \
                     AND s_w_id = ?1 AND s_i_id = ol_i_id AND s_quantity < ?5",
                )?
                .query_row([w, d, next, (next - 20).max(1), threshold], |r| r.get(0))?;
            result = Some(low);
            Ok(Finish::Commit)
        })?;
        let low = result.ok_or_else(|| {
            BenchError::Data("TPC-C on SQLite: Stock-Level committed without a result".into())
        })?;
        u32::try_from(low)
            .map_err(|_| BenchError::Data(format!("TPC-C on SQLite: Stock-Level counted {low}")))
    }

    fn take_retries(&mut self) -> u64 {
        std::mem::take(&mut self.retries)
    }
}

/// The settings every connection has, for the report.
pub const SETTINGS: &str = "journal_mode=WAL, synchronous=FULL, prepared statements, \
                            one connection per terminal, BEGIN IMMEDIATE for writers";

/// The bundled SQLite's version.
pub fn version() -> String {
    crate::scenarios::versus::compare_sqlite::sqlite_side::version()
}

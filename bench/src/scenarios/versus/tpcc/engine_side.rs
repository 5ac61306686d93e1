//! TPC-C on the engine: the schema as tables with composite primary keys
//! and two secondary indexes, the initial population by `bulk_load`, and
//! the five transactions as the spec's clauses 2.4 to 2.8 describe them,
//! each in one engine transaction.
//!
//! Each transaction runs in the engine's retrying transaction
//! (`Database::transaction_or_rollback`, `read_transaction_or_rollback`):
//! conflicts (the engine's first-updater-wins `WriteConflict`, a running
//! holder's `UniqueConflict`) roll the attempt back and run it again after
//! the engine's jittered backoff (`Options::transaction_backoff`), and
//! New-Order's rollback on an unused item id is a `Decision::Rollback`, an
//! outcome rather than an error. The database must allow at least
//! [`TERMINAL_ATTEMPTS`] runs (`Options::transaction_attempts`, checked
//! when a terminal is made) rather than the engine's default 10: with no
//! lock waits, a terminal's only way past a hot district or warehouse row
//! is to run again, and a run that gave up would be an error of the
//! benchmark. Reruns (runs of the closure beyond the first) are counted
//! per terminal.

use std::fmt;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use engine::{Database, Decision, KeyRange, OwnedRow, RowId, TableOptions, Transaction, Value};

use super::analytic::{Analyst, EngineAnalyst};
use super::backend::{Backend, LastOrder, OrderStatusLine, OrderStatusResult, Outcome, Terminal};
use super::checks::{DistrictState, WarehouseState};
use super::schema::{
    self, CUSTOMER, CUSTOMER_BY_NAME, DISTRICT, HISTORY, ITEM, NEW_ORDER, ORDER_LINE,
    ORDER_LINE_PKEY, ORDERS, ORDERS_BY_CUSTOMER, ORDERS_PKEY, STOCK, WAREHOUSE,
};
use super::spec::{
    CustomerSelector, DeliveryInput, NewOrderInput, OrderStatusInput, PaymentInput, Scale,
    StockLevelInput,
};
use crate::error::{BenchError, Result};

/// Runs of one transaction before a conflict is an error: the least
/// `Options::transaction_attempts` a database needs for terminals.
pub const TERMINAL_ATTEMPTS: u32 = 1_000;

const NEW_ORDER_PKEY: &str = "new_order_pkey";

/// A deliberate fault for tests of the checks.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum DeliveryFault {
    /// In this district, Delivery skips the oldest undelivered order and
    /// delivers the next one: a hole in the district's NEW-ORDER ids, which
    /// consistency condition 3 must notice.
    SkipOldestIn(u32),
}

/// Told `(warehouse, district, order id)` of each New-Order after its
/// commit returned: the crash check's child prints these, and the parent
/// checks that every acknowledged order survived recovery.
#[derive(Clone)]
pub struct NewOrderAck(pub Arc<dyn Fn(u32, u32, i64) + Send + Sync>);

impl fmt::Debug for NewOrderAck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NewOrderAck")
    }
}

/// The engine holding the TPC-C tables.
#[derive(Debug)]
pub struct EngineBackend {
    db: Database,
    fault: Option<DeliveryFault>,
    ack: Option<NewOrderAck>,
}

impl EngineBackend {
    pub fn new(db: Database) -> EngineBackend {
        EngineBackend {
            db,
            fault: None,
            ack: None,
        }
    }

    /// This backend telling `ack` of every committed New-Order.
    pub fn with_new_order_ack(mut self, ack: NewOrderAck) -> EngineBackend {
        self.ack = Some(ack);
        self
    }

    /// This backend with a broken Delivery (for the checks' tests).
    pub fn with_fault(mut self, fault: DeliveryFault) -> EngineBackend {
        self.fault = Some(fault);
        self
    }

    pub fn database(&self) -> &Database {
        &self.db
    }
}

/// Microseconds since the epoch, for the date columns.
pub fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

impl Backend for EngineBackend {
    fn name(&self) -> &'static str {
        "engine"
    }

    fn load(&self, scale: &Scale, progress: &mut dyn FnMut(&str, u64)) -> Result<()> {
        for t in schema::tables() {
            let options = if t.primary_key.is_empty() {
                TableOptions::default()
            } else {
                TableOptions::default().primary_key(t.primary_key)
            };
            self.db.create_table_with(t.name, t.columns, options)?;
        }
        // Before the load, so `bulk_load` builds them bottom-up too.
        for ix in schema::indexes() {
            self.db
                .create_index_on(ix.name, ix.table, ix.columns, ix.unique)?;
        }
        let now = now_micros();
        for table in schema::TABLES {
            let rows = schema::population(table, *scale, now)
                .ok_or_else(|| BenchError::Config(format!("no population for table {table}")))?;
            let done = self
                .db
                .bulk_load(table, rows, |p| progress(table, p.rows))?;
            progress(table, done.rows);
        }
        Ok(())
    }

    fn terminal(&self, scale: &Scale, home: u32) -> Result<Box<dyn Terminal + '_>> {
        if home == 0 || home > scale.warehouses {
            return Err(BenchError::Config(format!(
                "terminal home warehouse {home} is not one of 1..={}",
                scale.warehouses
            )));
        }
        let attempts = self.db.options().transaction_attempts;
        if attempts < TERMINAL_ATTEMPTS {
            return Err(BenchError::Config(format!(
                "TPC-C terminals need a database opened with transaction_attempts >= \
                 {TERMINAL_ATTEMPTS} (this one allows {attempts}): with no lock waits a hot \
                 row is only passed by running again"
            )));
        }
        Ok(Box::new(EngineTerminal {
            db: &self.db,
            scale: *scale,
            fault: self.fault,
            ack: self.ack.clone(),
            retries: 0,
        }))
    }

    fn analyst(&self) -> Result<Box<dyn Analyst + '_>> {
        Ok(Box::new(EngineAnalyst::new(&self.db)))
    }

    fn consistency_state(&self, scale: &Scale) -> Result<Vec<WarehouseState>> {
        let txn = self.db.read()?;
        let mut out = Vec::new();
        for w in 1..=scale.warehouses {
            let wi = i64::from(w);
            let Some((_, wrow)) = txn.get_by_primary_key(WAREHOUSE, wi)? else {
                continue;
            };
            let mut ws = WarehouseState {
                warehouse: w,
                ytd: wrow.i64("w_ytd")?,
                districts: Vec::new(),
            };
            for d in 1..=scale.districts {
                let di = i64::from(d);
                let Some((_, drow)) = txn.get_by_primary_key(DISTRICT, (wi, di))? else {
                    continue;
                };
                let mut ds = DistrictState {
                    district: d,
                    ytd: drow.i64("d_ytd")?,
                    next_order_id: drow.i64("d_next_o_id")?,
                    ..DistrictState::default()
                };
                txn.range_each(ORDERS_PKEY, KeyRange::prefix((wi, di)), |r| {
                    let o = r.i64("o_id")?;
                    ds.max_order_id = Some(ds.max_order_id.map_or(o, |m| m.max(o)));
                    ds.order_line_count_sum += r.i64("o_ol_cnt")?;
                    Ok(())
                })?;
                txn.range_each(NEW_ORDER_PKEY, KeyRange::prefix((wi, di)), |r| {
                    let o = r.i64("no_o_id")?;
                    ds.max_new_order_id = Some(ds.max_new_order_id.map_or(o, |m| m.max(o)));
                    ds.min_new_order_id = Some(ds.min_new_order_id.map_or(o, |m| m.min(o)));
                    ds.new_orders += 1;
                    Ok(())
                })?;
                ds.order_lines =
                    txn.range_each(ORDER_LINE_PKEY, KeyRange::prefix((wi, di)), |_| Ok(()))? as i64;
                ws.districts.push(ds);
            }
            out.push(ws);
        }
        txn.commit()?;
        Ok(out)
    }
}

struct EngineTerminal<'a> {
    db: &'a Database,
    scale: Scale,
    fault: Option<DeliveryFault>,
    ack: Option<NewOrderAck>,
    retries: u64,
}

/// Set column `name` of `row`'s values.
fn set(values: &mut [Value], row: &OwnedRow, name: &str, v: Value) -> Result<()> {
    values[row.table().column_index(name)?] = v;
    Ok(())
}

fn missing(what: String) -> BenchError {
    BenchError::Data(format!("TPC-C: {what} is missing"))
}

impl EngineTerminal<'_> {
    /// Run `f` in the engine's retrying transaction until it commits, rolls
    /// back on purpose, or fails with an error that is not a conflict (or
    /// conflicts on its last allowed run). Runs beyond the first are
    /// counted in `retries`.
    fn run<T>(
        &mut self,
        read_only: bool,
        mut f: impl FnMut(&Transaction, &Scale) -> Result<Decision<T>>,
    ) -> Result<(T, Outcome)> {
        let scale = self.scale;
        let mut runs = 0u64;
        let attempt = |txn: &Transaction| {
            runs += 1;
            f(txn, &scale)
        };
        let r = if read_only {
            self.db.read_transaction_or_rollback(attempt)
        } else {
            self.db.transaction_or_rollback(attempt)
        };
        self.retries += runs.saturating_sub(1);
        Ok(match r? {
            Decision::Commit(v) => (v, Outcome::Committed),
            Decision::Rollback(v) => (v, Outcome::RolledBack),
        })
    }
}

/// The customer a selector names in (w, d): by id, or the one at position
/// ceil(n / 2) of the n customers with the last name sorted by first name
/// (clause 2.5.2.2).
fn find_customer(
    txn: &Transaction,
    w: i64,
    d: i64,
    who: &CustomerSelector,
) -> Result<(RowId, OwnedRow)> {
    match who {
        CustomerSelector::Id(c) => txn
            .get_by_primary_key(CUSTOMER, (w, d, i64::from(*c)))?
            .ok_or_else(|| missing(format!("customer ({w}, {d}, {c})"))),
        CustomerSelector::LastName(name) => {
            let mut all = txn
                .range(CUSTOMER_BY_NAME, KeyRange::prefix((w, d, name.clone())))?
                .collect::<engine::Result<Vec<_>>>()?;
            if all.is_empty() {
                return Err(missing(format!(
                    "a customer named {name} in warehouse {w} district {d}"
                )));
            }
            let at = all.len().div_ceil(2) - 1;
            Ok(all.swap_remove(at))
        }
    }
}

impl Terminal for EngineTerminal<'_> {
    fn new_order(&mut self, input: &NewOrderInput) -> Result<Outcome> {
        let now = now_micros();
        let all_local = i64::from(input.all_local());
        let (o, outcome) = self.run(false, |txn, scale| {
            let (w, d, c) = (
                i64::from(input.warehouse),
                i64::from(input.district),
                i64::from(input.customer),
            );
            let (_, wrow) = txn
                .get_by_primary_key(WAREHOUSE, w)?
                .ok_or_else(|| missing(format!("warehouse {w}")))?;
            let w_tax = wrow.f64("w_tax")?;
            let (did, drow) = txn
                .get_by_primary_key(DISTRICT, (w, d))?
                .ok_or_else(|| missing(format!("district ({w}, {d})")))?;
            let d_tax = drow.f64("d_tax")?;
            let o = drow.i64("d_next_o_id")?;
            let mut dv = drow.values().to_vec();
            set(&mut dv, &drow, "d_next_o_id", Value::I64(o + 1))?;
            txn.update(DISTRICT, did, dv)?;
            let (_, crow) = txn
                .get_by_primary_key(CUSTOMER, (w, d, c))?
                .ok_or_else(|| missing(format!("customer ({w}, {d}, {c})")))?;
            let discount = crow.f64("c_discount")?;
            txn.insert(
                ORDERS,
                vec![
                    Value::I64(o),
                    Value::I64(d),
                    Value::I64(w),
                    Value::I64(c),
                    Value::Timestamp(now),
                    Value::Null,
                    Value::I64(input.lines.len() as i64),
                    Value::I64(all_local),
                ],
            )?;
            txn.insert(NEW_ORDER, vec![Value::I64(o), Value::I64(d), Value::I64(w)])?;
            let dist = schema::dist_column(input.district);
            let mut total: i64 = 0;
            for (n, line) in input.lines.iter().enumerate() {
                let i = i64::from(line.item);
                let Some((_, item)) = txn.get_by_primary_key(ITEM, i)? else {
                    // The unused item id: the whole order rolls back
                    // (clause 2.4.2.3).
                    if line.item == scale.unused_item() {
                        return Ok(Decision::Rollback(o));
                    }
                    return Err(missing(format!("item {i}")));
                };
                let price = item.i64("i_price")?;
                let sw = i64::from(line.supply_warehouse);
                let (sid, srow) = txn
                    .get_by_primary_key(STOCK, (sw, i))?
                    .ok_or_else(|| missing(format!("stock ({sw}, {i})")))?;
                let q = i64::from(line.quantity);
                let s_q = srow.i64("s_quantity")?;
                let new_q = if s_q >= q + 10 { s_q - q } else { s_q - q + 91 };
                let dist_info = srow.text(dist.as_str())?.to_string();
                let mut sv = srow.values().to_vec();
                set(&mut sv, &srow, "s_quantity", Value::I64(new_q))?;
                set(&mut sv, &srow, "s_ytd", Value::I64(srow.i64("s_ytd")? + q))?;
                set(
                    &mut sv,
                    &srow,
                    "s_order_cnt",
                    Value::I64(srow.i64("s_order_cnt")? + 1),
                )?;
                if sw != w {
                    set(
                        &mut sv,
                        &srow,
                        "s_remote_cnt",
                        Value::I64(srow.i64("s_remote_cnt")? + 1),
                    )?;
                }
                txn.update(STOCK, sid, sv)?;
                let amount = q * price;
                total += amount;
                txn.insert(
                    ORDER_LINE,
                    vec![
                        Value::I64(o),
                        Value::I64(d),
                        Value::I64(w),
                        Value::I64(n as i64 + 1),
                        Value::I64(i),
                        Value::I64(sw),
                        Value::Null,
                        Value::I64(q),
                        Value::I64(amount),
                        Value::Text(dist_info),
                    ],
                )?;
            }
            // The total the terminal would display (clause 2.4.2.2).
            let shown = total as f64 * (1.0 - discount) * (1.0 + w_tax + d_tax);
            std::hint::black_box(shown);
            Ok(Decision::Commit(o))
        })?;
        if let (Some(ack), Outcome::Committed) = (&self.ack, outcome) {
            (ack.0)(input.warehouse, input.district, o);
        }
        Ok(outcome)
    }

    fn payment(&mut self, input: &PaymentInput) -> Result<Outcome> {
        let now = now_micros();
        let (_, outcome) = self.run(false, |txn, _| {
            let (w, d) = (i64::from(input.warehouse), i64::from(input.district));
            let (cw, cd) = (
                i64::from(input.customer_warehouse),
                i64::from(input.customer_district),
            );
            let amount = input.amount;
            let (wid, wrow) = txn
                .get_by_primary_key(WAREHOUSE, w)?
                .ok_or_else(|| missing(format!("warehouse {w}")))?;
            let w_name = wrow.text("w_name")?.to_string();
            let mut wv = wrow.values().to_vec();
            set(
                &mut wv,
                &wrow,
                "w_ytd",
                Value::I64(wrow.i64("w_ytd")? + amount),
            )?;
            txn.update(WAREHOUSE, wid, wv)?;
            let (did, drow) = txn
                .get_by_primary_key(DISTRICT, (w, d))?
                .ok_or_else(|| missing(format!("district ({w}, {d})")))?;
            let d_name = drow.text("d_name")?.to_string();
            let mut dv = drow.values().to_vec();
            set(
                &mut dv,
                &drow,
                "d_ytd",
                Value::I64(drow.i64("d_ytd")? + amount),
            )?;
            txn.update(DISTRICT, did, dv)?;
            let (cid, crow) = find_customer(txn, cw, cd, &input.customer)?;
            let c = crow.i64("c_id")?;
            let mut cv = crow.values().to_vec();
            set(
                &mut cv,
                &crow,
                "c_balance",
                Value::I64(crow.i64("c_balance")? - amount),
            )?;
            set(
                &mut cv,
                &crow,
                "c_ytd_payment",
                Value::I64(crow.i64("c_ytd_payment")? + amount),
            )?;
            set(
                &mut cv,
                &crow,
                "c_payment_cnt",
                Value::I64(crow.i64("c_payment_cnt")? + 1),
            )?;
            if crow.text("c_credit")? == "BC" {
                // Bad credit: the payment goes in front of C_DATA, which
                // keeps its first 500 characters (clause 2.5.2.2).
                let mut data = format!("{c} {cd} {cw} {d} {w} {amount} ");
                data.push_str(crow.text("c_data")?);
                data.truncate(500);
                set(&mut cv, &crow, "c_data", Value::Text(data))?;
            }
            txn.update(CUSTOMER, cid, cv)?;
            txn.insert(
                HISTORY,
                vec![
                    Value::I64(c),
                    Value::I64(cd),
                    Value::I64(cw),
                    Value::I64(d),
                    Value::I64(w),
                    Value::Timestamp(now),
                    Value::I64(amount),
                    Value::Text(format!("{w_name}    {d_name}")),
                ],
            )?;
            Ok(Decision::Commit(()))
        })?;
        Ok(outcome)
    }

    fn order_status(&mut self, input: &OrderStatusInput) -> Result<OrderStatusResult> {
        let (result, _) = self.run(true, |txn, _| {
            let (w, d) = (i64::from(input.warehouse), i64::from(input.district));
            let (_, crow) = find_customer(txn, w, d, &input.customer)?;
            let c = crow.i64("c_id")?;
            let mut result = OrderStatusResult {
                customer: c,
                balance: crow.i64("c_balance")?,
                last_order: None,
            };
            let newest = txn
                .range(
                    ORDERS_BY_CUSTOMER,
                    KeyRange::prefix((w, d, c)).desc().limit(1),
                )?
                .next()
                .transpose()?;
            if let Some((_, order)) = newest {
                let o = order.i64("o_id")?;
                let mut lines = Vec::new();
                txn.range_each(ORDER_LINE_PKEY, KeyRange::prefix((w, d, o)), |l| {
                    lines.push(OrderStatusLine {
                        item: l.i64("ol_i_id")?,
                        supply_warehouse: l.i64("ol_supply_w_id")?,
                        quantity: l.i64("ol_quantity")?,
                        amount: l.i64("ol_amount")?,
                    });
                    Ok(())
                })?;
                let lines_n = lines.len() as i64;
                if lines_n != order.i64("o_ol_cnt")? {
                    return Err(BenchError::Data(format!(
                        "TPC-C: order ({w}, {d}, {o}) has {lines_n} lines, O_OL_CNT says {}",
                        order.i64("o_ol_cnt")?
                    )));
                }
                result.last_order = Some(LastOrder { id: o, lines });
            }
            Ok(Decision::Commit(result))
        })?;
        Ok(result)
    }

    fn delivery(&mut self, input: &DeliveryInput) -> Result<Outcome> {
        let now = now_micros();
        let fault = self.fault;
        let (_, outcome) = self.run(false, |txn, scale| {
            let w = i64::from(input.warehouse);
            for district in 1..=scale.districts {
                let d = i64::from(district);
                let skip = usize::from(fault == Some(DeliveryFault::SkipOldestIn(district)));
                let oldest = txn
                    .range(NEW_ORDER_PKEY, KeyRange::prefix((w, d)).limit(1 + skip))?
                    .nth(skip)
                    .transpose()?;
                // No undelivered order in this district: skipped (clause
                // 2.7.4.2).
                let Some((noid, norow)) = oldest else {
                    continue;
                };
                let o = norow.i64("no_o_id")?;
                txn.delete(NEW_ORDER, noid)?;
                let (oid, orow) = txn
                    .get_by_primary_key(ORDERS, (w, d, o))?
                    .ok_or_else(|| missing(format!("order ({w}, {d}, {o})")))?;
                let c = orow.i64("o_c_id")?;
                let mut ov = orow.values().to_vec();
                set(
                    &mut ov,
                    &orow,
                    "o_carrier_id",
                    Value::I64(i64::from(input.carrier)),
                )?;
                txn.update(ORDERS, oid, ov)?;
                let lines = txn
                    .range(ORDER_LINE_PKEY, KeyRange::prefix((w, d, o)))?
                    .collect::<engine::Result<Vec<_>>>()?;
                let mut sum = 0;
                for (lid, lrow) in lines {
                    sum += lrow.i64("ol_amount")?;
                    let mut lv = lrow.values().to_vec();
                    set(&mut lv, &lrow, "ol_delivery_d", Value::Timestamp(now))?;
                    txn.update(ORDER_LINE, lid, lv)?;
                }
                let (cid, crow) = txn
                    .get_by_primary_key(CUSTOMER, (w, d, c))?
                    .ok_or_else(|| missing(format!("customer ({w}, {d}, {c})")))?;
                let mut cv = crow.values().to_vec();
                set(
                    &mut cv,
                    &crow,
                    "c_balance",
                    Value::I64(crow.i64("c_balance")? + sum),
                )?;
                set(
                    &mut cv,
                    &crow,
                    "c_delivery_cnt",
                    Value::I64(crow.i64("c_delivery_cnt")? + 1),
                )?;
                txn.update(CUSTOMER, cid, cv)?;
            }
            Ok(Decision::Commit(()))
        })?;
        Ok(outcome)
    }

    fn stock_level(&mut self, input: &StockLevelInput) -> Result<u32> {
        let (low, _) = self.run(true, |txn, _| {
            let (w, d) = (i64::from(input.warehouse), i64::from(input.district));
            let (_, drow) = txn
                .get_by_primary_key(DISTRICT, (w, d))?
                .ok_or_else(|| missing(format!("district ({w}, {d})")))?;
            let next = drow.i64("d_next_o_id")?;
            // The items of the district's last 20 orders (clause 2.8.2.2).
            let mut items = Vec::new();
            txn.range_each(
                ORDER_LINE_PKEY,
                KeyRange::prefix((w, d)).range((next - 20).max(1)..next),
                |l| {
                    items.push(l.i64("ol_i_id")?);
                    Ok(())
                },
            )?;
            items.sort_unstable();
            items.dedup();
            let threshold = i64::from(input.threshold);
            let mut low = 0u32;
            for i in items {
                let (_, s) = txn
                    .get_by_primary_key(STOCK, (w, i))?
                    .ok_or_else(|| missing(format!("stock ({w}, {i})")))?;
                low += u32::from(s.i64("s_quantity")? < threshold);
            }
            Ok(Decision::Commit(low))
        })?;
        Ok(low)
    }

    fn take_retries(&mut self) -> u64 {
        std::mem::take(&mut self.retries)
    }
}

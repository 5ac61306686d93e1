//! The CH-benCHmark's analytic side: four of its queries over the live
//! TPC-C tables, run by analytic threads beside the terminals
//! (`drive_with_analytics`), each in one read-only transaction.
//!
//! | query | computes | engine plan |
//! |-------|----------|-------------|
//! | Q1  | per `ol_number`: sum(ol_quantity), sum(ol_amount), count, of order lines delivered after `from` | scan ORDER-LINE |
//! | Q4  | per `o_ol_cnt`: orders entered in `[from, to)` with at least one line delivered no earlier than the order was entered | scan ORDERS, then each order's lines through `order_line_pkey` |
//! | Q6  | sum(ol_amount) and count of lines delivered in `[from, to)` with a quantity in 1..=100000 | scan ORDER-LINE |
//! | Q12 | per `o_ol_cnt`: order lines delivered before `to`, no earlier than their order's entry, whose order's carrier is 1 or 2 (high) or another (low) | scan ORDER-LINE, then each order through `orders_pkey` |
//!
//! The SQL beside each ([`Q1_SQL`], ...) is CH's query with its literal
//! dates as parameters `?1` (`from`) and `?2` (`to`), and with the sums
//! and counts an average is made of instead of the average (integers
//! compare exactly between databases; an average is their quotient).
//! CH's dates lie before (lower bounds) or after (upper bounds) every date
//! its loader writes; [`Window::everything`] does the same for this data.
//!
//! Answers are plain integers in a fixed order, so two databases' answers
//! on the same data compare with `==`.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use engine::{Database, KeyRange, Transaction};
use serde::Serialize;

use super::schema::{ORDER_LINE, ORDER_LINE_PKEY, ORDERS, ORDERS_PKEY};
use crate::error::Result;
use crate::latency::{Latencies, Summary};

/// The queries, in the order an analytic thread runs them.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Query {
    Q1,
    Q4,
    Q6,
    Q12,
}

impl Query {
    pub const ALL: [Query; 4] = [Query::Q1, Query::Q4, Query::Q6, Query::Q12];

    pub fn name(self) -> &'static str {
        match self {
            Query::Q1 => "q1",
            Query::Q4 => "q4",
            Query::Q6 => "q6",
            Query::Q12 => "q12",
        }
    }

    /// The query as SQL (parameters `?1` = `from`, `?2` = `to`, both in
    /// microseconds since the epoch, the timestamp columns' unit; a query
    /// with one bound names only its own).
    pub fn sql(self) -> &'static str {
        match self {
            Query::Q1 => Q1_SQL,
            Query::Q4 => Q4_SQL,
            Query::Q6 => Q6_SQL,
            Query::Q12 => Q12_SQL,
        }
    }
}

/// CH Q1 (only `?1`: CH's Q1 has only a lower bound).
pub const Q1_SQL: &str = "SELECT ol_number, sum(ol_quantity), sum(ol_amount), count(*) \
     FROM order_line WHERE ol_delivery_d > ?1 \
     GROUP BY ol_number ORDER BY ol_number";
/// CH Q4.
pub const Q4_SQL: &str = "SELECT o_ol_cnt, count(*) FROM orders \
     WHERE o_entry_d >= ?1 AND o_entry_d < ?2 AND EXISTS (SELECT 1 FROM order_line \
       WHERE ol_w_id = o_w_id AND ol_d_id = o_d_id AND ol_o_id = o_id \
       AND ol_delivery_d >= o_entry_d) \
     GROUP BY o_ol_cnt ORDER BY o_ol_cnt";
/// CH Q6 (with the count of lines, so an empty result is told apart).
pub const Q6_SQL: &str = "SELECT coalesce(sum(ol_amount), 0), count(*) FROM order_line \
     WHERE ol_delivery_d >= ?1 AND ol_delivery_d < ?2 \
       AND ol_quantity BETWEEN 1 AND 100000";
/// CH Q12 (only `?2`: CH's Q12 has only an upper bound).
pub const Q12_SQL: &str = "SELECT o_ol_cnt, \
       sum(CASE WHEN o_carrier_id = 1 OR o_carrier_id = 2 THEN 1 ELSE 0 END), \
       sum(CASE WHEN o_carrier_id <> 1 AND o_carrier_id <> 2 THEN 1 ELSE 0 END) \
     FROM orders, order_line \
     WHERE ol_w_id = o_w_id AND ol_d_id = o_d_id AND ol_o_id = o_id \
       AND o_entry_d <= ol_delivery_d AND ol_delivery_d < ?2 \
     GROUP BY o_ol_cnt ORDER BY o_ol_cnt";

/// The dates the queries compare with, in microseconds since the epoch.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Window {
    pub from: i64,
    pub to: i64,
}

impl Window {
    /// From the epoch to the end of time: as CH's literal dates, every
    /// date of the data lies inside, so only the NULL delivery dates of
    /// undelivered lines and the joins' own conditions select.
    pub fn everything() -> Window {
        Window {
            from: 0,
            to: i64::MAX,
        }
    }
}

/// One group of Q1.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Q1Row {
    pub number: i64,
    pub sum_quantity: i64,
    pub sum_amount: i64,
    pub count: i64,
}

/// One group of Q12.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Q12Row {
    pub ol_cnt: i64,
    pub high: i64,
    pub low: i64,
}

/// A query's result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Answer {
    Q1(Vec<Q1Row>),
    /// (o_ol_cnt, orders).
    Q4(Vec<(i64, i64)>),
    Q6 {
        revenue: i64,
        lines: i64,
    },
    Q12(Vec<Q12Row>),
}

impl Answer {
    pub fn query(&self) -> Query {
        match self {
            Answer::Q1(_) => Query::Q1,
            Answer::Q4(_) => Query::Q4,
            Answer::Q6 { .. } => Query::Q6,
            Answer::Q12(_) => Query::Q12,
        }
    }
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Answer::Q1(rows) => {
                for r in rows {
                    write!(
                        f,
                        "[{}: qty {} amount {} n {}]",
                        r.number, r.sum_quantity, r.sum_amount, r.count
                    )?;
                }
                Ok(())
            }
            Answer::Q4(rows) => {
                for (cnt, n) in rows {
                    write!(f, "[{cnt}: {n}]")?;
                }
                Ok(())
            }
            Answer::Q6 { revenue, lines } => write!(f, "revenue {revenue} over {lines} lines"),
            Answer::Q12(rows) => {
                for r in rows {
                    write!(f, "[{}: high {} low {}]", r.ol_cnt, r.high, r.low)?;
                }
                Ok(())
            }
        }
    }
}

/// One analytic client of a database: runs a query in one read-only
/// transaction of its own.
pub trait Analyst: Send {
    fn run(&mut self, query: Query, window: &Window) -> Result<Answer>;
}

/// The engine's analyst: scans and primary-key ranges in `db.read()`
/// transactions.
#[derive(Debug)]
pub struct EngineAnalyst<'a> {
    db: &'a Database,
}

impl<'a> EngineAnalyst<'a> {
    pub fn new(db: &'a Database) -> EngineAnalyst<'a> {
        EngineAnalyst { db }
    }
}

impl Analyst for EngineAnalyst<'_> {
    fn run(&mut self, query: Query, window: &Window) -> Result<Answer> {
        let txn = self.db.read()?;
        let answer = match query {
            Query::Q1 => q1(&txn, window),
            Query::Q4 => q4(&txn, window),
            Query::Q6 => q6(&txn, window),
            Query::Q12 => q12(&txn, window),
        }?;
        txn.commit()?;
        Ok(answer)
    }
}

fn q1(txn: &Transaction, w: &Window) -> Result<Answer> {
    let mut groups: BTreeMap<i64, Q1Row> = BTreeMap::new();
    txn.scan_each(ORDER_LINE, |r| {
        if r.timestamp_opt("ol_delivery_d")?
            .is_some_and(|t| t > w.from)
        {
            let number = r.i64("ol_number")?;
            let g = groups.entry(number).or_insert(Q1Row {
                number,
                sum_quantity: 0,
                sum_amount: 0,
                count: 0,
            });
            g.sum_quantity += r.i64("ol_quantity")?;
            g.sum_amount += r.i64("ol_amount")?;
            g.count += 1;
        }
        Ok(())
    })?;
    Ok(Answer::Q1(groups.into_values().collect()))
}

fn q6(txn: &Transaction, w: &Window) -> Result<Answer> {
    let (mut revenue, mut lines) = (0, 0);
    txn.scan_each(ORDER_LINE, |r| {
        let delivered = r
            .timestamp_opt("ol_delivery_d")?
            .is_some_and(|t| t >= w.from && t < w.to);
        if delivered && (1..=100_000).contains(&r.i64("ol_quantity")?) {
            revenue += r.i64("ol_amount")?;
            lines += 1;
        }
        Ok(())
    })?;
    Ok(Answer::Q6 { revenue, lines })
}

fn q4(txn: &Transaction, w: &Window) -> Result<Answer> {
    // (w, d, o, entry, ol_cnt) of the orders in the window; the callback
    // of a scan must not call back into the database, so the lines are
    // looked up after it.
    let mut orders = Vec::new();
    txn.scan_each(ORDERS, |r| {
        let entry = r.timestamp("o_entry_d")?;
        if entry >= w.from && entry < w.to {
            orders.push((
                r.i64("o_w_id")?,
                r.i64("o_d_id")?,
                r.i64("o_id")?,
                entry,
                r.i64("o_ol_cnt")?,
            ));
        }
        Ok(())
    })?;
    orders.sort_unstable();
    let mut groups: BTreeMap<i64, i64> = BTreeMap::new();
    for (wi, d, o, entry, cnt) in orders {
        let mut found = false;
        txn.range_each(ORDER_LINE_PKEY, KeyRange::prefix((wi, d, o)), |l| {
            found |= l
                .timestamp_opt("ol_delivery_d")?
                .is_some_and(|t| t >= entry);
            Ok(())
        })?;
        if found {
            *groups.entry(cnt).or_default() += 1;
        }
    }
    Ok(Answer::Q4(groups.into_iter().collect()))
}

fn q12(txn: &Transaction, w: &Window) -> Result<Answer> {
    // (w, d, o, delivery) of the lines delivered before `to`, sorted so
    // each order is looked up once, in key order.
    let mut lines = Vec::new();
    txn.scan_each(ORDER_LINE, |r| {
        if let Some(t) = r.timestamp_opt("ol_delivery_d")?
            && t < w.to
        {
            lines.push((r.i64("ol_w_id")?, r.i64("ol_d_id")?, r.i64("ol_o_id")?, t));
        }
        Ok(())
    })?;
    lines.sort_unstable();
    let mut groups: BTreeMap<i64, Q12Row> = BTreeMap::new();
    for order in lines.chunk_by(|a, b| (a.0, a.1, a.2) == (b.0, b.1, b.2)) {
        let (wi, d, o, _) = order[0];
        let mut head = None;
        txn.range_each(ORDERS_PKEY, KeyRange::prefix((wi, d, o)), |r| {
            head = Some((
                r.timestamp("o_entry_d")?,
                r.i64_opt("o_carrier_id")?,
                r.i64("o_ol_cnt")?,
            ));
            Ok(())
        })?;
        // A line without its order joins nothing (SQL's inner join).
        let Some((entry, carrier, cnt)) = head else {
            continue;
        };
        for &(_, _, _, t) in order {
            if entry > t {
                continue;
            }
            let g = groups.entry(cnt).or_insert(Q12Row {
                ol_cnt: cnt,
                high: 0,
                low: 0,
            });
            // A NULL carrier counts in neither sum, as SQL's CASE has it.
            match carrier {
                Some(1 | 2) => g.high += 1,
                Some(_) => g.low += 1,
                None => {}
            }
        }
    }
    Ok(Answer::Q12(groups.into_values().collect()))
}

/// What the analytic threads did.
#[derive(Clone, Debug, Default)]
pub struct AnalyticResult {
    pub threads: usize,
    pub elapsed: Duration,
    /// Queries finished, per query.
    pub counts: BTreeMap<Query, u64>,
    /// Each query's times, keyed by [`Query::name`].
    pub latencies: Latencies,
}

impl AnalyticResult {
    pub fn total(&self) -> u64 {
        self.counts.values().sum()
    }

    /// Queries finished per hour, all four together.
    pub fn queries_per_hour(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs == 0.0 {
            return 0.0;
        }
        self.total() as f64 * 3600.0 / secs
    }

    /// The percentiles of `query`'s times, if it finished at least once.
    pub fn summary(&self, query: Query) -> Option<Summary> {
        self.latencies.get(query.name()).map(|l| l.summary())
    }

    pub(super) fn merge(&mut self, other: AnalyticResult) {
        for (q, n) in other.counts {
            *self.counts.entry(q).or_default() += n;
        }
        self.latencies.merge(&other.latencies);
    }
}

/// One analytic thread: the queries in rotation, starting at `first`,
/// until `stop()` says so after at least one query (so a run with analytic
/// threads always has a figure).
pub(super) fn analytic_loop(
    analyst: &mut dyn Analyst,
    first: usize,
    window: &Window,
    stop: &dyn Fn() -> bool,
) -> Result<AnalyticResult> {
    let mut out = AnalyticResult::default();
    let mut i = first;
    loop {
        if out.total() > 0 && stop() {
            break;
        }
        let query = Query::ALL[i % Query::ALL.len()];
        let t0 = Instant::now();
        let answer = analyst.run(query, window)?;
        out.latencies.record(query.name(), t0.elapsed());
        std::hint::black_box(answer);
        *out.counts.entry(query).or_default() += 1;
        i += 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_query_s_sql_names_the_bounds_its_predicates_use() {
        let uses = |q: Query| (q.sql().contains("?1"), q.sql().contains("?2"));
        assert_eq!(uses(Query::Q1), (true, false));
        assert_eq!(uses(Query::Q4), (true, true));
        assert_eq!(uses(Query::Q6), (true, true));
        assert_eq!(uses(Query::Q12), (false, true));
        let names: Vec<_> = Query::ALL.iter().map(|q| q.name()).collect();
        assert_eq!(names, ["q1", "q4", "q6", "q12"]);
    }

    #[test]
    fn queries_per_hour_counts_every_query_over_the_elapsed_time() {
        let mut r = AnalyticResult {
            elapsed: Duration::from_secs(60),
            ..AnalyticResult::default()
        };
        assert_eq!(r.queries_per_hour(), 0.0);
        r.counts.insert(Query::Q1, 3);
        r.counts.insert(Query::Q6, 2);
        assert_eq!(r.queries_per_hour(), 300.0);
    }
}

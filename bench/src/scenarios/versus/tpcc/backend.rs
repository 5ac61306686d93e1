//! What a database must provide to run TPC-C: a [`Backend`] loads the
//! tables, hands out one [`Terminal`] per client thread and reports the
//! numbers the consistency conditions compare; a terminal runs the five
//! transactions with the spec's logic on the inputs `spec` drew. The
//! engine implements both in `engine_side`; another database (SQLite
//! behind `--features sqlite`) implements the same traits, so both run the
//! same inputs on the same data.

use super::analytic::Analyst;
use super::checks::{CheckReport, WarehouseState};
use super::spec::{
    DeliveryInput, Input, NewOrderInput, OrderStatusInput, PaymentInput, Scale, StockLevelInput,
};
use crate::error::Result;

/// How a transaction ended.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It committed.
    Committed,
    /// It rolled back as the spec asks (New-Order naming an unused item):
    /// a success of the terminal, not an error.
    RolledBack,
}

/// What Order-Status returns (clause 2.6.3.4, the fields this
/// implementation reads): the customer, its balance, and its newest order
/// with that order's lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderStatusResult {
    /// `C_ID` of the customer the selector named.
    pub customer: i64,
    /// `C_BALANCE`, in cents.
    pub balance: i64,
    /// The customer's order with the highest `O_ID`, if it has any.
    pub last_order: Option<LastOrder>,
}

/// A customer's newest order, as Order-Status returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LastOrder {
    /// `O_ID`.
    pub id: i64,
    /// Its lines in `OL_NUMBER` order (as many as `O_OL_CNT` says: checked).
    pub lines: Vec<OrderStatusLine>,
}

/// One line of [`LastOrder`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderStatusLine {
    /// `OL_I_ID`.
    pub item: i64,
    /// `OL_SUPPLY_W_ID`.
    pub supply_warehouse: i64,
    /// `OL_QUANTITY`.
    pub quantity: i64,
    /// `OL_AMOUNT`, in cents.
    pub amount: i64,
}

/// What a finished transaction hands back to the driver: the output of
/// the two read-only transactions, nothing for the three that write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Nothing,
    OrderStatus(OrderStatusResult),
    /// Stock-Level's count of distinct items below the threshold
    /// (clause 2.8.2.2).
    StockLevel {
        low_stock: u32,
    },
}

/// One client of the database, bound to a home warehouse. Errors are
/// failures of the run (a conflict the retries did not get past
/// included); a rollback the spec asks for is [`Outcome::RolledBack`].
pub trait Terminal: Send {
    fn new_order(&mut self, input: &NewOrderInput) -> Result<Outcome>;
    fn payment(&mut self, input: &PaymentInput) -> Result<Outcome>;
    /// Order-Status, read-only: it always commits.
    fn order_status(&mut self, input: &OrderStatusInput) -> Result<OrderStatusResult>;
    fn delivery(&mut self, input: &DeliveryInput) -> Result<Outcome>;
    /// Stock-Level, read-only: the number of distinct items of the
    /// district's last 20 orders whose stock is below the threshold.
    fn stock_level(&mut self, input: &StockLevelInput) -> Result<u32>;

    /// Reruns after retryable conflicts since the last call (so the driver
    /// can count them per transaction type).
    fn take_retries(&mut self) -> u64;

    /// Run whichever transaction `input` is: how it ended and what it
    /// returned.
    fn run(&mut self, input: &Input) -> Result<(Outcome, Reply)> {
        Ok(match input {
            Input::NewOrder(i) => (self.new_order(i)?, Reply::Nothing),
            Input::Payment(i) => (self.payment(i)?, Reply::Nothing),
            Input::OrderStatus(i) => (
                Outcome::Committed,
                Reply::OrderStatus(self.order_status(i)?),
            ),
            Input::Delivery(i) => (self.delivery(i)?, Reply::Nothing),
            Input::StockLevel(i) => (
                Outcome::Committed,
                Reply::StockLevel {
                    low_stock: self.stock_level(i)?,
                },
            ),
        })
    }
}

/// A database holding the TPC-C tables.
pub trait Backend: Sync {
    /// Its name in reports (`engine`, `sqlite`).
    fn name(&self) -> &'static str;

    /// Create the nine tables and their indexes and load the initial
    /// population of `scale` (`schema::population`); `progress(table,
    /// rows)` is told as tables fill.
    fn load(&self, scale: &Scale, progress: &mut dyn FnMut(&str, u64)) -> Result<()>;

    /// A terminal whose home warehouse is `home` (1-based).
    fn terminal(&self, scale: &Scale, home: u32) -> Result<Box<dyn Terminal + '_>>;

    /// An analytic client (the CH queries of `analytic`) with a read-only
    /// view of its own. A database without an analytic side says so.
    fn analyst(&self) -> Result<Box<dyn Analyst + '_>> {
        Err(crate::error::BenchError::Config(format!(
            "{} runs no analytic queries",
            self.name()
        )))
    }

    /// The numbers consistency conditions 1 to 4 compare, per warehouse
    /// and district, read in one snapshot.
    fn consistency_state(&self, scale: &Scale) -> Result<Vec<WarehouseState>>;

    /// Conditions 1 to 4 over [`consistency_state`](Self::consistency_state).
    fn check(&self, scale: &Scale) -> Result<CheckReport> {
        Ok(super::checks::evaluate(
            scale,
            &self.consistency_state(scale)?,
        ))
    }
}

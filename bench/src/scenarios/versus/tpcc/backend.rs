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

/// One client of the database, bound to a home warehouse. Errors are
/// failures of the run (a conflict the retries did not get past
/// included); a rollback the spec asks for is [`Outcome::RolledBack`].
pub trait Terminal: Send {
    fn new_order(&mut self, input: &NewOrderInput) -> Result<Outcome>;
    fn payment(&mut self, input: &PaymentInput) -> Result<Outcome>;
    fn order_status(&mut self, input: &OrderStatusInput) -> Result<Outcome>;
    fn delivery(&mut self, input: &DeliveryInput) -> Result<Outcome>;
    fn stock_level(&mut self, input: &StockLevelInput) -> Result<Outcome>;

    /// Reruns after retryable conflicts since the last call (so the driver
    /// can count them per transaction type).
    fn take_retries(&mut self) -> u64;

    /// Run whichever transaction `input` is.
    fn run(&mut self, input: &Input) -> Result<Outcome> {
        match input {
            Input::NewOrder(i) => self.new_order(i),
            Input::Payment(i) => self.payment(i),
            Input::OrderStatus(i) => self.order_status(i),
            Input::Delivery(i) => self.delivery(i),
            Input::StockLevel(i) => self.stock_level(i),
        }
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

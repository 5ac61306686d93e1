//! What the TPC-C specification (revision 5.11) defines independently of any
//! database: the scale per warehouse, the random functions of its clause
//! 4.3.2 and 2.1.6 (uniform draws, NURand with run-time constants, last
//! names from ten syllables, a-strings and n-strings, zip codes, `ORIGINAL`
//! in 10% of the item and stock data), and each transaction's input drawn
//! as clauses 2.4 to 2.8 say. Every backend runs the same inputs.

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use crate::error::{BenchError, Result};

/// Money is kept in whole cents (`i64`), so the consistency conditions
/// compare sums exactly; rates (tax, discount) are `f64`.
pub type Cents = i64;

/// How much data one run holds: the spec's cardinalities per warehouse, or
/// reduced ones for tests.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Scale {
    /// Warehouses (`W`): the unit of scale.
    pub warehouses: u32,
    /// Rows of ITEM, and of STOCK per warehouse (spec: 100,000).
    pub items: u32,
    /// Districts per warehouse (spec: 10).
    pub districts: u32,
    /// Customers per district (spec: 3,000), also the initial orders per
    /// district (one per customer).
    pub customers: u32,
    /// Of the initial orders per district, the last this many are
    /// undelivered: a NEW-ORDER row, no carrier (spec: 900 of 3,000).
    pub new_orders: u32,
    /// Customers `1..=last_names` of a district get the last names
    /// `0..last_names` in order at load (spec: 1,000, all of them); the
    /// run draws last names in this range, so each names a customer.
    pub last_names: u32,
}

/// The items an order refers to at most, and the lines per order (spec
/// clause 2.4.1.3: 5 to 15).
pub const MIN_ORDER_LINES: u32 = 5;
pub const MAX_ORDER_LINES: u32 = 15;

impl Scale {
    /// The specification's scale for `warehouses` warehouses.
    pub fn standard(warehouses: u32) -> Result<Scale> {
        Scale {
            warehouses,
            items: 100_000,
            districts: 10,
            customers: 3_000,
            new_orders: 900,
            last_names: 1_000,
        }
        .validated()
    }

    /// One warehouse with reduced cardinalities (1,000 items, 2 districts
    /// of 60 customers, 18 undelivered orders each, 30 last names): loads
    /// in a fraction of a second in a debug build, for tests.
    pub fn tiny() -> Scale {
        Scale {
            warehouses: 1,
            items: 1_000,
            districts: 2,
            customers: 60,
            new_orders: 18,
            last_names: 30,
        }
    }

    /// This scale with `warehouses` warehouses.
    pub fn with_warehouses(self, warehouses: u32) -> Result<Scale> {
        Scale { warehouses, ..self }.validated()
    }

    /// The scale if its cardinalities can be run, else an error naming
    /// the one that cannot.
    pub fn validated(self) -> Result<Scale> {
        let bad = |what: &str| Err(BenchError::Config(format!("TPC-C scale: {what}")));
        if self.warehouses == 0 || self.warehouses > 10_000 {
            return bad(&format!(
                "warehouses must be 1 to 10000, not {}",
                self.warehouses
            ));
        }
        if self.districts == 0 || self.districts > 10 {
            return bad(&format!(
                "districts must be 1 to 10, not {}",
                self.districts
            ));
        }
        if self.items < MAX_ORDER_LINES {
            return bad(&format!(
                "items must be at least {MAX_ORDER_LINES}, not {}",
                self.items
            ));
        }
        if self.customers == 0 {
            return bad("customers per district must be at least 1");
        }
        if self.new_orders > self.customers {
            return bad(&format!(
                "undelivered orders per district ({}) exceed the orders ({})",
                self.new_orders, self.customers
            ));
        }
        if self.last_names == 0 || self.last_names > 1_000 || self.last_names > self.customers {
            return bad(&format!(
                "last names must be 1 to min(1000, customers = {}), not {}",
                self.customers, self.last_names
            ));
        }
        Ok(self)
    }

    /// The first initial order id that is still undelivered (spec: 2,101).
    pub fn first_new_order(&self) -> u32 {
        self.customers - self.new_orders + 1
    }

    /// The item id no item has: New-Order's rollback case uses it.
    pub fn unused_item(&self) -> u32 {
        self.items + 1
    }
}

/// The ten syllables last names are made of (clause 4.3.2.3).
pub const SYLLABLES: [&str; 10] = [
    "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
];

/// The last name of number `n` in 0..=999: its three decimal digits each
/// pick a syllable (clause 4.3.2.3: 371 is PRICALLYOUGHT).
pub fn last_name(n: u32) -> String {
    assert!(n < 1000, "last-name number {n} out of 0..=999");
    let mut s = String::with_capacity(15);
    s.push_str(SYLLABLES[(n / 100) as usize]);
    s.push_str(SYLLABLES[(n / 10 % 10) as usize]);
    s.push_str(SYLLABLES[(n % 10) as usize]);
    s
}

/// The NURand constants `C` (clause 2.1.6): one per `A` (255 for C_LAST,
/// 1023 for C_ID, 8191 for OL_I_ID).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct NuConstants {
    pub c_last: u32,
    pub c_id: u32,
    pub ol_i_id: u32,
}

/// The seed the initial population's random draws start from: the same
/// data for every backend and every run.
pub const LOAD_SEED: u64 = 0x7_9cc0;

impl NuConstants {
    /// The constants the load used (drawn from [`LOAD_SEED`]).
    pub fn load() -> NuConstants {
        let mut rng = SmallRng::seed_from_u64(LOAD_SEED ^ 0xc0);
        NuConstants {
            c_last: rng.random_range(0..=255),
            c_id: rng.random_range(0..=1023),
            ol_i_id: rng.random_range(0..=8191),
        }
    }

    /// Run-time constants for a run with `seed`: C_ID and OL_I_ID drawn
    /// anew, C_LAST differing from the load's by a delta in 65..=119 other
    /// than 96 and 112 (clause 2.1.6.1).
    pub fn run(load: &NuConstants, seed: u64) -> NuConstants {
        let mut rng = SmallRng::seed_from_u64(seed ^ 0xc1);
        let c_last = loop {
            let c: u32 = rng.random_range(0..=255);
            if run_c_last_is_valid(load.c_last, c) {
                break c;
            }
        };
        NuConstants {
            c_last,
            c_id: rng.random_range(0..=1023),
            ol_i_id: rng.random_range(0..=8191),
        }
    }
}

/// Whether `run` may be the run-time C_LAST after `load` (clause 2.1.6.1).
pub fn run_c_last_is_valid(load: u32, run: u32) -> bool {
    let delta = load.abs_diff(run);
    (65..=119).contains(&delta) && delta != 96 && delta != 112
}

/// The random draws of the specification over one generator.
#[derive(Debug)]
pub struct SpecRng {
    rng: SmallRng,
    c: NuConstants,
}

const ALPHANUMERIC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

impl SpecRng {
    pub fn new(seed: u64, c: NuConstants) -> SpecRng {
        SpecRng {
            rng: SmallRng::seed_from_u64(seed),
            c,
        }
    }

    pub fn constants(&self) -> NuConstants {
        self.c
    }

    /// A uniform draw in `lo..=hi`.
    pub fn uniform(&mut self, lo: u32, hi: u32) -> u32 {
        self.rng.random_range(lo..=hi)
    }

    /// A uniform draw in `lo..=hi` for signed values (cents).
    pub fn uniform_i64(&mut self, lo: i64, hi: i64) -> i64 {
        self.rng.random_range(lo..=hi)
    }

    /// A uniform rate with four decimals in `lo..=hi` ten-thousandths.
    pub fn rate(&mut self, lo: u32, hi: u32) -> f64 {
        f64::from(self.uniform(lo, hi)) / 10_000.0
    }

    /// Whether a draw of `percent`% came true.
    pub fn percent(&mut self, percent: u32) -> bool {
        self.uniform(1, 100) <= percent
    }

    /// NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y - x +
    /// 1)) + x, with `C` the constant for that `A` (clause 2.1.6).
    pub fn nurand(&mut self, a: u32, x: u32, y: u32) -> u32 {
        let c = match a {
            255 => self.c.c_last,
            1023 => self.c.c_id,
            8191 => self.c.ol_i_id,
            _ => panic!("NURand has no constant for A = {a}"),
        };
        (((self.uniform(0, a) | self.uniform(x, y)) + c) % (y - x + 1)) + x
    }

    /// A customer id drawn as the transactions do: NURand(1023, 1, customers).
    pub fn customer_id(&mut self, scale: &Scale) -> u32 {
        self.nurand(1023, 1, scale.customers)
    }

    /// An item id drawn as New-Order does: NURand(8191, 1, items).
    pub fn item_id(&mut self, scale: &Scale) -> u32 {
        self.nurand(8191, 1, scale.items)
    }

    /// A last name drawn as Payment and Order-Status do: NURand(255, 0,
    /// 999), reduced into the scale's last names (a no-op at the spec's).
    pub fn last_name_number(&mut self, scale: &Scale) -> u32 {
        self.nurand(255, 0, 999) % scale.last_names
    }

    /// An a-string: random alphanumeric characters, length in `lo..=hi`.
    pub fn astring(&mut self, lo: u32, hi: u32) -> String {
        let len = self.uniform(lo, hi);
        (0..len)
            .map(|_| ALPHANUMERIC[self.rng.random_range(0..ALPHANUMERIC.len())] as char)
            .collect()
    }

    /// An n-string: random digits, length in `lo..=hi`.
    pub fn nstring(&mut self, lo: u32, hi: u32) -> String {
        let len = self.uniform(lo, hi);
        (0..len)
            .map(|_| char::from(b'0' + self.rng.random_range(0..10u8)))
            .collect()
    }

    /// A zip code: four random digits and `11111` (clause 4.3.2.7).
    pub fn zip(&mut self) -> String {
        let mut z = self.nstring(4, 4);
        z.push_str("11111");
        z
    }

    /// I_DATA / S_DATA: an a-string of 26 to 50 characters, with
    /// `ORIGINAL` at a random position in 10% of the rows (clause 4.3.3.1).
    pub fn data_with_original(&mut self) -> String {
        let mut s = self.astring(26, 50);
        if self.percent(10) {
            let at = self.uniform(0, s.len() as u32 - 8) as usize;
            s.replace_range(at..at + 8, "ORIGINAL");
        }
        s
    }

    /// A random permutation of `1..=n` (the initial orders' customers).
    pub fn permutation(&mut self, n: u32) -> Vec<u32> {
        use rand::seq::SliceRandom;
        let mut v: Vec<u32> = (1..=n).collect();
        v.shuffle(&mut self.rng);
        v
    }

    /// Another warehouse than `home`, uniformly (`home` itself when there
    /// is only one).
    pub fn other_warehouse(&mut self, scale: &Scale, home: u32) -> u32 {
        if scale.warehouses == 1 {
            return home;
        }
        let w = self.uniform(1, scale.warehouses - 1);
        if w >= home { w + 1 } else { w }
    }
}

/// The five transactions.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TxnKind {
    NewOrder,
    Payment,
    OrderStatus,
    Delivery,
    StockLevel,
}

impl TxnKind {
    pub const ALL: [TxnKind; 5] = [
        TxnKind::NewOrder,
        TxnKind::Payment,
        TxnKind::OrderStatus,
        TxnKind::Delivery,
        TxnKind::StockLevel,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TxnKind::NewOrder => "new-order",
            TxnKind::Payment => "payment",
            TxnKind::OrderStatus => "order-status",
            TxnKind::Delivery => "delivery",
            TxnKind::StockLevel => "stock-level",
        }
    }

    /// Cards per 100 in the standard mix (clause 5.2.3: at least 43%
    /// Payment and 4% each of the last three; New-Order takes the rest).
    pub fn standard_share(self) -> u32 {
        match self {
            TxnKind::NewOrder => 45,
            TxnKind::Payment => 43,
            TxnKind::OrderStatus | TxnKind::Delivery | TxnKind::StockLevel => 4,
        }
    }
}

/// The mix as a deck of 100 cards (45/43/4/4/4), shuffled, dealt one at a
/// time and reshuffled when empty (clause 5.2.4.2's card deck): every 100
/// transactions of a terminal hold exactly the mix.
#[derive(Debug)]
pub struct Deck {
    cards: Vec<TxnKind>,
    next: usize,
}

impl Deck {
    pub fn standard() -> Deck {
        let cards = TxnKind::ALL
            .iter()
            .flat_map(|&k| std::iter::repeat_n(k, k.standard_share() as usize))
            .collect();
        Deck {
            cards,
            next: usize::MAX,
        }
    }

    pub fn deal(&mut self, rng: &mut SpecRng) -> TxnKind {
        if self.next >= self.cards.len() {
            use rand::seq::SliceRandom;
            self.cards.shuffle(&mut rng.rng);
            self.next = 0;
        }
        self.next += 1;
        self.cards[self.next - 1]
    }
}

/// How Payment and Order-Status name their customer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CustomerSelector {
    /// C_ID drawn by NURand(1023, 1, customers).
    Id(u32),
    /// C_LAST: the customer at position ceil(n / 2) of those with the name,
    /// sorted by C_FIRST (clause 2.5.2.2).
    LastName(String),
}

impl CustomerSelector {
    /// By last name in 60% of the draws, else by id (clauses 2.5.1.2, 2.6.1.2).
    pub fn draw(rng: &mut SpecRng, scale: &Scale) -> CustomerSelector {
        if rng.percent(60) {
            CustomerSelector::LastName(last_name(rng.last_name_number(scale)))
        } else {
            CustomerSelector::Id(rng.customer_id(scale))
        }
    }
}

/// One line of a New-Order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderLineInput {
    pub item: u32,
    pub supply_warehouse: u32,
    pub quantity: u32,
}

/// New-Order's input (clause 2.4.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewOrderInput {
    pub warehouse: u32,
    pub district: u32,
    pub customer: u32,
    /// 5 to 15 lines; in 1% of the orders the last names
    /// [`Scale::unused_item`], and the transaction rolls back.
    pub lines: Vec<OrderLineInput>,
}

impl NewOrderInput {
    pub fn draw(rng: &mut SpecRng, scale: &Scale, home: u32) -> NewOrderInput {
        let district = rng.uniform(1, scale.districts);
        let customer = rng.customer_id(scale);
        let count = rng.uniform(MIN_ORDER_LINES, MAX_ORDER_LINES);
        let rollback = rng.percent(1);
        let lines = (0..count)
            .map(|n| {
                let item = if rollback && n == count - 1 {
                    scale.unused_item()
                } else {
                    rng.item_id(scale)
                };
                // 1% of the lines come from a remote warehouse (clause
                // 2.4.1.5), when there is another.
                let supply_warehouse = if rng.percent(1) {
                    rng.other_warehouse(scale, home)
                } else {
                    home
                };
                OrderLineInput {
                    item,
                    supply_warehouse,
                    quantity: rng.uniform(1, 10),
                }
            })
            .collect();
        NewOrderInput {
            warehouse: home,
            district,
            customer,
            lines,
        }
    }

    /// Whether every line is supplied by the home warehouse (O_ALL_LOCAL).
    pub fn all_local(&self) -> bool {
        self.lines
            .iter()
            .all(|l| l.supply_warehouse == self.warehouse)
    }

    /// Whether this order names the unused item (and must roll back).
    pub fn expects_rollback(&self, scale: &Scale) -> bool {
        self.lines.iter().any(|l| l.item == scale.unused_item())
    }
}

/// Payment's input (clause 2.5.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PaymentInput {
    pub warehouse: u32,
    pub district: u32,
    /// The customer's warehouse and district: the home ones in 85% of the
    /// payments, a random other warehouse and district in 15%.
    pub customer_warehouse: u32,
    pub customer_district: u32,
    pub customer: CustomerSelector,
    /// 1.00 to 5,000.00.
    pub amount: Cents,
}

impl PaymentInput {
    pub fn draw(rng: &mut SpecRng, scale: &Scale, home: u32) -> PaymentInput {
        let district = rng.uniform(1, scale.districts);
        let (customer_warehouse, customer_district) = if scale.warehouses > 1 && rng.percent(15) {
            (
                rng.other_warehouse(scale, home),
                rng.uniform(1, scale.districts),
            )
        } else {
            (home, district)
        };
        let customer = CustomerSelector::draw(rng, scale);
        PaymentInput {
            warehouse: home,
            district,
            customer_warehouse,
            customer_district,
            customer,
            amount: rng.uniform_i64(100, 500_000),
        }
    }
}

/// Order-Status's input (clause 2.6.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderStatusInput {
    pub warehouse: u32,
    pub district: u32,
    pub customer: CustomerSelector,
}

impl OrderStatusInput {
    pub fn draw(rng: &mut SpecRng, scale: &Scale, home: u32) -> OrderStatusInput {
        OrderStatusInput {
            warehouse: home,
            district: rng.uniform(1, scale.districts),
            customer: CustomerSelector::draw(rng, scale),
        }
    }
}

/// Delivery's input (clause 2.7.1): every district of the warehouse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeliveryInput {
    pub warehouse: u32,
    /// 1 to 10.
    pub carrier: u32,
}

impl DeliveryInput {
    pub fn draw(rng: &mut SpecRng, _scale: &Scale, home: u32) -> DeliveryInput {
        DeliveryInput {
            warehouse: home,
            carrier: rng.uniform(1, 10),
        }
    }
}

/// Stock-Level's input (clause 2.8.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StockLevelInput {
    pub warehouse: u32,
    pub district: u32,
    /// 10 to 20.
    pub threshold: u32,
}

impl StockLevelInput {
    pub fn draw(rng: &mut SpecRng, scale: &Scale, home: u32) -> StockLevelInput {
        StockLevelInput {
            warehouse: home,
            district: rng.uniform(1, scale.districts),
            threshold: rng.uniform(10, 20),
        }
    }
}

/// One transaction's input, whichever kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    NewOrder(NewOrderInput),
    Payment(PaymentInput),
    OrderStatus(OrderStatusInput),
    Delivery(DeliveryInput),
    StockLevel(StockLevelInput),
}

impl Input {
    pub fn draw(kind: TxnKind, rng: &mut SpecRng, scale: &Scale, home: u32) -> Input {
        match kind {
            TxnKind::NewOrder => Input::NewOrder(NewOrderInput::draw(rng, scale, home)),
            TxnKind::Payment => Input::Payment(PaymentInput::draw(rng, scale, home)),
            TxnKind::OrderStatus => Input::OrderStatus(OrderStatusInput::draw(rng, scale, home)),
            TxnKind::Delivery => Input::Delivery(DeliveryInput::draw(rng, scale, home)),
            TxnKind::StockLevel => Input::StockLevel(StockLevelInput::draw(rng, scale, home)),
        }
    }

    pub fn kind(&self) -> TxnKind {
        match self {
            Input::NewOrder(_) => TxnKind::NewOrder,
            Input::Payment(_) => TxnKind::Payment,
            Input::OrderStatus(_) => TxnKind::OrderStatus,
            Input::Delivery(_) => TxnKind::Delivery,
            Input::StockLevel(_) => TxnKind::StockLevel,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rng(seed: u64) -> SpecRng {
        SpecRng::new(seed, NuConstants::run(&NuConstants::load(), seed))
    }

    #[test]
    fn last_names_are_the_three_syllables_of_the_number_s_digits() {
        assert_eq!(last_name(0), "BARBARBAR");
        assert_eq!(last_name(371), "PRICALLYOUGHT");
        assert_eq!(last_name(999), "EINGEINGEING");
        let names: std::collections::HashSet<String> = (0..1000).map(last_name).collect();
        assert_eq!(names.len(), 1000, "every number has its own name");
    }

    #[test]
    fn nurand_stays_in_its_range_and_is_skewed() {
        let mut r = rng(1);
        let mut counts = vec![0u32; 3001];
        for _ in 0..300_000 {
            let c = r.nurand(1023, 1, 3000);
            assert!((1..=3000).contains(&c), "{c}");
            counts[c as usize] += 1;
        }
        for _ in 0..10_000 {
            let i = r.nurand(8191, 1, 100_000);
            assert!((1..=100_000).contains(&i), "{i}");
            let n = r.nurand(255, 0, 999);
            assert!(n <= 999, "{n}");
        }
        // Non-uniform: the most drawn id is drawn far more than the mean
        // of 100 per id.
        let max = *counts.iter().max().unwrap();
        assert!(max > 300, "most drawn id only {max} times");
    }

    #[test]
    fn run_time_c_last_keeps_the_specified_distance_from_the_load_s() {
        let load = NuConstants::load();
        for seed in 0..200 {
            let run = NuConstants::run(&load, seed);
            assert!(run_c_last_is_valid(load.c_last, run.c_last), "{run:?}");
            assert!(run.c_id <= 1023 && run.ol_i_id <= 8191);
        }
        assert!(!run_c_last_is_valid(10, 106), "96 is excluded");
        assert!(!run_c_last_is_valid(0, 64));
        assert!(run_c_last_is_valid(120, 1));
    }

    #[test]
    fn strings_have_the_drawn_lengths_and_alphabets() {
        let mut r = rng(2);
        for _ in 0..1000 {
            let a = r.astring(8, 16);
            assert!((8..=16).contains(&a.len()) && a.bytes().all(|b| b.is_ascii_alphanumeric()));
            let n = r.nstring(16, 16);
            assert!(n.len() == 16 && n.bytes().all(|b| b.is_ascii_digit()));
            let z = r.zip();
            assert!(z.len() == 9 && z.ends_with("11111"));
        }
    }

    #[test]
    fn about_one_data_string_in_ten_holds_original() {
        let mut r = rng(3);
        let n = 20_000;
        let with = (0..n)
            .filter(|_| {
                let d = r.data_with_original();
                assert!((26..=50).contains(&d.len()));
                d.contains("ORIGINAL")
            })
            .count();
        assert!((1_600..=2_400).contains(&with), "{with} of {n}");
    }

    #[test]
    fn the_deck_deals_exactly_the_standard_mix_per_hundred() {
        let mut r = rng(4);
        let mut deck = Deck::standard();
        for _ in 0..3 {
            let mut counts = std::collections::HashMap::new();
            for _ in 0..100 {
                *counts.entry(deck.deal(&mut r)).or_insert(0) += 1;
            }
            for k in TxnKind::ALL {
                assert_eq!(counts[&k], k.standard_share(), "{k:?}");
            }
        }
    }

    #[test]
    fn inputs_follow_the_spec_s_shares() {
        let scale = Scale::standard(4).unwrap();
        let mut r = rng(5);
        let n = 20_000;
        let (mut rollbacks, mut remote_lines, mut lines) = (0, 0, 0);
        for _ in 0..n {
            let o = NewOrderInput::draw(&mut r, &scale, 2);
            assert!((5..=15).contains(&o.lines.len()));
            rollbacks += u32::from(o.expects_rollback(&scale));
            for l in &o.lines {
                lines += 1;
                remote_lines += u32::from(l.supply_warehouse != 2);
                assert!((1..=10).contains(&l.quantity));
                assert!(l.item <= scale.unused_item());
            }
        }
        assert!((120..=290).contains(&rollbacks), "rollbacks {rollbacks}");
        let remote_share = f64::from(remote_lines) / f64::from(lines);
        assert!((0.006..0.014).contains(&remote_share), "{remote_share}");
        let (mut by_name, mut remote) = (0, 0);
        for _ in 0..n {
            let p = PaymentInput::draw(&mut r, &scale, 3);
            assert!((100..=500_000).contains(&p.amount));
            by_name += u32::from(matches!(p.customer, CustomerSelector::LastName(_)));
            remote += u32::from(p.customer_warehouse != 3);
        }
        assert!((11_500..=12_500).contains(&by_name), "by name {by_name}");
        assert!((2_700..=3_300).contains(&remote), "remote {remote}");
    }

    #[test]
    fn one_warehouse_has_no_remote_lines_or_payments() {
        let scale = Scale::tiny();
        let mut r = rng(6);
        for _ in 0..2_000 {
            assert!(NewOrderInput::draw(&mut r, &scale, 1).all_local());
            let p = PaymentInput::draw(&mut r, &scale, 1);
            assert_eq!((p.customer_warehouse, p.customer_district), (1, p.district));
            if let CustomerSelector::LastName(name) = p.customer {
                let n = (0..scale.last_names).find(|&i| last_name(i) == name);
                assert!(n.is_some(), "{name} is not one of the loaded names");
            }
        }
    }

    #[test]
    fn scales_out_of_range_are_refused_with_the_reason() {
        let e = Scale::standard(0).unwrap_err().to_string();
        assert!(e.contains("warehouses must be 1 to 10000"), "{e}");
        let e = Scale {
            new_orders: 61,
            ..Scale::tiny()
        }
        .validated()
        .unwrap_err()
        .to_string();
        assert!(e.contains("undelivered orders"), "{e}");
        assert!(Scale::tiny().validated().is_ok());
    }
}

//! The textbook replacement policies, online: each takes one access at a
//! time ([`Cache::access`]) and keeps state only for the keys it has seen
//! (resident pages, and the ghost lists of those that keep them), so a
//! replay can stream a trace of any length through it. Keys are dense ids
//! `0..` handed out in order of first access (the replay interns the
//! trace's object ids); the per-key arrays grow as new keys appear, so a
//! policy's memory is a few bytes per distinct key (the trace's
//! footprint), never per request.
//!
//! - LRU: evict the least recently used page.
//! - ARC (Megiddo & Modha, FAST 2003): two LRU lists T1 (seen once) and T2
//!   (seen twice or more) sharing `pages`, with ghost lists B1 and B2 of
//!   recently evicted keys; a ghost hit moves the target size p of T1.
//! - S3-FIFO (Yang et al., SOSP 2023): a small FIFO S of 10% of the pages,
//!   a main FIFO M, each page with a 2-bit frequency, and a ghost FIFO G of
//!   as many keys as M holds pages. Evicting from S: a page read again while
//!   in S (frequency > 0) moves to M, else its key goes to G. Evicting from
//!   M: a page with frequency > 0 is reinserted with frequency - 1. A miss
//!   found in G is inserted into M.
//! - SIEVE (Zhang et al., NSDI 2024): one FIFO queue, a visited bit per
//!   page set by a hit, and a hand that starts at the oldest page and moves
//!   toward the newest (wrapping): a visited page has its bit cleared and
//!   is passed over, the first unvisited one is evicted, and the hand stays
//!   where it stopped for the next miss. New pages go in at the newest end;
//!   a hit moves nothing.
//! - 2Q (Johnson & Shasha, VLDB 1994, the full version): a FIFO A1in of
//!   pages seen once (Kin = 25% of the pages), a ghost FIFO A1out of keys
//!   evicted from A1in (Kout = 50% of the pages), and an LRU Am of pages
//!   referenced again after leaving A1in. A hit in A1in moves nothing (a
//!   correlated re-reference); a miss found in A1out goes to Am; any other
//!   miss goes to A1in. Room is made by evicting A1in's oldest (to A1out)
//!   while A1in holds more than Kin, else Am's least recent (if Am is
//!   empty, A1in's oldest).
//! - OPT (Belady's MIN): on a miss with the pool full, evict the resident
//!   page whose next use is furthest away (never, first). It needs each
//!   access's next use: [`Cache::access`]'s `next`.

use std::collections::{BTreeSet, VecDeque};

/// `next` for an access whose key is never accessed again.
pub const NEVER: u64 = u64::MAX;

/// An online replacement policy over dense keys.
pub trait Cache {
    /// Access `key`; `next` is the index (in the replayed sequence) of
    /// `key`'s next access, [`NEVER`] if none (only OPT reads it). True if
    /// the page was resident.
    fn access(&mut self, key: u32, next: u64) -> bool;
}

/// Grow `v` with `fill` so that index `k` exists.
#[inline]
fn grow<T: Clone>(v: &mut Vec<T>, k: u32, fill: T) {
    if k as usize >= v.len() {
        v.resize((k as usize + 1).max(v.len() * 2), fill);
    }
}

// ---------------------------------------------------------------------------
// Doubly linked lists over dense keys (LRU, ARC, SIEVE, 2Q)
// ---------------------------------------------------------------------------

const NIL: u32 = u32::MAX;
const NONE: u8 = u8::MAX;

/// Up to four lists sharing one pair of link arrays: a key is in at most one.
#[derive(Debug, Default)]
struct Lists {
    prev: Vec<u32>,
    next: Vec<u32>,
    /// Which list a key is in (`NONE` for none).
    of: Vec<u8>,
    /// Per list: (head = least recent, tail = most recent, len).
    ends: [(u32, u32, usize); 4],
}

impl Lists {
    fn new() -> Lists {
        Lists {
            ends: [(NIL, NIL, 0); 4],
            ..Lists::default()
        }
    }

    /// The list `k` is in (`NONE`: none), making room for `k`.
    #[inline]
    fn of(&mut self, k: u32) -> u8 {
        grow(&mut self.prev, k, NIL);
        grow(&mut self.next, k, NIL);
        grow(&mut self.of, k, NONE);
        self.of[k as usize]
    }

    fn len(&self, l: u8) -> usize {
        self.ends[l as usize].2
    }

    fn remove(&mut self, k: u32) {
        let l = self.of[k as usize];
        if l == NONE {
            return;
        }
        let (p, n) = (self.prev[k as usize], self.next[k as usize]);
        let e = &mut self.ends[l as usize];
        if p == NIL {
            e.0 = n;
        } else {
            self.next[p as usize] = n;
        }
        if n == NIL {
            e.1 = p;
        } else {
            self.prev[n as usize] = p;
        }
        e.2 -= 1;
        self.of[k as usize] = NONE;
    }

    /// Append `k` as the most recent of list `l` (moving it from any list).
    fn push_mru(&mut self, l: u8, k: u32) {
        self.remove(k);
        let e = &mut self.ends[l as usize];
        self.prev[k as usize] = e.1;
        self.next[k as usize] = NIL;
        if e.1 == NIL {
            e.0 = k;
        } else {
            self.next[e.1 as usize] = k;
        }
        e.1 = k;
        e.2 += 1;
        self.of[k as usize] = l;
    }

    /// Remove and return the least recent of list `l`.
    fn pop_lru(&mut self, l: u8) -> Option<u32> {
        let k = self.ends[l as usize].0;
        if k == NIL {
            return None;
        }
        self.remove(k);
        Some(k)
    }
}

// ---------------------------------------------------------------------------
// LRU
// ---------------------------------------------------------------------------

/// Textbook LRU.
#[derive(Debug)]
pub struct Lru {
    pages: usize,
    l: Lists,
}

impl Lru {
    pub fn new(pages: usize) -> Lru {
        Lru {
            pages: pages.max(1),
            l: Lists::new(),
        }
    }
}

impl Cache for Lru {
    #[inline]
    fn access(&mut self, k: u32, _: u64) -> bool {
        let hit = self.l.of(k) == 0;
        if !hit && self.l.len(0) == self.pages {
            self.l.pop_lru(0);
        }
        self.l.push_mru(0, k);
        hit
    }
}

// ---------------------------------------------------------------------------
// ARC
// ---------------------------------------------------------------------------

/// ARC (Megiddo & Modha).
#[derive(Debug)]
pub struct Arc {
    c: usize,
    p: usize,
    l: Lists,
}

const T1: u8 = 0;
const T2: u8 = 1;
const B1: u8 = 2;
const B2: u8 = 3;

impl Arc {
    pub fn new(pages: usize) -> Arc {
        Arc {
            c: pages.max(1),
            p: 0,
            l: Lists::new(),
        }
    }

    /// REPLACE(x, p): move the LRU page of T1 or T2 to its ghost list.
    fn replace(&mut self, in_b2: bool) {
        let (l, p) = (&mut self.l, self.p);
        let t1 = l.len(T1);
        if t1 >= 1 && ((in_b2 && t1 == p) || t1 > p) {
            if let Some(v) = l.pop_lru(T1) {
                l.push_mru(B1, v);
            }
        } else if let Some(v) = l.pop_lru(T2) {
            l.push_mru(B2, v);
        } else if let Some(v) = l.pop_lru(T1) {
            l.push_mru(B1, v);
        }
    }
}

impl Cache for Arc {
    fn access(&mut self, x: u32, _: u64) -> bool {
        let c = self.c;
        match self.l.of(x) {
            T1 | T2 => {
                self.l.push_mru(T2, x);
                true
            }
            B1 => {
                let d = (self.l.len(B2) / self.l.len(B1)).max(1);
                self.p = (self.p + d).min(c);
                self.replace(false);
                self.l.push_mru(T2, x);
                false
            }
            B2 => {
                let d = (self.l.len(B1) / self.l.len(B2)).max(1);
                self.p = self.p.saturating_sub(d);
                self.replace(true);
                self.l.push_mru(T2, x);
                false
            }
            _ => {
                let l = &mut self.l;
                let l1 = l.len(T1) + l.len(B1);
                let total = l1 + l.len(T2) + l.len(B2);
                if l1 == c {
                    if l.len(T1) < c {
                        l.pop_lru(B1);
                        self.replace(false);
                    } else {
                        l.pop_lru(T1);
                    }
                } else if total >= c {
                    if total == 2 * c {
                        l.pop_lru(B2);
                    }
                    self.replace(false);
                }
                self.l.push_mru(T1, x);
                false
            }
        }
    }
}

// ---------------------------------------------------------------------------
// S3-FIFO
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Debug)]
enum Where {
    Out,
    Small,
    Main,
}

/// S3-FIFO (Yang et al.).
#[derive(Debug)]
pub struct S3Fifo {
    c: usize,
    small_cap: usize,
    main_cap: usize,
    at: Vec<Where>,
    freq: Vec<u8>,
    // FIFOs: push_back = insert at the head, pop_front = take the tail.
    small: VecDeque<u32>,
    main: VecDeque<u32>,
    /// The ghost FIFO with lazy deletion: an entry counts while
    /// `ghost_seq` of its key still names it.
    ghost: VecDeque<(u32, u64)>,
    ghost_seq: Vec<u64>,
    ghost_live: usize,
    seq: u64,
}

impl S3Fifo {
    pub fn new(pages: usize) -> S3Fifo {
        let c = pages.max(1);
        let small_cap = (c / 10).max(1);
        S3Fifo {
            c,
            small_cap,
            main_cap: c.saturating_sub(small_cap).max(1),
            at: Vec::new(),
            freq: Vec::new(),
            small: VecDeque::new(),
            main: VecDeque::new(),
            ghost: VecDeque::new(),
            ghost_seq: Vec::new(),
            ghost_live: 0,
            seq: 0,
        }
    }

    fn evict_main(&mut self) {
        while let Some(t) = self.main.pop_front() {
            if self.freq[t as usize] > 0 {
                self.freq[t as usize] -= 1;
                self.main.push_back(t);
            } else {
                self.at[t as usize] = Where::Out;
                return;
            }
        }
    }

    fn evict_small(&mut self) {
        while let Some(t) = self.small.pop_front() {
            let ti = t as usize;
            if self.freq[ti] > 0 {
                self.at[ti] = Where::Main;
                self.main.push_back(t);
                if self.main.len() > self.main_cap {
                    self.evict_main();
                }
            } else {
                self.at[ti] = Where::Out;
                self.seq += 1;
                self.ghost_seq[ti] = self.seq;
                self.ghost.push_back((t, self.seq));
                self.ghost_live += 1;
                while self.ghost_live > self.main_cap {
                    let (g, s) = self.ghost.pop_front().expect("live > 0");
                    if self.ghost_seq[g as usize] == s {
                        self.ghost_seq[g as usize] = 0;
                        self.ghost_live -= 1;
                    }
                }
                return;
            }
        }
    }
}

impl Cache for S3Fifo {
    fn access(&mut self, x: u32, _: u64) -> bool {
        grow(&mut self.at, x, Where::Out);
        grow(&mut self.freq, x, 0);
        grow(&mut self.ghost_seq, x, 0);
        let xi = x as usize;
        if self.at[xi] != Where::Out {
            self.freq[xi] = (self.freq[xi] + 1).min(3);
            return true;
        }
        while self.small.len() + self.main.len() >= self.c {
            if self.small.len() >= self.small_cap {
                self.evict_small();
            } else {
                self.evict_main();
            }
        }
        self.freq[xi] = 0;
        if self.ghost_seq[xi] != 0 {
            self.ghost_seq[xi] = 0;
            self.ghost_live -= 1;
            self.at[xi] = Where::Main;
            self.main.push_back(x);
        } else {
            self.at[xi] = Where::Small;
            self.small.push_back(x);
        }
        false
    }
}

// ---------------------------------------------------------------------------
// SIEVE
// ---------------------------------------------------------------------------

/// SIEVE (Zhang et al.): list 0 is the queue, least recent = oldest.
#[derive(Debug)]
pub struct Sieve {
    pages: usize,
    l: Lists,
    visited: Vec<bool>,
    /// The page the hand points at (`NIL`: start from the oldest).
    hand: u32,
}

impl Sieve {
    pub fn new(pages: usize) -> Sieve {
        Sieve {
            pages: pages.max(1),
            l: Lists::new(),
            visited: Vec::new(),
            hand: NIL,
        }
    }
}

impl Cache for Sieve {
    #[inline]
    fn access(&mut self, k: u32, _: u64) -> bool {
        grow(&mut self.visited, k, false);
        if self.l.of(k) == 0 {
            self.visited[k as usize] = true;
            return true;
        }
        if self.l.len(0) == self.pages {
            let oldest = self.l.ends[0].0;
            let mut h = if self.hand == NIL { oldest } else { self.hand };
            while self.visited[h as usize] {
                self.visited[h as usize] = false;
                // Toward the newest; past it, back to the oldest.
                h = match self.l.next[h as usize] {
                    NIL => oldest,
                    n => n,
                };
            }
            self.hand = self.l.next[h as usize];
            self.l.remove(h);
        }
        self.visited[k as usize] = false;
        self.l.push_mru(0, k);
        false
    }
}

// ---------------------------------------------------------------------------
// 2Q
// ---------------------------------------------------------------------------

const A1IN: u8 = 0;
const AM: u8 = 1;
const A1OUT: u8 = 2;

/// 2Q (Johnson & Shasha), full version, Kin = 25% and Kout = 50% of the
/// pages (the paper's recommended sizes).
#[derive(Debug)]
pub struct TwoQ {
    pages: usize,
    kin: usize,
    kout: usize,
    l: Lists,
}

impl TwoQ {
    pub fn new(pages: usize) -> TwoQ {
        let pages = pages.max(1);
        TwoQ {
            pages,
            kin: (pages / 4).max(1),
            kout: (pages / 2).max(1),
            l: Lists::new(),
        }
    }

    fn reclaim(&mut self) {
        if self.l.len(A1IN) + self.l.len(AM) < self.pages {
            return;
        }
        if self.l.len(A1IN) > self.kin || self.l.len(AM) == 0 {
            if let Some(y) = self.l.pop_lru(A1IN) {
                self.l.push_mru(A1OUT, y);
                if self.l.len(A1OUT) > self.kout {
                    self.l.pop_lru(A1OUT);
                }
            }
        } else {
            self.l.pop_lru(AM);
        }
    }
}

impl Cache for TwoQ {
    fn access(&mut self, x: u32, _: u64) -> bool {
        match self.l.of(x) {
            AM => {
                self.l.push_mru(AM, x);
                true
            }
            A1IN => true,
            A1OUT => {
                self.reclaim();
                self.l.push_mru(AM, x);
                false
            }
            _ => {
                self.reclaim();
                self.l.push_mru(A1IN, x);
                false
            }
        }
    }
}

// ---------------------------------------------------------------------------
// OPT
// ---------------------------------------------------------------------------

/// Belady's MIN, given each access's next use.
#[derive(Debug)]
pub struct Opt {
    pages: usize,
    /// Resident pages by their next use.
    resident: BTreeSet<(u64, u32)>,
    /// `cur[k]`: k's next use while resident.
    cur: Vec<Option<u64>>,
}

impl Opt {
    pub fn new(pages: usize) -> Opt {
        Opt {
            pages: pages.max(1),
            resident: BTreeSet::new(),
            cur: Vec::new(),
        }
    }
}

impl Cache for Opt {
    fn access(&mut self, k: u32, next: u64) -> bool {
        grow(&mut self.cur, k, None);
        let hit = match self.cur[k as usize].take() {
            Some(at) => {
                self.resident.remove(&(at, k));
                true
            }
            None => {
                if self.resident.len() == self.pages
                    && let Some((_, v)) = self.resident.pop_last()
                {
                    self.cur[v as usize] = None;
                }
                false
            }
        };
        self.resident.insert((next, k));
        self.cur[k as usize] = Some(next);
        hit
    }
}

/// Each access's next use in `keys` (its index, [`NEVER`] if none), by one
/// backward pass: a `u64` per access.
pub fn next_uses(keys: &[u32]) -> Vec<u64> {
    let mut next = vec![NEVER; keys.len()];
    let mut last: Vec<u64> = Vec::new();
    for i in (0..keys.len()).rev() {
        let k = keys[i];
        grow(&mut last, k, NEVER);
        next[i] = last[k as usize];
        last[k as usize] = i as u64;
    }
    next
}

/// Replay `keys` through `cache`; whether each access hit.
pub fn run(cache: &mut (impl Cache + ?Sized), keys: &[u32], next: &[u64]) -> Vec<bool> {
    keys.iter()
        .zip(next)
        .map(|(&k, &n)| cache.access(k, n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// Keys named by letters (key = letter - 'a').
    fn keys(s: &str) -> Vec<u32> {
        s.bytes().map(|b| u32::from(b - b'a')).collect()
    }

    fn hits(mut c: impl Cache, s: &str) -> Vec<bool> {
        let k = keys(s);
        run(&mut c, &k, &next_uses(&k))
    }

    /// `+` for a hit, `-` for a miss.
    fn marks(h: &[bool]) -> String {
        h.iter().map(|&h| if h { '+' } else { '-' }).collect()
    }

    // SIEVE, 3 pages, "abcadbea" (queue oldest -> newest):
    //   a- b- c- [a b c]; a+ (a visited); d-: the hand starts at the oldest,
    //   a: visited, cleared, passed; b: not visited, evicted; the hand
    //   stays at c; d in [a c d]. b-: c is evicted (hand -> d), [a d b];
    //   e-: d is evicted (hand -> b), [a b e]; a+: a survived.
    // LRU on the same: d evicts b, b evicts c, e evicts a: a misses.
    #[test]
    fn sieve_passes_over_a_visited_page_and_keeps_its_hand() {
        assert_eq!(marks(&hits(Sieve::new(3), "abcadbea")), "---+---+");
        assert_eq!(marks(&hits(Lru::new(3), "abcadbea")), "---+----");
    }

    // SIEVE, 2 pages, "ababcbab": a- b- a+ b+ (both visited); c-: the hand
    // clears a, clears b, wraps to a and evicts it; the hand goes past b's
    // end (back to the oldest next time); [b c]. b+ (visited); a-: the hand
    // starts at the oldest, b: visited, cleared; c: evicted; [b a]. b+.
    #[test]
    fn sieve_wraps_its_hand_from_the_newest_to_the_oldest() {
        assert_eq!(marks(&hits(Sieve::new(2), "ababcbab")), "--++-+-+");
    }

    // 2Q, 4 pages (Kin 1, Kout 2), "aabcdeaa": a- a+ (a hit in A1in moves
    // nothing) b- c- d-: A1in [a b c d]; e-: A1in holds more than Kin: its
    // oldest, a, goes to A1out; a-: found in A1out: b goes to A1out to make
    // room, a to Am; a+ (in Am). SIEVE keeps a (visited) and hits at the
    // seventh access.
    #[test]
    fn two_q_ignores_a_correlated_rereference_and_promotes_from_the_ghost() {
        assert_eq!(marks(&hits(TwoQ::new(4), "aabcdeaa")), "-+-----+");
        assert_eq!(marks(&hits(Sieve::new(4), "aabcdeaa")), "-+----++");
    }

    // 2Q, 4 pages, "abcdeafgha": a..d fill A1in; e: a to A1out; a: from
    // A1out into Am (b to A1out); f, g, h: c, d, e pass through A1out (b,
    // then c, dropped past Kout = 2); a+ from Am. Then "fd": f+ (still in
    // A1in); d- from A1out: A1in [f g h] is over Kin, f goes to A1out, d to
    // Am; then "a" hits in Am, and "i" takes from A1in (g) while it is over
    // Kin, so a and d stay in Am.
    #[test]
    fn two_q_keeps_am_pages_while_a1in_is_over_its_share() {
        assert_eq!(
            marks(&hits(TwoQ::new(4), "abcdeafghafdaiad")),
            "---------++-+-++"
        );
    }

    /// LRU by stack distance: an access hits in `pages` iff fewer than
    /// `pages` distinct keys were accessed since the key's previous access.
    fn lru_by_stack_distance(keys: &[u32], pages: usize) -> Vec<bool> {
        (0..keys.len())
            .map(|i| {
                let Some(j) = keys[..i].iter().rposition(|&k| k == keys[i]) else {
                    return false;
                };
                let mut between: Vec<u32> = keys[j + 1..i].to_vec();
                between.sort_unstable();
                between.dedup();
                between.len() < pages
            })
            .collect()
    }

    /// OPT by Mattson's priority stack (next use sooner = higher
    /// priority): each access's depth in the stack, for every size at once;
    /// an access hits in `pages` iff its depth is below `pages`.
    fn opt_depths(keys: &[u32]) -> Vec<Option<usize>> {
        let next = next_uses(keys);
        let mut prio: HashMap<u32, u64> = HashMap::new();
        let mut stack: Vec<u32> = Vec::new();
        keys.iter()
            .zip(&next)
            .map(|(&x, &nx)| {
                let pos = stack.iter().position(|&k| k == x);
                let end = pos.unwrap_or(stack.len());
                if pos.is_none() {
                    stack.push(x);
                }
                // x on top; the old top is carried down, and at each depth
                // the higher priority of (carried, resident) stays.
                let mut carried = x;
                for slot in stack.iter_mut().take(end) {
                    if carried == x || prio[&carried] < prio[slot] {
                        std::mem::swap(&mut carried, slot);
                    }
                }
                stack[end] = carried;
                prio.insert(x, nx);
                pos
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn lru_and_opt_hit_exactly_where_the_stack_distances_say(
            keys in proptest::collection::vec(0u32..30, 1..400),
            pages in 1usize..20,
        ) {
            let next = next_uses(&keys);
            let lru = run(&mut Lru::new(pages), &keys, &next);
            prop_assert_eq!(lru, lru_by_stack_distance(&keys, pages));
            let opt = run(&mut Opt::new(pages), &keys, &next);
            let depth: Vec<bool> = opt_depths(&keys)
                .iter()
                .map(|d| d.is_some_and(|d| d < pages))
                .collect();
            prop_assert_eq!(opt, depth);
        }
    }
}

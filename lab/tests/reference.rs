//! Every textbook policy, streamed from a file as `bench replay` streams
//! it, against a second, deliberately naive implementation written from
//! the policy's description (vectors searched linearly, no dense keys, no
//! linked lists, no lazy deletion): LRU by stack distance, OPT by scanning
//! the future, ARC, S3-FIFO, SIEVE and 2Q step by step. The traces are
//! random over sparse object ids from the whole u64 range (0 and u64::MAX
//! among them), empty or of one object, and the pool sizes run from 1 to
//! past the footprint.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use lab::formats::{Format, ReadOptions};
use lab::replay::{Policy, next_uses_of, replay_stream};
use proptest::prelude::*;

/// LRU: an access hits iff fewer than `pages` distinct objects were
/// accessed since the object's previous access.
fn lru(t: &[u64], pages: usize) -> u64 {
    (0..t.len())
        .filter(|&i| {
            let Some(j) = t[..i].iter().rposition(|&k| k == t[i]) else {
                return false;
            };
            let mut between = t[j + 1..i].to_vec();
            between.sort_unstable();
            between.dedup();
            between.len() < pages
        })
        .count() as u64
}

/// OPT (always loading the missed page): evict the resident object whose
/// next access is furthest, found by scanning the rest of the trace.
fn opt(t: &[u64], pages: usize) -> u64 {
    let mut res: Vec<u64> = Vec::new();
    let mut hits = 0;
    for (i, &x) in t.iter().enumerate() {
        if res.contains(&x) {
            hits += 1;
            continue;
        }
        if res.len() == pages {
            let next = |k: u64| {
                t[i + 1..]
                    .iter()
                    .position(|&y| y == k)
                    .unwrap_or(usize::MAX)
            };
            let far = (0..res.len()).max_by_key(|&j| next(res[j])).unwrap();
            res.remove(far);
        }
        res.push(x);
    }
    hits
}

fn take(v: &mut Vec<u64>, x: u64) -> bool {
    match v.iter().position(|&k| k == x) {
        Some(i) => {
            v.remove(i);
            true
        }
        None => false,
    }
}

/// ARC as Megiddo and Modha's figure gives it; lists LRU first.
fn arc(t: &[u64], c: usize) -> u64 {
    let (mut t1, mut t2, mut b1, mut b2) = (vec![], vec![], vec![], vec![]);
    let mut p = 0usize;
    let replace = |t1: &mut Vec<u64>,
                   t2: &mut Vec<u64>,
                   b1: &mut Vec<u64>,
                   b2: &mut Vec<u64>,
                   in_b2: bool,
                   p: usize| {
        if !t1.is_empty() && ((in_b2 && t1.len() == p) || t1.len() > p) {
            b1.push(t1.remove(0));
        } else if !t2.is_empty() {
            b2.push(t2.remove(0));
        } else {
            b1.push(t1.remove(0));
        }
    };
    let mut hits = 0;
    for &x in t {
        if take(&mut t1, x) || take(&mut t2, x) {
            hits += 1;
            t2.push(x);
        } else if b1.contains(&x) {
            p = (p + (b2.len() / b1.len()).max(1)).min(c);
            replace(&mut t1, &mut t2, &mut b1, &mut b2, false, p);
            take(&mut b1, x);
            t2.push(x);
        } else if b2.contains(&x) {
            p = p.saturating_sub((b1.len() / b2.len()).max(1));
            replace(&mut t1, &mut t2, &mut b1, &mut b2, true, p);
            take(&mut b2, x);
            t2.push(x);
        } else {
            let l1 = t1.len() + b1.len();
            let total = l1 + t2.len() + b2.len();
            if l1 == c {
                if t1.len() < c {
                    b1.remove(0);
                    replace(&mut t1, &mut t2, &mut b1, &mut b2, false, p);
                } else {
                    t1.remove(0);
                }
            } else if total >= c {
                if total == 2 * c {
                    b2.remove(0);
                }
                replace(&mut t1, &mut t2, &mut b1, &mut b2, false, p);
            }
            t1.push(x);
        }
    }
    hits
}

/// S3-FIFO: small FIFO of c/10 (at least 1), main FIFO of the rest, a
/// ghost FIFO of as many keys as main; 2-bit frequencies.
fn s3fifo(t: &[u64], c: usize) -> u64 {
    let small_cap = (c / 10).max(1);
    let main_cap = c.saturating_sub(small_cap).max(1);
    let (mut s, mut m, mut g) = (VecDeque::new(), VecDeque::new(), VecDeque::new());
    let mut freq: std::collections::HashMap<u64, u8> = std::collections::HashMap::new();
    fn evict_m(m: &mut VecDeque<u64>, freq: &mut std::collections::HashMap<u64, u8>) {
        while let Some(k) = m.pop_front() {
            let f = freq.get_mut(&k).unwrap();
            if *f > 0 {
                *f -= 1;
                m.push_back(k);
            } else {
                return;
            }
        }
    }
    let mut hits = 0;
    for &x in t {
        if s.contains(&x) || m.contains(&x) {
            let f = freq.get_mut(&x).unwrap();
            *f = (*f + 1).min(3);
            hits += 1;
            continue;
        }
        while s.len() + m.len() >= c {
            if s.len() >= small_cap {
                while let Some(k) = s.pop_front() {
                    if freq[&k] > 0 {
                        m.push_back(k);
                        if m.len() > main_cap {
                            evict_m(&mut m, &mut freq);
                        }
                    } else {
                        g.push_back(k);
                        if g.len() > main_cap {
                            g.pop_front();
                        }
                        break;
                    }
                }
            } else {
                evict_m(&mut m, &mut freq);
            }
        }
        freq.insert(x, 0);
        match g.iter().position(|&k| k == x) {
            Some(i) => {
                g.remove(i);
                m.push_back(x);
            }
            None => s.push_back(x),
        }
    }
    hits
}

/// SIEVE: a queue oldest first, a visited bit each, a hand moving from
/// the oldest toward the newest and wrapping.
fn sieve(t: &[u64], c: usize) -> u64 {
    let mut q: Vec<(u64, bool)> = Vec::new();
    let mut hand: Option<usize> = None;
    let mut hits = 0;
    for &x in t {
        if let Some(e) = q.iter_mut().find(|e| e.0 == x) {
            e.1 = true;
            hits += 1;
            continue;
        }
        if q.len() == c {
            let mut h = hand.unwrap_or(0);
            while q[h].1 {
                q[h].1 = false;
                h = (h + 1) % q.len();
            }
            q.remove(h);
            hand = (h < q.len()).then_some(h);
        }
        q.push((x, false));
    }
    hits
}

/// 2Q (the full version): A1in FIFO of Kin = c/4, A1out ghost FIFO of
/// Kout = c/2 (each at least 1), Am LRU.
fn two_q(t: &[u64], c: usize) -> u64 {
    let (kin, kout) = ((c / 4).max(1), (c / 2).max(1));
    let (mut a1in, mut a1out, mut am): (Vec<u64>, Vec<u64>, Vec<u64>) = (vec![], vec![], vec![]);
    let reclaim = |a1in: &mut Vec<u64>, a1out: &mut Vec<u64>, am: &mut Vec<u64>| {
        if a1in.len() + am.len() < c {
            return;
        }
        if a1in.len() > kin || am.is_empty() {
            a1out.push(a1in.remove(0));
            if a1out.len() > kout {
                a1out.remove(0);
            }
        } else {
            am.remove(0);
        }
    };
    let mut hits = 0;
    for &x in t {
        if take(&mut am, x) {
            am.push(x);
            hits += 1;
        } else if a1in.contains(&x) {
            hits += 1;
        } else if a1out.contains(&x) {
            reclaim(&mut a1in, &mut a1out, &mut am);
            take(&mut a1out, x);
            am.push(x);
        } else {
            reclaim(&mut a1in, &mut a1out, &mut am);
            a1in.push(x);
        }
    }
    hits
}

fn reference(p: Policy, t: &[u64], pages: usize) -> u64 {
    match p {
        Policy::Lru => lru(t, pages),
        Policy::Opt => opt(t, pages),
        Policy::Arc => arc(t, pages),
        Policy::S3Fifo => s3fifo(t, pages),
        Policy::Sieve => sieve(t, pages),
        Policy::TwoQ => two_q(t, pages),
        Policy::Engine(e) => unreachable!("{e} has no reference here"),
    }
}

const TEXTBOOK: [Policy; 6] = [
    Policy::Lru,
    Policy::Arc,
    Policy::S3Fifo,
    Policy::Sieve,
    Policy::TwoQ,
    Policy::Opt,
];

/// `t` as an oracleGeneral file (next accesses computed) and as a CSV.
fn write_trace(dir: &Path, t: &[u64]) -> (PathBuf, PathBuf) {
    let og = dir.join("t.oracleGeneral.bin");
    let mut bytes = Vec::new();
    for (i, &x) in t.iter().enumerate() {
        let next = t[i + 1..]
            .iter()
            .position(|&y| y == x)
            .map_or(-1, |d| (i + 1 + d) as i64);
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.extend_from_slice(&x.to_le_bytes());
        bytes.extend_from_slice(&4096u32.to_le_bytes());
        bytes.extend_from_slice(&next.to_le_bytes());
    }
    std::fs::write(&og, bytes).unwrap();
    let csv = dir.join("t.csv");
    let mut text = String::from("object\n");
    for x in t {
        text.push_str(&format!("{x}\n"));
    }
    std::fs::write(&csv, text).unwrap();
    (og, csv)
}

fn check(t: &[u64], case: u64) -> Result<(), TestCaseError> {
    let d = std::env::temp_dir().join(format!("lab-reference-{}-{case}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let (og, csv) = write_trace(&d, t);
    let mut distinct = t.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    let fp = distinct.len();
    let og_o = ReadOptions {
        format: Format::OracleGeneral,
        ..ReadOptions::default()
    };
    let csv_o = ReadOptions {
        format: Format::Csv,
        ..ReadOptions::default()
    };
    let next = next_uses_of(&csv, &csv_o).unwrap();
    for pages in [1, 2, 3, 5, 10, fp.max(1), fp + 7] {
        for p in TEXTBOOK {
            let want = reference(p, t, pages);
            let from_og = replay_stream(&og, &og_o, p, pages, None).unwrap();
            let from_csv = replay_stream(
                &csv,
                &csv_o,
                p,
                pages,
                (p == Policy::Opt).then_some(&next[..]),
            )
            .unwrap();
            prop_assert_eq!(from_og, want, "{} at {} pages (oracleGeneral)", p, pages);
            prop_assert_eq!(from_csv, want, "{} at {} pages (csv)", p, pages);
        }
    }
    std::fs::remove_dir_all(&d).ok();
    Ok(())
}

/// Sparse ids over the whole u64 range, the extremes among them.
fn ids() -> impl Strategy<Value = Vec<u64>> {
    proptest::collection::vec(
        prop_oneof![Just(0u64), Just(u64::MAX), Just(1u64 << 63), any::<u64>()],
        1..24,
    )
}

static CASE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn every_textbook_policy_streamed_hits_as_often_as_its_naive_reference(
        pool in ids(),
        picks in proptest::collection::vec(any::<prop::sample::Index>(), 0..300),
    ) {
        let t: Vec<u64> = picks.iter().map(|i| *i.get(&pool)).collect();
        check(&t, CASE.fetch_add(1, std::sync::atomic::Ordering::Relaxed))?;
    }
}

#[test]
fn an_empty_trace_and_a_trace_of_one_object_replay_in_every_pool_size() {
    check(&[], u64::MAX).unwrap();
    check(&[u64::MAX; 50], u64::MAX - 1).unwrap();
    check(&[0], u64::MAX - 2).unwrap();
}

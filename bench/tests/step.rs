//! `bench step`: the victims' histories are exactly their buffers' events
//! since the load, the step run hits where the plain replay does, bad input
//! is a clear error, and the README's guided tour (16 buffers, the hot-scan
//! demo) still shows what it says: the clock loses the hot set to the scan,
//! HOT/COOL keeps it.

use std::ffi::OsString;

use bench::replay::run_replay;
use bench::step::{self, DemoShape, HOT_REL, Window};
use bufmgr::trace::Trace;
use bufmgr::{Evictor, RingSizes};
use lab::replay::{Policy, Ref, ReplayPool, StepEvent, replay};

fn args(s: &str) -> Vec<OsString> {
    s.split_whitespace().map(OsString::from).collect()
}

fn demo(e: Evictor, pages: usize) -> Trace {
    step::record_demo(&DemoShape::default(), e, pages, None).expect("demo runs")
}

fn window(from: u64, count: u64) -> Window {
    Window {
        from,
        count,
        ..Window::default()
    }
}

#[test]
fn a_victims_history_is_exactly_its_buffers_events_since_the_load() {
    for e in bufmgr::Evictor::ALL {
        let trace = demo(e, 16);
        let acc = trace.accesses_by_time();
        let r = step::step(&acc, e, 16, &window(0, acc.len() as u64));
        assert_eq!(r.printed, acc.len() as u64);
        // Every event, numbered by access, from a second observed pool.
        let mut pool = ReplayPool::observed(e, 16, RingSizes::default(), Vec::new());
        let mut all: Vec<(u64, StepEvent)> = Vec::new();
        for (i, a) in acc.iter().enumerate() {
            pool.access(&Ref::from(*a));
            all.extend(pool.observer_mut().drain(..).map(|ev| (i as u64, ev)));
        }
        let evicting = all
            .iter()
            .filter(|(_, ev)| {
                matches!(
                    ev,
                    StepEvent::Victim {
                        evicted: Some(_),
                        ..
                    }
                )
            })
            .count();
        assert_eq!(r.evictions.len(), evicting, "{e}: every eviction explained");
        assert!(evicting > 100, "{e}: the demo evicts ({evicting})");
        for v in &r.evictions {
            let at = all
                .iter()
                .position(|(i, ev)| {
                    *i == v.access
                        && matches!(ev, StepEvent::Victim { buffer, .. } if *buffer == v.buffer)
                })
                .expect("the victim event");
            let load = all[..at]
                .iter()
                .rposition(
                    |(_, ev)| matches!(ev, StepEvent::Load { buffer, .. } if *buffer == v.buffer),
                )
                .expect("the victim was loaded");
            let since: Vec<(u64, StepEvent)> = all[load..=at]
                .iter()
                .filter(|(_, ev)| ev.buffer() == v.buffer)
                .copied()
                .collect();
            assert_eq!(v.history, since, "{e}: history of {:?}", v.tag);
            assert!(
                matches!(since[0].1, StepEvent::Load { tag, .. } if tag == v.tag),
                "it starts with the victim's own load"
            );
        }
        // A victim's block in the text names it and shows its events.
        assert!(r.text.contains("why this page:"), "{e}");
    }
}

#[test]
fn step_hits_where_the_plain_replay_and_the_live_pool_hit() {
    for e in bufmgr::Evictor::ALL {
        let trace = demo(e, 16);
        let acc = trace.accesses_by_time();
        let refs: Vec<Ref> = acc.iter().map(|a| Ref::from(*a)).collect();
        let plain = replay(Policy::Engine(e), &refs, 16, &RingSizes::default());
        // Printing only a window still replays (and counts) every access.
        let r = step::step(&acc, e, 16, &window(100, 10));
        assert_eq!(r.printed, 10);
        assert_eq!(r.hits, plain, "{e}");
        let live: Vec<bool> = acc.iter().map(|a| a.hit).collect();
        assert_eq!(
            r.hits, live,
            "{e}: the one-partition live pool decided the same"
        );
        // Each printed miss with a page evicted has its why-block.
        let printed_evictions = r.evictions.iter().filter(|v| v.access >= 100).count();
        assert_eq!(printed_evictions, r.evictions.len());
    }
}

#[test]
fn bad_input_is_a_clear_error() {
    for n in ["7", "33", "1000"] {
        let e = step::run(args(&format!("--pool-pages {n}"))).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("--pool-pages {n}")) && msg.contains("8 to 32"),
            "{msg}"
        );
    }
    let e = step::run(args("--policy lru")).unwrap_err().to_string();
    assert!(
        e.contains("lru") && e.contains("clock, hotcool or probation"),
        "{e}"
    );
    let dir = std::env::temp_dir().join(format!("bench-step-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.trace");
    std::fs::write(&bad, b"BMTRACE\0garbage").unwrap();
    let e = step::run(vec![bad.clone().into_os_string()])
        .unwrap_err()
        .to_string();
    assert!(e.contains("bad.trace") && e.contains("offset"), "{e}");
    let missing = dir.join("missing.trace");
    let e = step::run(vec![missing.into_os_string()])
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing.trace"), "{e}");
    // A window past the end says how many accesses there are.
    let e = step::run(args("--from 600")).unwrap_err().to_string();
    assert!(
        e.contains("--from 600") && e.contains("600 accesses"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The tour's commands (README "A guided tour"), at their own parameters.
#[test]
fn the_guided_tour_shows_the_clock_losing_the_hot_set_and_hotcool_keeping_it() {
    let dir = std::env::temp_dir().join(format!("bench-step-tour-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("hot-scan.trace");
    // (1) record the demo through a live 16-buffer clock pool.
    let out = step::run(vec![
        "--count".into(),
        "0".into(),
        "--record".into(),
        file.clone().into_os_string(),
    ])
    .unwrap();
    assert!(
        out.contains("relation 1 (the hot set): 150 accesses"),
        "{out}"
    );
    let trace = Trace::read(&file).unwrap();
    assert_eq!(trace.pool_buffers, 16);
    // (2) the replay table at 16 pages, the hot set as the subset.
    let hot = |a: &bufmgr::trace::Access| a.tag.rel == HOT_REL;
    let r = run_replay(&trace, &Policy::ALL, &[16], hot);
    let ratio = |p: Policy| {
        let row = r.rows.iter().find(|x| x.policy == p).unwrap();
        row.subset_hits as f64 / r.subset_accesses as f64
    };
    let (clock, hotcool) = (
        ratio(Policy::Engine(Evictor::Clock)),
        ratio(Policy::Engine(Evictor::HotCool)),
    );
    assert!(
        clock < 0.6 && hotcool > 0.9,
        "clock {clock:.3}, hotcool {hotcool:.3}"
    );
    assert!(ratio(Policy::Opt) >= hotcool);
    // (3) the clock, around the moment the scan takes a hot page.
    let trace_arg = || file.clone().into_os_string();
    let mut a = vec![trace_arg()];
    a.extend(args("--policy clock --from 60 --count 6"));
    let out = step::run(a).unwrap();
    assert!(out.contains("why this page: 1/1 (buf 0)"), "{out}");
    // (4) HOT/COOL on the same accesses: cooled, read again, kept; the
    // victims are scan pages only.
    let acc = trace.accesses_by_time();
    let s = step::step(&acc, Evictor::HotCool, 16, &window(60, 40));
    assert!(!s.evictions.is_empty());
    assert!(
        s.evictions.iter().all(|v| v.tag.rel != HOT_REL),
        "HOT/COOL evicted a hot page in the tour's window"
    );
    assert!(s.text.contains("HOT+REF -> HOT"), "a cooling tick is shown");
    let mut a = vec![trace_arg()];
    a.extend(args("--policy hotcool --from 60 --count 6"));
    assert!(step::run(a).unwrap().contains("HOT+REF -> HOT"));
    // (5) the pool-size sweep: the clock's hot-set misses fall as the pool
    // grows, and at 32 pages both keep the hot set.
    let sizes = [8, 12, 16, 24, 32];
    let r = run_replay(&trace, &Policy::ALL, &sizes, hot);
    let at = |p: Policy, n: usize| {
        r.rows
            .iter()
            .find(|x| x.policy == p && x.pages == n)
            .unwrap()
            .subset_hits
    };
    let clock = Policy::Engine(Evictor::Clock);
    assert!(at(clock, 32) > at(clock, 16), "{:?}", r.rows);
    let svg = bench::replay::miss_ratio_curve(&r, &Policy::ALL, "relation [1]").unwrap();
    assert!(svg.starts_with("<svg") || svg.contains("<svg"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn ring_accesses_show_the_slot_the_ring_looked_at() {
    use bufmgr::trace::Access;
    use bufmgr::{BufferTag, RelFork, RelId, RingKind};
    // 16 buffers: a bulk-read ring of 2 (pages / 8). Ten ring reads: from
    // the third on, the ring's slot is reusable and the hand does not move.
    let acc: Vec<Access> = (0..10u32)
        .map(|b| Access {
            tag: BufferTag::new(RelFork::main(RelId(7)), b),
            thread: 0,
            hit: false,
            ring: Some(RingKind::BulkRead),
            buffer: 0,
            nanos: u64::from(b),
        })
        .collect();
    let refs: Vec<&Access> = acc.iter().collect();
    let r = step::step(&refs, Evictor::Clock, 16, &window(0, 10));
    assert!(r.text.contains("ring BulkRead: miss"), "{}", r.text);
    assert!(r.text.contains("ring slot b0"), "{}", r.text);
    assert!(r.text.contains("reuse 7/0"), "{}", r.text);
    assert!(r.text.contains("evict 7/0 from buf 0 (ring)"), "{}", r.text);
    assert_eq!(r.evictions.len(), 8);
}

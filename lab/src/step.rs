//! Stepping through a trace on a tiny pool, one access at a time: every
//! decision of the engine's evictor rules as [`crate::replay::ReplayPool`]'s
//! step observer reports it (each tick of the hand, each pop of the
//! probation queue, each ring slot looked at, the victim and the load), and
//! for each eviction "why this page": every event of its buffer since that
//! page was loaded. This module keeps each buffer's history and formats;
//! the decisions are the replay's. `bench step` is its command line (and
//! its README shows the output).
//!
//! Buffer histories are kept only until the window's last printed access
//! (after it the replay goes on to count hits, nothing more), and whole: a
//! page hit thousands of times keeps thousands of events
//! ([`Window::history`] limits what is printed, not what is kept).

use std::fmt::Write as _;

use bufmgr::desc::{HOT, PROBATION, REFBIT, TAG_VALID, usage};
use bufmgr::evictor::Tick;
use bufmgr::trace::Access;
use bufmgr::{BufferTag, Evictor, Fork, RingSizes};

use crate::replay::{Ref, ReplayPool, StepEvent, StepObserver, VictimSource};

/// Which accesses [`step`] prints.
#[derive(Clone, Debug, Default)]
pub struct Window {
    /// The first access that may be printed (numbered from 0).
    pub from: u64,
    /// How many accesses are printed (those `relations` and `threads` pick).
    pub count: u64,
    /// Print only accesses to these relation ids.
    pub relations: Option<Vec<u32>>,
    /// Print only accesses by these trace thread ids.
    pub threads: Option<Vec<u32>>,
    /// The most recent history events printed per victim (0: all).
    pub history: usize,
}

impl Window {
    /// Whether the window prints access `a` (its relation and thread).
    pub fn selects(&self, a: &Access) -> bool {
        self.relations
            .as_ref()
            .is_none_or(|r| r.contains(&a.tag.rel.0))
            && self.threads.as_ref().is_none_or(|t| t.contains(&a.thread))
    }
}

/// An event and the number of the access during which it happened.
pub type Dated = (u64, StepEvent);

/// An eviction in the printed window, with the victim's history.
#[derive(Clone, Debug)]
pub struct Eviction {
    /// The access whose miss evicted it.
    pub access: u64,
    pub tag: BufferTag,
    pub buffer: usize,
    /// Every event of its buffer from its load to the victim event.
    pub history: Vec<Dated>,
}

/// What a step run printed and found.
#[derive(Clone, Debug, Default)]
pub struct StepResult {
    /// The whole report.
    pub text: String,
    /// Per access of the whole trace: was it a hit.
    pub hits: Vec<bool>,
    /// Accesses printed.
    pub printed: u64,
    /// The evictions of the printed accesses.
    pub evictions: Vec<Eviction>,
}

/// A page as the report names it.
pub fn page_name(t: &BufferTag) -> String {
    match t.fork {
        Fork::Main => format!("{}/{}", t.rel.0, t.block),
        Fork::FreeSpace => format!("{}/fsm/{}", t.rel.0, t.block),
    }
}

/// A state word as the tick lines show it.
pub fn state_name(e: Evictor, s: u64) -> String {
    if s & TAG_VALID == 0 {
        return "free".into();
    }
    spell_state(e, s, ["HOT+REF", "HOT", "COOL", " PB"])
}

/// A state word as the pool line shows it (two or three characters).
fn state_short(e: Evictor, s: u64) -> String {
    spell_state(e, s, ["H*", "H", "C", "q"])
}

/// `s` under `e` in `words`: HOT with its reference bit, HOT, COOL, and
/// what is appended in the probation region (the clock: `u0`..`u5`).
fn spell_state(e: Evictor, s: u64, words: [&str; 4]) -> String {
    let [hot_ref, hot, cool, region] = words;
    let mut out = match e {
        Evictor::Clock => format!("u{}", usage(s)),
        Evictor::HotCool | Evictor::Probation => match (s & HOT != 0, s & REFBIT != 0) {
            (true, true) => hot_ref.into(),
            (true, false) => hot.into(),
            (false, _) => cool.into(),
        },
    };
    if s & PROBATION != 0 {
        out.push_str(region);
    }
    out
}

fn decision(t: Tick, pop: bool) -> &'static str {
    match t {
        Tick::Pinned => "pinned",
        Tick::Skip => "skip",
        Tick::Cool(_) if pop => "promote",
        Tick::Cool(_) => "cool",
        Tick::Victim => "victim",
    }
}

fn before_after(e: Evictor, before: u64, after: u64) -> String {
    if before == after {
        format!("{:<19} ", state_name(e, before))
    } else {
        format!(
            "{:<19} ",
            format!("{} -> {}", state_name(e, before), state_name(e, after))
        )
    }
}

/// One event as a line (without the access number).
fn event_line(e: Evictor, ev: &StepEvent) -> String {
    let page = |t: &Option<BufferTag>| t.as_ref().map_or("-".into(), page_name);
    match *ev {
        StepEvent::Hit { before, after, .. } => {
            format!("{:<14}{}", "hit", before_after(e, before, after))
        }
        StepEvent::RingSlot {
            buffer,
            tag,
            state,
            reusable,
        } => format!(
            "{:<14}{:<19} {}",
            format!("ring slot b{buffer}"),
            state_name(e, state),
            if reusable {
                format!("reuse {}", page(&tag))
            } else {
                "not reusable: sweep".into()
            }
        ),
        StepEvent::Tick {
            hand,
            before,
            after,
            tick,
            ..
        } => format!(
            "{:<14}{}{}",
            format!("tick {hand}"),
            before_after(e, before, after),
            decision(tick, false)
        ),
        StepEvent::Pop {
            before,
            after,
            tick,
            forced,
            ..
        } => format!(
            "{:<14}{}{}{}",
            "queue pop",
            before_after(e, before, after),
            decision(tick, true),
            if forced { " (forced)" } else { "" }
        ),
        StepEvent::Victim { source, .. } => format!("victim ({})", source_name(source)),
        StepEvent::Load {
            state,
            queued,
            ghost_hit,
            ..
        } => format!(
            "{:<14}{:<19} {}",
            "load",
            state_name(e, state),
            if queued {
                "to the probation queue"
            } else if ghost_hit {
                "ghost hit: to main"
            } else {
                ""
            }
        ),
    }
}

fn source_name(s: VictimSource) -> &'static str {
    match s {
        VictimSource::Hand => "hand",
        VictimSource::Queue => "probation queue",
        VictimSource::Ring => "ring",
    }
}

/// The pool line: every buffer's page and short state, `>` at the hand.
fn pool_line<O: StepObserver>(pool: &ReplayPool<O>) -> String {
    let hand = pool.hand_buffer();
    let cells: Vec<String> = pool
        .resident()
        .iter()
        .zip(pool.states())
        .enumerate()
        .map(|(i, (t, &s))| {
            let mark = if i == hand { ">" } else { "" };
            match t {
                Some(t) => format!("{mark}{}:{}", page_name(t), state_short(pool.evictor(), s)),
                None => format!("{mark}-"),
            }
        })
        .collect();
    cells.join(" ")
}

/// Step through `accesses` (in time order) on a pool of `pages` buffers
/// under `evictor`, printing the accesses `window` selects. Every access is
/// replayed; buffer histories are kept until the window's last printed
/// access, then only hits are counted.
pub fn step(accesses: &[&Access], evictor: Evictor, pages: usize, window: &Window) -> StepResult {
    let mut pool = ReplayPool::observed(evictor, pages, RingSizes::default(), Vec::new());
    // Each buffer's events since its page was loaded.
    let mut histories: Vec<Vec<Dated>> = vec![Vec::new(); pages];
    let mut r = StepResult::default();
    let mut t = String::new();
    for (i, a) in accesses.iter().enumerate() {
        let i = i as u64;
        let hit = pool.access(&Ref::from(*a));
        r.hits.push(hit);
        let events = std::mem::take(pool.observer_mut());
        let watching = r.printed < window.count;
        if !watching {
            continue;
        }
        let print = i >= window.from && window.selects(a);
        if print {
            let ring = a.ring.map_or(String::new(), |k| format!(" ring {k:?}"));
            let _ = writeln!(
                t,
                "#{i} rel {} block {}{} thread {}{ring}: {}",
                a.tag.rel.0,
                a.tag.block,
                match a.tag.fork {
                    Fork::Main => "",
                    Fork::FreeSpace => " (fsm)",
                },
                a.thread,
                if hit { "hit" } else { "miss" }
            );
        }
        for ev in &events {
            let b = ev.buffer();
            if let StepEvent::Load { .. } = ev {
                histories[b].clear();
            }
            histories[b].push((i, *ev));
            if !print {
                continue;
            }
            let tag_of = |t: Option<BufferTag>| t.as_ref().map_or("-".into(), page_name);
            match *ev {
                StepEvent::Hit { tag, .. } => {
                    let _ = writeln!(
                        t,
                        "  buf {b:<3} {:<10} {}",
                        page_name(&tag),
                        event_line(evictor, ev)
                    );
                }
                StepEvent::Tick { tag, .. } | StepEvent::Pop { tag, .. } => {
                    let _ = writeln!(
                        t,
                        "  buf {b:<3} {:<10} {}",
                        tag_of(tag),
                        event_line(evictor, ev)
                    );
                }
                StepEvent::RingSlot { .. } => {
                    let _ = writeln!(t, "  {}", event_line(evictor, ev));
                }
                StepEvent::Victim {
                    evicted, source, ..
                } => {
                    if let Some(tag) = evicted {
                        let _ = writeln!(
                            t,
                            "  evict {} from buf {b} ({})",
                            page_name(&tag),
                            source_name(source)
                        );
                        r.evictions.push(Eviction {
                            access: i,
                            tag,
                            buffer: b,
                            history: histories[b].clone(),
                        });
                        write_history(&mut t, evictor, &tag, b, &histories[b], window.history);
                    } else {
                        let _ = writeln!(t, "  buf {b} was free ({})", source_name(source));
                    }
                }
                StepEvent::Load { tag, .. } => {
                    let _ = writeln!(
                        t,
                        "  buf {b:<3} {:<10} {}",
                        page_name(&tag),
                        event_line(evictor, ev)
                    );
                }
            }
        }
        if print {
            let _ = writeln!(t, "  pool {}", pool_line(&pool));
            r.printed += 1;
        }
    }
    r.text = t
        .lines()
        .map(str::trim_end)
        .fold(String::new(), |mut s, l| {
            s.push_str(l);
            s.push('\n');
            s
        });
    r
}

fn write_history(
    t: &mut String,
    e: Evictor,
    tag: &BufferTag,
    buffer: usize,
    h: &[Dated],
    keep: usize,
) {
    let _ = writeln!(
        t,
        "  why this page: {} (buf {buffer}), its {} events since it was loaded",
        page_name(tag),
        h.len()
    );
    let skip = if keep == 0 {
        0
    } else {
        h.len().saturating_sub(keep)
    };
    if skip > 0 {
        let hits = h[..skip]
            .iter()
            .filter(|(_, ev)| matches!(ev, StepEvent::Hit { .. }))
            .count();
        let _ = writeln!(
            t,
            "    ... {skip} earlier ({hits} of them hits; --history 0 shows all)"
        );
    }
    for (i, ev) in &h[skip..] {
        let _ = writeln!(t, "    #{i:<5} {}", event_line(e, ev));
    }
}

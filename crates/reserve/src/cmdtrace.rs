//! What an uninstrumented command received, per period, from the kernel's
//! own trace.
//!
//! A command cannot say when it ran, and the kernel's counters are too
//! coarse to say it for it: `schedstat` of a running thread lags by up to
//! a tick, and on a kernel without IRQ time accounting the CPU time it
//! shows includes every interrupt that hit the thread. The trace has both
//! halves exactly: `sched_switch` says when a reserved thread was on a CPU
//! (what the kernel *charged*), and the irq / softirq / system-vector /
//! NMI entry and exit events say when the CPU was taken from it while it
//! stayed current (what was *stolen*: billed, not received). Per period,
//! received = charged − stolen, which is what Rez-FB needs.
//!
//! [`Accountant`] is the pure state machine (tested on synthetic events);
//! [`CommandTrace`] feeds it from a private tracefs instance of the cause
//! recorder's crate (`punctual_trace`), whose journal puts tracefs back
//! even after SIGKILL.

use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::path::Path;

use punctual_trace::event::{Decoded, Decoder, Event};
use punctual_trace::format::{HeaderEvent, HeaderPage};
use punctual_trace::rings::{drain_ring, Rings};
use punctual_trace::tracefs::{Instance, NoTracing};
use punctual_units::Nanos;

/// One period as the trace saw it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeriodTrace {
    /// Time a reserved thread was current on a CPU (what the kernel bills).
    pub charged: Nanos,
    /// Interrupt, softirq, system-vector and NMI time inside `charged`.
    pub stolen: Nanos,
    /// Events were lost in the period (ring overrun), or it began before
    /// the trace knew what ran: the figures are a lower bound.
    pub incomplete: bool,
}

impl PeriodTrace {
    pub fn received(&self) -> Nanos {
        self.charged.saturating_sub(self.stolen)
    }
}

#[derive(Clone, Debug, Default)]
struct Cpu {
    /// The task current on the CPU (`None` until an event says, or after a
    /// loss).
    current: Option<i32>,
    /// A reserved thread has been current since.
    oncpu_since: Option<u64>,
    /// Nesting depth of interrupt contexts (only the outermost counts).
    depth: u32,
    /// The outermost interrupt context began (while a reserved thread was
    /// current) at.
    stolen_since: Option<u64>,
    last_ts: u64,
}

/// Per-CPU state machine over decoded events, accumulating charged and
/// stolen time of a set of threads on a period grid `t0 + k·period`.
#[derive(Debug)]
pub struct Accountant {
    t0: u64,
    period: u64,
    tids: HashSet<i32>,
    cpus: BTreeMap<u32, Cpu>,
    acc: BTreeMap<u64, PeriodTrace>,
    /// Periods before this one were handed out; late additions are dropped.
    next_out: u64,
    pub events: u64,
    pub lost_events: u64,
}

impl Accountant {
    pub fn new(t0: Nanos, period: Nanos) -> Accountant {
        Accountant {
            t0: t0.0,
            period: period.0.max(1),
            tids: HashSet::new(),
            cpus: BTreeMap::new(),
            acc: BTreeMap::new(),
            next_out: 0,
            events: 0,
            lost_events: 0,
        }
    }

    /// Moves the grid origin (the command's admission instant is known
    /// only once it has run). Nothing may have been accounted yet.
    pub fn set_origin(&mut self, t0: Nanos) {
        debug_assert!(self.acc.is_empty());
        self.t0 = t0.0;
    }

    /// The threads whose time is accounted. A thread added while it is
    /// already current starts counting at its next switch-in.
    pub fn set_tids(&mut self, tids: impl IntoIterator<Item = i32>) {
        self.tids = tids.into_iter().collect();
    }

    fn add(&mut self, a: u64, b: u64, stolen: bool) {
        let a = a.max(self.t0);
        if b <= a {
            return;
        }
        let mut k = (a - self.t0) / self.period;
        let mut from = a;
        while from < b {
            let end = (self.t0 + (k + 1) * self.period).min(b);
            if k >= self.next_out {
                let e = self.acc.entry(k).or_default();
                let d = Nanos(end - from);
                if stolen {
                    e.stolen += d;
                } else {
                    e.charged += d;
                }
            }
            from = end;
            k += 1;
        }
    }

    fn mark_incomplete(&mut self, a: u64, b: u64) {
        let a = a.max(self.t0);
        let b = b.max(a);
        let k0 = (a - self.t0) / self.period;
        let k1 = (b - self.t0) / self.period;
        for k in k0.max(self.next_out)..=k1 {
            self.acc.entry(k).or_default().incomplete = true;
        }
    }

    /// Events were lost on `cpu` before `ts`: what ran in between is
    /// unknown, so open intervals are dropped and the periods flagged.
    pub fn lost(&mut self, cpu: u32, ts: u64, count: u64) {
        self.lost_events += count.max(1);
        let st = self.cpus.entry(cpu).or_default();
        let from = st.last_ts;
        *st = Cpu {
            last_ts: ts.max(from),
            ..Default::default()
        };
        self.mark_incomplete(from, ts);
    }

    /// Feeds one event of `cpu` (per-CPU time order).
    pub fn feed(&mut self, cpu: u32, ev: &Decoded) {
        self.events += 1;
        let st = self.cpus.entry(cpu).or_default();
        let prev_ts = st.last_ts;
        let ts = ev.ts.max(prev_ts);
        st.last_ts = ts;
        // Every event's common_pid is the task current when it fired; one
        // that differs from what the switches said means a switch went
        // unrecorded. This kernel (6.18 guest) emits no sched_switch when
        // a CPU leaves idle, and idle records nothing but its interrupts,
        // so the switch happened right after the CPU's previous event (the
        // exit of the interrupt that woke the task).
        if st.current.is_some() && st.current != Some(ev.pid) {
            let at = if st.current == Some(0) { prev_ts } else { ts };
            let was = st.oncpu_since.take();
            let stolen = st.stolen_since.take();
            st.depth = 0;
            st.current = Some(ev.pid);
            if self.tids.contains(&ev.pid) {
                st.oncpu_since = Some(at);
            }
            if let Some(a) = was {
                self.add(a, at, false);
            }
            if let Some(a) = stolen {
                self.add(a, at, true);
            }
        }
        let st = self.cpus.get_mut(&cpu).expect("inserted above");
        if st.current.is_none() {
            // The task current at any event is its common_pid: this
            // recovers the state at the start or after a loss. Time before
            // this event is unknown.
            st.current = Some(ev.pid);
            if self.tids.contains(&ev.pid) {
                st.oncpu_since = Some(ts);
                self.mark_incomplete(ts, ts);
            }
        }
        let st = self.cpus.get_mut(&cpu).expect("inserted above");
        let current_reserved = st.current.is_some_and(|p| self.tids.contains(&p));
        let mut close_stolen = None;
        let mut close_oncpu = None;
        match &ev.event {
            Event::IrqEntry { .. } | Event::SoftirqEntry { .. } | Event::VectorEntry { .. } => {
                if st.depth == 0 && current_reserved {
                    st.stolen_since = Some(ts);
                }
                st.depth = st.depth.saturating_add(1);
            }
            // An exit without its entry (the trace began inside) is
            // ignored: its start is unknown.
            Event::IrqExit { .. } | Event::SoftirqExit { .. } | Event::VectorExit { .. }
                if st.depth > 0 =>
            {
                st.depth -= 1;
                if st.depth == 0 {
                    close_stolen = st.stolen_since.take().map(|a| (a, ts));
                }
            }
            Event::Nmi { delta_ns } if current_reserved && st.depth == 0 => {
                let d = (*delta_ns).max(0) as u64;
                close_stolen = Some((ts.saturating_sub(d), ts));
            }
            Event::Switch {
                prev_pid, next_pid, ..
            } => {
                // A switch happens at task level: contexts still open lost
                // their exits.
                if let Some(a) = st.stolen_since.take() {
                    close_stolen = Some((a, ts));
                }
                st.depth = 0;
                if st.oncpu_since.is_some() || self.tids.contains(prev_pid) {
                    close_oncpu = st.oncpu_since.take().map(|a| (a, ts));
                }
                st.current = Some(*next_pid);
                if self.tids.contains(next_pid) {
                    st.oncpu_since = Some(ts);
                }
            }
            _ => {}
        }
        if let Some((a, b)) = close_oncpu {
            self.add(a, b, false);
        }
        if let Some((a, b)) = close_stolen {
            self.add(a, b, true);
        }
    }

    /// Hands out period `k` (everything before `t0 + (k+1)·period` must
    /// have been fed). Open intervals are cut at the boundary, their rest
    /// kept for the next period.
    pub fn finish_period(&mut self, k: u64) -> PeriodTrace {
        let end = self.t0 + (k + 1) * self.period;
        let mut cuts = Vec::new();
        for st in self.cpus.values_mut() {
            if let Some(a) = st.oncpu_since {
                if a < end {
                    cuts.push((a, end, false));
                    st.oncpu_since = Some(end);
                }
            }
            if let Some(a) = st.stolen_since {
                if a < end {
                    cuts.push((a, end, true));
                    st.stolen_since = Some(end);
                }
            }
        }
        for (a, b, s) in cuts {
            self.add(a, b, s);
        }
        let out = self.acc.remove(&k).unwrap_or_default();
        self.next_out = self.next_out.max(k + 1);
        // Anything older is stale (a period skipped by a late wake-up).
        self.acc = self.acc.split_off(&self.next_out);
        out
    }
}

/// A private tracing instance recording, on the reserved CPU(s), the
/// events [`Accountant`] needs.
pub struct CommandTrace {
    // Declared before `instance`: the open ring files must be closed
    // before the instance directory can be removed.
    files: Vec<(u32, File)>,
    decoder: Decoder,
    hp: HeaderPage,
    he: HeaderEvent,
    buf: Vec<u8>,
    pub pages: u64,
    pub malformed: u64,
    instance: Instance,
}

impl std::fmt::Debug for CommandTrace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandTrace")
            .field("cpus", &self.files.iter().map(|x| x.0).collect::<Vec<_>>())
            .field("instance", &self.instance.path())
            .finish()
    }
}

/// The events wanted: interrupt contexts and task switches only (no
/// wake-ups, no workqueues), so the reserved CPU pays for as few ring
/// writes as the accounting allows.
fn wanted(events_dir: &Path) -> Vec<String> {
    punctual_trace::recorder::wanted_events(events_dir, false)
        .into_iter()
        .filter(|e| !e.starts_with("workqueue/"))
        .collect()
}

impl CommandTrace {
    /// Starts recording on `cpus`. Fails with the one sentence the user
    /// sees when tracing is unavailable; leaves nothing behind then.
    pub fn start(cpus: &[u32], journal_dir: &Path) -> Result<CommandTrace, NoTracing> {
        let inst = Instance::create(journal_dir)?;
        let wanted = wanted(&inst.root().join("events"));
        // 4 MiB: ~4 s of the disk load's interrupt events, room for a
        // reader that falls behind for a while.
        let Rings {
            files,
            decoder,
            header_page: hp,
            header_event: he,
            instance: mut inst,
            ..
        } = Rings::open(
            inst,
            cpus,
            4096,
            wanted,
            &["sched/sched_switch", "irq/irq_handler_entry"],
            &[],
        )?;
        let fail = |what: &str, e: &dyn std::fmt::Display| NoTracing(format!("{what}: {e}"));
        inst.set("tracing_on", "1")
            .map_err(|e| fail("cannot switch tracing on", &e))?;
        let page = hp.page_size();
        Ok(CommandTrace {
            files,
            decoder,
            hp,
            he,
            buf: vec![0u8; page],
            pages: 0,
            malformed: 0,
            instance: inst,
        })
    }

    /// Reads everything the rings hold now into `acct`.
    pub fn drain(&mut self, acct: &mut Accountant) {
        let (pages, malformed, decoder) = (&mut self.pages, &mut self.malformed, &self.decoder);
        for (cpu, f) in self.files.iter_mut() {
            let cpu = *cpu;
            drain_ring(f, &mut self.buf, &self.hp, &self.he, |page| {
                let Ok(page) = page else {
                    *malformed += 1;
                    return;
                };
                *pages += 1;
                *malformed += page.malformed;
                if page.missed {
                    let to = page.events.first().map(|e| e.ts).unwrap_or(page.base_ts);
                    acct.lost(cpu, to, page.missed_count.unwrap_or(1));
                }
                for ev in &page.events {
                    if let Some(d) = decoder.decode(ev.ts, ev.data) {
                        acct.feed(cpu, &d);
                    }
                }
            });
        }
    }

    /// Stops tracing and removes the instance (tracefs as it was).
    pub fn close(mut self) -> Result<(), String> {
        let _ = self.instance.set("tracing_on", "0");
        self.files.clear();
        self.instance.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ts: u64, pid: i32, event: Event) -> Decoded {
        Decoded { ts, pid, event }
    }
    fn sw(ts: u64, prev: i32, next: i32) -> Decoded {
        ev(
            ts,
            prev,
            Event::Switch {
                prev_pid: prev,
                prev_comm: String::new(),
                prev_prio: 120,
                prev_state: Some(0),
                next_pid: next,
                next_comm: String::new(),
                next_prio: -1,
            },
        )
    }
    fn irq_in(ts: u64, pid: i32) -> Decoded {
        ev(
            ts,
            pid,
            Event::IrqEntry {
                irq: 11,
                name: "virtio1-req.0".into(),
            },
        )
    }
    fn irq_out(ts: u64, pid: i32) -> Decoded {
        ev(ts, pid, Event::IrqExit { irq: 11 })
    }
    fn soft_in(ts: u64, pid: i32) -> Decoded {
        ev(ts, pid, Event::SoftirqEntry { vec: 4 })
    }
    fn soft_out(ts: u64, pid: i32) -> Decoded {
        ev(ts, pid, Event::SoftirqExit { vec: 4 })
    }

    #[test]
    fn charged_and_stolen_split_at_period_boundaries() {
        // Grid 1000 + k·100; thread 7 runs [1010, 1250); an interrupt with
        // a nested softirq takes [1090, 1130) from it (counted once); an
        // interrupt while idle (pid 0) is nobody's loss.
        let mut a = Accountant::new(Nanos(1000), Nanos(100));
        a.set_tids([7]);
        let evs = [
            sw(1005, 0, 0),
            irq_in(1006, 0),
            irq_out(1008, 0),
            sw(1010, 0, 7),
            irq_in(1090, 7),
            soft_in(1095, 7),
            soft_out(1110, 7),
            irq_out(1130, 7),
            sw(1250, 7, 0),
        ];
        for e in &evs {
            a.feed(1, e);
        }
        let p0 = a.finish_period(0);
        assert_eq!(
            p0,
            PeriodTrace {
                charged: Nanos(90),
                stolen: Nanos(10),
                incomplete: false
            }
        );
        assert_eq!(p0.received(), Nanos(80));
        let p1 = a.finish_period(1);
        assert_eq!((p1.charged, p1.stolen), (Nanos(100), Nanos(30)));
        let p2 = a.finish_period(2);
        assert_eq!((p2.charged, p2.stolen), (Nanos(50), Nanos(0)));
    }

    #[test]
    fn a_switch_out_of_idle_the_kernel_did_not_record_is_recovered() {
        // The CPU idles (pid 0); the replenishment timer fires (vector
        // entry/exit in idle) and thread 7 runs, with no sched_switch
        // recorded; its first own event is a tick 3 units later.
        let mut a = Accountant::new(Nanos(0), Nanos(100));
        a.set_tids([7]);
        a.feed(0, &sw(5, 3, 0));
        let tick_in = |ts, pid| {
            ev(
                ts,
                pid,
                Event::VectorEntry {
                    name: "local_timer".into(),
                },
            )
        };
        let tick_out = |ts, pid| {
            ev(
                ts,
                pid,
                Event::VectorExit {
                    name: "local_timer".into(),
                },
            )
        };
        a.feed(0, &tick_in(20, 0));
        a.feed(0, &tick_out(22, 0));
        a.feed(0, &tick_in(25, 7));
        a.feed(0, &tick_out(26, 7));
        a.feed(0, &sw(60, 7, 0));
        let p = a.finish_period(0);
        assert_eq!((p.charged, p.stolen), (Nanos(38), Nanos(1)));
        // The same with no event of its own before it leaves the CPU.
        a.feed(0, &tick_in(120, 0));
        a.feed(0, &tick_out(121, 0));
        a.feed(0, &sw(150, 7, 0));
        assert_eq!(a.finish_period(1).charged, Nanos(29));
    }

    #[test]
    fn open_intervals_are_cut_at_the_boundary_and_carried() {
        let mut a = Accountant::new(Nanos(0), Nanos(100));
        a.set_tids([7]);
        a.feed(0, &sw(50, 0, 7));
        a.feed(0, &irq_in(90, 7));
        // Period 0 ends while the thread is inside an interrupt.
        let p0 = a.finish_period(0);
        assert_eq!((p0.charged, p0.stolen), (Nanos(50), Nanos(10)));
        a.feed(0, &irq_out(120, 7));
        a.feed(0, &sw(160, 7, 3));
        let p1 = a.finish_period(1);
        assert_eq!((p1.charged, p1.stolen), (Nanos(60), Nanos(20)));
        // Another thread's time and an exit without entry count for nothing.
        a.feed(0, &irq_out(210, 3));
        a.feed(0, &sw(290, 3, 0));
        assert_eq!(a.finish_period(2), PeriodTrace::default());
    }

    #[test]
    fn losses_and_a_start_mid_run_flag_periods_incomplete() {
        let mut a = Accountant::new(Nanos(0), Nanos(100));
        a.set_tids([7]);
        // First event seen while 7 already runs: known from then on.
        a.feed(0, &irq_in(30, 7));
        a.feed(0, &irq_out(40, 7));
        let p0 = a.finish_period(0);
        assert!(p0.incomplete);
        assert_eq!((p0.charged, p0.stolen), (Nanos(70), Nanos(10)));
        // Lost events in period 2: its open time is dropped and flagged.
        a.lost(0, 250, 5);
        let p1 = a.finish_period(1);
        assert!(p1.incomplete);
        let p2 = a.finish_period(2);
        assert!(p2.incomplete);
        assert_eq!(p2.charged, Nanos(0));
        assert_eq!(a.lost_events, 5);
        // NMI taken from the thread.
        a.feed(0, &sw(310, 0, 7));
        a.feed(0, &ev(350, 7, Event::Nmi { delta_ns: 5 }));
        let p3 = a.finish_period(3);
        assert_eq!((p3.charged, p3.stolen), (Nanos(90), Nanos(5)));
        assert!(!p3.incomplete);
    }
}

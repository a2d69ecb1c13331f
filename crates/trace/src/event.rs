//! Typed events from raw records, through the `format` files.

use std::collections::HashMap;

use crate::format::{EventFormat, Field, FormatError};

/// The events the attribution understands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    IrqEntry {
        irq: i32,
        name: String,
    },
    IrqExit {
        irq: i32,
    },
    SoftirqEntry {
        vec: u32,
    },
    SoftirqExit {
        vec: u32,
    },
    /// x86 system vector (`irq_vectors:<name>_entry`), e.g. `local_timer`.
    VectorEntry {
        name: String,
    },
    VectorExit {
        name: String,
    },
    Switch {
        prev_pid: i32,
        prev_comm: String,
        prev_prio: i32,
        next_pid: i32,
        next_comm: String,
        next_prio: i32,
        /// The kernel's `prev_state` (`None` when the format lacks it): 0
        /// (or only the preemption bit above the state bits) means the
        /// task left the CPU still runnable.
        prev_state: Option<i64>,
    },
    Wakeup {
        pid: i32,
        comm: String,
        prio: i32,
    },
    /// `sched_waking`: the start of the wake-up path (`try_to_wake_up`),
    /// on the waker's CPU, before the task is queued.
    Waking {
        pid: i32,
        comm: String,
        prio: i32,
    },
    /// A kworker starts a work item; `function` is a kernel address.
    WorkStart {
        function: u64,
    },
    WorkEnd {
        function: u64,
    },
    /// An NMI handler ran for `delta_ns`, ending at the event's timestamp.
    Nmi {
        delta_ns: i64,
    },
    /// A system call returned (`raw_syscalls:sys_exit`), in the task's own
    /// context: the first sign that a thread woken on an idle CPU runs,
    /// where this kernel traces no switch out of idle.
    SysExit,
    /// A page fault entered by the current task (`exceptions:page_fault_*`;
    /// no exit event exists).
    PageFault,
}

/// Whether a `sched_switch` `prev_state` says the task was still
/// runnable: no state bit set (`R`), possibly with the preemption marker
/// (`R+`, a bit above the state bits) that the kernel adds when it
/// switches a task out without it blocking.
pub fn left_runnable(prev_state: i64) -> bool {
    prev_state & 0xff == 0
}

/// One decoded record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub ts: u64,
    /// `common_pid`: the task current when the event fired.
    pub pid: i32,
    pub event: Event,
}

/// Softirq names by vector number (include/linux/interrupt.h order, which
/// has not changed since 2.6.34).
pub const SOFTIRQ_NAMES: [&str; 10] = [
    "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
];

pub fn softirq_name(vec: u32) -> String {
    SOFTIRQ_NAMES
        .get(vec as usize)
        .map(|s| s.to_string())
        .unwrap_or_else(|| format!("softirq{vec}"))
}

#[derive(Debug, Clone)]
enum Kind {
    IrqEntry {
        irq: Field,
        name: Field,
    },
    IrqExit {
        irq: Field,
    },
    SoftirqEntry {
        vec: Field,
    },
    SoftirqExit {
        vec: Field,
    },
    VectorEntry(String),
    VectorExit(String),
    Switch(Box<([Field; 6], Option<Field>)>),
    Wakeup {
        pid: Field,
        comm: Field,
        prio: Field,
    },
    Waking {
        pid: Field,
        comm: Field,
        prio: Field,
    },
    WorkStart {
        function: Field,
    },
    WorkEnd {
        function: Field,
    },
    Nmi {
        delta: Field,
    },
    PageFault,
    SysExit,
}

/// Maps event ids to decoders; built once per run from the format files.
#[derive(Debug, Clone)]
pub struct Decoder {
    by_id: HashMap<u16, Kind>,
    common_type: Field,
    common_pid: Field,
}

impl Decoder {
    /// Formats of events it does not know are ignored; a known event
    /// missing a field it needs is refused.
    pub fn new(formats: &[EventFormat]) -> Result<Decoder, FormatError> {
        let mut by_id = HashMap::new();
        let mut common = None;
        for f in formats {
            let g = |n: &str| f.field(n).cloned();
            let kind = match (f.system.as_str(), f.name.as_str()) {
                ("irq", "irq_handler_entry") => Kind::IrqEntry {
                    irq: g("irq")?,
                    name: g("name")?,
                },
                ("irq", "irq_handler_exit") => Kind::IrqExit { irq: g("irq")? },
                ("irq", "softirq_entry") => Kind::SoftirqEntry { vec: g("vec")? },
                ("irq", "softirq_exit") => Kind::SoftirqExit { vec: g("vec")? },
                ("irq_vectors", n) if n.ends_with("_entry") => {
                    Kind::VectorEntry(n.trim_end_matches("_entry").to_string())
                }
                ("irq_vectors", n) if n.ends_with("_exit") => {
                    Kind::VectorExit(n.trim_end_matches("_exit").to_string())
                }
                ("sched", "sched_switch") => Kind::Switch(Box::new((
                    [
                        g("prev_pid")?,
                        g("prev_comm")?,
                        g("prev_prio")?,
                        g("next_pid")?,
                        g("next_comm")?,
                        g("next_prio")?,
                    ],
                    f.field("prev_state").ok().cloned(),
                ))),
                ("sched", "sched_wakeup") => Kind::Wakeup {
                    pid: g("pid")?,
                    comm: g("comm")?,
                    prio: g("prio")?,
                },
                ("sched", "sched_waking") => Kind::Waking {
                    pid: g("pid")?,
                    comm: g("comm")?,
                    prio: g("prio")?,
                },
                ("workqueue", "workqueue_execute_start") => Kind::WorkStart {
                    function: g("function")?,
                },
                ("workqueue", "workqueue_execute_end") => Kind::WorkEnd {
                    function: g("function")?,
                },
                ("nmi", "nmi_handler") => Kind::Nmi {
                    delta: g("delta_ns")?,
                },
                ("exceptions", "page_fault_user" | "page_fault_kernel") => Kind::PageFault,
                ("raw_syscalls", "sys_exit") => Kind::SysExit,
                _ => continue,
            };
            if common.is_none() {
                common = Some((g("common_type")?, g("common_pid")?));
            }
            by_id.insert(f.id, kind);
        }
        let (common_type, common_pid) = common.ok_or(FormatError::Missing("common_type"))?;
        Ok(Decoder {
            by_id,
            common_type,
            common_pid,
        })
    }

    /// Decodes one record; `None` for events it does not know or records
    /// too short for their format.
    pub fn decode(&self, ts: u64, rec: &[u8]) -> Option<Decoded> {
        let id = self.common_type.int(rec)? as u16;
        let kind = self.by_id.get(&id)?;
        let pid = self.common_pid.int(rec)? as i32;
        let i32f = |f: &Field| f.int(rec).map(|v| v as i32);
        let event = match kind {
            Kind::IrqEntry { irq, name } => Event::IrqEntry {
                irq: i32f(irq)?,
                name: name.string(rec)?,
            },
            Kind::IrqExit { irq } => Event::IrqExit { irq: i32f(irq)? },
            Kind::SoftirqEntry { vec } => Event::SoftirqEntry {
                vec: vec.int(rec)? as u32,
            },
            Kind::SoftirqExit { vec } => Event::SoftirqExit {
                vec: vec.int(rec)? as u32,
            },
            Kind::VectorEntry(n) => Event::VectorEntry { name: n.clone() },
            Kind::VectorExit(n) => Event::VectorExit { name: n.clone() },
            Kind::Switch(f) => {
                let ([pp, pc, ppr, np, nc, npr], ps) = &**f;
                Event::Switch {
                    prev_pid: i32f(pp)?,
                    prev_comm: pc.string(rec)?,
                    prev_prio: i32f(ppr)?,
                    next_pid: i32f(np)?,
                    next_comm: nc.string(rec)?,
                    next_prio: i32f(npr)?,
                    prev_state: ps.as_ref().and_then(|f| f.int(rec)),
                }
            }
            Kind::Wakeup { pid, comm, prio } => Event::Wakeup {
                pid: i32f(pid)?,
                comm: comm.string(rec)?,
                prio: i32f(prio)?,
            },
            Kind::Waking { pid, comm, prio } => Event::Waking {
                pid: i32f(pid)?,
                comm: comm.string(rec)?,
                prio: i32f(prio)?,
            },
            Kind::WorkStart { function } => Event::WorkStart {
                function: function.u64(rec)?,
            },
            Kind::WorkEnd { function } => Event::WorkEnd {
                function: function.u64(rec)?,
            },
            Kind::Nmi { delta } => Event::Nmi {
                delta_ns: delta.int(rec)?,
            },
            Kind::PageFault => Event::PageFault,
            Kind::SysExit => Event::SysExit,
        };
        Some(Decoded { ts, pid, event })
    }
}

/// Reads the format files of the given `system/event` names below an
/// `events` directory; events this kernel lacks are skipped.
pub fn load_formats(events_dir: &std::path::Path, names: &[String]) -> Vec<EventFormat> {
    names
        .iter()
        .filter_map(|n| {
            let (sys, _) = n.split_once('/')?;
            let text = crate::tracefs::read_file(&events_dir.join(n).join("format")).ok()?;
            EventFormat::parse(sys, &text).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This kernel's `exceptions:page_fault_user` format (and the kernel
    /// one, the same fields): a page fault with the pid it ran for.
    #[test]
    fn page_faults_decode_with_their_task() {
        let text = |name: &str, id: u16| {
            format!(
                "name: {name}\nID: {id}\nformat:\n\
                 \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
                 \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
                 \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
                 \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
                 \tfield:unsigned long address;\toffset:8;\tsize:8;\tsigned:0;\n\
                 \tfield:unsigned long ip;\toffset:16;\tsize:8;\tsigned:0;\n\
                 \tfield:unsigned long error_code;\toffset:24;\tsize:8;\tsigned:0;\n\n\
                 print fmt: \"address=%ps ip=%ps error_code=0x%lx\"\n"
            )
        };
        let formats = [
            EventFormat::parse("exceptions", &text("page_fault_user", 190)).unwrap(),
            EventFormat::parse("exceptions", &text("page_fault_kernel", 189)).unwrap(),
        ];
        let d = Decoder::new(&formats).unwrap();
        for id in [190u16, 189] {
            let mut rec = vec![0u8; 32];
            rec[0..2].copy_from_slice(&id.to_le_bytes());
            rec[4..8].copy_from_slice(&4242i32.to_le_bytes());
            let ev = d.decode(7, &rec).unwrap();
            assert_eq!((ev.ts, ev.pid, ev.event), (7, 4242, Event::PageFault));
        }
    }
}

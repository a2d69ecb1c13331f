//! `punctual watch`: the flight recorder on every online CPU, keeping the
//! scheduler events of another process's threads, for as long as asked
//! (or until Ctrl-C, `--stop-at`, or the process's exit), then the record
//! those events make (`punctual_trace::watch`). The application is not
//! touched: no probe runs, nothing is injected into it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use punctual_record::{Nanos, Record, Warning};
use punctual_trace::recorder::{FlightRecorder, Options};
use punctual_trace::tracedat::RawWindow;
use punctual_trace::watch::{StopAt, WatchSpec};

use crate::MeasureError;

/// What to watch and for how long.
#[derive(Clone, Debug)]
pub struct WatchRequest {
    pub pid: i32,
    /// `--tid`: only these threads of the process (all when empty).
    pub tids: Vec<i32>,
    /// `--period`: judge deadlines by this period instead of the detected one.
    pub period: Option<Nanos>,
    pub duration: Nanos,
    /// `--stop-at`: end the run at the first wake-up later than this.
    pub stop_at: Option<Nanos>,
    /// Trace ring per CPU, in KiB.
    pub buffer_kb: u32,
    /// Slowest wake-ups kept per thread in the spike log.
    pub max_spikes: usize,
    /// What to keep of a `--stop-at` event besides its causes.
    pub evidence: crate::Evidence,
}

/// How long after a switch its stack may be stamped: the unwinding runs in
/// the switch's tracepoint, tens of microseconds at worst on a busy VM.
const STACK_AFTER_SWITCH: Nanos = Nanos(500_000);

/// Every switch away from a task, on every CPU: a watched thread can wait
/// on any of them, and what held it is whatever ran there.
pub const WATCH_STACK_FILTER: &str = "prev_pid != 0";

/// The process and the threads a request names, as found in /proc.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub pid: i32,
    pub command: String,
    /// (tid, name).
    pub threads: Vec<(i32, String)>,
}

fn comm(path: &std::path::Path) -> String {
    std::fs::read_to_string(path.join("comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Checks that the process and the threads asked for exist; bad input is
/// one sentence naming the value.
pub fn target(pid: i32, tids: &[i32]) -> Result<Target, MeasureError> {
    if pid <= 0 {
        return Err(MeasureError::Usage(format!(
            "--pid {pid} is not a process id (give a number of 1 or more)"
        )));
    }
    let proc = std::path::PathBuf::from(format!("/proc/{pid}"));
    let Ok(rd) = std::fs::read_dir(proc.join("task")) else {
        return Err(MeasureError::Usage(format!(
            "no process with pid {pid} is running"
        )));
    };
    let mut all: Vec<(i32, String)> = rd
        .flatten()
        .filter_map(|e| {
            let tid = e.file_name().to_string_lossy().parse().ok()?;
            Some((tid, comm(&e.path())))
        })
        .collect();
    all.sort();
    let threads = if tids.is_empty() {
        all
    } else {
        let mut v = Vec::new();
        for t in tids {
            match all.iter().find(|(x, _)| x == t) {
                Some(x) => v.push(x.clone()),
                None => {
                    return Err(MeasureError::Usage(format!(
                        "--tid {t} is not a thread of process {pid} (its threads: {})",
                        all.iter()
                            .map(|(x, n)| format!("{x} {n}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )))
                }
            }
        }
        v.dedup();
        v
    };
    Ok(Target {
        pid,
        command: comm(&proc),
        threads,
    })
}

/// How often a watch of a whole process looks for its new threads: a
/// thread is followed from the first look after it starts (its earlier
/// wake-ups are not timed; its switches still in the rings are kept).
pub const FOLLOW_EVERY: Nanos = Nanos(100_000_000);

/// The threads of `pid` now, (tid, name), in tid order.
fn task_list(pid: i32) -> Vec<(i32, String)> {
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut all: Vec<(i32, String)> = rd
        .flatten()
        .filter_map(|e| {
            let tid = e.file_name().to_string_lossy().parse().ok()?;
            Some((tid, comm(&e.path())))
        })
        .collect();
    all.sort();
    all
}

fn alive(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Records the target's threads into `rec` until the duration, the stop
/// flag (Ctrl-C: the record keeps what was seen, marked interrupted),
/// `--stop-at` or the process's exit. Without tracefs there is nothing to
/// watch with: that is a run that could not be made. With
/// `req.evidence`, the recorder's last pages come back raw.
pub fn run(
    rec: &mut Record,
    req: &WatchRequest,
    t: &Target,
    stop: Arc<AtomicBool>,
) -> Result<Option<RawWindow>, MeasureError> {
    rec.set_config("pid", t.pid);
    rec.set_config("command", &t.command);
    rec.set_config("tids", t.threads.iter().map(|x| x.0).collect::<Vec<i32>>());
    rec.set_config("duration_ns", req.duration.0);
    rec.set_config("buffer_kb", req.buffer_kb);
    rec.set_config("max_spikes", req.max_spikes);
    if let Some(p) = req.period {
        rec.set_config("period_ns", p.0);
    }
    if let Some(s) = req.stop_at {
        rec.set_config("stop_at_ns", s.0);
    }
    let tripped = Arc::new(AtomicBool::new(false));
    let opts = Options {
        buffer_kb: req.buffer_kb,
        watch: t.threads.iter().map(|x| x.0).collect(),
        stop_at: req.stop_at.map(|threshold| StopAt {
            threshold,
            flag: Arc::clone(&tripped),
        }),
        // A crossing is seen at the next drain: drain more often when one
        // ends the run.
        poll: if req.stop_at.is_some() {
            Duration::from_millis(100)
        } else {
            Options::default().poll
        },
        keep_raw: (req.evidence.raw || req.evidence.stacks)
            .then_some(punctual_trace::tracedat::STOP_WINDOW),
        stack_filter: req.evidence.stacks.then(|| WATCH_STACK_FILTER.to_string()),
        ..Options::default()
    };
    if req.evidence.stacks {
        rec.set_config("stop_stacks", true);
    }
    let cpus = punctual_live::sysinfo::online_cpus();
    let mut recorder = FlightRecorder::start(&cpus, &opts).map_err(|e| {
        MeasureError::Runtime(format!(
            "watch reads the scheduler's events from tracefs, which is not available here: {}",
            e.0
        ))
    })?;
    let origin = punctual_live::clock::mono();
    rec.started_mono_ns = Some(origin);
    let mut exited = false;
    // Without --tid every thread of the process is watched, those it
    // creates later too: /proc is read again every FOLLOW_EVERY.
    let follow = req.tids.is_empty();
    let mut threads = t.threads.clone();
    let mut followed: Vec<i32> = Vec::new();
    let mut last_scan = origin;
    let mut follow_problem = None;
    loop {
        let now = punctual_live::clock::mono();
        if follow && now.0.saturating_sub(last_scan.0) >= FOLLOW_EVERY.0 {
            last_scan = now;
            let new: Vec<(i32, String)> = task_list(t.pid)
                .into_iter()
                .filter(|(tid, _)| !threads.iter().any(|x| x.0 == *tid))
                .collect();
            if !new.is_empty() {
                let tids: Vec<i32> = new.iter().map(|x| x.0).collect();
                if let Err(e) = recorder.watch_more(&tids) {
                    follow_problem.get_or_insert(e);
                }
                followed.extend(&tids);
                threads.extend(new);
            }
        }
        let elapsed = punctual_live::clock::mono().0.saturating_sub(origin.0);
        if elapsed >= req.duration.0
            || stop.load(Ordering::Relaxed)
            || tripped.load(Ordering::Relaxed)
        {
            break;
        }
        if !alive(t.pid) {
            exited = true;
            break;
        }
        let left = req.duration.0 - elapsed;
        std::thread::sleep(Duration::from_nanos(left.min(50_000_000)));
    }
    let elapsed = Nanos(punctual_live::clock::mono().0.saturating_sub(origin.0));
    rec.interrupted = stop.load(Ordering::Relaxed);
    let trace = recorder
        .stop()
        .map_err(|e| MeasureError::Runtime(format!("the trace could not be read: {}", e.0)))?;
    if let Some(p) = &trace.cleanup_problem {
        rec.warnings.push(Warning::Other {
            message: format!("tracing cleanup incomplete: {p}; run 'punctual cause --cleanup'"),
        });
    }
    if !followed.is_empty() {
        rec.set_config("followed_tids", &followed);
    }
    if let Some(p) = follow_problem {
        rec.warnings.push(Warning::Other {
            message: format!(
                "threads created during the run are watched without their wake-ups: {p}"
            ),
        });
    }
    let spec = WatchSpec {
        pid: t.pid,
        command: t.command.clone(),
        threads: threads.clone(),
        period: req.period,
        max_spikes: req.max_spikes,
        origin: origin.0,
        stop_at: req.stop_at,
    };
    let mut sum = trace.fill_watch(rec, &spec);
    if let (Some(raw), Some(s)) = (&trace.raw, sum.stopped_at.as_mut()) {
        if req.evidence.stacks {
            // The switch-in is the sched_switch's time; the stack of the
            // task it switched away from is written right after it.
            let run = origin.0 + s.at_ns.0;
            let from = run.saturating_sub(s.latency_ns.0);
            let to = run + STACK_AFTER_SWITCH.0;
            s.stack = crate::attach::event_stack(raw, s.cpu, from, to, &s.causes, &[s.tid]);
            rec.set_watch(&sum);
        }
    }
    if exited {
        rec.warnings.push(Warning::Other {
            message: format!(
                "process {} ({}) exited after {elapsed}: the record covers its life until then",
                t.pid, t.command
            ),
        });
    }
    crate::session::finish_record(rec, elapsed, req.duration);
    Ok(trace.raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_process_or_thread_is_one_sentence() {
        let e = target(0, &[]).unwrap_err();
        assert!(matches!(e, MeasureError::Usage(_)), "{e}");
        // Pids are below pid_max (at most 2^22).
        let e = target(1 << 23, &[]).unwrap_err().to_string();
        assert_eq!(e, format!("no process with pid {} is running", 1 << 23));
        let me = std::process::id() as i32;
        let t = target(me, &[]).unwrap();
        assert!(t.threads.iter().any(|x| x.0 == me));
        let e = target(me, &[-5]).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("--tid -5 is not a thread of process {me}")),
            "{e}"
        );
        assert_eq!(target(me, &[me]).unwrap().threads.len(), 1);
    }
}

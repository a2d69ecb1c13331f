//! The recorder's raw window as a `trace.dat`: `trace-cmd report` reads
//! it and finds in it the switches of a thread this test ran while
//! recording (root, tracefs and trace-cmd needed; skipped otherwise).

use std::time::Duration;

use punctual_trace::recorder::{FlightRecorder, Options};
use punctual_units::Nanos;

use crate::common::live;

fn skip_reason() -> Option<String> {
    // SAFETY: plain syscall.
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root for tracefs".into());
    }
    let found = std::process::Command::new("trace-cmd")
        .arg("--version")
        .output()
        .is_ok();
    (!found).then(|| "needs trace-cmd (apt-get install -y trace-cmd)".into())
}

#[test]
fn the_raw_window_is_a_trace_dat_trace_cmd_reads() {
    if let Some(r) = skip_reason() {
        eprintln!("skipped: {r}");
        return;
    }
    let _l = live();
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        journal_dir: dir.path().join("run"),
        keep_raw: Some(Nanos::from_ms(1000)),
        // The sleeper's own stack each time it blocks.
        stack_filter: Some("prev_comm == \"rawdat-sleeper\"".into()),
        ..Options::default()
    };
    let cpus = punctual_trace::recorder::online_cpus();
    let rec = FlightRecorder::start(&cpus, &opts).expect("tracing");
    // The trigger's removal is in the restore journal while it runs.
    let journal = dir
        .path()
        .join("run")
        .join(format!("trace-journal-{}.json", std::process::id()));
    let j = std::fs::read_to_string(&journal).unwrap();
    assert!(
        j.contains("!stacktrace if prev_comm"),
        "the trigger is journaled: {j}"
    );
    // A thread that sleeps and wakes: every wake-up is a switch in and out.
    let h = std::thread::Builder::new()
        .name("rawdat-sleeper".into())
        .spawn(|| {
            // SAFETY: plain syscall.
            let tid = unsafe { libc::gettid() };
            for _ in 0..100 {
                std::thread::sleep(Duration::from_millis(1));
            }
            tid
        })
        .unwrap();
    let tid = h.join().unwrap();
    let trace = rec.stop().expect("trace");
    assert!(!journal.exists(), "stopping undid the journal");
    let raw = trace.raw.as_ref().expect("the raw window was kept");
    assert!(!raw.keep.is_empty(), "pages were kept");
    let path = dir.path().join("trace.dat");
    raw.write(&path).unwrap();
    let out = std::process::Command::new("trace-cmd")
        .args(["report", "-i"])
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "trace-cmd report failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // trace-cmd prints a switch as `prev:PID [prio] S ==> next:PID [prio]`.
    let mine = format!(":{tid} [");
    let switches = text
        .lines()
        .filter(|l| l.contains("sched_switch:") && l.contains(&mine))
        .count();
    // 100 sleeps, each a switch out (and in, unless from idle); a page
    // may be lost, but most are there.
    assert!(
        switches >= 50,
        "{switches} switches to the sleeper ({tid}) in the report:\n{}",
        text.lines().take(40).collect::<Vec<_>>().join("\n")
    );
    assert!(
        text.contains("rawdat-sleeper"),
        "its name comes from the file's process table"
    );
    // The stacktrace trigger: trace-cmd prints each stack after its
    // switch, and the window decodes them itself.
    assert!(
        text.contains("kernel_stack:"),
        "no stack in the report; missing {:?}",
        trace.missing
    );
    let stacks: Vec<_> = raw.stacks().into_iter().filter(|s| s.pid == tid).collect();
    assert!(stacks.len() >= 50, "{} stacks of the sleeper", stacks.len());
    let kallsyms = std::fs::read_to_string("/proc/kallsyms").unwrap();
    let names = punctual_trace::tracedat::symbolize(&stacks[0].frames, &kallsyms);
    assert!(
        names.iter().any(|n| n.contains("nanosleep")),
        "a sleeper blocks in nanosleep: {names:?}"
    );
}

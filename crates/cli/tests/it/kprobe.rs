//! `timer --probe timerlat` and `noise --probe osnoise` where they cannot
//! run: a kernel without the tracer is told so in one sentence with what
//! to do (exit status 2), and options of punctual's own probes are refused
//! with the kernel's rather than ignored. Where the kernel has the tracers
//! (the PREEMPT_RT guests of tests/kernels), tests/kernels/suite.sh runs
//! them for real.

use assert_cmd::Command;

fn punctual() -> Command {
    Command::cargo_bin("punctual").unwrap()
}

/// The tracers this kernel lists, or None when tracefs cannot say.
fn available_tracers() -> Option<String> {
    ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .find_map(|d| std::fs::read_to_string(format!("{d}/available_tracers")).ok())
}

#[test]
fn a_kernel_without_the_tracer_exits_2_with_what_to_do() {
    let Some(list) = available_tracers() else {
        eprintln!("skipped: tracefs is not readable here (needs root and a mounted tracefs)");
        return;
    };
    for (verb, tracer, config) in [
        ("timer", "timerlat", "CONFIG_TIMERLAT_TRACER"),
        ("noise", "osnoise", "CONFIG_OSNOISE_TRACER"),
    ] {
        if list.split_whitespace().any(|t| t == tracer) {
            eprintln!("skipped {verb}: this kernel has the {tracer} tracer");
            continue;
        }
        let out = punctual()
            .args([verb, "--probe", tracer, "--cpus", "0", "--duration", "1s"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{verb}: {err}");
        assert_eq!(err.lines().count(), 1, "one sentence: {err}");
        assert!(
            err.contains(&format!("kernel's {tracer} tracer is not available here")),
            "{err}"
        );
        assert!(err.contains(config), "says which kernel to boot: {err}");
        assert!(
            err.contains(&format!("leave out --probe {tracer}")),
            "says how to measure anyway: {err}"
        );
        assert!(out.stdout.is_empty(), "no record printed");
    }
}

/// These are refused before the tracer is looked for, on any kernel.
#[test]
fn options_of_punctuals_own_probes_are_refused_with_the_kernels() {
    for args in [
        &["timer", "--probe", "timerlat", "--cause"][..],
        &["timer", "--probe", "timerlat", "--clock", "timerfd"][..],
        &["timer", "--probe", "timerlat", "--stop-at", "1ms"][..],
        &["timer", "--probe", "timerlat", "--interval", "50us"][..],
        &["timer", "--probe", "timerlat", "--interval", "100500ns"][..],
        &["noise", "--probe", "osnoise", "--threshold", "3us"][..],
        &["noise", "--probe", "osnoise", "--cause"][..],
    ] {
        let out = punctual()
            .args(args)
            .args(["--cpus", "0", "--duration", "1s"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("not to --probe")
                || err.contains("not a period the timerlat tracer takes"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn an_unknown_probe_is_a_usage_error() {
    let out = punctual()
        .args(["timer", "--probe", "hwlat", "--duration", "1s"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

//! Small repros of where the simulator was wrong or silent: overload
//! accounting, scenario validation and plan-mode admission. Each expected
//! figure is derived by hand in the comment above its check.

use punctual_sim::{run_text, RunOptions};
use punctual_units::Nanos;

use crate::common::{assert_at, refuse};

fn run(text: &str) -> punctual_sim::Outcome {
    run_text("t.toml", text, &[], &RunOptions::default())
        .unwrap_or_else(|e| panic!("{e}"))
        .1
}

#[test]
fn a_job_pending_past_its_deadline_at_the_end_is_a_miss() {
    // 3 ms of work every 2 ms for 10 ms. Jobs released at 0, 2, 4 finish at
    // 3, 6, 9, each after its deadline (2, 4, 6): 3 misses. The job released
    // at 6 is still waiting at its deadline of 8: a 4th. The one released
    // at 8 has its deadline at the end (10) and is not yet late.
    let text = "[sim]\nduration = \"10ms\"\n[[task]]\nname = \"a\"\nkind = \"periodic\"\n\
                priority = 10\nperiod = \"2ms\"\nexec = \"3ms\"\n";
    let o = run(text);
    let t = &o.tasks[0];
    assert_eq!(t.jobs, 3);
    assert_eq!(t.deadline_misses, 4);
}

#[test]
fn duplicate_names_are_refused_where_the_second_one_stands() {
    let base = "[[task]]\nname = \"d\"\nkind = \"drainer\"\n";
    let text = format!("{base}[[task]]\nname = \"d\"\nkind = \"background\"\n");
    let e = refuse(&text);
    assert!(
        e.message.contains("two [[task]] entries are named 'd'"),
        "{e}"
    );
    assert_at(&e, &text, "\"d\"\nkind = \"background\"");

    let stream = "[[stream]]\nname = \"s\"\nrate = 100.0\ncapacity = 4\ndrained_by = \"d\"\n";
    let text = format!("{base}{stream}{}", stream.replace("rate", "cpu = 0\nrate"));
    let e = refuse(&text);
    assert!(e.message.contains("[[stream]]"), "{e}");
    assert_at(&e, &text, "\"s\"\ncpu = 0");

    let c =
        "[[constraint]]\nname = \"c\"\nstart = \"1ms\"\ndeadline = \"2ms\"\nestimate = \"1ms\"\n";
    let text = format!(
        "[sim]\nscheduler = \"plan\"\n[[task]]\nname = \"g\"\nkind = \"background\"\n{c}{}",
        c.replace("start", "at = \"0ms\"\nstart")
    );
    let e = refuse(&text);
    assert!(e.message.contains("[[constraint]]"), "{e}");
    assert_at(&e, &text, "\"c\"\nat = ");
}

#[test]
fn an_empty_scenario_and_an_unreleased_timer_task_are_refused() {
    let e = refuse("");
    assert!(e.message.contains("nothing to simulate"), "{e}");
    let e = refuse("[sim]\nduration = \"1s\"\n");
    assert!(e.message.contains("nothing to simulate"), "{e}");
    let text = "[[task]]\nname = \"cb\"\nkind = \"timer\"\n";
    let e = refuse(text);
    assert!(e.message.contains("no [[timer]] releases it"), "{e}");
    assert_at(&e, text, "\"cb\"");
}

#[test]
fn errors_in_sim_give_line_and_column() {
    let task = "[[task]]\nname = \"b\"\nkind = \"background\"\n";
    for (field, value) in [
        ("cpus", "0"),
        ("duration", "\"0ms\""),
        ("quantum", "\"0ms\""),
        ("admission_cap", "1.5"),
    ] {
        let text = format!("[sim]\n{field} = {value}\n{task}");
        let e = refuse(&text);
        assert!(e.message.contains(field), "{e}");
        assert_at(&e, &text, value);
    }
}

const PLAN: &str = "[sim]\nscheduler = \"plan\"\nplan_base = \"10ms\"\nduration = \"100ms\"\n";

#[test]
fn plan_mode_honours_the_admission_cap() {
    // 10 ms every 10 ms is the whole CPU: over the plan's default 95% cap,
    // admitted under a cap of 1.0.
    let task = "[[task]]\nname = \"a\"\nkind = \"background\"\n\
                reserve = { amount = \"10ms\", period = \"10ms\" }\n";
    let e = refuse(&format!("{PLAN}{task}"));
    assert!(e.message.contains("reservation denied"), "{e}");
    let o = run(&format!("{PLAN}admission_cap = 1.0\n{task}"));
    assert_eq!(o.tasks[0].deadline_misses, 0);
    assert_eq!(o.tasks[0].jobs, 10);
    // With admission off it runs too, with a warning naming the cap.
    let o = run(&format!("{PLAN}admission = false\n{task}"));
    assert!(o.warnings.iter().any(|w| w.contains("admission is off")));
}

#[test]
fn a_plan_refusal_after_rounding_a_period_says_so() {
    // 19.99 ms rounds down to the 10 ms level: 9.9 ms is then 99% of it.
    let task = "[[task]]\nname = \"a\"\nkind = \"background\"\n\
                reserve = { amount = \"9.9ms\", period = \"19.99ms\" }\n";
    let e = refuse(&format!("{PLAN}{task}"));
    assert!(
        e.message
            .contains("19.99ms was rounded down to the 10ms plan level, so 9.9ms becomes 99.0%"),
        "{e}"
    );
}

#[test]
fn a_constraint_asked_after_the_end_is_not_granted() {
    let text = format!(
        "{PLAN}[[task]]\nname = \"g\"\nkind = \"background\"\n[[constraint]]\nname = \"late\"\n\
         task = \"g\"\nat = \"200ms\"\nstart = \"0ms\"\ndeadline = \"10ms\"\nestimate = \"1ms\"\n"
    );
    let o = run(&text);
    let c = &o.constraints[0];
    assert!(!c.granted);
    let why = c.denied_because.as_deref().unwrap_or("");
    assert!(why.contains("after the run ended"), "{why}");
}

#[test]
fn the_trace_holds_stalls_and_steals() {
    // A 1 ms bus stall every 10 ms and a 2 ms hypervisor steal every 25 ms
    // over 100 ms: 10 and 4 slices, none overlapping another of its CPU.
    let text = "[sim]\nduration = \"100ms\"\n[[task]]\nname = \"b\"\nkind = \"background\"\n\
                [[noise]]\nname = \"bus\"\nkind = \"periodic\"\nlevel = \"stall\"\nperiod = \"10ms\"\n\
                duration = \"1ms\"\n[[noise]]\nname = \"vm\"\nkind = \"periodic\"\nlevel = \"steal\"\n\
                period = \"25ms\"\nphase = \"3ms\"\nduration = \"2ms\"\n";
    let opts = RunOptions {
        trace_cap: Some(10_000),
        ..Default::default()
    };
    let o = run_text("t.toml", text, &[], &opts).unwrap().1;
    let of = |n: &str| o.trace.iter().filter(|s| s.name == n).count();
    assert_eq!(of("bus"), 10);
    assert_eq!(of("vm"), 4);
    let total: Nanos = o.trace.iter().filter(|s| s.track == 0).map(|s| s.dur).sum();
    assert_eq!(total, Nanos::from_ms(10 + 8));
}

#[test]
fn a_denial_never_rounds_both_sides_to_one_figure() {
    // A takes 1 ms of each 10 ms, so 9 ms of [0, 10 ms) is free; 9.000001 ms
    // is asked.
    let text = format!(
        "{PLAN}[[task]]\nname = \"a\"\nkind = \"background\"\n\
         reserve = {{ amount = \"1ms\", period = \"10ms\" }}\n[[task]]\nname = \"g\"\n\
         kind = \"background\"\n[[constraint]]\nname = \"c\"\ntask = \"g\"\nstart = \"0ms\"\n\
         deadline = \"10ms\"\nestimate = \"9.000001ms\"\n"
    );
    let o = run(&text);
    let why = o.constraints[0].denied_because.as_deref().unwrap_or("");
    assert!(why.contains("only 9000000ns of"), "{why}");
    assert!(why.contains("9000001ns was asked"), "{why}");
}

#[test]
fn interrupt_work_the_cpu_cannot_serve_is_dropped_not_queued() {
    // Poisson 10^7/s of 1 ms interrupt work for 100 ms: about 10^6
    // arrivals, of which the CPU serves 100 and queues at most 10 000; the
    // rest (about 990 000, give or take 3 000 at three standard deviations)
    // are dropped and counted.
    let text = "[sim]\nduration = \"100ms\"\n[[task]]\nname = \"b\"\nkind = \"background\"\n\
                [[noise]]\nname = \"storm\"\nkind = \"poisson\"\nlevel = \"irq\"\nrate = 1e7\n\
                duration = \"1ms\"\n";
    let o = run(text);
    let s = o.sources.iter().find(|s| &*s.name == "storm").unwrap();
    assert!(
        s.dropped > 980_000 && s.dropped < 1_000_000,
        "{}",
        s.dropped
    );
    assert!(o
        .warnings
        .iter()
        .any(|w| w.contains("'storm' were dropped")));
}

#[test]
fn a_refilling_consumer_drops_the_jobs_queued_behind_an_underrun() {
    // 1 ms buffers × 3, 0.5 ms of work, one 10 ms stall at 5 ms (a
    // higher-priority task that computes 10 ms once). Without refill the
    // jobs released at 5..14 ms queue behind the stall and run from 15 ms
    // on, 0.5 ms each: job k (released at 5 + k ms) finishes at
    // 15.5 + 0.5k ms, late by 10.5 − 0.5k ms, an underrun while that
    // exceeds the 2 ms deadline: k = 0..16, 17 misses. With refill the
    // first late job (released at 5 ms, finishing at 15.5 ms) is one
    // underrun, the ten queued behind it are dropped, and the job released
    // at 16 ms runs on time: 1 miss.
    let base = "[sim]\nduration = \"40ms\"\n\
                [[task]]\nname = \"stall\"\nkind = \"periodic\"\npriority = 31\nperiod = \"1s\"\n\
                phase = \"5ms\"\nexec = \"10ms\"\n\
                [[task]]\nname = \"consumer\"\nkind = \"periodic\"\npriority = 10\nperiod = \"1ms\"\n\
                exec = \"500us\"\nbuffers = 3\n";
    let misses = |text: &str| {
        let o = run(text);
        o.tasks
            .iter()
            .find(|t| &*t.name == "consumer")
            .unwrap()
            .deadline_misses
    };
    assert_eq!(misses(base), 17);
    assert_eq!(misses(&format!("{base}refill = true\n")), 1);
    let e = refuse(
        "[[task]]\nname = \"a\"\nkind = \"timer\"\npriority = 10\nexec = \"1ms\"\nrefill = true\n",
    );
    assert!(
        e.message.contains("refill needs buffers or a deadline"),
        "{e}"
    );
}

//! `sim.edf_ties`: how equal EDF deadlines are ordered when a job was
//! queued behind its own late predecessor. Each expected figure is derived
//! by hand in the comment above its check.

use punctual_sim::{run_text, Outcome, RunOptions};
use punctual_units::Nanos;

use crate::common::{assert_at, refuse};

fn run(text: &str) -> Outcome {
    run_text("t.toml", text, &[], &RunOptions::default())
        .unwrap_or_else(|e| panic!("{e}"))
        .1
}

/// A: 4.5 ms of work every 4 ms (always late, so its jobs queue); B: one
/// job of 1 ms released at `b_at` with its deadline at 8 ms, the absolute
/// deadline of A's job released at 4 ms. Late jobs run on; 11 ms
/// simulated.
fn tie_at(rule: &str, b_at: &str, b_deadline: &str) -> String {
    format!(
        "[sim]\nduration = \"11ms\"\n{rule}\
         [[task]]\nname = \"a\"\nkind = \"periodic\"\nclass = \"edf\"\nperiod = \"4ms\"\nexec = \"4.5ms\"\n\
         [[task]]\nname = \"b\"\nkind = \"periodic\"\nclass = \"edf\"\nperiod = \"100ms\"\nphase = \"{b_at}\"\n\
         deadline = \"{b_deadline}\"\nexec = \"1ms\"\n"
    )
}

/// B released at 2 ms, before A's job of 4 ms.
fn tie(rule: &str) -> String {
    tie_at(rule, "2ms", "6ms")
}

#[test]
fn by_task_a_queued_job_keeps_its_tasks_place() {
    // A0 runs 0-4.5 (deadline 4: a miss). At 4.5 A1 (released 4, deadline
    // 8) is next for A, and B0 (released 2, deadline 8) waits too: A has
    // been ready since 0, before B, and A1 keeps that place, so A1 runs
    // 4.5-9 (a miss) and B0 9-10 (done at 10 after its deadline 8: a
    // miss). A2 (released 8, deadline 12) runs 10-11 and is unfinished at
    // the end, before its deadline.
    for rule in ["", "edf_ties = \"task\"\n"] {
        let o = run(&tie(rule));
        let (a, b) = (&o.tasks[0], &o.tasks[1]);
        assert_eq!((a.jobs, a.deadline_misses), (2, 2), "{rule}");
        assert_eq!((b.jobs, b.deadline_misses), (1, 1), "{rule}");
        assert_eq!(b.response.max(), Nanos::from_ms(8), "{rule}");
    }
}

#[test]
fn by_ready_a_queued_job_is_ready_from_its_predecessors_end() {
    // As above, but A1 becomes ready only when A0 ends, at 4.5, after B0
    // (ready since 2): B0 runs 4.5-5.5, on time (response 3.5 ms); A1
    // runs 5.5-10 (a miss); A2 runs 10-11, unfinished.
    let o = run(&tie("edf_ties = \"ready\"\n"));
    let (a, b) = (&o.tasks[0], &o.tasks[1]);
    assert_eq!((a.jobs, a.deadline_misses), (2, 2));
    assert_eq!((b.jobs, b.deadline_misses), (1, 0));
    assert_eq!(b.response.max(), Nanos::from_us(3_500));
}

#[test]
fn by_ready_a_job_released_after_the_queued_one_still_goes_first() {
    // B released at 4.2 ms, after A1 (4 ms), with the same deadline 8 ms.
    // By task, A1 keeps A's place from 0: A1 runs 4.5-9 (a miss), B0 9-10
    // (a miss, response 5.8 ms). By ready, A1 is ready at 4.5, after B0
    // (ready at 4.2): B0 runs 4.5-5.5 (on time, response 1.3 ms), A1
    // 5.5-10. SimSo (EDF_mono, which activates a queued job at its
    // predecessor's end) runs B's job first too.
    let o = run(&tie_at("", "4.2ms", "3.8ms"));
    assert_eq!(o.tasks[1].deadline_misses, 1);
    assert_eq!(o.tasks[1].response.max(), Nanos::from_us(5_800));
    let o = run(&tie_at("edf_ties = \"ready\"\n", "4.2ms", "3.8ms"));
    assert_eq!(o.tasks[1].deadline_misses, 0);
    assert_eq!(o.tasks[1].response.max(), Nanos::from_us(1_300));
    assert_eq!((o.tasks[0].jobs, o.tasks[0].deadline_misses), (2, 2));
}

#[test]
fn a_bad_or_unsupported_edf_ties_is_refused_where_it_stands() {
    let text = tie("edf_ties = \"job\"\n");
    let e = refuse(&text);
    assert_at(&e, &text, "\"job\"");
    assert!(
        e.to_string().contains("expected \"task\" or \"ready\""),
        "{e}"
    );
    let text = "[sim]\ncpus = 2\nmultiprocessor = \"global\"\nedf_ties = \"ready\"\n\
                [[task]]\nname = \"a\"\nkind = \"periodic\"\nclass = \"edf\"\nperiod = \"2ms\"\nexec = \"1ms\"\n";
    let e = refuse(text);
    assert_at(&e, text, "\"ready\"");
    assert!(
        e.to_string()
            .contains("not supported with sim.multiprocessor"),
        "{e}"
    );
}

/// One CPU, 20 ms, equal fixed priorities: A 5 ms every 4 ms (always
/// behind), B 2 ms once at 1 ms.
fn equal_priorities(rule: &str) -> String {
    format!(
        "[sim]\nduration = \"20ms\"\n{rule}\
         [[task]]\nname = \"A\"\nkind = \"periodic\"\npriority = 5\nperiod = \"4ms\"\nexec = \"5ms\"\n\
         [[task]]\nname = \"B\"\nkind = \"periodic\"\npriority = 5\nperiod = \"100ms\"\nphase = \"1ms\"\nexec = \"2ms\"\n"
    )
}

#[test]
fn priority_ties_ready_puts_a_queued_job_behind_an_equal_priority_that_waits() {
    // "task": A runs from 0 and always has a job queued (5 ms of work
    // every 4 ms), so it stays runnable and keeps the CPU against B, its
    // equal, until the 20 ms round-robin quantum, which is the end: B never
    // runs. A completes at 5, 10 and 15 (responses 5, 6, 7 ms).
    let o = run(&equal_priorities(""));
    assert_eq!(o.tasks[1].jobs, 0);
    assert_eq!(o.tasks[0].jobs, 3);
    assert_eq!(o.tasks[0].response.max(), Nanos::from_ms(7));
    // "ready": at 5 A's second job (released 4) becomes ready then, behind
    // B (ready since 1): B runs 5-7 (waited 4 ms, response 6 ms). A runs
    // 7-12 and 12-17: completions at 5, 12 and 17, the last released at 8
    // (response 9 ms).
    let o = run(&equal_priorities("priority_ties = \"ready\"\n"));
    assert_eq!(o.tasks[1].jobs, 1);
    assert_eq!(o.tasks[1].latency.max(), Nanos::from_ms(4));
    assert_eq!(o.tasks[1].response.max(), Nanos::from_ms(6));
    assert_eq!(o.tasks[0].jobs, 3);
    assert_eq!(o.tasks[0].response.max(), Nanos::from_ms(9));
    // EDF ties are another key: they leave fixed priorities alone.
    let o = run(&equal_priorities("edf_ties = \"ready\"\n"));
    assert_eq!(o.tasks[1].jobs, 0);
}

#[test]
fn a_bad_or_unsupported_priority_ties_is_refused_where_it_stands() {
    let text = equal_priorities("priority_ties = \"fifo\"\n");
    let e = refuse(&text);
    assert_at(&e, &text, "\"fifo\"");
    assert!(
        e.to_string()
            .contains("sim.priority_ties = \"fifo\": expected \"task\" or \"ready\""),
        "{e}"
    );
    let text = "[sim]\ncpus = 2\nmultiprocessor = \"global\"\npriority_ties = \"ready\"\n\
                [[task]]\nname = \"a\"\nkind = \"periodic\"\npriority = 3\nperiod = \"2ms\"\nexec = \"1ms\"\n";
    let e = refuse(text);
    assert_at(&e, text, "\"ready\"");
    assert!(
        e.to_string()
            .contains("sim.priority_ties = \"ready\" is not supported with sim.multiprocessor"),
        "{e}"
    );
}

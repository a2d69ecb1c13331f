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

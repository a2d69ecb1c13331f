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
/// job of 1 ms released at 2 ms with a 6 ms deadline, so B's job and A's
/// job released at 4 ms share the absolute deadline 8 ms. Late jobs run
/// on; 11 ms simulated.
fn tie(rule: &str) -> String {
    format!(
        "[sim]\nduration = \"11ms\"\n{rule}\
         [[task]]\nname = \"a\"\nkind = \"periodic\"\nclass = \"edf\"\nperiod = \"4ms\"\nexec = \"4.5ms\"\n\
         [[task]]\nname = \"b\"\nkind = \"periodic\"\nclass = \"edf\"\nperiod = \"100ms\"\nphase = \"2ms\"\n\
         deadline = \"6ms\"\nexec = \"1ms\"\n"
    )
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
fn by_job_each_job_ranks_by_its_own_release_as_in_simso() {
    // As above, but at 4.5 the tie between A1 (released 4) and B0
    // (released 2) goes to B0, released first: B0 runs 4.5-5.5, on time;
    // A1 runs 5.5-10 (a miss); A2 runs 10-11, unfinished.
    let o = run(&tie("edf_ties = \"job\"\n"));
    let (a, b) = (&o.tasks[0], &o.tasks[1]);
    assert_eq!((a.jobs, a.deadline_misses), (2, 2));
    assert_eq!((b.jobs, b.deadline_misses), (1, 0));
    assert_eq!(b.response.max(), Nanos::from_us(3_500));
}

#[test]
fn a_bad_or_unsupported_edf_ties_is_refused_where_it_stands() {
    let text = tie("edf_ties = \"fifo\"\n");
    let e = refuse(&text);
    assert_at(&e, &text, "\"fifo\"");
    assert!(
        e.to_string().contains("expected \"task\" or \"job\""),
        "{e}"
    );
    let text = "[sim]\ncpus = 2\nmultiprocessor = \"global\"\nedf_ties = \"job\"\n\
                [[task]]\nname = \"a\"\nkind = \"periodic\"\nclass = \"edf\"\nperiod = \"2ms\"\nexec = \"1ms\"\n";
    let e = refuse(text);
    assert_at(&e, text, "\"job\"");
    assert!(
        e.to_string()
            .contains("not supported with sim.multiprocessor"),
        "{e}"
    );
}

//! `sim.on_miss`: late jobs run on ("continue", the default) or are dropped
//! at their deadline ("abort", SimSo's default). Each expected figure is
//! derived by hand in the comment above its check.

use punctual_sim::{run_text, to_record, Outcome, RunOptions, ScenarioError};

fn run(text: &str) -> Outcome {
    run_text("t.toml", text, &[], &RunOptions::default())
        .unwrap_or_else(|e| panic!("{e}"))
        .1
}

fn refuse(text: &str) -> ScenarioError {
    match run_text("t.toml", text, &[], &RunOptions::default()) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e,
    }
}

/// 3 ms of work every 2 ms for 10 ms (the overload repro).
fn overload(on_miss: &str) -> String {
    format!(
        "[sim]\nduration = \"10ms\"\n{on_miss}[[task]]\nname = \"a\"\nkind = \"periodic\"\n\
         priority = 10\nperiod = \"2ms\"\nexec = \"3ms\"\n"
    )
}

#[test]
fn continue_is_the_default_and_counts_the_pending_job() {
    // Jobs released at 0, 2, 4 finish at 3, 6, 9, after their deadlines
    // (2, 4, 6); the job released at 6 is still waiting at its deadline 8:
    // 4 misses, 3 completed jobs. The deadline of the job released at 8 is
    // the end of the run, not yet past.
    let default = run(&overload(""));
    let explicit = run(&overload("on_miss = \"continue\"\n"));
    for o in [&default, &explicit] {
        let t = &o.tasks[0];
        assert_eq!((t.jobs, t.deadline_misses, t.aborted), (3, 4, None));
    }
    // Saying "continue" changes nothing in the record but the scenario text.
    assert_eq!(
        default.tasks[0].deadline_misses,
        explicit.tasks[0].deadline_misses
    );
    assert_eq!(default.events, explicit.events);
}

#[test]
fn abort_drops_each_late_job_at_its_deadline() {
    // Each job runs 2 ms of its 3 and is dropped at its deadline, where the
    // next is released and starts: jobs released at 0, 2, 4, 6 are aborted
    // at 2, 4, 6, 8 (4 misses, 4 aborted, none completed). The one released
    // at 8 is running at the end, its deadline (10) not yet past.
    let o = run(&overload("on_miss = \"abort\"\n"));
    let t = &o.tasks[0];
    assert_eq!(t.releases, 5);
    assert_eq!(
        (t.jobs, t.deadline_misses, t.aborted, t.preemptions),
        (0, 4, Some(4), 0)
    );
    // Every job started at its release: no latency at all.
    assert_eq!(t.latency.max().0, 0);
}

/// A (priority 20) 1 ms every 4 ms; B (priority 10) `b_exec` every 6 ms;
/// 13 ms.
fn two_tasks(on_miss: &str, b_exec: &str) -> String {
    format!(
        "[sim]\nduration = \"13ms\"\non_miss = \"{on_miss}\"\n\
         [[task]]\nname = \"a\"\nkind = \"periodic\"\npriority = 20\nperiod = \"4ms\"\nexec = \"1ms\"\n\
         [[task]]\nname = \"b\"\nkind = \"periodic\"\npriority = 10\nperiod = \"6ms\"\nexec = \"{b_exec}\"\n"
    )
}

#[test]
fn an_aborted_job_gives_way_to_the_next_and_a_job_ending_at_its_deadline_is_on_time() {
    // B = 4.5 ms. A runs 0-1, 4-5, 8-9, 12-13. B0 runs 1-4 and 5-6: 4 ms
    // done at its deadline 6, 0.5 ms left.
    //   abort: B0 is dropped at 6; B1 runs 6-8 and 9-11.5, on time (12).
    //          B: 1 job, 1 miss, 1 aborted, response max 5.5 ms; B2 starts
    //          at 13 (A runs 12-13), so B was preempted once (B1 at 8).
    //   continue: B0 runs on to 6.5 (a miss, response 6.5 ms); B1 runs
    //          6.5-8 and 9-12, done exactly at its deadline: on time.
    //          B: 2 jobs, 1 miss.
    let o = run(&two_tasks("abort", "4.5ms"));
    let b = &o.tasks[1];
    assert_eq!((b.jobs, b.deadline_misses, b.aborted), (1, 1, Some(1)));
    assert_eq!(b.response.max().0, 5_500_000);
    assert_eq!(o.tasks[0].aborted, Some(0));
    assert_eq!(o.tasks[0].deadline_misses, 0);
    let o = run(&two_tasks("continue", "4.5ms"));
    let b = &o.tasks[1];
    assert_eq!((b.jobs, b.deadline_misses, b.aborted), (2, 1, None));
    assert_eq!(b.response.max().0, 6_500_000);
    // B = 4 ms: B0 finishes exactly at its deadline 6 (1-4, 5-6). Under
    // abort that is a completion, not a drop.
    let o = run(&two_tasks("abort", "4ms"));
    let b = &o.tasks[1];
    assert_eq!((b.jobs, b.deadline_misses, b.aborted), (2, 0, Some(0)));
}

#[test]
fn a_job_queued_behind_a_late_one_is_dropped_at_its_own_deadline() {
    // 5 ms every 2 ms with a 4 ms deadline, for 9 ms. J0 (0, dl 4) runs
    // 0-4 and is dropped; J1 (2, dl 6) starts at 4 and is dropped at 6;
    // J2 (4, dl 8) starts at 6 and is dropped at 8; J3 (6, dl 10) starts at
    // 8 and is running at the end. 3 misses, 3 aborted, latencies 0, 2, 2,
    // 2 ms.
    let text = "[sim]\nduration = \"9ms\"\non_miss = \"abort\"\n[[task]]\nname = \"a\"\n\
                kind = \"periodic\"\npriority = 10\nperiod = \"2ms\"\ndeadline = \"4ms\"\nexec = \"5ms\"\n";
    let o = run(text);
    let t = &o.tasks[0];
    assert_eq!((t.jobs, t.deadline_misses, t.aborted), (0, 3, Some(3)));
    assert_eq!(t.latency.max().0, 2_000_000);
}

#[test]
fn abort_runs_are_deterministic_and_recorded() {
    let text = "[sim]\nduration = \"2s\"\non_miss = \"abort\"\n\
                [[task]]\nname = \"a\"\nkind = \"periodic\"\nclass = \"edf\"\nperiod = \"5ms\"\nexec = { uniform = [\"1ms\", \"4ms\"] }\n\
                [[task]]\nname = \"b\"\nkind = \"periodic\"\nclass = \"edf\"\nperiod = \"7ms\"\nexec = { exp = \"3ms\" }\n\
                [[noise]]\nname = \"n\"\nkind = \"poisson\"\nlevel = \"dpc\"\nrate = 500\nduration = { exp = \"50us\" }\n";
    let record = || {
        let (scn, o) = run_text("t.toml", text, &[], &RunOptions::default()).unwrap();
        to_record(&scn, &o, &[]).to_json_pretty()
    };
    let (r1, r2) = (record(), record());
    assert_eq!(r1, r2);
    assert!(r1.contains("\"aborted\": "), "{r1}");
    let o = run(text);
    // Overloaded (mean utilization 0.5 + 0.43): some jobs are dropped, and
    // every drop is a miss.
    let aborted: u64 = o.tasks.iter().map(|t| t.aborted.unwrap()).sum();
    assert!(aborted > 0);
    for t in &o.tasks {
        assert!(t.deadline_misses >= t.aborted.unwrap());
    }
}

#[test]
fn bad_or_unsupported_on_miss_is_refused_where_it_stands() {
    let cases = [
        (
            "[sim]\non_miss = \"drop\"\n",
            "expected \"continue\" or \"abort\"",
        ),
        (
            "[sim]\non_miss = \"abort\"\nscheduler = \"plan\"\n",
            "not supported in plan mode",
        ),
        (
            "[sim]\non_miss = \"abort\"\ncpus = 2\nmultiprocessor = \"global\"\n",
            "not supported with sim.multiprocessor = \"global\"",
        ),
    ];
    for (sim, msg) in cases {
        let text = format!(
            "{sim}[[task]]\nname = \"a\"\nkind = \"periodic\"\nclass = \"edf\"\nperiod = \"2ms\"\nexec = \"1ms\"\n"
        );
        let e = refuse(&text);
        assert_eq!((e.line, e.column), (2, 11), "{e}");
        assert!(e.to_string().contains(msg), "{e}");
    }
    let text = "[sim]\non_miss = \"abort\"\n[[lock]]\nname = \"l\"\nprotocol = \"inherit\"\n[[task]]\nname = \"a\"\n\
                kind = \"periodic\"\npriority = 5\nperiod = \"2ms\"\nexec = \"1ms\"\n\
                critical = { lock = \"l\", at = \"0ms\", hold = \"1ms\" }\n";
    let e = refuse(text);
    assert_eq!((e.line, e.column), (2, 11), "{e}");
    assert!(e.to_string().contains("critical section"), "{e}");
}

#[test]
fn partitioned_placement_aborts_on_each_cpu() {
    // Two tasks of 1.2 ms every 2 ms with a 1 ms deadline (utilization 0.6
    // each, so first-fit puts them on separate CPUs). Alone on its CPU each
    // job runs 1 ms and is dropped at its deadline: jobs released at 0, 2,
    // 4, 6, 8 are dropped at 1, 3, 5, 7, 9.
    let task = |n: &str| {
        format!(
            "[[task]]\nname = \"{n}\"\nkind = \"periodic\"\nclass = \"edf\"\nperiod = \"2ms\"\ndeadline = \"1ms\"\nexec = \"1.2ms\"\n"
        )
    };
    let text = format!(
        "[sim]\nduration = \"10ms\"\ncpus = 2\nmultiprocessor = \"partitioned\"\non_miss = \"abort\"\n{}{}",
        task("a"),
        task("b")
    );
    let o = run(&text);
    for t in &o.tasks {
        assert_eq!((t.jobs, t.deadline_misses, t.aborted), (0, 5, Some(5)));
    }
    assert_ne!(o.tasks[0].cpu, o.tasks[1].cpu);
}

#[test]
fn the_successor_of_a_dropped_job_is_ready_from_the_drop_on() {
    // EDF. A: 5 ms every 4 ms; B: 1 ms every 8 ms from 4 ms, deadline 4 ms.
    // A0 runs 0-4 and is dropped at 4. At 4, B0 (deadline 8) became ready
    // before the drop; A1 (deadline 8 too) becomes ready at the drop,
    // behind it: B0 runs 4-5, A1 from 5. So B completes its job with no
    // latency and A1 starts 1 ms late. (Were A1 to keep A's place from 0,
    // it would run 4-8 and B0 would not run before the end at 8.)
    let text = "[sim]\nduration = \"8ms\"\non_miss = \"abort\"\n\
                [[task]]\nname = \"a\"\nkind = \"periodic\"\nclass = \"edf\"\nperiod = \"4ms\"\nexec = \"5ms\"\n\
                [[task]]\nname = \"b\"\nkind = \"periodic\"\nclass = \"edf\"\nperiod = \"8ms\"\nphase = \"4ms\"\n\
                deadline = \"4ms\"\nexec = \"1ms\"\n";
    let o = run(text);
    let (a, b) = (&o.tasks[0], &o.tasks[1]);
    assert_eq!((b.jobs, b.latency.max().0), (1, 0));
    assert_eq!((a.aborted, a.latency.max().0), (Some(1), 1_000_000));
}

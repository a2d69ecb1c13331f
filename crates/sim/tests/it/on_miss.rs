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

/// Two CPUs, global EDF, 20 ms, one job each (period 20 ms): A 10 ms due
/// at 4, B 2 ms due at 5, C 3 ms due at 20, D 5 ms due at 19.
const GLOBAL_ABORT: &str = r#"
[sim]
duration = "20ms"
cpus = 2
multiprocessor = "global"
ON_MISS

[[task]]
name = "A"
kind = "periodic"
class = "edf"
period = "20ms"
exec = "10ms"
deadline = "4ms"

[[task]]
name = "B"
kind = "periodic"
class = "edf"
period = "20ms"
exec = "2ms"
deadline = "5ms"

[[task]]
name = "C"
kind = "periodic"
class = "edf"
period = "20ms"
exec = "3ms"
deadline = "20ms"

[[task]]
name = "D"
kind = "periodic"
class = "edf"
period = "20ms"
exec = "5ms"
deadline = "19ms"
"#;

fn stats(o: &punctual_sim::Outcome, name: &str) -> punctual_sim::outcome::TaskStats {
    o.tasks
        .iter()
        .find(|t| &*t.name == name)
        .expect(name)
        .clone()
}

#[test]
fn global_abort_frees_the_cpu_at_the_deadline_for_a_waiting_job() {
    // 0: A (d 4) and B (d 5) take the two CPUs; C (d 20) and D (d 19) wait.
    // 2: B completes; D, the earlier deadline, takes its CPU (2-7). 4: A's
    // deadline with 6 ms of work left: dropped, and C takes its CPU at once
    // (4-7), a response of 7 ms. Letting A run on instead, C waits for the
    // first CPU to free, D's at 7, and completes at 10.
    let ms = punctual_units::Nanos::from_ms;
    let (_, o) = run_text(
        "t.toml",
        &GLOBAL_ABORT.replace("ON_MISS", "on_miss = \"abort\""),
        &[],
        &RunOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let a = stats(&o, "A");
    assert_eq!(
        (a.releases, a.jobs, a.deadline_misses, a.aborted),
        (1, 0, 1, Some(1))
    );
    for (name, response) in [("B", ms(2)), ("C", ms(7)), ("D", ms(7))] {
        let t = stats(&o, name);
        assert_eq!(
            (t.jobs, t.deadline_misses, t.aborted),
            (1, 0, Some(0)),
            "{name}"
        );
        assert_eq!(t.response.max(), response, "{name}");
    }
    let m = o.multiprocessor.as_ref().expect("multiprocessor stats");
    assert!(m.migrations.iter().all(|&n| n == 0), "{:?}", m.migrations);
    assert!(o.tasks.iter().all(|t| t.preemptions == 0));

    let (_, o) = run_text(
        "t.toml",
        &GLOBAL_ABORT.replace("ON_MISS", ""),
        &[],
        &RunOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let a = stats(&o, "A");
    assert_eq!((a.jobs, a.deadline_misses, a.aborted), (1, 1, None));
    assert_eq!(a.response.max(), ms(10));
    assert_eq!(stats(&o, "C").response.max(), ms(10));
}

#[test]
fn global_abort_spares_a_job_that_ends_at_its_deadline() {
    // Two CPUs, every 10 ms: H1 7 ms due at 7, H2 6 ms due at 8, L 6 ms
    // due at 9. H1 and H2 run from 0; L takes H2's CPU at 6 and has 3 of
    // its 6 ms done at 9: dropped, in each of the three periods. H1 ends
    // exactly at its deadline each time: on time.
    let text = r#"
[sim]
duration = "30ms"
cpus = 2
multiprocessor = "global"
on_miss = "abort"

[[task]]
name = "H1"
kind = "periodic"
class = "edf"
period = "10ms"
exec = "7ms"
deadline = "7ms"

[[task]]
name = "H2"
kind = "periodic"
class = "edf"
period = "10ms"
exec = "6ms"
deadline = "8ms"

[[task]]
name = "L"
kind = "periodic"
class = "edf"
period = "10ms"
exec = "6ms"
deadline = "9ms"
"#;
    let (_, o) =
        run_text("t.toml", text, &[], &RunOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let got = |n: &str| {
        let t = stats(&o, n);
        (t.releases, t.jobs, t.deadline_misses, t.aborted)
    };
    assert_eq!(got("H1"), (3, 3, 0, Some(0)));
    assert_eq!(got("H2"), (3, 3, 0, Some(0)));
    assert_eq!(got("L"), (3, 0, 3, Some(3)));
    // L's jobs each waited 6 ms for a CPU.
    assert_eq!(
        stats(&o, "L").latency.max(),
        punctual_units::Nanos::from_ms(6)
    );
}

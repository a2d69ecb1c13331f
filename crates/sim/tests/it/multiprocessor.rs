//! Global and partitioned scheduling on several CPUs (`sim.multiprocessor`):
//! schedules derived by hand, placement, refusals located at the field,
//! and same scenario + seed ⇒ same bytes. Figure-for-figure agreement with
//! SimSo on generated sets is `bench/simso/compare_mp.sh` and the CLI test
//! `simso_multiprocessor`.

use punctual_sim::{run_text, to_record, RunOptions};

use crate::common::{assert_at, refuse};

fn run(text: &str) -> (punctual_sim::Scenario, punctual_sim::Outcome) {
    run_text("t.toml", text, &[], &RunOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn task(o: &punctual_sim::Outcome, name: &str) -> (usize, punctual_sim::outcome::TaskStats) {
    let i = o.tasks.iter().position(|t| &*t.name == name).expect(name);
    (i, o.tasks[i].clone())
}

/// Two CPUs; L (12 ms every 20 ms), A (3 ms every 10 ms), B (4 ms every
/// 10 ms from 2 ms); 30 ms.
const LAB: &str = r#"
[sim]
duration = "30ms"
cpus = 2
multiprocessor = "global"

[[task]]
name = "L"
kind = "periodic"
CLASS_L
period = "20ms"
exec = "12ms"

[[task]]
name = "A"
kind = "periodic"
CLASS_A
period = "10ms"
exec = "3ms"

[[task]]
name = "B"
kind = "periodic"
CLASS_B
period = "10ms"
phase = "2ms"
exec = "4ms"
"#;

#[test]
fn global_edf_migrates_a_preempted_job_to_the_cpu_that_frees_first() {
    // 0: L (d 20) and A (d 10) start on the two CPUs. 2: B (d 12) preempts
    // L, the later deadline. 3: A completes; L resumes on A's CPU, not the
    // one it left: a migration. 6: B done; 13: L and A (10-13) done; B
    // (released 12, d 22) waits for a CPU until 13, runs to 17. 20: L (d 40)
    // and A (d 30) start on the two CPUs; 22: B (d 32) preempts L; 23: A
    // completes and L resumes on A's CPU: the second migration. L's second
    // job has 10 ms left at 30 ms and its deadline is 40 ms: no miss.
    let text = LAB
        .replace("CLASS_L", "class = \"edf\"")
        .replace("CLASS_A", "class = \"edf\"")
        .replace("CLASS_B", "class = \"edf\"");
    let (_, o) = run(&text);
    let m = o.multiprocessor.as_ref().expect("multiprocessor stats");
    assert_eq!(m.policy, "global");
    let (li, l) = task(&o, "L");
    let (ai, a) = task(&o, "A");
    let (bi, b) = task(&o, "B");
    assert_eq!((l.releases, l.jobs, l.deadline_misses), (2, 1, 0));
    assert_eq!((a.jobs, b.jobs), (3, 3));
    assert_eq!(a.deadline_misses + b.deadline_misses, 0);
    assert_eq!((m.migrations[li], l.preemptions), (2, 0));
    assert_eq!((m.migrations[ai], m.migrations[bi]), (0, 0));
    // B's second job waited from its release at 12 to 13.
    assert_eq!(b.latency.max(), punctual_units::Nanos::from_ms(1));
}

#[test]
fn global_fixed_priority_preempts_by_priority_not_deadline() {
    // Priorities A 3 > B 2 > L 1. As under EDF until 12: B (released 12)
    // now outranks L and preempts it (L ran 3-12, 11 of its 12 ms); 13: A
    // completes, L resumes on A's CPU (migration 2) and completes at 14.
    // 20-23 as under EDF: migration 3.
    let text = LAB
        .replace("CLASS_L", "priority = 1")
        .replace("CLASS_A", "priority = 3")
        .replace("CLASS_B", "priority = 2");
    let (_, o) = run(&text);
    let m = o.multiprocessor.as_ref().unwrap();
    let (li, l) = task(&o, "L");
    let (_, b) = task(&o, "B");
    assert_eq!((l.jobs, m.migrations[li]), (1, 3));
    // L's first job finished at 14: response 14 ms.
    assert_eq!(l.response.max(), punctual_units::Nanos::from_ms(14));
    // B never waits: it always outranks L.
    assert_eq!(b.latency.max(), punctual_units::Nanos::ZERO);
}

const FOUR: &str = r#"
[sim]
duration = "100ms"
cpus = 2
multiprocessor = "partitioned"
PLACEMENT

[[task]]
name = "a"
kind = "periodic"
class = "edf"
period = "10ms"
exec = "6ms"

[[task]]
name = "c"
kind = "periodic"
class = "edf"
period = "10ms"
exec = "3ms"

[[task]]
name = "b"
kind = "periodic"
class = "edf"
period = "10ms"
exec = "5ms"

[[task]]
name = "d"
kind = "periodic"
class = "edf"
period = "20ms"
exec = "6ms"
"#;

fn cpus_of(text: &str) -> Vec<(String, u32)> {
    let (_, o) = run(text);
    o.tasks
        .iter()
        .map(|t| (t.name.to_string(), t.cpu))
        .collect()
}

#[test]
fn partitioned_placement_takes_tasks_largest_first() {
    // Largest first: a 0.6, b 0.5, c 0.3, d 0.3 (c before d: file order).
    // First fit: a→0, b→1 (0.6+0.5 > 1), c→0 (0.9), d→1 (0.8).
    // Worst fit: a→0, b→1, c→1 (0.5 < 0.6; 0.8), d→0 (0.6 < 0.8; 0.9).
    let ff = cpus_of(&FOUR.replace("PLACEMENT", ""));
    let want = |v: [u32; 4]| {
        ["a", "c", "b", "d"]
            .iter()
            .zip(v)
            .map(|(n, c)| (n.to_string(), c))
            .collect::<Vec<_>>()
    };
    assert_eq!(ff, want([0, 0, 1, 1]));
    let wf = cpus_of(&FOUR.replace("PLACEMENT", "placement = \"worst-fit\""));
    assert_eq!(wf, want([0, 1, 1, 0]));
    // Each CPU is at most full, so partitioned EDF misses nothing.
    let (_, o) = run(&FOUR.replace("PLACEMENT", ""));
    assert!(o.tasks.iter().all(|t| t.deadline_misses == 0));
    assert_eq!(o.multiprocessor.unwrap().placement, Some("first-fit"));
}

#[test]
fn a_set_that_fits_nowhere_is_refused_at_the_task() {
    // Largest first: a 0.6 → cpu 0, e 0.6 → cpu 1, then b 0.5 fits on
    // neither; the refusal names b, where it stands in the file.
    let text = r#"
[sim]
cpus = 2
multiprocessor = "partitioned"

[[task]]
name = "a"
kind = "periodic"
class = "edf"
period = "10ms"
exec = "6ms"

[[task]]
name = "b"
kind = "periodic"
class = "edf"
period = "10ms"
exec = "5ms"

[[task]]
name = "e"
kind = "periodic"
class = "edf"
period = "10ms"
exec = "6ms"
"#;
    let e = refuse(text);
    assert_at(&e, text, "\"b\"");
    assert!(e.message.contains("fits on no CPU by first-fit"), "{e}");
    assert!(e.message.contains("cpu 0 0.600000, cpu 1 0.600000"), "{e}");
}

#[test]
fn combinations_not_simulated_are_refused_where_they_stand() {
    let base = "[sim]\ncpus = 2\nmultiprocessor = \"global\"\n\n[[task]]\nname = \"t\"\nkind = \"periodic\"\nclass = \"edf\"\nperiod = \"10ms\"\n";
    let cases: Vec<(String, &str, &str)> = vec![
        (
            base.replace("\"global\"", "\"clustered\""),
            "\"clustered\"",
            "expected \"global\" or \"partitioned\"",
        ),
        (
            format!("{base}\n[[noise]]\nname = \"n\"\nkind = \"periodic\"\nperiod = \"1ms\"\nduration = \"10us\"\n"),
            "\"n\"",
            "[[noise]] is not simulated",
        ),
        (
            base.replace("class = \"edf\"", "class = \"edf\"\ncpu = 1"),
            "\"t\"",
            "cpu = 1 pins it",
        ),
        (
            base.replace("kind = \"periodic\"", "kind = \"background\"")
                .replace("period = \"10ms\"\n", ""),
            "\"background\"",
            "only periodic tasks",
        ),
        (
            format!("{base}\n[[task]]\nname = \"u\"\nkind = \"periodic\"\npriority = 3\nperiod = \"10ms\"\n"),
            "\"u\"",
            "one class for all tasks",
        ),
        (
            base.replace("class = \"edf\"\n", ""),
            "\"t\"",
            "needs class = \"edf\" or a fixed priority",
        ),
        (
            base.replace("multiprocessor = \"global\"", "placement = \"worst-fit\""),
            "\"worst-fit\"",
            "needs sim.multiprocessor = \"partitioned\"",
        ),
        (
            base.replace("multiprocessor = \"global\"", "multiprocessor = \"partitioned\"\nplacement = \"best-fit\""),
            "\"best-fit\"",
            "expected \"first-fit\" or \"worst-fit\"",
        ),
        (
            base.replace("multiprocessor = \"global\"", "multiprocessor = \"global\"\nscheduler = \"plan\""),
            "\"global\"",
            "not sim.scheduler = \"plan\"",
        ),
    ];
    for (text, needle, says) in cases {
        let e = refuse(&text);
        assert_at(&e, &text, needle);
        assert!(e.message.contains(says), "{e}\n{text}");
    }
}

#[test]
fn one_cpu_under_global_edf_is_plain_edf() {
    // On one CPU global EDF is uniprocessor EDF: the same jobs, misses and
    // preemptions as the pinned engine, and no migration.
    let text = r#"
[sim]
duration = "1s"
cpus = 1
MP

[[task]]
name = "t1"
kind = "periodic"
class = "edf"
period = "4ms"
exec = "1ms"

[[task]]
name = "t2"
kind = "periodic"
class = "edf"
period = "6ms"
exec = "2ms"

[[task]]
name = "t3"
kind = "periodic"
class = "edf"
period = "12ms"
exec = "3ms"
"#;
    let (_, g) = run(&text.replace("MP", "multiprocessor = \"global\""));
    let (_, p) = run(&text.replace("MP", ""));
    for (a, b) in g.tasks.iter().zip(&p.tasks) {
        assert_eq!(
            (a.jobs, a.deadline_misses, a.preemptions),
            (b.jobs, b.deadline_misses, b.preemptions),
            "{}",
            a.name
        );
    }
    assert!(g.multiprocessor.unwrap().migrations.iter().all(|&m| m == 0));
    assert!(p.multiprocessor.is_none());
}

#[test]
fn same_seed_same_bytes_under_both_policies() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/multiprocessor-edf.toml"
    );
    let text = std::fs::read_to_string(path)
        .unwrap()
        .replace("\"10s\"", "\"2s\"");
    for sets in [
        vec![],
        vec![("sim.multiprocessor".to_string(), "partitioned".to_string())],
    ] {
        let bytes = |seed| {
            let opts = RunOptions {
                seed: Some(seed),
                trace_cap: Some(50_000),
                ..Default::default()
            };
            let (scn, o) = run_text(path, &text, &sets, &opts).unwrap_or_else(|e| panic!("{e}"));
            (
                to_record(&scn, &o, &sets).to_json_pretty(),
                punctual_sim::trace_json(&o),
            )
        };
        assert_eq!(bytes(7), bytes(7), "{sets:?}");
        assert_ne!(bytes(7).0, bytes(8).0, "{sets:?}: the seed has no effect");
    }
}

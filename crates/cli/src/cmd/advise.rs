//! `punctual advise`: which fix buys the most, predicted from a record
//! with cause attribution. The model is `punctual_analysis::advise`; the
//! text is `punctual_report::text::advise`; this parses, validates, calls
//! and prints.

use std::path::PathBuf;

use punctual_analysis::buffer::{Buffering, Compute};
use punctual_analysis::{advise, profiles, Profile};
use punctual_record::{Nanos, Record};
use punctual_remedy::{self as remedy, Remedy, RemedyError};

use crate::error::{CliError, CliResult};
use crate::opts;
use crate::output::{rfc3339_now, write_json, Terminal};

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  punctual advise c.json          (c.json from: punctual check --cpus 1 --cause --json c.json)
  punctual advise c.json --profile 'pro audio 128 frames × 2 at 48 kHz' --top 3
  punctual advise t.json --buffers 2 --buffer-len 1ms --compute 0.5ms --target 1h --json fixes.json
  punctual advise n.json --apply rt-runtime-unlimited --verify --json verified.json
How each fix is predicted, and the limits: docs/advise.md")]
pub struct Args {
    /// Records with cause attribution (`check --cause`, `timer --cause`,
    /// `noise --cause`, `cause`).
    #[arg(required = true, value_name = "RECORD")]
    pub records: Vec<PathBuf>,
    /// Judge fixes by this shipped profile only (default: every profile
    /// that misses or is inconclusive now).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["buffers", "buffer_len"])]
    pub profile: Option<String>,
    /// Your workload's number of buffers n (with --buffer-len).
    #[arg(long, value_name = "N", requires = "buffer_len")]
    pub buffers: Option<i64>,
    /// Length t of one buffer (with --buffers).
    #[arg(long, value_name = "T", value_parser = opts::positive_duration, requires = "buffers")]
    pub buffer_len: Option<Nanos>,
    /// Compute c per buffer: a time (0.5ms) or a fraction of t (25%).
    #[arg(long, value_name = "C", default_value = "0%")]
    pub compute: String,
    /// MTTF your workload needs (with --buffers/--buffer-len).
    #[arg(long, value_name = "D", default_value = "1h", value_parser = opts::positive_duration)]
    pub target: Nanos,
    /// Fixes shown (all are written with --json).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
    /// Write the input record with its ranked `fixes[]` here (atomically).
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// Apply fix ID at run time (through the restore journal, undone on
    /// every exit path), measure again as the record was measured, and
    /// print what was predicted beside what was observed. Needs --verify.
    #[arg(long, value_name = "ID", requires = "verify")]
    pub apply: Option<String>,
    /// With --apply: measure again with the fix in place (same probes,
    /// duration, CPUs and load as the record).
    #[arg(long, requires = "apply")]
    pub verify: bool,
    /// With --apply: leave the fix in place afterwards, and print how to
    /// make it permanent.
    #[arg(long, requires = "apply")]
    pub keep: bool,
    /// With --verify: also write the second run's own record here. Its
    /// observed figures are a forecast too, so keeping what was measured
    /// lets a later model read both sides again.
    #[arg(long, value_name = "PATH", requires = "verify")]
    pub verified_json: Option<PathBuf>,
}

/// The profiles asked for, and whether only the failing ones are kept.
fn chosen(a: &Args) -> CliResult<(Vec<Profile>, bool)> {
    if let Some(name) = &a.profile {
        let all = profiles::builtin();
        return match all.iter().find(|p| &p.name == name) {
            Some(p) => Ok((vec![p.clone()], false)),
            None => Err(CliError::usage(format!(
                "--profile '{name}' is not a shipped profile; `punctual forecast RECORD` lists \
                 them by name"
            ))),
        };
    }
    if let (Some(n), Some(t)) = (a.buffers, a.buffer_len) {
        if !(1..=1_000_000).contains(&n) {
            return Err(CliError::usage(format!(
                "--buffers {n} must be between 1 and 1000000"
            )));
        }
        let compute = Compute::parse(&a.compute).map_err(|e| CliError::usage(format!("--{e}")))?;
        let b = Buffering::new(n as u32, t, compute);
        b.slack()
            .map_err(|e| CliError::usage(format!("--buffers/--buffer-len/--compute: {e}")))?;
        return Ok((
            vec![Profile {
                name: format!("{n} × {t} (compute {})", compute.at(t)),
                family: None,
                size: b.label(),
                buffering: b,
                target: a.target,
                source: "command line".into(),
            }],
            false,
        ));
    }
    Ok((profiles::builtin(), true))
}

pub fn run(a: Args) -> CliResult {
    if a.top == 0 {
        return Err(CliError::usage("--top 0 shows nothing; give at least 1"));
    }
    opts::check_output("--json", &a.json)?;
    opts::check_output("--verified-json", &a.verified_json)?;
    if a.json.is_some() && a.records.len() > 1 {
        return Err(CliError::usage(
            "--json writes one record with its fixes; give one RECORD with it",
        ));
    }
    if a.apply.is_some() && a.records.len() > 1 {
        return Err(CliError::usage(
            "--apply measures again as one record was measured; give one RECORD with it",
        ));
    }
    let (profs, only_failing) = chosen(&a)?;
    for path in &a.records {
        let shown = path.display().to_string();
        let mut rec = Record::read(path).map_err(|e| CliError::usage(e.to_string()))?;
        let adv = advise::advise(&rec, &profs, only_failing)
            .map_err(|e| CliError::usage(format!("{shown}: {e}")))?;
        let what = if !adv.has_wakeups {
            "no wake-ups in the record, so no MTTF: fixes judged by the stolen fraction and the \
             gaps' p99.9"
                .to_string()
        } else if adv.all_profiles_meet {
            format!(
                "every one of {} profiles meets its target now; fixes judged by all of them",
                profs.len()
            )
        } else {
            let n = adv.now.first().map(|(_, f)| f.profiles.len()).unwrap_or(0);
            if only_failing {
                format!("{n} profile(s) that miss or are inconclusive now")
            } else {
                format!("{n} profile(s) asked for")
            }
        };
        println!("== advise: {shown} ({} record; {what})", rec.kind);
        rec.fixes = adv.fixes;
        rec.unexplained = adv.remainder.clone();
        simulate_reservations(&mut rec)?;
        print!(
            "{}",
            punctual_report::text::advise::advise_text(&rec, &adv.now, &adv.remainder, a.top)
        );
        if let Some(id) = &a.apply {
            verify(&mut rec, id, &profs, a.keep, &a.verified_json)?;
        }
        write_json(&rec, &a.json)?;
    }
    Ok(())
}

/// Sources of the second run's attribution kept in `fixes[].observed_sources`:
/// enough to see what remained, without copying a whole cause summary.
pub const OBSERVED_SOURCES: usize = 16;

/// Independent simulator runs per reservation mode: the spread over
/// them gives the miss rate's interval.
pub const RESERVATION_RUNS: u32 = 6;

/// Student's t at 97.5 % for RESERVATION_RUNS − 1 degrees of freedom.
const T_975_5DF: f64 = 2.571;

/// Each reservation fix's miss rate, simulated on the record's gap
/// process (`advise::reservation_scenario`), plain and with feedback,
/// into its `predicted.reservation_miss`.
fn simulate_reservations(rec: &mut Record) -> CliResult {
    let plans: Vec<(usize, u32, Nanos, Nanos, u64)> = rec
        .fixes
        .iter()
        .enumerate()
        .filter(|(_, f)| f.kind == "reservation")
        .filter_map(|(i, f)| {
            let n = |k: &str| f.target.get(k).and_then(|v| v.as_u64());
            Some((
                i,
                f.cpu,
                Nanos(n("budget")?),
                Nanos(n("period")?),
                n("over_reserve_percent").unwrap_or(0),
            ))
        })
        .collect();
    for (i, cpu, budget, period, over) in plans {
        let rate = |kind: &str| -> CliResult<(punctual_record::MissRate, Nanos)> {
            let text = advise::reservation_scenario(rec, cpu, budget, period, over, kind)
                .map_err(|e| CliError::usage(format!("the reservation's simulation: {e}")))?;
            let mut per_run = Vec::new();
            let (mut periods, mut misses, mut run_ns) = (0u64, 0u64, Nanos::ZERO);
            for seed in 1..=RESERVATION_RUNS as u64 {
                let opts = punctual_sim::RunOptions {
                    seed: Some(seed),
                    timeline_window: Some(Nanos::ZERO),
                    ..Default::default()
                };
                let (scn, out) = punctual_sim::run_text("reservation", &text, &[], &opts)
                    .map_err(|e| CliError::runtime(format!("the reservation's simulation: {e}")))?;
                let r = punctual_sim::to_record(&scn, &out, &[]);
                run_ns = r.duration_ns;
                let Some(p) = r
                    .period_summary
                    .iter()
                    .find(|p| p.task == advise::RESERVED_TASK)
                else {
                    continue;
                };
                periods += p.periods;
                misses += p.misses;
                per_run.push(p.misses as f64 / p.periods.max(1) as f64);
            }
            Ok((miss_rate(periods, misses, &per_run), run_ns))
        };
        let (plain, run_ns) = rate("rez")?;
        let (feedback, _) = rate("rez-fb")?;
        rec.fixes[i].predicted.reservation_miss = Some(punctual_record::ReservationMiss {
            runs: RESERVATION_RUNS,
            run_ns,
            plain,
            feedback,
        });
    }
    Ok(())
}

/// The pooled miss fraction, with a 95 % interval from the spread of the
/// runs' fractions (a run's periods are correlated, the runs are not); no
/// miss at all gives `[0, 3 / periods]` (the rule of three).
fn miss_rate(periods: u64, misses: u64, per_run: &[f64]) -> punctual_record::MissRate {
    let fraction = misses as f64 / periods.max(1) as f64;
    let ci = if misses == 0 {
        [0.0, (3.0 / periods.max(1) as f64).min(1.0)]
    } else {
        let n = per_run.len().max(1) as f64;
        let mean = per_run.iter().sum::<f64>() / n;
        let var = per_run.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
        let half = T_975_5DF * (var / n).sqrt();
        [(fraction - half).max(0.0), (fraction + half).min(1.0)]
    };
    punctual_record::MissRate {
        periods,
        misses,
        fraction,
        ci,
    }
}

/// The runtime change a fix names, in the remedy crate's terms: its
/// `kind` and `target` read as a [`Remedy`].
fn remedy_of(f: &punctual_record::Fix) -> CliResult<Remedy> {
    if f.kind == "buffering" {
        return Err(CliError::usage(format!(
            "fix {} is the application's buffering, which punctual never changes",
            f.id
        )));
    }
    let mut v = serde_json::Map::new();
    v.insert("kind".into(), serde_json::Value::String(f.kind.clone()));
    for (k, x) in &f.target {
        v.insert(k.clone(), x.clone());
    }
    serde_json::from_value(serde_json::Value::Object(v)).map_err(|e| {
        CliError::usage(format!(
            "fix {} cannot be applied at run time: its target does not name what to change ({e})",
            f.id
        ))
    })
}

/// `--apply ID --verify`: applies the fix through the restore journal,
/// measures again as the record was measured, reads the new record the
/// way the prediction was read, prints both, keeps them in `fixes[]`,
/// and undoes the fix unless `keep`.
fn verify(
    rec: &mut Record,
    id: &str,
    profs: &[Profile],
    keep: bool,
    verified_json: &Option<PathBuf>,
) -> CliResult {
    let Some(i) = rec.fixes.iter().position(|f| f.id == id) else {
        let ids: Vec<&str> = rec.fixes.iter().map(|f| f.id.as_str()).collect();
        return Err(CliError::usage(format!(
            "--apply {id}: no such fix for this record; its fixes are {}",
            ids.join(", ")
        )));
    };
    let remedy = remedy_of(&rec.fixes[i])?;
    if !rec.fixes[i].runtime_applicable {
        return Err(CliError::usage(format!(
            "fix {id} cannot be applied at run time on the measured kernel; make it permanent \
             as its text says and measure again"
        )));
    }
    if let Remedy::Reservation { budget, period } = remedy {
        return verify_reservation(rec, i, budget, period, profs, keep, verified_json);
    }
    let again = punctual_measure::again::again(rec, &Default::default())?;
    let stop = crate::interrupt::stop_flag();
    let terminal = Terminal::default();
    let mut journal = remedy::journal().map_err(remedy_err)?;
    let applied = remedy::apply(&remedy, &mut journal).map_err(remedy_err)?;
    println!(
        "\n== applied {id}: {}",
        if applied.changes.is_empty() {
            remedy.describe()
        } else {
            applied.changes.join("; ")
        }
    );
    println!(
        "== measuring again as the record was measured ({} for {})",
        again.kind,
        again.duration()
    );
    // On an error the journal, dropped with `applied`, undoes the fix.
    let second = punctual_measure::again::run_again(stop, &terminal, &again, rfc3339_now())?;
    let problems = if keep {
        remedy::keep(applied, &mut journal)
    } else {
        remedy::revert(applied, &mut journal)
    };
    let fix = &mut rec.fixes[i];
    let asked: Vec<Profile> = fix
        .now
        .profiles
        .iter()
        .filter_map(|p| profs.iter().find(|q| q.name == p.profile).cloned())
        .collect();
    let observed = advise::figures(&second, fix.cpu, &asked);
    fix.observed = Some(observed);
    fix.observed_sources = advise::attributed(&second, fix.cpu, OBSERVED_SOURCES);
    print!("{}", punctual_report::text::advise::verify_text(fix));
    write_json(&second, verified_json)?;
    if keep {
        println!("kept; to make it permanent:");
        for l in remedy.permanent_how().lines() {
            println!("  {l}");
        }
    } else if problems.is_empty() {
        println!("reverted: the machine is as it was before --apply");
    }
    if !problems.is_empty() {
        return Err(CliError::runtime(format!(
            "the fix could not all be put back ({}); `punctual cause --cleanup` retries",
            problems.join("; ")
        )));
    }
    Ok(())
}

/// `--apply` of a reservation: the probed task is what a reservation
/// holds, so the record is measured again with the timer probe run as
/// SCHED_DEADLINE at the fix's budget (over-reserved as the fix says)
/// and period, and the busy loop as SCHED_DEADLINE with its whole period
/// as budget (inside the fix's budget it would count the reservation's
/// own throttling as stolen time; with the whole period it measures what
/// is still stolen from a deadline thread). Nothing on the machine
/// changes: the policy is the probe threads' own and ends with them, on
/// every exit path. Like `punctual reserve` without `--cpu`, the probe
/// runs where the kernel lets a deadline thread run (its root domain).
fn verify_reservation(
    rec: &mut Record,
    i: usize,
    budget: Nanos,
    period: Nanos,
    profs: &[Profile],
    keep: bool,
    verified_json: &Option<PathBuf>,
) -> CliResult {
    let id = rec.fixes[i].id.clone();
    if keep {
        return Err(CliError::usage(format!(
            "--keep {id}: a reservation lasts as long as the thread inside it, so there is \
             nothing to keep; start the program under it: {}",
            reserve_command(&rec.fixes[i])
        )));
    }
    let over = rec.fixes[i]
        .target
        .get("over_reserve_percent")
        .and_then(|v| v.as_u64())
        .unwrap_or(0);
    let runtime = Nanos(budget.0.saturating_mul(100 + over) / 100).min(period);
    for (r, what) in [(runtime, "the probe"), (period, "the busy loop")] {
        remedy::check(&Remedy::Reservation { budget: r, period }).map_err(|e| {
            remedy_err(match e {
                RemedyError::Refused(m) => RemedyError::Refused(format!("{m} (for {what})")),
                other => other,
            })
        })?;
    }
    let dl = |runtime| punctual_live::rt::Policy::Deadline {
        runtime,
        deadline: period,
        period,
    };
    let overrides = punctual_measure::again::Overrides {
        timer_policy: Some(dl(runtime)),
        noise_policy: Some(dl(period)),
        ..Default::default()
    };
    let again = punctual_measure::again::again(rec, &overrides)?;
    println!(
        "\n== applied {id}: the probe runs as SCHED_DEADLINE {runtime} every {period} \
         (the busy loop with all of {period}), where the kernel lets a deadline thread run; \
         nothing else on the machine changes"
    );
    println!(
        "== measuring again as the record was measured ({} for {})",
        again.kind,
        again.duration()
    );
    let stop = crate::interrupt::stop_flag();
    let second =
        punctual_measure::again::run_again(stop, &Terminal::default(), &again, rfc3339_now())?;
    if let Some(w) = second.warnings.iter().find_map(|w| match w {
        punctual_record::Warning::NoRealtimePolicy { asked, reason } => {
            Some(format!("{asked}: {reason}"))
        }
        _ => None,
    }) {
        return Err(CliError::runtime(format!(
            "the kernel refused the reservation to the probe ({w}), so nothing was verified"
        )));
    }
    let fix = &mut rec.fixes[i];
    let asked: Vec<Profile> = fix
        .now
        .profiles
        .iter()
        .filter_map(|p| profs.iter().find(|q| q.name == p.profile).cloned())
        .collect();
    fix.observed = Some(advise::figures(&second, fix.cpu, &asked));
    fix.observed_sources = advise::attributed(&second, fix.cpu, OBSERVED_SOURCES);
    print!("{}", punctual_report::text::advise::verify_text(fix));
    write_json(&second, verified_json)?;
    println!("ended with the probe: the machine is as it was before --apply");
    Ok(())
}

/// The `punctual reserve …` line of a reservation fix.
fn reserve_command(f: &punctual_record::Fix) -> String {
    f.permanent_how
        .lines()
        .find_map(|l| l.split_once("ExecStart=").map(|(_, c)| c.to_string()))
        .unwrap_or_else(|| f.description.clone())
}

fn remedy_err(e: RemedyError) -> CliError {
    if e.is_usage() {
        CliError::usage(e.to_string())
    } else {
        CliError::runtime(e.to_string())
    }
}

//! `--fail-if` and `--fail-on-verdict` on `timer`, `noise`, `check` and
//! `report`: the exit status a CI job stops on. 0 every gate passed, 1 a
//! gate failed (one line names it), 2 a gate that cannot be read (bad
//! expression, a series the record does not have). The gates themselves
//! are `punctual_analysis::gate`.

use punctual_analysis::gate::{record_verdicts, Gate, VerdictGate};
use punctual_record::{Record, VerdictEntry, VerdictState};

use crate::error::{CliError, CliResult};

/// The gate options, declared once.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct GateArgs {
    /// Exit 1 when this holds for any series it names, e.g. 'p99 > 200us',
    /// 'cpu1.latency.max >= 1ms', 'missed > 0' (SERIES.FIGURE OP LIMIT;
    /// without SERIES every latency and stolen-gap series; figures min,
    /// mean, max, p50, p90, p99, p99.9, p99.99, missed, count). Repeatable.
    #[arg(long = "fail-if", value_name = "EXPR")]
    pub fail_if: Vec<String>,
    /// Exit 1 on a verdict: 'misses' (any workload profile decided as
    /// missed), 'inconclusive' (missed or undecided), or the start of a
    /// profile's name (that profile decided as missed).
    #[arg(long, value_name = "WHEN")]
    pub fail_on_verdict: Option<String>,
}

/// Parsed gates.
#[derive(Clone, Debug, Default)]
pub struct Gates {
    pub figures: Vec<Gate>,
    pub verdict: Option<VerdictGate>,
}

/// One gate's answer on one record.
#[derive(Clone, Debug)]
pub struct Checked {
    /// `--fail-if 'p99 > 200us'`.
    pub name: String,
    pub failed: bool,
    pub detail: String,
}

fn profile_names() -> Vec<String> {
    punctual_analysis::profiles::builtin()
        .into_iter()
        .map(|p| p.name)
        .collect()
}

impl GateArgs {
    /// Parses every gate before anything runs; a bad one is exit 2.
    pub fn parse(&self) -> CliResult<Gates> {
        let figures = self
            .fail_if
            .iter()
            .map(|t| Gate::parse(t).map_err(CliError::usage))
            .collect::<CliResult<Vec<_>>>()?;
        let verdict = match &self.fail_on_verdict {
            Some(t) => Some(VerdictGate::parse(t, &profile_names()).map_err(CliError::usage)?),
            None => None,
        };
        Ok(Gates { figures, verdict })
    }
}

/// One line of a verdict for a CI log.
pub fn verdict_line(v: &VerdictEntry) -> String {
    let secs = |s: Option<f64>| match s {
        Some(s) => punctual_analysis::verdict::human_secs(s),
        None => "never".to_string(),
    };
    format!(
        "{}: {} (MTTF {}, 95% CI {} to {}, target {}){}",
        v.profile,
        v.state.word(),
        secs(v.mttf_s),
        secs(v.ci_s[0]),
        secs(v.ci_s[1]),
        punctual_analysis::verdict::human_secs(v.target_s),
        if v.representative {
            ""
        } else {
            " [not representative]"
        }
    )
}

impl Gates {
    pub fn is_empty(&self) -> bool {
        self.figures.is_empty() && self.verdict.is_none()
    }

    /// Every gate on `rec`; exit 2 when one cannot be read there.
    pub fn check(&self, rec: &Record) -> CliResult<Vec<Checked>> {
        let mut out = Vec::new();
        for g in &self.figures {
            let o = g.check(rec).map_err(CliError::usage)?;
            out.push(Checked {
                name: format!("--fail-if '{}'", o.gate),
                failed: o.failed,
                detail: o.detail,
            });
        }
        if let Some(vg) = &self.verdict {
            let v = record_verdicts(rec);
            if v.is_empty() {
                return Err(CliError::usage(format!(
                    "--fail-on-verdict: this {} record has no verdict (verdicts come from \
                     wake-up latencies: timer, check, simulate)",
                    rec.kind
                )));
            }
            let failing = vg.failing(&v);
            let decided = |s| v.iter().filter(|x| x.state == s).count();
            out.push(Checked {
                name: format!("--fail-on-verdict {}", vg.text()),
                failed: !failing.is_empty(),
                detail: if failing.is_empty() {
                    format!(
                        "{} profiles: {} meet, {} miss, {} inconclusive",
                        v.len(),
                        decided(VerdictState::Meets),
                        decided(VerdictState::Misses),
                        decided(VerdictState::Inconclusive)
                    )
                } else {
                    let named: Vec<String> = failing
                        .iter()
                        .take(3)
                        .map(|x| format!("{} {}", x.profile, x.state.word()))
                        .collect();
                    let more = failing.len() - named.len();
                    format!(
                        "{} of {} profiles: {}{}",
                        failing.len(),
                        v.len(),
                        named.join(", "),
                        if more > 0 {
                            format!(" and {more} more")
                        } else {
                            String::new()
                        }
                    )
                },
            });
        }
        Ok(out)
    }

    /// Checks the gates on `rec` (nothing when there are none), says each
    /// answer on standard error, and fails with one line naming the gates
    /// that failed.
    pub fn enforce(&self, rec: &Record) -> CliResult {
        if self.is_empty() {
            return Ok(());
        }
        let checked = self.check(rec)?;
        enforce_checked(&checked)
    }
}

/// Says each answer on standard error; a [`CliError::Gate`] naming the
/// failed ones.
pub fn enforce_checked(checked: &[Checked]) -> CliResult {
    for c in checked.iter().filter(|c| !c.failed) {
        eprintln!("gate passed: {}: {}", c.name, c.detail);
    }
    let failed: Vec<String> = checked
        .iter()
        .filter(|c| c.failed)
        .map(|c| format!("{}: {}", c.name, c.detail))
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(CliError::gate(format!(
            "gate failed: {}",
            failed.join("; ")
        )))
    }
}

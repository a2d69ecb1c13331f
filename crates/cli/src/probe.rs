//! The run of a one-probe verb (`timer`, `noise`), from its flags to its
//! printed record. Above both `opts` (the flags it reads) and `output`
//! (how it prints and writes), so those two stay one-way.

use std::path::Path;
use std::sync::Arc;

use punctual_measure::ProbeRequest;
use punctual_record::Record;

use crate::error::{CliError, CliResult};
use crate::opts::{load_specs, CStateArgs, CauseArgs, ProbeArgs};
use crate::output::{print_text, rfc3339_now, Terminal};

/// The run of a one-probe verb (`timer`, `noise`): its request through a
/// session with the terminal's progress line, the replay file named in the
/// record, and the text printed from the record. `--cause` needs a live
/// run, so it is refused with a replayed feed. A live run holds the
/// C-states `c_states` asks for while it measures, and says so in the
/// record.
pub fn run_one_probe(
    kind: &'static str,
    probe: Arc<dyn punctual_measure::Probe>,
    common: &ProbeArgs,
    cause: &CauseArgs,
    c_states: &CStateArgs,
    evidence: punctual_measure::Evidence,
    replay: Option<&Path>,
) -> CliResult<(Record, Option<punctual_trace::tracedat::RawWindow>)> {
    if replay.is_some() && cause.cause {
        return Err(CliError::usage(
            "--cause traces a live run; it does not apply to --replay",
        ));
    }
    let req = ProbeRequest {
        kind,
        label: kind,
        probe,
        loads: load_specs(common.load.as_deref())?,
        tracing: cause.tracing_with(evidence),
    };
    let terminal = Terminal::default();
    let session = punctual_measure::Session::new(crate::interrupt::stop_flag(), &terminal);
    let cpus = req.probe.cpus().to_vec();
    let c_states = replay.is_none().then(|| c_states.request());
    let mut raw = None;
    let mut rec = punctual_live::cstate::holding(c_states, &cpus, || {
        let m = session.run(&req, rfc3339_now())?;
        raw = m.raw;
        Ok::<_, CliError>(m.record)
    })?;
    if let Some(p) = replay {
        rec.set_config("replay", p.display().to_string());
    }
    print_text(&rec)?;
    Ok((rec, raw))
}

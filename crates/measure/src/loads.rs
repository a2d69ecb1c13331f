//! The `--load` of the probe verbs: a worker child running the loads for
//! exactly the probe's time, and what it achieved in the record.

use punctual_loads::{LoadSpec, Loads, RunningLoads};
use punctual_record::{Record, Warning};
use punctual_units::Nanos;

use crate::MeasureError;

/// `--load` text into specs, refused with one sentence (a usage error)
/// before anything starts. Also clears interrupt routing a killed earlier
/// run left behind, as `punctual load` does, so the probe does not measure
/// a stale setting; what it restored is returned for the caller to say.
pub fn specs(text: Option<&str>) -> Result<(Vec<LoadSpec>, Vec<String>), MeasureError> {
    let Some(t) = text else {
        return Ok((Vec::new(), Vec::new()));
    };
    let specs = LoadSpec::parse_list(t).map_err(|e| MeasureError::Usage(e.to_string()))?;
    Ok((specs, punctual_loads::irq::recover_stale()))
}

/// Starts the loads (if any) for `duration`. Returns once they run; a spec
/// that cannot be used here (unwritable dir, missing program) is a usage
/// error.
pub fn start(specs: &[LoadSpec], duration: Nanos) -> Result<Option<RunningLoads>, MeasureError> {
    if specs.is_empty() {
        return Ok(None);
    }
    Loads::start(specs, duration).map(Some).map_err(|e| {
        if e.is_usage() {
            MeasureError::Usage(e.to_string())
        } else {
            MeasureError::Runtime(e.to_string())
        }
    })
}

/// Stops the loads and puts what they achieved in the record's `load`
/// section, their notes as warnings and the specs in `config.load`.
pub fn finish(running: Option<RunningLoads>, specs: &[LoadSpec], rec: &mut Record) {
    let Some(r) = running else { return };
    let o = r.stop_outcome();
    rec.set_config(
        "load",
        specs.iter().map(|s| s.text.clone()).collect::<Vec<_>>(),
    );
    rec.load = o.reports;
    for n in o.notes {
        rec.warnings.push(Warning::Other { message: n });
    }
}

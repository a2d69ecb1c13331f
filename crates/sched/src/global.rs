//! Global scheduling on several CPUs: one ready queue, any job on any CPU.
//!
//! [`assign`] is the dispatch rule of global EDF and global fixed
//! priority, written once for the simulator (and any live driver): it is
//! given what each CPU runs and the jobs waiting, and moves the most
//! urgent waiting job onto a CPU, one at a time, while that is possible.
//! Which CPU a job lands on does not change which jobs run, but it decides
//! what counts as a migration, so the choice follows SimSo's global EDF
//! (`simso.schedulers.EDF`), against which the simulator is checked:
//! - a free CPU if there is one: the job's preferred CPU (the one its task
//!   last ran on) when that is free, else the lowest-numbered free CPU;
//! - else the CPU running the least urgent job, if that job is strictly
//!   less urgent than the waiting one (an equal one keeps its CPU); among
//!   several equally least urgent, the preferred CPU, else the
//!   lowest-numbered.

/// A job competing for a CPU. Smaller `urgency` runs first: the absolute
/// deadline in nanoseconds for EDF, the inverted priority for fixed
/// priority. `order` breaks ties among waiting jobs (smaller first: the
/// task's place in the scenario, SimSo's task order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GlobalJob {
    pub urgency: u64,
    pub order: u32,
    /// Caller's handle (the task).
    pub id: usize,
    /// The CPU it would rather have.
    pub preferred: usize,
}

/// Moves waiting jobs onto `cpus` (what each runs, `None` when idle) until
/// no waiting job may take a CPU. Jobs taken off a CPU join `waiting`;
/// a job moved is taken out of it. Returns whether anything moved.
///
/// `callers` are the CPUs on which the events of this instant asked for a
/// decision, in the order they did: the `k`-th move is [`decide`]d on the
/// `k`-th caller, as in SimSo, where each event's rescheduling runs on
/// one CPU and places one job. Past the callers a move prefers the job's
/// own `preferred` CPU.
pub fn assign(
    cpus: &mut [Option<GlobalJob>],
    waiting: &mut Vec<GlobalJob>,
    callers: &[usize],
) -> bool {
    let mut moved = false;
    let mut k = 0;
    while decide(cpus, waiting, callers.get(k).copied()) {
        moved = true;
        k += 1;
    }
    moved
}

/// One decision, asked on CPU `caller` (`None`: on the most urgent waiting
/// job's preferred CPU): the most urgent waiting job takes a free CPU, or
/// the CPU of a strictly less urgent one; the caller's CPU first among
/// equals, then the lowest-numbered. Returns whether a job moved.
pub fn decide(
    cpus: &mut [Option<GlobalJob>],
    waiting: &mut Vec<GlobalJob>,
    caller: Option<usize>,
) -> bool {
    decide_at(cpus, waiting, caller).is_some()
}

/// [`decide`], returning the CPU the job moved to: the one slot a
/// decision changes, so a caller that records moves need not compare
/// every slot before and after.
pub fn decide_at(
    cpus: &mut [Option<GlobalJob>],
    waiting: &mut Vec<GlobalJob>,
    caller: Option<usize>,
) -> Option<usize> {
    let mut wi = 0;
    let mut best = (*waiting.first()?).rank();
    for (i, w) in waiting.iter().enumerate().skip(1) {
        let k = w.rank();
        if k < best {
            best = k;
            wi = i;
        }
    }
    let job = waiting[wi];
    let pref = caller.unwrap_or(job.preferred);
    // One pass: the first free CPU, and the least urgent running job with
    // the first CPU that runs one as late.
    let mut free = None;
    let mut worst = 0u64;
    let mut first_worst = None;
    for (c, slot) in cpus.iter().enumerate() {
        match slot {
            None => {
                free = Some(c);
                break;
            }
            Some(j) if first_worst.is_none() || j.urgency > worst => {
                worst = j.urgency;
                first_worst = Some(c);
            }
            Some(_) => {}
        }
    }
    let target = if let Some(first_free) = free {
        if cpus.get(pref).is_some_and(Option::is_none) {
            pref
        } else {
            first_free
        }
    } else {
        let first_worst = first_worst?;
        if worst <= job.urgency {
            return None;
        }
        if cpus
            .get(pref)
            .is_some_and(|j| j.is_some_and(|j| j.urgency == worst))
        {
            pref
        } else {
            first_worst
        }
    };
    waiting.swap_remove(wi);
    if let Some(out) = cpus[target].replace(job) {
        waiting.push(out);
    }
    Some(target)
}

impl GlobalJob {
    /// What orders waiting jobs: urgency, then `order`.
    fn rank(self) -> (u64, u32) {
        (self.urgency, self.order)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn j(urgency: u64, id: usize, preferred: usize) -> GlobalJob {
        GlobalJob {
            urgency,
            order: id as u32,
            id,
            preferred,
        }
    }

    #[test]
    fn the_most_urgent_jobs_run_and_free_cpus_fill_in_order() {
        let mut cpus = [None, None];
        let mut w = vec![j(30, 0, 0), j(10, 1, 0), j(20, 2, 0)];
        assert!(assign(&mut cpus, &mut w, &[]));
        assert_eq!(cpus.map(|c| c.unwrap().id), [1, 2]);
        assert_eq!(w, vec![j(30, 0, 0)]);
        assert!(!assign(&mut cpus, &mut w, &[]));
    }

    #[test]
    fn a_job_takes_its_preferred_cpu_when_free() {
        let mut cpus = [None, None, None];
        let mut w = vec![j(10, 0, 2)];
        assign(&mut cpus, &mut w, &[]);
        assert_eq!(cpus[2].unwrap().id, 0);
    }

    #[test]
    fn each_move_prefers_its_callers_cpu() {
        let mut cpus = [None, None];
        let mut w = vec![j(10, 0, 0), j(20, 1, 1)];
        assign(&mut cpus, &mut w, &[1, 0]);
        assert_eq!(cpus.map(|c| c.unwrap().id), [1, 0]);
    }

    #[test]
    fn the_least_urgent_is_preempted_and_an_equal_one_is_not() {
        let mut cpus = [Some(j(50, 0, 0)), Some(j(40, 1, 1))];
        let mut w = vec![j(50, 2, 1)];
        assert!(!assign(&mut cpus, &mut w, &[]));
        w.push(j(45, 3, 1));
        assert!(assign(&mut cpus, &mut w, &[]));
        assert_eq!(cpus[0].unwrap().id, 3);
        let mut ids: Vec<usize> = w.iter().map(|x| x.id).collect();
        ids.sort();
        assert_eq!(ids, vec![0, 2]);
    }

    #[test]
    fn among_equally_late_victims_the_preferred_cpu_goes_first() {
        let mut cpus = [Some(j(50, 0, 0)), Some(j(50, 1, 1))];
        let mut w = vec![j(10, 2, 1)];
        assign(&mut cpus, &mut w, &[]);
        assert_eq!(cpus[1].unwrap().id, 2);
        let mut cpus = [Some(j(50, 0, 0)), Some(j(50, 1, 1))];
        let mut w = vec![j(10, 2, 7)];
        assign(&mut cpus, &mut w, &[]);
        assert_eq!(cpus[0].unwrap().id, 2);
    }
}

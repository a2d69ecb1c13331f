//! Where work goes on several CPUs: the fit heuristics shared by the
//! simulator's partitioned scheduling and the plan's placement of live
//! reservations ([`crate::plan::MultiPlan`] tries CPUs in worst-fit order).
//!
//! Loads are integer parts per billion of one CPU, so the same task set
//! is placed the same way on every machine; a float sum could round a set
//! that fills a CPU exactly to either side of it.

/// One CPU's whole capacity, in parts per billion.
pub const CPU_PPB: u64 = 1_000_000_000;

/// Which CPU an item goes to among those that can take it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fit {
    /// The lowest-numbered CPU that can take it: packs the first CPUs full
    /// and leaves the last ones free.
    First,
    /// The least-loaded CPU that can take it (ties: the lowest-numbered):
    /// spreads the load, so each CPU keeps slack.
    Worst,
}

impl Fit {
    pub fn name(self) -> &'static str {
        match self {
            Fit::First => "first-fit",
            Fit::Worst => "worst-fit",
        }
    }
}

/// The order in which `fit` tries CPUs whose current loads are `loads`.
pub fn order<L: Ord + Copy>(fit: Fit, loads: &[L]) -> Vec<usize> {
    let mut o: Vec<usize> = (0..loads.len()).collect();
    if fit == Fit::Worst {
        o.sort_by_key(|&c| (loads[c], c));
    }
    o
}

/// The share of one CPU that `exec` every `period` asks, in parts per
/// billion, rounded up (a set is never placed on a CPU it overfills).
pub fn demand_ppb(exec_ns: u64, period_ns: u64) -> u64 {
    let p = u128::from(period_ns.max(1));
    let x = u128::from(exec_ns) * u128::from(CPU_PPB);
    x.div_ceil(p).min(u128::from(u64::MAX)) as u64
}

/// Items that fit nowhere: the first one met, and the loads it met.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoFit {
    /// Index of the item in the order given.
    pub item: usize,
    pub demand_ppb: u64,
    pub loads_ppb: Vec<u64>,
}

/// Places items of the given demands (parts per billion) on `cpus` CPUs
/// of `capacity_ppb` each, in the order given, by `fit`: the CPU of each
/// item, or the first item that fits on none.
///
/// The caller chooses the order; the textbook variants (first-fit
/// decreasing, worst-fit decreasing) hand the items largest first.
pub fn place(
    demands_ppb: &[u64],
    cpus: usize,
    capacity_ppb: u64,
    fit: Fit,
) -> Result<Vec<usize>, NoFit> {
    let mut loads = vec![0u64; cpus];
    let mut out = Vec::with_capacity(demands_ppb.len());
    for (item, &d) in demands_ppb.iter().enumerate() {
        let Some(c) = order(fit, &loads)
            .into_iter()
            .find(|&c| loads[c].saturating_add(d) <= capacity_ppb)
        else {
            return Err(NoFit {
                item,
                demand_ppb: d,
                loads_ppb: loads,
            });
        };
        loads[c] += d;
        out.push(c);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HALF: u64 = CPU_PPB / 2;

    #[test]
    fn first_fit_packs_and_worst_fit_spreads() {
        let d = [HALF, HALF / 2, HALF / 2, HALF];
        assert_eq!(place(&d, 2, CPU_PPB, Fit::First).unwrap(), vec![0, 0, 0, 1]);
        assert_eq!(place(&d, 2, CPU_PPB, Fit::Worst).unwrap(), vec![0, 1, 1, 0]);
    }

    #[test]
    fn an_exact_fill_fits_and_one_part_more_does_not() {
        assert_eq!(demand_ppb(1, 3) * 3, CPU_PPB + 2);
        assert!(place(&[HALF, HALF], 1, CPU_PPB, Fit::First).is_ok());
        let e = place(&[HALF, HALF + 1], 1, CPU_PPB, Fit::First).unwrap_err();
        assert_eq!(e.item, 1);
        assert_eq!(e.loads_ppb, vec![HALF]);
    }

    #[test]
    fn worst_fit_breaks_ties_by_lower_index() {
        assert_eq!(order(Fit::Worst, &[3u32, 1, 1, 0]), vec![3, 1, 2, 0]);
        assert_eq!(order(Fit::First, &[3u32, 1, 1, 0]), vec![0, 1, 2, 3]);
    }
}

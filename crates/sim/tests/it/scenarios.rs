//! Each shipped scenario against the published shape of its seed
//! experiment. The numbers are computed by the model; the tolerances are
//! stated next to each check.

use std::path::PathBuf;

use punctual_sim::{run_text, summary, Outcome, RunOptions};

fn scenario(name: &str) -> (String, String) {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    (p.display().to_string(), text)
}

fn run(name: &str, sets: &[(&str, &str)]) -> Outcome {
    let (file, text) = scenario(name);
    let sets: Vec<(String, String)> = sets
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    run_text(&file, &text, &sets, &RunOptions::default())
        .unwrap_or_else(|e| panic!("{e}"))
        .1
}

/// Fraction of a task's interval samples in [lo, hi) microseconds.
fn interval_fraction(o: &Outcome, task: &str, lo_us: u64, hi_us: u64) -> f64 {
    let t = o.tasks.iter().find(|t| &*t.name == task).expect("task");
    let s = t
        .series()
        .into_iter()
        .find(|s| s.name.ends_with(".interval"))
        .expect("series");
    let n: u64 = s
        .histogram
        .buckets
        .iter()
        .filter(|(lo, _)| *lo >= lo_us * 1000 && *lo < hi_us * 1000)
        .map(|b| b.1)
        .sum();
    n as f64 / s.count.max(1) as f64
}

#[test]
fn nt_mmtimer_rounding_splits_intervals_between_0_and_2ms() {
    let o = run("nt-mmtimer-rounding.toml", &[]);
    let near0 = interval_fraction(&o, "callback", 0, 200);
    let near2 = interval_fraction(&o, "callback", 1800, 2200);
    eprintln!("rounding: near 0 ms {near0:.4}, near 2 ms {near2:.4}");
    // Jones & Regehr's NT study Table 2: "about half" each. Tolerance ±0.05.
    assert!((near0 - 0.5).abs() < 0.05, "near 0: {near0}");
    assert!((near2 - 0.5).abs() < 0.05, "near 2: {near2}");
}

#[test]
fn nt_mmtimer_fixed_has_2_4_percent_near_2ms() {
    let o = run("nt-mmtimer-fixed.toml", &[]);
    let near2 = interval_fraction(&o, "callback", 1800, 2200);
    let near1 = interval_fraction(&o, "callback", 800, 1200);
    eprintln!("fixed: near 1 ms {near1:.4}, near 2 ms {near2:.4}");
    // Jones & Regehr's NT study Table 3: ~2.4% near 2 ms (1024/1000 − 1). Tolerance ±0.3 points.
    assert!((near2 - 0.024).abs() < 0.003, "near 2: {near2}");
    assert!(near1 > 0.97, "near 1: {near1}");
    let _ = summary(&o);
}

#[test]
fn nt_long_dpcs_make_7_7_and_18ms_gaps() {
    let o = run("nt-long-dpcs.toml", &[]);
    let t = o.tasks.iter().find(|t| &*t.name == "callback").unwrap();
    let s = t
        .series()
        .into_iter()
        .find(|s| s.name.ends_with(".interval"))
        .unwrap();
    let count = |lo: u64, hi: u64| -> u64 {
        s.histogram
            .buckets
            .iter()
            .filter(|(b, _)| *b >= lo * 1000 && *b < hi * 1000)
            .map(|b| b.1)
            .sum()
    };
    let mid = count(6_000, 8_500);
    let long = count(17_000, 19_000);
    let other_long = count(2_500, 6_000) + count(8_500, 17_000) + count(19_000, 1_000_000);
    eprintln!(
        "gaps 6-8.5 ms: {mid}, 17-19 ms: {long}, other >2.5 ms: {other_long}, max {}",
        s.max
    );
    // 60 s: the 5 s DPC fires 12 times, the 10 s one 6 times (Jones & Regehr's NT study:
    // "always two samples around 7-8 ms apart and one around 18 ms" per 10 s).
    assert_eq!(mid, 12);
    assert_eq!(long, 6);
    assert_eq!(other_long, 0);
}

fn metric(o: &Outcome, key: &str) -> f64 {
    *summary(o)
        .get(key)
        .unwrap_or_else(|| panic!("no summary key {key}"))
}

#[test]
fn mediaplayer_inversion_drops_audio_and_both_fixes_stop_it() {
    let none = run("mediaplayer-inversion.toml", &[]);
    let ceiling = run("mediaplayer-ceiling.toml", &[]);
    let inherit = run(
        "mediaplayer-inversion.toml",
        &[("lock.kmixbuf.protocol", "inherit")],
    );
    let drops = |o: &Outcome| metric(o, "kmixer.deadline_misses");
    eprintln!(
        "dropouts: none {}, ceiling {}, inherit {}",
        drops(&none),
        drops(&ceiling),
        drops(&inherit)
    );
    // Jones's Rialto talk: without protection the mixer starves; with the ceiling fix
    // (or inheritance) it does not. No tolerance: a dropout is a dropout.
    assert!(drops(&none) >= 1.0);
    assert_eq!(drops(&ceiling), 0.0);
    assert_eq!(drops(&inherit), 0.0);
}

#[test]
fn softmodem_underruns_fall_with_buffering() {
    let mut prev = f64::INFINITY;
    let mut rates = Vec::new();
    for n in 2..=5 {
        let o = run(
            "softmodem-mttf.toml",
            &[
                ("task.datapump.buffers", &n.to_string()),
                ("sim.duration", "\"120s\""),
            ],
        );
        let m = metric(&o, "datapump.deadline_misses");
        rates.push(m);
        assert!(m <= prev, "more underruns with more buffers: {rates:?}");
        prev = m;
    }
    eprintln!("underruns per 120 s for n = 2..5: {rates:?}");
    // Cota-Robles & Held: each added buffer adds one period of tolerance; with long
    // DPCs up to 17 ms and stalls up to 30 ms, 2 buffers underrun and 5 do
    // far less (at least 10x fewer).
    assert!(rates[0] > 0.0);
    assert!(rates[3] * 10.0 <= rates[0], "{rates:?}");
}

/// Lowest swept rate that loses packets.
fn first_loss(capacity: u64, rates: &[u64]) -> Option<u64> {
    rates.iter().copied().find(|r| {
        let o = run(
            "vmbus-buffers.toml",
            &[
                ("stream.vmbus.capacity", &capacity.to_string()),
                ("stream.vmbus.rate", &format!("{r}.0")),
                ("sim.duration", "\"2s\""),
            ],
        );
        metric(&o, "vmbus.lost") > 0.0
    })
}

#[test]
fn vmbus_loss_begins_at_buffers_over_drain_interval() {
    // Basham's VMBus note: 655 buffers → ~65,500 packets/s, 2600 → ~260,000. The model
    // must start losing within ±5% of those rates.
    let a = first_loss(655, &[62_000, 64_000, 66_000, 68_000, 70_000]);
    let b = first_loss(2600, &[247_000, 255_000, 263_000, 271_000, 279_000]);
    eprintln!("loss begins: 655 buffers at {a:?}/s, 2600 buffers at {b:?}/s");
    let a = a.expect("655 buffers never lose") as f64;
    let b = b.expect("2600 buffers never lose") as f64;
    assert!((a / 65_500.0 - 1.0).abs() <= 0.05, "{a}");
    assert!((b / 260_000.0 - 1.0).abs() <= 0.05, "{b}");
}

/// Smallest over-reservation (step 2%) whose period miss fraction ≤ 1%.
fn needed_over(kind: &str) -> f64 {
    needed_over_from(kind, 0)
}

/// As [`needed_over`], counting only periods from `skip` on: a feedback
/// controller starts from the requested amount and needs a few periods to
/// learn the stolen share, and how much those first misses weigh depends
/// only on the run's length, not on the policy's steady state.
fn needed_over_from(kind: &str, skip: u64) -> f64 {
    for k in 0..=25 {
        let over = -0.1 + 0.02 * k as f64;
        let o = run(
            "rez-network.toml",
            &[
                ("task.t2.reserve.kind", kind),
                ("task.t2.reserve.over", &format!("{over:.2}")),
                ("sim.duration", "\"6s\""),
            ],
        );
        let late: Vec<_> = o
            .periods
            .iter()
            .map(|p| &p.1)
            .filter(|p| p.index >= skip)
            .collect();
        let missed = late.iter().filter(|p| !p.hit).count();
        if missed as f64 <= 0.01 * late.len() as f64 {
            return over;
        }
    }
    f64::INFINITY
}

#[test]
fn rez_network_needs_large_over_reservation_augmented_small() {
    let plain = run("rez-network.toml", &[]);
    let stolen = metric(&plain, "t2.stolen_fraction");
    let rez = needed_over("rez");
    let rez_c = needed_over("rez-c");
    let rez_fb = needed_over("rez-fb");
    // Rez-FB after its first 10 periods (200 ms of learning at G = 0.5).
    let rez_fb_steady = needed_over_from("rez-fb", 10);
    eprintln!(
        "stolen {stolen:.3}; needed over-reservation: rez {rez:.2}, rez-c {rez_c:.2}, \
         rez-fb {rez_fb:.2} (after its first 10 periods: {rez_fb_steady:.2})"
    );
    // Rez-FB's extra misses are the controller's warm-up: once it has
    // learnt the stolen share it needs no more than Rez-C.
    assert!(rez_fb_steady <= rez_c + 1e-9, "{rez_fb_steady} vs {rez_c}");
    // Regehr's thesis Fig 11.3: ~18% stolen; Rez needs ~24%, Rez-C and Rez-FB ~6%.
    // Tolerances: stolen ±3 points; Rez within 0.20..0.30; augmented
    // within 0.0..0.12 and at least 12 points below Rez.
    assert!((stolen - 0.18).abs() < 0.03, "{stolen}");
    assert!((0.20..=0.30).contains(&rez), "{rez}");
    for x in [rez_c, rez_fb] {
        assert!((0.0..=0.12).contains(&x), "{x}");
        assert!(rez - x >= 0.12, "{rez} vs {x}");
    }
}

#[test]
fn rezfb_burst_raises_then_lowers_the_request() {
    let o = run("rezfb-burst.toml", &[]);
    let seg = |a: u64, b: u64| {
        let x: Vec<_> = o
            .periods
            .iter()
            .map(|p| &p.1)
            .filter(|p| p.index >= a && p.index < b)
            .collect();
        let mean_c = x.iter().map(|p| p.requested.0 as f64).sum::<f64>() / x.len() as f64 / 1e6;
        let misses = x.iter().filter(|p| !p.hit).count();
        (mean_c, misses)
    };
    let before = seg(100, 1000);
    let start = seg(1000, 1030);
    let during = seg(1100, 2000);
    let after = seg(2100, 3000);
    eprintln!("C_t ms / misses: before {before:?}, burst start {start:?}, during {during:?}, after {after:?}");
    // Regehr's thesis Fig 11.4: C_t rises during the burst and falls back to ~4 ms
    // after (tolerance: within 0.2 ms of its pre-burst level); misses only
    // at the transition.
    assert!(during.0 > before.0 + 0.5, "C_t did not rise");
    assert!((after.0 - before.0).abs() < 0.2, "C_t did not come back");
    assert!(before.0 < 4.3 && before.0 >= 4.0);
    assert!(start.1 >= 1, "no miss at the transition");
    assert_eq!(during.1 + after.1 + before.1, 0);
}

#[test]
fn stolen_fraction_falls_as_the_reserved_block_grows() {
    let f = |ms: u64| {
        let o = run(
            "stolen-vs-reservation.toml",
            &[("task.t2.reserve.amount", &format!("\"{ms}ms\""))],
        );
        metric(&o, "t2.stolen_fraction")
    };
    let v: Vec<f64> = (1..=10).map(f).collect();
    eprintln!("stolen fraction by block 1..10 ms: {v:.3?}");
    // Regehr's thesis Fig 11.5: decreasing with the block size. Tolerance: the
    // 10 ms block loses at least 5 points less than the 1 ms and 4 ms
    // blocks, and from 5 ms on the curve never rises by more than 0.5 point.
    assert!(v[9] + 0.05 < v[0] && v[9] + 0.05 < v[3], "{v:?}");
    for w in v[4..].windows(2) {
        assert!(w[1] <= w[0] + 0.005, "{v:?}");
    }
}

#[test]
fn disk_pio_steals_about_half_dma_about_one_percent() {
    let dma = metric(&run("disk-pio-dma.toml", &[]), "t2.stolen_fraction");
    let pio = metric(
        &run("disk-pio-dma.toml", &[("noise.ide.mode", "pio")]),
        "t2.stolen_fraction",
    );
    eprintln!("stolen: dma {dma:.4}, pio {pio:.4}");
    // Regehr's thesis Table 11.1 (Linux/RT IDE): DMA 1.1% ± 0.28, PIO 49% ± 3.5.
    // Tolerance: DMA within 0.5..2%, PIO within 40..58%.
    assert!((0.005..=0.02).contains(&dma), "{dma}");
    assert!((0.40..=0.58).contains(&pio), "{pio}");
}

/// Jones's Rialto talk: executing the Rialto plan gives every thread A–F exactly its
/// reserved amount in every one of its periods (exact: the plan hands out
/// whole stretches, there is no noise), grants "5 ms in [30, 40) ms" and
/// completes it inside the window, and denies "9 ms in [30, 40) ms" up front.
/// The amounts are read from the scenario; what was received is measured by
/// running it.
#[test]
fn rialto_plan_gives_each_thread_its_amount_every_period_and_answers_constraints() {
    let (file, text) = scenario("rialto-plan.toml");
    let (scn, o) = run_text(&file, &text, &[], &RunOptions::default()).unwrap();
    let reserved: Vec<_> = scn
        .spec
        .task
        .iter()
        .filter_map(|t| t.reserve.as_ref().map(|r| (t.name.get_ref().clone(), r)))
        .collect();
    assert_eq!(reserved.len(), 6, "threads A-F");
    for (name, r) in &reserved {
        let ps: Vec<_> = o.periods.iter().filter(|(n, _)| n == name).collect();
        assert_eq!(
            ps.len() as u64,
            o.duration.0 / r.period.0 .0,
            "{name}: one accounted period per {} of the run",
            r.period.0
        );
        for (_, p) in ps {
            assert_eq!(p.received, r.amount.0, "{name} period {}", p.index);
        }
    }
    let c = |n: &str| o.constraints.iter().find(|c| c.name == n).unwrap();
    let g = c("5ms-in-30-40");
    assert!(g.granted, "{g:?}");
    assert_eq!(g.received, g.estimate);
    let done = g.completed_at.unwrap();
    assert!(done > g.window_start && done <= g.deadline && g.met_deadline);
    let d = c("9ms-in-30-40");
    assert!(!d.granted && d.received.is_zero());
    assert!(d.denied_because.as_deref().unwrap().contains("available"));

    // The same window with a larger request than the plan's free time there
    // is denied too: the answer follows the plan, not the file.
    let (_, o2) = run_text(
        &file,
        &text,
        &[("constraint.5ms-in-30-40.estimate".into(), "6ms".into())],
        &RunOptions::default(),
    )
    .unwrap();
    assert!(!o2.constraints.iter().any(|c| c.granted));
}

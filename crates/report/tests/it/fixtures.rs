//! The fixture records under `tests/fixtures/`, built here with the same
//! `Recorder` the probes use, so reports can be tested before (and apart
//! from) the probes and the simulator.
//!
//! The committed JSON must equal what this code builds: a change to the
//! record format or to the builder fails here instead of silently changing
//! every report test. `PUNCTUAL_BLESS=1 cargo test -p punctual-report
//! --test it fixtures::` rewrites them after a deliberate change.

use punctual_record::{
    IdleState, KernelView, Metric, Nanos, Period, PeriodSummary, Platform, Record, Recorder,
    Source, SourceShare, Spike, Stolen, Timeline, Warning,
};

use crate::common::fixtures_dir;

/// A 15-character comm, as the kernel truncates `<img src=x onerror=alert(1)>`.
pub const EVIL_COMM: &str = "<img src=x oner";
pub const EVIL_SCENARIO: &str = "<script>alert('scenario')</script> audio & video";

struct Lcg(u64);
impl Lcg {
    fn next_f64(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
}

fn platform(host: &str, governor: &str) -> Platform {
    Platform {
        hostname: Some(host.into()),
        cpu_model: Some("Intel Xeon (KVM guest)".into()),
        logical_cpus: Some(2),
        online_cpus: Some("0-1".into()),
        packages: Some(1),
        threads_per_core: Some(1),
        numa_nodes: Some(1),
        kernel: Some("6.18.0".into()),
        preemption: Some("full".into()),
        hz: Some(250),
        nohz: Some("idle".into()),
        clocksource: Some("kvm-clock".into()),
        cpufreq_governor: Some(governor.into()),
        hypervisor: Some("KVM".into()),
        rt_runtime_us: Some(950_000),
        rt_period_us: Some(1_000_000),
        irq_time_accounting: Some(false),
        cpuidle_states: vec![IdleState {
            name: "C1".into(),
            exit_latency_us: 1,
            disabled: false,
        }],
        ..Default::default()
    }
}

/// A timer run: 2 CPUs at 1 kHz for 60 s, Pareto-like tails whose scale
/// `tail_us` sets how bad the machine is.
fn timer_record(host: &str, governor: &str, seed: u64, tail_us: f64) -> Record {
    let mut r = Record::new(Source::Measured, "timer", platform(host, governor));
    r.started_at = "2026-11-22T05:00:00Z".into();
    r.duration_ns = Nanos::from_secs(60);
    r.set_config("interval", "1ms");
    r.set_config("cpus", "0-1");
    r.set_config("policy", "fifo:95");
    let mut rng = Lcg(seed);
    for cpu in 0..2u32 {
        let mut lat = Recorder::new(Nanos(1000)).with_sample_period(Nanos::from_ms(1));
        let mut int = Recorder::new(Nanos(1000)).with_sample_period(Nanos::from_ms(1));
        let mut prev = 0u64;
        for _ in 0..60_000 {
            let u = rng.next_f64();
            // Body around 8 µs, power-law tail with exponent 1.6.
            let v = 4_000.0
                + 4_000.0 * rng.next_f64()
                + tail_us * 1_000.0 * (u.powf(-1.0 / 1.6) - 1.0) * 0.02;
            let v = (v as u64).min(40_000_000);
            lat.record(Nanos(v));
            int.record(Nanos((1_000_000 + v).saturating_sub(prev)));
            prev = v;
        }
        let mut s = lat.to_series(&format!("cpu{cpu}.latency"), Metric::Latency);
        s.cpu = Some(cpu);
        r.series.push(s);
        let mut s = int.to_series(&format!("cpu{cpu}.interval"), Metric::Interval);
        s.cpu = Some(cpu);
        r.series.push(s);

        let mut t = Timeline::new(Nanos::from_secs(1));
        let mut total = Nanos::ZERO;
        for sec in 0..60u64 {
            let v = Nanos((20_000.0 + 200_000.0 * rng.next_f64().powi(3)) as u64);
            t.add(Nanos::from_secs(sec), v);
            total += v;
        }
        let virt = Nanos(total.0 / 2);
        let timer = Nanos(total.0 / 4);
        let evil = total - virt - timer;
        r.stolen.push(Stolen {
            cpu,
            task: None,
            observed_ns: Nanos::from_secs(60),
            total_ns: total,
            fraction: total.0 as f64 / 60e9,
            intervals: 4_000 + cpu as u64,
            max_ns: Nanos::from_us(180),
            threshold_ns: Nanos::from_us(1),
            loop_cost_ns: Some(Nanos(40)),
            timeline: t,
            by_source: vec![
                SourceShare {
                    kind: "irq".into(),
                    name: "virtio0-input.0".into(),
                    count: 2_500,
                    total_ns: virt,
                    max_ns: Nanos::from_us(90),
                    share: 0.5,
                },
                SourceShare {
                    kind: "vector".into(),
                    name: "local_timer".into(),
                    count: 15_000,
                    total_ns: timer,
                    max_ns: Nanos::from_us(12),
                    share: 0.25,
                },
                SourceShare {
                    kind: "thread".into(),
                    name: EVIL_COMM.into(),
                    count: 40,
                    total_ns: evil,
                    max_ns: Nanos::from_us(180),
                    share: 0.25,
                },
            ],
            kernel_view: Some(KernelView {
                irq_ns: Nanos::from_ms(12),
                softirq_ns: Nanos::from_ms(30),
                steal_ns: Nanos::from_ms(210),
                interrupts: [
                    ("LOC".to_string(), 15_000u64),
                    ("virtio0-input.0".to_string(), 2_500),
                ]
                .into_iter()
                .collect(),
            }),
        });
    }
    for k in 0..6u64 {
        r.spikes.push(Spike {
            at_ns: Nanos::from_secs(5 + 9 * k),
            cpu: (k % 2) as u32,
            task: None,
            metric: Metric::Latency,
            value_ns: Nanos::from_us(400 + 350 * k),
            causes: vec![
                SourceShare {
                    kind: "hypervisor".into(),
                    name: "steal".into(),
                    count: 1,
                    total_ns: Nanos::from_us(300 + 300 * k),
                    max_ns: Nanos::from_us(300 + 300 * k),
                    share: 0.75,
                },
                SourceShare {
                    kind: "thread".into(),
                    name: EVIL_COMM.into(),
                    count: 1,
                    total_ns: Nanos::from_us(100 + 50 * k),
                    max_ns: Nanos::from_us(100 + 50 * k),
                    share: 0.25,
                },
            ],
            incomplete: k == 5,
        });
    }
    r.spikes_dropped = 3;
    r.warnings = vec![
        Warning::Virtualized {
            hypervisor: "KVM".into(),
        },
        Warning::NoIrqTimeAccounting,
        Warning::TickHz { hz: 250 },
    ];
    if governor != "performance" {
        r.warnings.insert(
            1,
            Warning::CpufreqGovernor {
                governor: governor.into(),
            },
        );
    }
    r.extra.insert(
        "forecast".into(),
        serde_json::json!({
            "verdicts": [
                {"profile": "rt-audio", "verdict": "pass", "buffers": 3, "buffer_ms": 8},
                {"profile": "adsl", "verdict": "fail", "buffers": 2, "buffer_ms": 2}
            ],
            "worst_case": [
                {"window": "hour", "value_ns": 2_400_000, "extrapolated": false},
                {"window": "week", "value_ns": 9_100_000, "extrapolated": true}
            ]
        }),
    );
    r
}

/// A simulated reservation run of Regehr's thesis: 4 ms every 20 ms, network
/// receive stealing about 18 %.
fn reserve_record() -> Record {
    let mut r = Record::new(Source::Simulated, "simulate", platform("simulator", "n/a"));
    r.started_at = "2026-11-22T05:00:00Z".into();
    r.duration_ns = Nanos::from_secs(4);
    r.set_config("scenario", EVIL_SCENARIO);
    r.set_config("seed", 1);
    let mut rng = Lcg(99);
    let mut misses = 0;
    let (mut rec_tot, mut st_tot, mut req_tot) = (Nanos::ZERO, Nanos::ZERO, Nanos::ZERO);
    let mut resp = Recorder::new(Nanos(1000)).with_sample_period(Nanos::from_ms(20));
    for i in 0..200u64 {
        let stolen = Nanos((720_000.0 * 2.0 * rng.next_f64()) as u64);
        let requested = Nanos::from_ms(4);
        let received = Nanos::from_ms(4).saturating_sub(stolen / 2);
        let hit = received >= Nanos(3_600_000);
        if !hit {
            misses += 1;
        }
        rec_tot += received;
        st_tot += stolen;
        req_tot += requested;
        resp.record(Nanos::from_ms(4) + stolen + Nanos((rng.next_f64() * 1e6) as u64));
        r.periods.push(Period {
            task: "mixer".into(),
            index: i,
            start_ns: Nanos::from_ms(20 * i),
            reserved_ns: Nanos::from_ms(4),
            requested_ns: requested,
            received_ns: received,
            stolen_ns: stolen,
            hit,
        });
    }
    let mut s = resp.to_series("mixer.response", Metric::Response);
    s.task = Some("mixer".into());
    r.series.push(s);
    r.period_summary.push(PeriodSummary {
        task: "mixer".into(),
        periods: 200,
        misses,
        reserved_ns: Nanos::from_ms(4),
        received_total_ns: rec_tot,
        stolen_total_ns: st_tot,
        requested_total_ns: req_tot,
    });
    r
}

#[test]
fn fixtures_match_their_builder() {
    let bless = std::env::var_os("PUNCTUAL_BLESS").is_some();
    for (name, rec) in [
        (
            "timer-idle.json",
            timer_record("alpha", "performance", 1, 30.0),
        ),
        (
            "timer-load.json",
            timer_record("beta", "schedutil", 2, 250.0),
        ),
        ("reserve-sim.json", reserve_record()),
    ] {
        let path = fixtures_dir().join(name);
        let want = rec.to_json_pretty() + "\n";
        if bless {
            std::fs::create_dir_all(fixtures_dir()).unwrap();
            std::fs::write(&path, &want).unwrap();
            continue;
        }
        let have = std::fs::read_to_string(&path).unwrap_or_else(|_| {
            panic!(
                "{} is missing; run with PUNCTUAL_BLESS=1 to create it",
                path.display()
            )
        });
        assert!(
            have == want,
            "{} differs from its builder; rerun with PUNCTUAL_BLESS=1 after a deliberate change",
            path.display()
        );
        // And it reads back as a record.
        Record::from_json(&have).unwrap();
    }
}

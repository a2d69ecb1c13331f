//! A quick fuzz of the scenario parser and simulator: every mutation of
//! the corpus either fails with a located error or runs to completion —
//! never a panic. Deterministic (own PRNG), a few seconds in debug builds.

use std::path::PathBuf;

use punctual_sim::rng::Rng;
use punctual_sim::{run_text, RunOptions};
use punctual_units::Nanos;

const TOKENS: &[&str] = &[
    "0",
    "-1",
    "1e308",
    "\"0ms\"",
    "\"-1ms\"",
    "\"1ns\"",
    "\"1h\"",
    "\"x\"",
    "true",
    "[]",
    "{}",
    "\"976.5625us\"",
    "4294967296",
    "0.0",
    "-0.5",
    "nan",
    "\"rez-c\"",
    "\"ceiling\"",
    "\"stall\"",
    "{ uniform = [\"1ms\", \"0ms\"] }",
    "{ exp = \"0ns\" }",
    "{ choice = [] }",
    "\"\"",
    "\"36500d\"",
    "\"584y\"",
    "1000000000",
];

fn mutate(text: &str, rng: &mut Rng) -> String {
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let n = 1 + rng.range(0, 3) as usize;
    for _ in 0..n {
        if lines.is_empty() {
            break;
        }
        let i = rng.range(0, lines.len() as u64 - 1) as usize;
        match rng.range(0, 5) {
            0 => {
                lines.remove(i);
            }
            1 => {
                let dup = lines[i].clone();
                lines.insert(i, dup);
            }
            2 => {
                if let Some((k, _)) = lines[i].split_once('=') {
                    let t = TOKENS[rng.range(0, TOKENS.len() as u64 - 1) as usize];
                    lines[i] = format!("{k}= {t}");
                }
            }
            3 => {
                let l = &lines[i];
                if !l.is_empty() {
                    let cut = rng.range(0, l.len() as u64 - 1) as usize;
                    if l.is_char_boundary(cut) {
                        lines[i] = l[..cut].to_string();
                    }
                }
            }
            4 => {
                let j = rng.range(0, lines.len() as u64 - 1) as usize;
                lines.swap(i, j);
            }
            _ => lines[i] = lines[i].replace("ms", "s"),
        }
    }
    lines.join("\n")
}

#[test]
fn mutated_scenarios_never_panic() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut corpus: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| {
            (
                p.display().to_string(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect();
    corpus.sort();
    assert!(!corpus.is_empty());
    let mut rng = Rng::new(2024, 0);
    let opts = RunOptions {
        seed: Some(1),
        duration: Some(Nanos::from_ms(50)),
        trace_cap: Some(1000),
        ..Default::default()
    };
    let (mut ok, mut err) = (0, 0);
    for round in 0..400 {
        let (file, text) = &corpus[round % corpus.len()];
        let m = mutate(text, &mut rng);
        let r = std::panic::catch_unwind(|| run_text(file, &m, &[], &opts).map(|_| ()));
        match r {
            Ok(Ok(())) => ok += 1,
            Ok(Err(e)) => {
                assert!(e.to_string().starts_with(file.as_str()), "{e}");
                err += 1;
            }
            Err(_) => panic!("panic on mutated scenario (round {round}):\n{m}"),
        }
    }
    eprintln!("fuzz: {ok} ran, {err} refused");
    assert!(ok > 0 && err > 0);
}

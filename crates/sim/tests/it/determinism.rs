//! Same scenario + seed ⇒ same bytes, for the record and the trace. Fails at
//! the first divergence and says where.

use std::path::PathBuf;

use punctual_sim::{run_text, to_record, trace_json, RunOptions};

fn record_bytes(file: &str, text: &str, seed: Option<u64>) -> (String, String) {
    let opts = RunOptions {
        seed,
        duration: None,
        trace_cap: Some(50_000),
        ..Default::default()
    };
    let (scn, o) = run_text(file, text, &[], &opts).unwrap_or_else(|e| panic!("{e}"));
    (to_record(&scn, &o, &[]).to_json_pretty(), trace_json(&o))
}

fn first_divergence(a: &str, b: &str) -> Option<(usize, usize)> {
    let off = a.bytes().zip(b.bytes()).position(|(x, y)| x != y);
    let off = match off {
        Some(o) => o,
        None if a.len() == b.len() => return None,
        None => a.len().min(b.len()),
    };
    let line = a[..off].matches('\n').count() + 1;
    Some((off, line))
}

fn check(file: &str, text: &str) {
    let (r1, t1) = record_bytes(file, text, Some(12345));
    let (r2, t2) = record_bytes(file, text, Some(12345));
    if let Some((off, line)) = first_divergence(&r1, &r2) {
        panic!("{file}: records diverge at byte {off}, line {line}");
    }
    if let Some((off, line)) = first_divergence(&t1, &t2) {
        panic!("{file}: traces diverge at byte {off}, line {line}");
    }
    // A different seed must change something when the scenario is random.
    let (r3, _) = record_bytes(file, text, Some(54321));
    if text.contains("poisson") || text.contains("uniform") || text.contains("exp") {
        assert_ne!(r1, r3, "{file}: the seed has no effect");
    }
}

#[test]
fn same_seed_same_bytes() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let everything = root.join("tests/corpus/everything.toml");
    let text = std::fs::read_to_string(&everything).unwrap();
    check(&everything.display().to_string(), &text);
    for name in ["softmodem-mttf.toml", "mediaplayer-inversion.toml"] {
        let p = root.join("../../scenarios").join(name);
        let text = std::fs::read_to_string(&p)
            .unwrap()
            .replace("duration = \"600s\"", "duration = \"20s\"");
        check(&p.display().to_string(), &text);
    }
}

#[test]
fn divergence_is_located() {
    assert_eq!(first_divergence("a\nb\nc", "a\nb\nx"), Some((4, 3)));
    assert_eq!(first_divergence("abc", "abc"), None);
    assert_eq!(first_divergence("ab", "abc"), Some((2, 1)));
}

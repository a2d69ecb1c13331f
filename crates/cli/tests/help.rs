//! Every verb's `--help` ends with examples of that verb and cites the
//! papers it builds on by author, not by an internal number.

use assert_cmd::Command;

const VERBS: [&str; 14] = [
    "check", "timer", "noise", "sysinfo", "simulate", "forecast", "load", "cause", "advise",
    "reserve", "validate", "monitor", "report", "watch",
];

fn help(verb: &str) -> String {
    let out = Command::cargo_bin("punctual")
        .unwrap()
        .args([verb, "--help"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{verb} --help exited {}", out.status);
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn every_verb_help_has_examples_of_that_verb() {
    for verb in VERBS {
        let text = help(verb);
        let examples = text
            .split("Examples:\n")
            .nth(1)
            .unwrap_or_else(|| panic!("{verb} --help has no Examples section:\n{text}"));
        let lines: Vec<&str> = examples
            .lines()
            .take_while(|l| l.starts_with("  "))
            .collect();
        assert!(!lines.is_empty(), "{verb} --help: empty Examples section");
        for l in lines {
            assert!(
                l.trim_start().starts_with(&format!("punctual {verb}")),
                "{verb} --help: example {l:?} is not a `punctual {verb}` command"
            );
        }
    }
}

#[test]
fn help_cites_papers_by_author_not_seed_number() {
    for verb in VERBS {
        let text = help(verb).to_lowercase();
        for n in 0..5 {
            assert!(
                !text.contains(&format!("seed 00{n}")),
                "{verb} --help says \"seed 00{n}\""
            );
        }
    }
}

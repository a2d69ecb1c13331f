//! Every verb's `--help` ends with examples of that verb and says what
//! each option does; the papers behind them are cited in docs/references.md.

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
fn help_says_what_options_do_without_citing_papers() {
    // Names a reader has to look up (an author, a system of the 1990s, an
    // algorithm's name in a thesis) belong in docs/references.md, not in
    // --help.
    let jargon = [
        "cota-robles",
        "regehr",
        "jones",
        "rialto",
        "vmbus",
        "hyper-v",
        // The simulator's scenarios name their reservation kinds rez-c and
        // rez-fb (scenario-format.md); an option's text should not.
        "(rez",
        "rez-c,",
    ];
    let top = Command::cargo_bin("punctual")
        .unwrap()
        .arg("--help")
        .output()
        .unwrap();
    let mut pages = vec![(
        "punctual".to_string(),
        String::from_utf8(top.stdout).unwrap(),
    )];
    pages.extend(VERBS.iter().map(|v| (v.to_string(), help(v))));
    pages.push(("compare".to_string(), help("compare")));
    for (verb, text) in pages {
        let lower = text.to_lowercase();
        for word in jargon {
            assert!(
                !lower.contains(word),
                "{verb} --help says {word:?}:\n{text}"
            );
        }
    }
}

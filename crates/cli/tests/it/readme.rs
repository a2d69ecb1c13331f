//! What the README tells a new user, held to what one stumbled on: it
//! must show how to get the binary before using it, not assume `sudo`,
//! show every verb it tours, and speak of studies by their authors rather
//! than by the project's own seed numbers.

use std::path::PathBuf;

fn readme() -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn the_install_step_comes_before_the_first_bare_punctual() {
    let r = readme();
    let install = r
        .find("cargo install --path crates/cli")
        .expect("an install step");
    let first_bare = r
        .lines()
        .scan(0, |at, l| {
            let here = *at;
            *at += l.len() + 1;
            Some((here, l))
        })
        .find(|(_, l)| l.starts_with("$ punctual ") || l.starts_with("punctual "))
        .map(|(at, _)| at)
        .expect("a bare punctual command");
    assert!(
        install < first_bare,
        "install at {install}, first use at {first_bare}"
    );
}

#[test]
fn no_sudo_and_no_seed_numbers() {
    let r = readme();
    assert!(!r.contains("sudo "), "a root-only machine may have no sudo");
    for l in r.lines() {
        let lower = l.to_lowercase();
        assert!(
            !(lower.contains("seed 00") || lower.contains("seeds 00")),
            "jargon to a user: {l}"
        );
    }
}

#[test]
fn validate_has_an_example() {
    assert!(readme().contains("punctual validate "));
}

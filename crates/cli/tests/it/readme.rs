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
    let mut in_code = false;
    let mut install = None;
    let mut first_bare = None;
    for (n, l) in r.lines().enumerate() {
        if l.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if install.is_none()
            && (l.contains("cargo build --release")
                || l.contains("cargo install --path crates/cli"))
        {
            install = Some(n);
        }
        let command = l.starts_with("$ punctual ") || (in_code && l.starts_with("punctual "));
        if first_bare.is_none() && command {
            first_bare = Some(n);
        }
    }
    let (install, first_bare) = (
        install.expect("an install step"),
        first_bare.expect("a bare punctual command"),
    );
    assert!(
        install < first_bare,
        "install on line {}, first bare command on line {}",
        install + 1,
        first_bare + 1
    );
    assert!(r.contains("cargo install --path crates/cli"));
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

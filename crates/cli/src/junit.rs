//! JUnit XML, the report CI systems read: `compare --junit` (one test
//! case per compared series) and `report --format junit` (one per gate and
//! per verdict) write it through this one writer.

/// How a test case ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Result {
    Passed,
    /// A `<failure>` with this message attribute.
    Failed(String),
    /// A `<skipped>` with this message attribute (an undecided verdict).
    Skipped(String),
}

/// One test case; `text` is the failure's body, or the passed or skipped
/// case's `<system-out>`.
#[derive(Clone, Debug)]
pub struct Case {
    pub classname: String,
    pub name: String,
    pub result: Result,
    pub text: String,
}

/// One test suite.
#[derive(Clone, Debug)]
pub struct Suite {
    pub name: String,
    pub cases: Vec<Case>,
}

pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn counts(cases: &[&Case]) -> String {
    let failures = cases
        .iter()
        .filter(|c| matches!(c.result, Result::Failed(_)))
        .count();
    let skipped = cases
        .iter()
        .filter(|c| matches!(c.result, Result::Skipped(_)))
        .count();
    let mut s = format!("tests=\"{}\" failures=\"{failures}\"", cases.len());
    if skipped > 0 {
        s.push_str(&format!(" skipped=\"{skipped}\""));
    }
    s
}

/// The document: `<testsuites name=…>` holding `suites`.
pub fn render(name: &str, suites: &[Suite]) -> String {
    let all: Vec<&Case> = suites.iter().flat_map(|s| s.cases.iter()).collect();
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    x.push_str(&format!(
        "<testsuites name=\"{}\" {}>\n",
        escape(name),
        counts(&all)
    ));
    for suite in suites {
        let cases: Vec<&Case> = suite.cases.iter().collect();
        x.push_str(&format!(
            "  <testsuite name=\"{}\" {}>\n",
            escape(&suite.name),
            counts(&cases)
        ));
        for c in &suite.cases {
            x.push_str(&format!(
                "    <testcase classname=\"{}\" name=\"{}\">",
                escape(&c.classname),
                escape(&c.name)
            ));
            match &c.result {
                Result::Failed(m) => x.push_str(&format!(
                    "\n      <failure message=\"{}\">{}</failure>\n    ",
                    escape(m),
                    escape(&c.text)
                )),
                Result::Skipped(m) => x.push_str(&format!(
                    "\n      <skipped message=\"{}\"/>\n      <system-out>{}</system-out>\n    ",
                    escape(m),
                    escape(&c.text)
                )),
                Result::Passed => x.push_str(&format!(
                    "\n      <system-out>{}</system-out>\n    ",
                    escape(&c.text)
                )),
            }
            x.push_str("</testcase>\n");
        }
        x.push_str("  </testsuite>\n");
    }
    x.push_str("</testsuites>\n");
    x
}

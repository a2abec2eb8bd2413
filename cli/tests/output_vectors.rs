//! The outputters against text printed by Salt 3007.15's own outputters
//! (`salt.output.try_printout`), captured into `data/salt_output.json`.

use brine_cli::output::{render_with_retcode, OutputOptions, Outputter, NO_INDENT};

#[derive(serde::Deserialize)]
struct Case {
    name: String,
    out: String,
    color: bool,
    indent: Option<i64>,
    retcode: i64,
    /// The data as JSON text, so key order survives.
    data: String,
    expected: String,
}

#[test]
fn every_captured_salt_output_is_reproduced() {
    let text = include_str!("data/salt_output.json");
    let cases: Vec<Case> = serde_json::from_str(text).expect("fixture parses");
    assert!(cases.len() >= 80);
    let mut failures = Vec::new();
    for case in &cases {
        let out: Outputter = case.out.parse().expect("known outputter");
        let data: serde_json::Value = serde_json::from_str(&case.data).expect("data parses");
        let opts = OutputOptions {
            color: case.color,
            indent: case.indent.map(|i| usize::try_from(i).unwrap_or(NO_INDENT)),
            static_: false,
            ..OutputOptions::default()
        };
        let got = render_with_retcode(out, &data, &opts, case.retcode);
        if got != case.expected {
            failures.push(format!(
                "{}/{} color={} indent={:?}\n--- expected\n{}\n--- got\n{}",
                case.name, case.out, case.color, case.indent, case.expected, got
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
}

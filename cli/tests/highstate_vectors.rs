//! The highstate outputter against text printed by Salt 3007.15's own
//! (`salt.output.highstate.output`), captured into `data/salt_highstate.json`: every mode
//! (full, terse, mixed, changes, `_id`), verbose or not, with and without profiling and color.

use brine_cli::output::{render, OutputOptions, Outputter, StateOutput};

#[derive(serde::Deserialize)]
struct Case {
    name: String,
    state_output: String,
    state_verbose: bool,
    profile: bool,
    color: bool,
    /// The data as JSON text, so key order survives.
    data: String,
    expected: String,
}

#[test]
fn every_captured_highstate_output_is_reproduced() {
    let cases: Vec<Case> =
        serde_json::from_str(include_str!("data/salt_highstate.json")).expect("fixture parses");
    assert!(cases.len() >= 100);
    let mut failures = Vec::new();
    for case in &cases {
        let data: serde_json::Value = serde_json::from_str(&case.data).expect("data parses");
        let opts = OutputOptions {
            color: case.color,
            state: StateOutput {
                mode: case.state_output.clone(),
                verbose: case.state_verbose,
                profile: case.profile,
                ..StateOutput::default()
            },
            ..OutputOptions::default()
        };
        let got = render(Outputter::Highstate, &data, &opts);
        // Salt's printout is right-stripped, as Brine's render is.
        let expected = case.expected.trim_end();
        if got != expected {
            failures.push(format!(
                "{} mode={} verbose={} profile={} color={}\n--- expected\n{}\n--- got\n{}",
                case.name,
                case.state_output,
                case.state_verbose,
                case.profile,
                case.color,
                expected,
                got
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

//! Salt's outputters (`salt/output/*.py`), so the tools print what Salt prints.
//!
//! [`render`] returns the text Salt's `try_printout` produces: the outputter's
//! text with trailing whitespace removed. The caller prints it followed by one
//! newline, and prints nothing at all when it is empty (Salt's `display_output`
//! skips empty text).

mod highstate;
mod table;

use brine_protocol::pprint;

pub(crate) use brine_protocol::nested::{
    nested, python_repr, python_rstrip, python_str, splitlines, Colors, Nested,
};

use std::fmt::Write as _;

use brine_protocol::pyrepr::float_repr as python_float;
use brine_protocol::yaml::{sorted, Style};
use serde_json::Value;

pub use highstate::StateOutput;

/// One of Salt's outputters, as named by `--out`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outputter {
    /// `nested`: Salt's default, indented key/value lines.
    Nested,
    /// `json`: `json.dumps(indent=4)`, keys in their original order.
    Json,
    /// `yaml`: PyYAML `safe_dump` in block style, keys sorted.
    Yaml,
    /// `txt` (also `text`): `key: line` per line of each value.
    Txt,
    /// `raw`: Python's `str()` of the data.
    Raw,
    /// `key`: the `salt-key` listing.
    Key,
    /// `no_return`: what Salt uses for minions that did not return.
    NoReturn,
    /// `highstate`: state returns, one block per state and a summary.
    Highstate,
    /// `pprint`: Python's `pprint.pformat` (indent from `--out-indent`).
    Pprint,
    /// `quiet`: nothing.
    Quiet,
    /// `newline_values_only`: each minion's value (a list's items) on lines of their own.
    NewlineValuesOnly,
    /// `table`: lists of rows as tables, under their keys.
    Table,
    /// `profile`: the states of state returns as a table of their durations.
    Profile,
}

/// Every name `--out` takes, as listed in the error for another name.
const OUTPUTTER_NAMES: &str = "nested, json, yaml, txt, raw, key, no_return, highstate, pprint, quiet, newline_values_only, table, profile";

/// An `--out` value that names no outputter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid outputter '{0}': valid outputters are {OUTPUTTER_NAMES}")]
pub struct UnknownOutputter(pub String);

impl std::str::FromStr for Outputter {
    type Err = UnknownOutputter;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "nested" => Ok(Self::Nested),
            "json" => Ok(Self::Json),
            "yaml" => Ok(Self::Yaml),
            "txt" | "text" => Ok(Self::Txt),
            "raw" => Ok(Self::Raw),
            "key" => Ok(Self::Key),
            "no_return" => Ok(Self::NoReturn),
            "highstate" => Ok(Self::Highstate),
            "pprint" => Ok(Self::Pprint),
            "quiet" => Ok(Self::Quiet),
            "newline_values_only" => Ok(Self::NewlineValuesOnly),
            "table" => Ok(Self::Table),
            "profile" => Ok(Self::Profile),
            other => Err(UnknownOutputter(other.to_owned())),
        }
    }
}

/// The outputter `--out NAME` asks for. As Salt's tools do, a name that is not an outputter
/// is reported on stderr (unless the console log level is `quiet`) and `nested` is used.
pub fn outputter_named(name: &str, log_level: &str) -> Outputter {
    name.parse().unwrap_or_else(|_| {
        if !log_level.eq_ignore_ascii_case("quiet") {
            eprintln!("[ERROR   ] Invalid outputter {name} specified, fall back to nested");
        }
        Outputter::Nested
    })
}

/// `--out-indent` with a negative value (Salt: "negative values disable indentation").
pub const NO_INDENT: usize = usize::MAX;

/// How to print: `--no-color`/tty detection, `--out-indent`, `--static`.
#[derive(Debug, Clone, Default)]
pub struct OutputOptions {
    /// ANSI colors as Salt's (pass false when stdout is not a tty).
    pub color: bool,
    /// `--out-indent`: `None` = not given (json 4, yaml 2), [`NO_INDENT`] = negative.
    pub indent: Option<usize>,
    /// `--static`: the caller gathers every minion's return into one map and
    /// renders it once; rendering itself is the same.
    pub static_: bool,
    /// The highstate outputter's settings.
    pub state: StateOutput,
}

/// Format one "event" of output (a map `{minion_id: return}`, or any value for
/// runners) exactly as Salt prints it, without the final newline.
pub fn render(out: Outputter, data: &Value, opts: &OutputOptions) -> String {
    render_with_retcode(out, data, opts, 0)
}

/// [`render`] for a return whose retcode is known: Salt's nested outputter
/// colors keys red when it is not 0.
pub fn render_with_retcode(
    out: Outputter,
    data: &Value,
    opts: &OutputOptions,
    retcode: i64,
) -> String {
    let colors = Colors::new(opts.color);
    let text = match out {
        Outputter::Nested => nested(data, &colors, retcode),
        Outputter::Json => json(data, opts.indent),
        Outputter::Yaml => brine_protocol::yaml::safe_dump(
            data,
            match opts.indent {
                None => Style::Block(2),
                Some(NO_INDENT) => Style::Flow,
                Some(n) => Style::Block(n),
            },
        ),
        Outputter::Txt => txt(data),
        Outputter::Raw => python_str(data),
        // Salt falls back to nested when the key outputter cannot read the data.
        Outputter::Key => key(data, &colors).unwrap_or_else(|| nested(data, &colors, retcode)),
        Outputter::NoReturn => no_return(data, &colors),
        Outputter::Highstate => highstate::highstate(data, &colors, &opts.state),
        Outputter::Pprint => pprint::pformat(
            data,
            match opts.indent {
                None | Some(NO_INDENT) => 1,
                Some(n) => n,
            },
        ),
        Outputter::Quiet => String::new(),
        // Salt's outputters that fail on the data fall back to nested.
        Outputter::NewlineValuesOnly => {
            newline_values_only(data).unwrap_or_else(|| nested(data, &colors, retcode))
        }
        Outputter::Table => {
            table::table(data, &colors).unwrap_or_else(|| nested(data, &colors, retcode))
        }
        Outputter::Profile => {
            table::profile(data, &colors).unwrap_or_else(|| nested(data, &colors, retcode))
        }
    };
    python_rstrip(&text).to_owned()
}

/// What `salt` prints when the target matched no minion (Salt's `_check_pub_data`).
pub const NO_MINIONS_MATCHED: &str =
    "No minions matched the target. No command was sent, no jid was assigned.";

/// The return Salt substitutes for a minion it believes is not connected.
pub const NOT_CONNECTED: &str = "Minion did not return. [Not connected]";

/// The return Salt substitutes for a targeted minion that did not answer in time;
/// it is printed with the `no_return` outputter (unless `--out` is given) and counts as retcode 1.
pub fn no_response_message(jid: &str) -> String {
    format!(
        "Minion did not return. [No response]\nThe minions may not have all finished running and any \
         remaining minions will return upon completion. To look up the return data for this job later, \
         run the following command:\n\nsalt-run jobs.lookup_jid {jid}"
    )
}

/// Salt's `get_printout` choice: `--out` wins, else the outputter the return
/// asked for (`out` in the minion's return), else nested. Outputters Brine does
/// not have (e.g. `highstate`) fall back to nested, as Salt does for unknown ones.
pub fn choose_outputter(cli: Option<Outputter>, returned: Option<&str>) -> Outputter {
    cli.or_else(|| returned.and_then(|name| name.parse().ok()))
        .unwrap_or(Outputter::Nested)
}

// ---------------------------------------------------------------- no_return

fn no_return(data: &Value, colors: &Colors) -> String {
    let mut out = String::new();
    no_return_display(data, 0, colors, &mut out);
    out
}

fn no_return_display(ret: &Value, indent: usize, colors: &Colors, out: &mut String) {
    match ret {
        Value::String(s) => {
            for line in s.split('\n') {
                let _ = writeln!(out, "{}{:indent$}{line}{}", colors.red, "", colors.endc);
            }
        }
        Value::Object(map) => {
            for (key, val) in sorted(map) {
                let _ = writeln!(out, "{}{:indent$}{key}{}:", colors.cyan, "", colors.endc);
                no_return_display(val, indent + 4, colors, out);
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------- key

/// Salt's key outputter for the ZeroMQ transport; `None` for data it cannot show.
fn key(data: &Value, colors: &Colors) -> Option<String> {
    let map = data.as_object()?;
    let mut out = String::new();
    for (status, keys) in sorted(map) {
        let (title, color) = match status.as_str() {
            "minions_pre" => (
                format!("{}Unaccepted Keys:{}", colors.light_red, colors.endc),
                colors.red,
            ),
            "minions" => (
                format!("{}Accepted Keys:{}", colors.light_green, colors.endc),
                colors.green,
            ),
            "minions_denied" => (
                format!("{}Denied Keys:{}", colors.light_magenta, colors.endc),
                colors.magenta,
            ),
            "minions_rejected" => (
                format!("{}Rejected Keys:{}", colors.light_blue, colors.endc),
                colors.blue,
            ),
            "local" => (
                format!("{}Local Keys:{}", colors.light_magenta, colors.endc),
                colors.magenta,
            ),
            _ => return None,
        };
        out.push_str(&title);
        out.push('\n');
        match keys {
            Value::Array(items) => {
                let mut names: Vec<String> = items.iter().map(python_str).collect();
                names.sort();
                for name in names {
                    let _ = writeln!(out, "{color}{}{}", name.replace('\x1b', "?"), colors.endc);
                }
            }
            Value::Object(entries) => {
                for (name, value) in sorted(entries) {
                    let _ = writeln!(
                        out,
                        "{color}{}:  {}{}",
                        name.replace('\x1b', "?"),
                        python_str(value),
                        colors.endc
                    );
                }
            }
            _ => return None,
        }
    }
    Some(out)
}

// ---------------------------------------------------------------- newline_values_only

/// Each minion's value on a line (`str()` of it), a list's items each on their own.
fn newline_values_only(data: &Value) -> Option<String> {
    let mut values = Vec::new();
    for value in data.as_object()?.values() {
        match value {
            Value::Array(items) => values.extend(items.iter().map(python_str)),
            other => values.push(python_str(other)),
        }
    }
    Some(values.join("\n"))
}

// ---------------------------------------------------------------- txt

fn txt(data: &Value) -> String {
    let mut out = String::new();
    match data {
        Value::Object(map) => {
            for (key, value) in map {
                match value {
                    Value::String(s) => {
                        for line in splitlines(s) {
                            let _ = writeln!(out, "{key}: {line}");
                        }
                    }
                    other => {
                        let _ = writeln!(out, "{key}: {}", python_str(other));
                    }
                }
            }
        }
        Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        other => {
            out.push_str(&pprint::pformat(other, 1));
            out.push('\n');
        }
    }
    out
}

// ---------------------------------------------------------------- Python repr

// ---------------------------------------------------------------- json

/// Python's `json.dumps(data, indent=..., ensure_ascii=False)`.
fn json(data: &Value, indent: Option<usize>) -> String {
    let indent = match indent {
        None => Some(4),
        Some(NO_INDENT) => None,
        Some(n) => Some(i64::try_from(n).unwrap_or(i64::MAX)),
    };
    brine_protocol::pyjson::dumps(data, &brine_protocol::pyjson::JsonStyle::new(indent, false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plain() -> OutputOptions {
        OutputOptions::default()
    }

    // Expected strings below were printed by Salt 3007.15 (`salt-call --out ...` / `try_printout`).
    #[test]
    fn nested_matches_salt_for_test_arg() {
        let data =
            json!({"local": {"args": ["a", 1], "kwargs": {"foo": "bar", "__pub_fun": "test.arg"}}});
        let expected = "local:\n    ----------\n    args:\n        - a\n        - 1\n    kwargs:\n        ----------\n        __pub_fun:\n            test.arg\n        foo:\n            bar";
        assert_eq!(render(Outputter::Nested, &data, &plain()), expected);
    }

    #[test]
    fn nested_colors_match_salt() {
        let data = json!({"web1": {"args": ["a", 1]}});
        let expected = "\x1b[0;36mweb1\x1b[0;0m:\n    \x1b[0;36m----------\x1b[0;0m\n    \x1b[0;36margs\x1b[0;0m:\n        \x1b[0;32m- a\x1b[0;0m\n        \x1b[0;1;33m- 1\x1b[0;0m";
        let opts = OutputOptions {
            color: true,
            ..plain()
        };
        assert_eq!(render(Outputter::Nested, &data, &opts), expected);
    }

    #[test]
    fn json_keeps_key_order_and_python_floats() {
        let data = json!({"web1": {"z": 1e20, "a": [true, null], "e": {}}});
        let expected = "{\n    \"web1\": {\n        \"z\": 1e+20,\n        \"a\": [\n            true,\n            null\n        ],\n        \"e\": {}\n    }\n}";
        assert_eq!(render(Outputter::Json, &data, &plain()), expected);
        let compact = OutputOptions {
            indent: Some(NO_INDENT),
            ..plain()
        };
        assert_eq!(
            render(Outputter::Json, &data, &compact),
            "{\"web1\": {\"z\": 1e+20, \"a\": [true, null], \"e\": {}}}"
        );
    }

    #[test]
    fn yaml_quotes_what_pyyaml_quotes() {
        let data =
            json!({"local": {"jid": "20240101010101123456", "ok": true, "v": "yes", "s": "a b"}});
        let expected = "local:\n  jid: '20240101010101123456'\n  ok: true\n  s: a b\n  v: 'yes'";
        assert_eq!(render(Outputter::Yaml, &data, &plain()), expected);
    }

    #[test]
    fn txt_raw_and_no_return_match_salt() {
        let data = json!({"web1": true, "web2": "one\ntwo"});
        assert_eq!(
            render(Outputter::Txt, &data, &plain()),
            "web1: True\nweb2: one\nweb2: two"
        );
        assert_eq!(
            render(Outputter::Raw, &data, &plain()),
            "{'web1': True, 'web2': 'one\\ntwo'}"
        );
        let missing = json!({"web3": no_response_message("20240101")});
        let expected = "web3:\n    Minion did not return. [No response]\n    The minions may not have all finished running and any remaining minions will return upon completion. To look up the return data for this job later, run the following command:\n    \n    salt-run jobs.lookup_jid 20240101";
        assert_eq!(render(Outputter::NoReturn, &missing, &plain()), expected);
    }

    #[test]
    fn key_listing_matches_salt_key() {
        let data = json!({"minions": ["web2", "web1"], "minions_pre": ["new1"], "minions_rejected": [], "minions_denied": []});
        let expected =
            "Accepted Keys:\nweb1\nweb2\nDenied Keys:\nUnaccepted Keys:\nnew1\nRejected Keys:";
        assert_eq!(render(Outputter::Key, &data, &plain()), expected);
    }

    #[test]
    fn outputter_names_parse_and_unknown_lists_valid_ones() {
        assert_eq!("text".parse::<Outputter>(), Ok(Outputter::Txt));
        assert_eq!("yaml".parse::<Outputter>(), Ok(Outputter::Yaml));
        let err = "pony".parse::<Outputter>().expect_err("not an outputter");
        assert!(err
            .to_string()
            .starts_with("invalid outputter 'pony': valid outputters are nested, json,"));
        assert_eq!(outputter_named("pony", "quiet"), Outputter::Nested);
        assert_eq!(outputter_named("table", "warning"), Outputter::Table);
        assert_eq!(
            choose_outputter(None, Some("no_return")),
            Outputter::NoReturn
        );
        assert_eq!(
            choose_outputter(Some(Outputter::Json), Some("no_return")),
            Outputter::Json
        );
        assert_eq!(choose_outputter(None, Some("pony")), Outputter::Nested);
        assert_eq!(
            choose_outputter(None, Some("highstate")),
            Outputter::Highstate
        );
    }

    #[test]
    fn python_float_repr() {
        for (f, text) in [
            (1e20, "1e+20"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (0.0001, "0.0001"),
            (1e-5, "1e-05"),
            (1.5, "1.5"),
            (-0.0, "-0.0"),
            (12345678901234567.0, "1.2345678901234568e+16"),
        ] {
            assert_eq!(python_float(f), text);
        }
    }

    #[test]
    fn empty_results_print_nothing() {
        assert_eq!(render(Outputter::Nested, &json!({}), &plain()), "");
        assert_eq!(render(Outputter::Txt, &json!({"m": ""}), &plain()), "");
    }
}

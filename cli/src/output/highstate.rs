//! Salt's `highstate` outputter: the default for `state.*` returns. One block per state (or one
//! line, in the terse modes), then a summary per minion.

use serde_json::Value;

use super::{python_float, python_rstrip, python_str as py_str, Colors, Nested};

/// The options of the highstate outputter (the master's `state_*` settings, or the command
/// line's `--state-output`, `--state-verbose`, `--output-diff`).
#[derive(Debug, Clone)]
pub struct StateOutput {
    /// `full`, `terse`, `mixed`, `changes`, each with an optional `_id` suffix; `filter` shows
    /// everything in full (Brine has no `state_output_exclude`/`state_output_terse`).
    pub mode: String,
    /// Show states that succeeded without changes.
    pub verbose: bool,
    /// Started/Duration lines and the total run time.
    pub profile: bool,
    /// Show only states that changed something or failed.
    pub diff: bool,
    /// Success and failure percentages in the summary.
    pub pct: bool,
}

impl Default for StateOutput {
    /// Salt 3007's defaults.
    fn default() -> Self {
        StateOutput {
            mode: "full".into(),
            verbose: true,
            profile: true,
            diff: false,
            pct: false,
        }
    }
}

pub(super) fn highstate(data: &Value, colors: &Colors, st: &StateOutput) -> String {
    Highstate { colors, st }.output(data, 1)
}

struct Highstate<'a> {
    colors: &'a Colors,
    st: &'a StateOutput,
}

/// Result counts of one minion in the order first seen, keyed as Salt keys them: the
/// result's `str()` (`True`, `False`, `None`), and `warnings`.
#[derive(Default)]
struct Counts(Vec<(String, u64)>);

impl Counts {
    fn add(&mut self, key: &str, n: u64) {
        match self.0.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 += n,
            None => self.0.push((key.to_string(), n)),
        }
    }

    fn get(&self, key: &str) -> u64 {
        self.0.iter().find(|(k, _)| k == key).map_or(0, |(_, n)| *n)
    }
}

/// A duration as Salt's summary adds it: a number, or text like `"12.5 ms"`.
fn duration_of(v: Option<&Value>) -> Option<f64> {
    match v {
        None => Some(0.0),
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::String(s)) => s
            .trim()
            .parse()
            .ok()
            .or_else(|| s.split(" ms").next()?.trim().parse().ok()),
        Some(_) => None,
    }
}

impl Highstate<'_> {
    fn output(&self, data: &Value, indent_level: usize) -> String {
        let mut data = data;
        if let Some(inner) = data.get("return").filter(|_| data.is_object()) {
            data = inner;
        }
        if let Some(inner) = data.get("data").filter(|_| data.is_object()) {
            data = inner;
        }
        if let Value::Object(m) = data {
            if m.len() == 1 {
                if let Some(Value::Object(only)) = m.values().next() {
                    if only.contains_key("jid") && only.contains_key("fun") {
                        if let Some(d) = only.get("return").and_then(|r| r.get("data")) {
                            data = d;
                        }
                    }
                }
            }
        }
        let map = match data {
            Value::Number(_) | Value::String(_) => return py_str(data),
            Value::Null => return "None".into(),
            Value::Object(m) => m,
            _ => return String::new(),
        };
        let masters = map.keys().filter(|k| k.ends_with("_master")).count();
        let drop_retcode = map.contains_key("retcode") && masters == 1;
        map.iter()
            .filter(|(k, _)| !(drop_retcode && k.as_str() == "retcode"))
            .map(|(host, hostdata)| self.host(host, hostdata, indent_level).0)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// One minion's block and whether anything changed.
    fn host(&self, host: &str, data: &Value, indent_level: usize) -> (String, bool) {
        let c = self.colors;
        let mut hcolor = c.green;
        let mut lines: Vec<String> = Vec::new();
        let mut nchanges = 0u64;
        match data {
            Value::Number(n) => {
                nchanges = 1;
                lines.push(format!("{}    {n}{}", c.green, c.endc));
                hcolor = c.cyan;
            }
            Value::String(s) => {
                nchanges = 1;
                for line in s.lines() {
                    lines.push(format!("{}    {line}{}", c.green, c.endc));
                }
                hcolor = c.cyan;
            }
            Value::Array(errors) => {
                hcolor = c.light_red;
                lines.push(format!("    {hcolor}Data failed to compile:{}", c.endc));
                for err in errors {
                    let err = strip_escapes(&py_str(err));
                    lines.push(format!("{hcolor}----------\n    {err}{}", c.endc));
                }
            }
            Value::Object(states) => {
                let (state_lines, failed_or_none) =
                    self.states(host, states, indent_level, &mut nchanges);
                lines = state_lines;
                if let Some(color) = failed_or_none {
                    hcolor = color;
                }
            }
            _ => {}
        }
        lines.insert(0, format!("{hcolor}{}:{}", strip_escapes(host), c.endc));
        (lines.join("\n"), nchanges > 0)
    }

    /// The state blocks and summary of one minion's dict return.
    fn states(
        &self,
        host: &str,
        states: &serde_json::Map<String, Value>,
        indent_level: usize,
        nchanges: &mut u64,
    ) -> (Vec<String>, Option<&'static str>) {
        let c = self.colors;
        let st = self.st;
        let mut lines: Vec<String> = Vec::new();
        let mut hcolor: Option<&'static str> = None;
        let mut counts = Counts::default();
        let mut rdurations: Vec<f64> = Vec::new();
        let mut pdurations: Vec<f64> = Vec::new();
        let mut run: Vec<(&String, &serde_json::Map<String, Value>)> = Vec::new();
        for (tname, info) in states {
            if let Value::Object(m) = info {
                if tname != "changes" && !m.is_empty() && !m.contains_key("__run_num__") {
                    lines.insert(0, super::python_repr(info));
                    lines.insert(
                        0,
                        "The State execution failed to record the order in which all states \
                         were executed. The state return missing data is:"
                            .into(),
                    );
                }
                if m.contains_key("result") {
                    run.push((tname, m));
                }
            }
        }
        let run_num = |m: &serde_json::Map<String, Value>| {
            m.get("__run_num__").and_then(Value::as_f64).unwrap_or(0.0)
        };
        run.sort_by(|a, b| {
            run_num(a.1)
                .partial_cmp(&run_num(b.1))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        for (tname, ret) in run {
            let result = ret.get("result").unwrap_or(&Value::Null);
            counts.add(&py_str(result), 1);
            let target = if ret.contains_key("__parallel__") {
                &mut pdurations
            } else {
                &mut rdurations
            };
            if let Some(d) = duration_of(ret.get("duration")) {
                target.push(d);
            }
            let changes = ret.get("changes").unwrap_or(&Value::Null);
            let name = ret.get("name").and_then(Value::as_str);
            let (schanged, ctext) =
                if matches!(name, Some("state.orch" | "state.orchestrate" | "state.sls")) {
                    let nested = self.output(changes, indent_level + 1);
                    let pad = " ".repeat(14 * indent_level);
                    let text = format!("\n{nested}")
                        .split('\n')
                        .map(|l| format!("{pad}{l}"))
                        .collect::<Vec<_>>()
                        .join("\n");
                    *nchanges += 1;
                    (true, text)
                } else {
                    let (changed, text) = self.changes(changes);
                    if changed {
                        *nchanges += 1;
                    }
                    (changed, text)
                };
            let ok = brine_protocol::payload::json_truthy(result);
            if (st.diff || !st.verbose) && ok && !schanged {
                continue;
            }
            let mut tcolor = c.green;
            if schanged {
                tcolor = c.cyan;
            }
            match result {
                Value::Bool(false) => {
                    hcolor = Some(c.red);
                    tcolor = c.red;
                }
                Value::Null => {
                    hcolor = Some(c.light_yellow);
                    tcolor = c.light_yellow;
                }
                _ => {}
            }
            let mode = st.mode.to_lowercase();
            let mut comps: Vec<String> = tname.split("_|-").map(str::to_string).collect();
            while comps.len() < 4 {
                comps.push(String::new());
            }
            if mode.ends_with("_id") {
                comps[2] = comps[1].clone();
            }
            let terse = mode.starts_with("terse")
                || (mode.starts_with("mixed") && *result != Value::Bool(false))
                || (mode.starts_with("changes") && ok && !schanged);
            if terse && !mode.starts_with("filter") {
                lines.push(self.terse(tcolor, &comps, ret));
                continue;
            }
            let endc = c.endc;
            let mut block = vec![
                format!("{tcolor}----------{endc}"),
                format!("    {tcolor}      ID: {}{endc}", comps[1]),
                format!(
                    "    {tcolor}Function: {}.{}{endc}",
                    comps[0],
                    comps.last().map(String::as_str).unwrap_or("")
                ),
                format!("    {tcolor}  Result: {}{endc}", py_str(result)),
                format!("    {tcolor} Comment: {}{endc}", comment_text(ret)),
            ];
            if st.profile && ret.contains_key("start_time") {
                let started = ret.get("start_time").map(py_str).unwrap_or_default();
                let duration = match ret.get("duration") {
                    None => String::new(),
                    Some(Value::String(s)) if s.is_empty() => String::new(),
                    Some(d) => format!("{} ms", py_num(d)),
                };
                block.push(format!("    {tcolor} Started: {started}{endc}"));
                block.push(format!("    {tcolor}Duration: {duration}{endc}"));
            }
            if comps[1] != comps[2] {
                block.insert(3, format!("    {tcolor}    Name: {}{endc}", comps[2]));
            }
            lines.extend(block);
            lines.push(format!("{tcolor}     Changes:   {ctext}{endc}"));
            if let Some(Value::Array(warnings)) = ret.get("warnings") {
                counts.add("warnings", 1);
                let text: Vec<String> = warnings.iter().map(py_str).collect();
                let filled = fill(&text.join("\n"), 80, 14);
                lines.push(format!(
                    "   {} Warnings: {}{endc}",
                    c.light_red,
                    filled.trim_start()
                ));
            }
        }
        lines.extend(self.summary(host, &counts, *nchanges, &rdurations, &pdurations));
        (lines, hcolor)
    }

    fn changes(&self, changes: &Value) -> (bool, String) {
        if !brine_protocol::payload::json_truthy(changes) {
            return (false, String::new());
        }
        let Value::Object(m) = changes else {
            return (true, format!("Invalid Changes data: {}", py_str(changes)));
        };
        if let (Some(Value::Object(hosts)), Some("highstate")) =
            (m.get("ret"), m.get("out").and_then(Value::as_str))
        {
            let mut text = String::new();
            let mut changed = false;
            for (host, hostdata) in hosts {
                let (s, ch) = self.host(host, hostdata, 1);
                for l in s.lines() {
                    text.push('\n');
                    text.push_str(&" ".repeat(14));
                    text.push_str(l);
                }
                changed |= ch;
            }
            return (changed, text);
        }
        let mut out = Vec::new();
        Nested {
            colors: self.colors,
            retcode: 0,
        }
        .display(changes, 14, "", &mut out);
        (true, format!("\n{}", python_rstrip(&out.join("\n"))))
    }

    fn terse(
        &self,
        tcolor: &str,
        comps: &[String],
        ret: &serde_json::Map<String, Value>,
    ) -> String {
        let c = self.colors;
        let result = match ret.get("result") {
            Some(Value::Bool(false)) => "Failed",
            Some(Value::Null) | None => "Differs",
            _ if ret
                .get("changes")
                .is_some_and(brine_protocol::payload::json_truthy) =>
            {
                "Changed"
            }
            _ => "Clean",
        };
        let mut s = String::new();
        if let Some(Value::Array(w)) = ret.get("warnings") {
            let w: Vec<String> = w.iter().map(py_str).collect();
            s.push_str(&format!(
                "{}Warnings:\n{}{}",
                c.light_red,
                w.join("\n"),
                c.endc
            ));
        }
        s.push_str(&format!(
            " {tcolor} Name: {} - Function: {}.{} - Result: {result}",
            comps[2],
            comps[0],
            comps.last().map(String::as_str).unwrap_or("")
        ));
        if self.st.profile && ret.contains_key("start_time") {
            s.push_str(&format!(
                " - Started: {} - Duration: {} ms",
                ret.get("start_time").map(py_str).unwrap_or_default(),
                ret.get("duration").map(py_num).unwrap_or_default()
            ));
        }
        s.push_str(c.endc);
        s
    }

    fn summary(
        &self,
        host: &str,
        counts: &Counts,
        nchanges: u64,
        rdurations: &[f64],
        pdurations: &[f64],
    ) -> Vec<String> {
        let c = self.colors;
        let endc = c.endc;
        let (succeeded, failed, not_run, warnings) = (
            counts.get("True"),
            counts.get("False"),
            counts.get("None"),
            counts.get("warnings"),
        );
        let count_max = counts
            .0
            .iter()
            .map(|(_, n)| n.to_string().len())
            .max()
            .unwrap_or(0);
        let width = "Succeeded".len() + count_max + 2;
        let counted = |label: &str, n: String| {
            format!(
                "{label}: {n:>w$}",
                w = width.saturating_sub(label.len() + 2)
            )
        };
        let mut out = vec![format!(
            "{}\nSummary for {host}\n{}{endc}",
            c.cyan,
            "-".repeat(width)
        )];
        let mut stats = Vec::new();
        if not_run > 0 {
            stats.push(format!("{}unchanged={not_run}{endc}", c.light_yellow));
        }
        if nchanges > 0 {
            stats.push(format!("{}changed={nchanges}{endc}", c.green));
        }
        let stats = if stats.is_empty() {
            String::new()
        } else {
            format!(" ({})", stats.join(", "))
        };
        out.push(format!(
            "{}{}{endc}{stats}",
            c.green,
            counted("Succeeded", (succeeded + not_run).to_string())
        ));
        let failed_color = if failed > 0 { c.red } else { c.cyan };
        out.push(format!(
            "{failed_color}{}{endc}",
            counted("Failed", failed.to_string())
        ));
        let total: u64 = counts.0.iter().map(|(_, n)| n).sum::<u64>() - warnings;
        if self.st.pct && total > 0 {
            let pct =
                |n: u64| python_float(((n as f64 / total as f64) * 100.0 * 100.0).round() / 100.0);
            out.push(format!(
                "{}{}{endc}",
                c.green,
                counted("Success %", pct(succeeded + not_run))
            ));
            out.push(format!(
                "{failed_color}{}{endc}",
                counted("Failure %", pct(failed))
            ));
        }
        if warnings > 0 {
            out.push(format!(
                "{}{}{endc}",
                c.light_red,
                counted("Warnings", warnings.to_string())
            ));
        }
        out.push(format!(
            "{}{}\nTotal states run: {total:>w$}{endc}",
            c.cyan,
            "-".repeat(width),
            w = width.saturating_sub(7)
        ));
        if self.st.profile {
            let mut sum: f64 = rdurations.iter().sum();
            if let Some(max) = pdurations.iter().cloned().reduce(f64::max) {
                sum += max;
            }
            let mut unit = "ms";
            if sum > 999.0 {
                sum /= 1000.0;
                unit = "s";
            }
            out.push(format!(
                "{}Total run time: {:>w$} {unit}{endc}",
                c.cyan,
                format!("{sum:.3}"),
                w = width.saturating_sub(5)
            ));
        }
        out
    }
}

/// Python's `str()` of a number or text as Salt formats a duration.
fn py_num(v: &Value) -> String {
    match v {
        Value::Number(n) if n.is_f64() => python_float(n.as_f64().unwrap_or(0.0)),
        other => py_str(other),
    }
}

/// The comment as Salt shows it: `str()` of it, stripped, continuation lines indented, and
/// any `data` appended.
fn comment_text(ret: &serde_json::Map<String, Value>) -> String {
    let raw = ret.get("comment").map(py_str).unwrap_or_default();
    let mut comment = raw.trim().replace('\n', &format!("\n{}", " ".repeat(14)));
    match ret.get("data") {
        Some(Value::Array(items)) => {
            for item in items {
                comment = format!("{comment} {}", py_str(item));
            }
        }
        Some(Value::Object(m)) => {
            for (k, v) in m {
                comment = format!("{comment}\n\t\t{k}: {}", py_str(v));
            }
        }
        Some(other) => comment = format!("{comment} {}", py_str(other)),
        None => {}
    }
    comment
}

/// Python's `textwrap.fill` with the same indent on every line (words split on whitespace).
fn fill(text: &str, width: usize, indent: usize) -> String {
    let pad = " ".repeat(indent);
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if line.is_empty() {
            line = format!("{pad}{word}");
        } else if line.len() + 1 + word.len() <= width {
            line.push(' ');
            line.push_str(word);
        } else {
            lines.push(std::mem::take(&mut line));
            line = format!("{pad}{word}");
        }
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines.join("\n")
}

/// Salt's `strip_esc_sequence`: the escape character of terminal sequences made harmless.
fn strip_escapes(s: &str) -> String {
    s.replace('\x1b', "?")
}

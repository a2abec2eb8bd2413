//! The text-editing `file` states, as Salt 3007 runs them: `file.append`, `file.prepend`,
//! `file.comment`, `file.uncomment`, `file.replace`, `file.blockreplace`, `file.line` and
//! `file.keyvalue`. The edits themselves are the minion's `file` execution functions
//! (`file.replace`, `file.blockreplace`, `file.line`, `file.comment_line`, `file.search`,
//! `file.append`, `file.prepend`), called through the host; `file.keyvalue` is all state.
//! The `source` templates of `file.append` and `file.prepend` come from the master, this
//! machine's disk or over http(s) (cached in `extrn_files`).

use brine_protocol::posixpath::dirname;
use std::path::Path;

use brine_protocol::nested::{is_binary, splitlines, splitlines_keepends};
use brine_protocol::payload::json_truthy;
use serde_json::{json, Map, Value};

use super::{changes, error, expanduser, set, Ret};
use crate::diff;
use crate::states::{ret, Call};
use crate::verify::{py_text, py_type};

// ---------------------------------------------------------------------------
// Python's text functions

use brine_protocol::pystr::fopen_lines;

use brine_protocol::pystr::{is_space as py_space, strip as py_strip};

/// Python's `str.lstrip(chars)`: whitespace when `chars` is `None`.
fn py_lstrip<'s>(s: &'s str, chars: Option<&str>) -> &'s str {
    match chars {
        Some(set) => s.trim_start_matches(|c| set.contains(c)),
        None => s.trim_start_matches(py_space),
    }
}

/// Python 3.11's `re.escape`.
fn re_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    for c in text.chars() {
        if "()[]{}?*+-|^$\\.&~# \t\n\r\x0b\x0c".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `shlex.shlex(line)` with `whitespace_split` and no comments, as Salt's
/// `build_whitespace_split_regex` sets it up: its tokens (quoted strings whole, quotes kept).
fn shlex_words(line: &str) -> Result<Vec<String>, String> {
    let quotes: &[char] = if line.contains("'\\\"") {
        &[]
    } else if line.contains('\'') {
        &['"']
    } else if line.contains('"') {
        &['\'']
    } else {
        &['\'', '"']
    };
    enum State {
        Space,
        Word,
        Quoted(char),
    }
    let mut words = Vec::new();
    let mut word = String::new();
    let mut state = State::Space;
    for c in line.chars() {
        let space = matches!(c, ' ' | '\t' | '\r' | '\n');
        state = match state {
            State::Space if space => State::Space,
            State::Space => {
                word.push(c);
                if quotes.contains(&c) {
                    State::Quoted(c)
                } else {
                    State::Word
                }
            }
            State::Word if space => {
                words.push(std::mem::take(&mut word));
                State::Space
            }
            State::Word => {
                word.push(c);
                State::Word
            }
            State::Quoted(q) => {
                word.push(c);
                if c == q {
                    words.push(std::mem::take(&mut word));
                    State::Space
                } else {
                    State::Quoted(q)
                }
            }
        };
    }
    match state {
        State::Quoted(_) => return Err("ValueError: No closing quotation".into()),
        State::Word => words.push(word),
        State::Space => {}
    }
    Ok(words)
}

/// Salt's `build_whitespace_split_regex`: a regex finding the lines of `text` whatever the
/// whitespace between and around their words.
fn whitespace_split_regex(text: &str) -> Result<String, String> {
    const SPACE: &str = r"(?:[\s]+)?";
    let mut regex = String::new();
    for line in splitlines(text) {
        let words: Vec<String> = shlex_words(line)?.iter().map(|w| re_escape(w)).collect();
        regex.push_str(&format!("{SPACE}{}{SPACE}", words.join(SPACE)));
    }
    Ok(format!("(?m)^{regex}$"))
}

/// Salt's `comment` state strips a pattern of a leading `(?x)` flag, `^` and a trailing `$`
/// (`re.sub(r"^(\(\?[iLmsux]\))?\^?(.*?)\$?$", r"\2", regex)`).
fn unanchor(regex: &str) -> String {
    // `.` stops at newlines, `$` may match before a final one: no match with any other.
    let (core, tail) = match regex.strip_suffix('\n') {
        Some(core) => (core, "\n"),
        None => (regex, ""),
    };
    if core.contains('\n') {
        return regex.to_string();
    }
    let mut core = core;
    let flag = core.len() >= 4
        && core.starts_with("(?")
        && core[3..].starts_with(')')
        && core[2..3].chars().all(|c| "iLmsux".contains(c));
    if flag {
        core = &core[4..];
    }
    let core = core.strip_prefix('^').unwrap_or(core);
    let core = core.strip_suffix('$').unwrap_or(core);
    format!("{core}{tail}")
}

/// Salt's `files.is_text`: the first 512 bytes are not binary (an unreadable file is not
/// text).
fn is_text(path: &str) -> bool {
    use std::io::Read;
    let mut block = Vec::with_capacity(512);
    std::fs::File::open(path)
        .and_then(|f| f.take(512).read_to_end(&mut block))
        .is_ok_and(|_| !is_binary(&block))
}

/// A Python `OSError` as its traceback's last line.
fn os_error(e: &std::io::Error, path: &str) -> String {
    brine_protocol::pyrepr::os_exception(e, Some(path))
}

/// Bytes decoded as UTF-8, strictly (Python's `UnicodeDecodeError` otherwise) or with
/// replacement characters.
fn decode(bytes: Vec<u8>, replace: bool) -> Result<String, String> {
    if replace {
        return Ok(String::from_utf8_lossy(&bytes).into_owned());
    }
    String::from_utf8(bytes).map_err(|e| {
        let err = e.utf8_error();
        let pos = err.valid_up_to();
        let byte = e.as_bytes().get(pos).copied().unwrap_or(0);
        let reason = match err.error_len() {
            None => "unexpected end of data",
            Some(_) if (0x80..0xc2).contains(&byte) || byte > 0xf4 => "invalid start byte",
            Some(_) => "invalid continuation byte",
        };
        format!(
            "UnicodeDecodeError: 'utf-8' codec can't decode byte 0x{byte:02x} in position {pos}: {reason}"
        )
    })
}

/// Unified diff of lines that keep their line breaks (`"".join(difflib.unified_diff(a, b))`).
fn unified(a: &[&str], b: &[&str]) -> String {
    diff::unified(a, b)
}

/// `"\n".join(difflib.unified_diff(a, b))` of lines without line breaks, as `file.append`
/// shows its changes: the headers keep their `\n`, the lines are joined by one.
fn unified_joined(a: &[&str], b: &[&str]) -> String {
    let a: Vec<String> = a.iter().map(|l| format!("{l}\n")).collect();
    let b: Vec<String> = b.iter().map(|l| format!("{l}\n")).collect();
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let b: Vec<&str> = b.iter().map(String::as_str).collect();
    let out = diff::unified(&a, &b);
    // Lines of a diff start with ` `, `-` or `+`: the first two and those with `@@` are
    // headers.
    out.split_inclusive('\n')
        .enumerate()
        .map(|(i, piece)| {
            if i < 2 || piece.starts_with("@@") {
                piece
            } else {
                piece.strip_suffix('\n').unwrap_or(piece)
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

// ---------------------------------------------------------------------------
// Calls, errors, arguments

/// Sets a return's comment.
fn say(r: &mut Ret, comment: impl Into<String>) {
    set(r, "comment", Value::String(comment.into()));
}

/// An execution function called with keyword arguments only (a positional `key=value` string
/// would be taken for a keyword argument).
fn exec(c: &Call, fun: &str, kwargs: Vec<(&str, Value)>) -> Result<Value, String> {
    let kwargs: Map<String, Value> = kwargs
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    c.host.call(fun, &[], &kwargs)
}

/// A failed execution function as Python sees the exception: its class and `str(exc)`.
fn exception(err: &str) -> (String, String) {
    if let Some((_, msg)) = err
        .strip_prefix("ERROR executing '")
        .and_then(|rest| rest.split_once("': "))
    {
        return ("SaltInvocationError".into(), msg.into());
    }
    if let Some(msg) = err.strip_prefix("ERROR: ") {
        return ("CommandExecutionError".into(), msg.into());
    }
    if let Some(rest) = err.strip_prefix("The minion function caused an exception: ") {
        if let Some((class, msg)) = rest.split_once(": ") {
            let is_class = !class.is_empty()
                && class
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
            if is_class {
                return (class.into(), msg.into());
            }
        }
        return ("Exception".into(), rest.into());
    }
    if let Some((_, msg)) = err
        .strip_prefix("Passed invalid arguments to ")
        .and_then(|rest| rest.split_once(": "))
    {
        return (
            "TypeError".into(),
            msg.lines().next().unwrap_or_default().into(),
        );
    }
    ("Exception".into(), err.into())
}

/// A failed execution function as the exception the state raises: `Class: message`, the last
/// line of Salt's traceback.
fn raised(err: String) -> String {
    let (class, msg) = exception(&err);
    format!("{class}: {msg}")
}

/// An argument as Salt's function receives it: `default` when absent, `None` when null.
fn arg_or(c: &Call, key: &str, default: Value) -> Value {
    c.low.get(key).cloned().unwrap_or(default)
}

/// `str()` of an argument, `default` when absent (`None` when null).
fn text_or(c: &Call, key: &str, default: &str) -> String {
    c.low.get(key).map_or_else(|| default.to_string(), py_text)
}

/// `file.search(path, pattern, multiline=True)`.
fn search(c: &Call, path: &str, pattern: &str) -> Result<bool, String> {
    exec(
        c,
        "file.search",
        vec![
            ("path", json!(path)),
            ("pattern", json!(pattern)),
            ("multiline", json!(true)),
        ],
    )
    .map(|v| json_truthy(&v))
    .map_err(raised)
}

/// Salt's `_check_file`.
fn check_file(name: &str) -> Result<(), String> {
    if !name.starts_with('/') {
        return Err(format!("Specified file {name} is not an absolute path"));
    }
    if !Path::new(name).exists() {
        return Err(format!("{name}: file not found"));
    }
    Ok(())
}

/// How a state decodes files (`encoding`, `encoding_errors`): UTF-8, strict or with
/// replacement characters; `Err` names what Brine does not read.
fn decoding(c: &Call) -> Result<bool, String> {
    if let Some(encoding) = c.text("encoding") {
        let norm = encoding.to_lowercase().replace(['-', ' '], "_");
        if !["utf_8", "utf8", "u8", "utf"].contains(&norm.as_str()) {
            return Err(format!(
                "encoding {encoding} is not supported: Brine reads files as UTF-8"
            ));
        }
    }
    match c.text("encoding_errors").as_deref() {
        None | Some("strict") => Ok(false),
        Some("replace") => Ok(true),
        Some(other) => Err(format!(
            "encoding_errors {other} is not supported: use strict or replace"
        )),
    }
}

/// A file's text, decoded as the state asks.
fn read_text(name: &str, replace: bool) -> Result<String, String> {
    let bytes = std::fs::read(name).map_err(|e| os_error(&e, name))?;
    decode(bytes, replace)
}

/// `text` of `file.append`/`file.prepend` as Salt's `_validate_str_list` makes it a list of
/// strings (no text at all is the string `None`).
fn str_list(text: Option<&Value>) -> Vec<String> {
    match text {
        None => vec!["None".into()],
        Some(Value::Array(items)) => items.iter().map(py_text).collect(),
        Some(other) => vec![py_text(other)],
    }
}

/// `source`/`sources` (Salt's `_unify_sources_and_hashes`): the sources to render.
fn unify_sources(c: &Call) -> Result<Vec<String>, String> {
    let given = |k: &str| c.arg(k).filter(|v| json_truthy(v));
    let (source, sources) = (given("source"), given("sources"));
    if source.is_some() && sources.is_some() {
        return Err("source and sources are mutually exclusive".into());
    }
    if given("source_hash").is_some() && given("source_hashes").is_some() {
        return Err("source_hash and source_hashes are mutually exclusive".into());
    }
    let list = match (source, sources) {
        (Some(source), _) => vec![py_text(source)],
        (None, Some(Value::Array(items))) => items.iter().map(py_text).collect(),
        (None, Some(other)) => {
            return Err(format!(
                "sources must be a list of sources, not {}",
                py_text(other)
            ))
        }
        (None, None) => Vec::new(),
    };
    // http(s) sources are fetched; ftp, s3 and swift are refused by name.
    if let Some(remote) = list
        .iter()
        .find(|s| crate::url::remote_scheme(s).is_some() && !crate::url::is_http(s))
    {
        return Err(crate::url::refused(remote));
    }
    Ok(list)
}

/// The rendered texts of the sources (Salt's `_get_template_texts`); `Err` is the state's
/// return, named after the source that failed.
fn template_texts(c: &Call, sources: &[String]) -> Result<Vec<String>, Ret> {
    let template = match c.low.get("template") {
        None => Some("jinja".to_string()),
        Some(Value::Null) => None,
        Some(v) => Some(py_text(v)),
    };
    let failed = |source: &str, comment: String| {
        let mut r = ret(source, json!(false), comment, json!({}));
        r.insert("data".into(), json!([]));
        r
    };
    let mut texts = Vec::new();
    for source in sources {
        let load_failed = || failed(source, format!("Failed to load template file {source}"));
        // An http(s) template is cached as Salt's cp.get_template caches it.
        let fetched = if crate::url::is_http(source) {
            c.host
                .cache_url(source, c.saltenv, &crate::url::Fetch::default())
                .and_then(|p| std::fs::read(p).map_err(|e| e.to_string()))
                .map(Some)
        } else {
            c.host.fetch(source, c.saltenv)
        };
        let Ok(Some(bytes)) = fetched else {
            return Err(load_failed());
        };
        let rendered = match template.as_deref() {
            Some("jinja") => {
                let mut vars = Map::new();
                for key in ["defaults", "context"] {
                    if let Some(Value::Object(m)) = c.arg(key) {
                        vars.extend(m.clone());
                    }
                }
                let text = String::from_utf8_lossy(&bytes).into_owned();
                match c.host.render_template(&text, source, c.saltenv, vars) {
                    Ok(t) => t,
                    Err(_) => return Err(load_failed()),
                }
            }
            Some(engine @ ("mako" | "py" | "wempy" | "genshi" | "cheetah")) => {
                return Err(failed(
                    source,
                    format!("Template engine {engine} is not supported: only jinja is"),
                ))
            }
            _ => return Err(load_failed()),
        };
        if rendered.is_empty() {
            return Err(failed(
                source,
                format!("Failed to read rendered template file ({source}): it is empty"),
            ));
        }
        texts.push(rendered);
    }
    Ok(texts)
}

/// A state function of the parent module called for this state's file.
fn sub_call(
    c: &Call,
    low: &Map<String, Value>,
    run: fn(&Call) -> Result<Ret, String>,
) -> Result<Ret, String> {
    run(&c.with_low(low))
}

/// What `file.append` and `file.prepend` do before reading the file: `makedirs: True` makes
/// the parent directory, a missing file is touched. `Some` is the state's return.
fn prepare(c: &Call, name: &str, r: &mut Ret) -> Result<Option<Ret>, String> {
    let makedirs = c.low.get("makedirs").cloned().unwrap_or(json!(false));
    if makedirs == json!(true) {
        let dir = dirname(name);
        if c.test {
            say(r, format!("Directory {dir} is set to be updated"));
            set(r, "result", Value::Null);
        } else {
            let present =
                exec(c, "file.directory_exists", vec![("path", json!(dir))]).map_err(raised)?;
            if !json_truthy(&present) {
                exec(c, "file.makedirs", vec![("path", json!(name))]).map_err(raised)?;
                if !Path::new(&dir).is_dir() {
                    let mut new_dir = Map::new();
                    new_dir.insert(dir.clone(), json!({"directory": "new"}));
                    set(r, "changes", Value::Object(new_dir));
                    set(r, "result", json!(false));
                    say(
                        r,
                        format!("The following files will be changed:\n{dir}: directory - new\n"),
                    );
                    return Ok(Some(r.clone()));
                }
            }
        }
    }
    if let Err(msg) = check_file(name) {
        let mut low = Map::new();
        low.insert("name".into(), json!(name));
        low.insert("makedirs".into(), makedirs);
        let touched = sub_call(c, &low, super::touch)?;
        if c.test {
            return Ok(Some(touched));
        }
        if check_file(name).is_err() {
            set(r, "result", json!(false));
            say(r, msg);
            return Ok(Some(r.clone()));
        }
    }
    Ok(None)
}

/// The texts to add: the rendered sources, else `text`; `Err` is the state's return.
fn texts(c: &Call, sources: &[String]) -> Result<Vec<String>, Ret> {
    if sources.is_empty() {
        return Ok(str_list(c.arg("text")));
    }
    template_texts(c, sources)
}

// ---------------------------------------------------------------------------
// The states

pub(super) fn append(c: &Call) -> Result<Ret, String> {
    let given = c.name();
    let mut r = ret(&given, json!(false), "", json!({}));
    if given.is_empty() {
        return error(r, "Must provide name to file.append");
    }
    let name = expanduser(&given);
    let sources = match unify_sources(c) {
        Ok(sources) => sources,
        Err(e) => return error(r, e),
    };
    let replace_errors = match decoding(c) {
        Ok(replace) => replace,
        Err(e) => return error(r, e),
    };
    if let Some(done) = prepare(c, &name, &mut r)? {
        return Ok(done);
    }
    let text = match texts(c, &sources) {
        Ok(text) => text,
        Err(failed) => return Ok(failed),
    };
    let before = read_text(&name, replace_errors)?;
    let slines = splitlines(&before);
    let ignore_whitespace = c.flag("ignore_whitespace", true);
    let mut append_lines: Vec<String> = Vec::new();
    for chunk in &text {
        let pattern = if ignore_whitespace {
            whitespace_split_regex(chunk)?
        } else {
            chunk.clone()
        };
        if search(c, &name, &pattern)? {
            continue;
        }
        append_lines.extend(splitlines(chunk).into_iter().map(str::to_string));
    }
    let show = |r: &mut Ret, old: &[&str], new: &[&str]| {
        let d = if is_text(&name) {
            unified_joined(old, new)
        } else {
            "Replace binary file".to_string()
        };
        changes(r).insert("diff".into(), json!(d));
    };
    if c.test {
        let mut nlines = slines.clone();
        nlines.extend(append_lines.iter().map(String::as_str));
        if nlines != slines {
            say(&mut r, format!("File {name} is set to be updated"));
            set(&mut r, "result", Value::Null);
            show(&mut r, &slines, &nlines);
        } else {
            say(&mut r, format!("File {name} is in correct state"));
            set(&mut r, "result", json!(true));
        }
        return Ok(r);
    }
    if append_lines.is_empty() {
        say(&mut r, format!("File {name} is in correct state"));
    } else {
        exec(
            c,
            "file.append",
            vec![("path", json!(name)), ("args", json!(append_lines))],
        )
        .map_err(raised)?;
        say(&mut r, format!("Appended {} lines", append_lines.len()));
    }
    let after = read_text(&name, replace_errors)?;
    let nlines = splitlines(&after);
    if nlines != slines {
        show(&mut r, &slines, &nlines);
    }
    set(&mut r, "result", json!(true));
    Ok(r)
}

pub(super) fn prepend(c: &Call) -> Result<Ret, String> {
    let name = expanduser(&c.name());
    let mut r = ret(&name, json!(false), "", json!({}));
    if name.is_empty() {
        return error(r, "Must provide name to file.prepend");
    }
    let sources = match unify_sources(c) {
        Ok(sources) => sources,
        Err(e) => return error(r, e),
    };
    let replace_errors = match decoding(c) {
        Ok(replace) => replace,
        Err(e) => return error(r, e),
    };
    if let Some(done) = prepare(c, &name, &mut r)? {
        return Ok(done);
    }
    let text = match texts(c, &sources) {
        Ok(text) => text,
        Err(failed) => return Ok(failed),
    };
    let before = read_text(&name, replace_errors)?;
    let slines = splitlines_keepends(&before);
    let header = c.flag("header", false);
    let mut count = 0;
    let mut test_lines: Vec<String> = Vec::new();
    let mut preface: Vec<String> = Vec::new();
    for chunk in &text {
        if !header && search(c, &name, &whitespace_split_regex(chunk)?)? {
            continue;
        }
        for line in splitlines(chunk) {
            if c.test {
                say(&mut r, format!("File {name} is set to be updated"));
                set(&mut r, "result", Value::Null);
                test_lines.push(format!("{line}\n"));
            } else {
                preface.push(line.to_string());
            }
            count += 1;
        }
    }
    let show = |r: &mut Ret, old: &[&str], new: &[&str]| {
        let d = if is_text(&name) {
            unified(old, new)
        } else {
            "Replace binary file".to_string()
        };
        changes(r).insert("diff".into(), json!(d));
    };
    if c.test {
        let mut nlines: Vec<&str> = test_lines.iter().map(String::as_str).collect();
        nlines.extend(slines.iter().copied());
        if nlines != slines {
            show(&mut r, &slines, &nlines);
            set(&mut r, "result", Value::Null);
        } else {
            say(&mut r, format!("File {name} is in correct state"));
            set(&mut r, "result", json!(true));
        }
        return Ok(r);
    }
    let prepend_lines = |lines: &[String]| {
        exec(
            c,
            "file.prepend",
            vec![("path", json!(name)), ("args", json!(lines))],
        )
        .map_err(raised)
    };
    if header {
        // The file's first lines compared with the lines to put there.
        let current = read_text(&name, replace_errors)?;
        let head: Vec<&str> = splitlines_keepends(&current)
            .into_iter()
            .take(preface.len())
            .flat_map(splitlines)
            .collect();
        if head != preface {
            prepend_lines(&preface)?;
        } else {
            count = 0;
        }
    } else {
        prepend_lines(&preface)?;
    }
    let after = read_text(&name, replace_errors)?;
    let nlines = splitlines_keepends(&after);
    if nlines != slines {
        show(&mut r, &slines, &nlines);
    }
    let comment = if count > 0 {
        format!("Prepended {count} lines")
    } else {
        format!("File {name} is in correct state")
    };
    say(&mut r, comment);
    set(&mut r, "result", json!(true));
    Ok(r)
}

pub(super) fn comment(c: &Call) -> Result<Ret, String> {
    let name = expanduser(&c.name());
    let mut r = ret(&name, json!(false), "", json!({}));
    if name.is_empty() {
        return error(r, "Must provide name to file.comment");
    }
    if let Err(msg) = check_file(&name) {
        return error(r, msg);
    }
    let replace_errors = match decoding(c) {
        Ok(replace) => replace,
        Err(e) => return error(r, e),
    };
    let regex = match c.low.get("regex") {
        Some(Value::String(s)) => s.clone(),
        other => {
            return Err(format!(
                "TypeError: expected string or bytes-like object, got '{}'",
                py_type(other.unwrap_or(&Value::Null))
            ))
        }
    };
    let ch = text_or(c, "char", "#");
    let unanchored = unanchor(&regex);
    let uncommented = format!(r"^(?!\s*{ch})\s*{unanchored}");
    let commented = format!("{ch}{unanchored}");
    if !search(c, &name, &uncommented)? {
        if search(c, &name, &commented)? {
            say(&mut r, "Pattern already commented");
            set(&mut r, "result", json!(true));
        } else if c.flag("ignore_missing", false) {
            set(
                &mut r,
                "comment",
                json!("Pattern not found and ignore_missing set to True"),
            );
            set(&mut r, "result", json!(true));
        } else {
            return error(r, format!("{unanchored}: Pattern not found"));
        }
        return Ok(r);
    }
    if c.test {
        changes(&mut r).insert(name.clone(), json!("updated"));
        say(&mut r, format!("File {name} is set to be updated"));
        set(&mut r, "result", Value::Null);
        return Ok(r);
    }
    let before = read_text(&name, replace_errors)?;
    exec(
        c,
        "file.comment_line",
        vec![
            ("path", json!(name)),
            ("regex", json!(regex)),
            ("char", json!(ch)),
            ("cmnt", json!(true)),
            ("backup", arg_or(c, "backup", json!(".bak"))),
        ],
    )
    .map_err(raised)?;
    let after = read_text(&name, replace_errors)?;
    let done = search(c, &name, &commented)?;
    set(&mut r, "result", json!(done));
    let (slines, nlines) = (splitlines_keepends(&before), splitlines_keepends(&after));
    if slines != nlines {
        let d = if is_text(&name) {
            unified(&slines, &nlines)
        } else {
            "Replace binary file".into()
        };
        changes(&mut r).insert("diff".into(), json!(d));
    }
    let comment = if done {
        "Commented lines successfully"
    } else {
        "Expected commented lines not found"
    };
    say(&mut r, comment);
    Ok(r)
}

pub(super) fn uncomment(c: &Call) -> Result<Ret, String> {
    let name = expanduser(&c.name());
    let mut r = ret(&name, json!(false), "", json!({}));
    if name.is_empty() {
        return error(r, "Must provide name to file.uncomment");
    }
    if let Err(msg) = check_file(&name) {
        return error(r, msg);
    }
    let regex = match c.low.get("regex") {
        Some(Value::String(s)) => s.clone(),
        other => {
            return Err(format!(
                "AttributeError: '{}' object has no attribute 'lstrip'",
                py_type(other.unwrap_or(&Value::Null))
            ))
        }
    };
    let ch = text_or(c, "char", "#");
    let bare = regex.trim_start_matches('^');
    let uncommented = format!("^[ \t]*{bare}");
    if !search(c, &name, &format!("{ch}[ \t]*{bare}"))? {
        if search(c, &name, &uncommented)? {
            say(&mut r, "Pattern already uncommented");
            set(&mut r, "result", json!(true));
            return Ok(r);
        }
        return error(r, format!("{regex}: Pattern not found"));
    }
    if c.test {
        changes(&mut r).insert(name.clone(), json!("updated"));
        say(&mut r, format!("File {name} is set to be updated"));
        set(&mut r, "result", Value::Null);
        return Ok(r);
    }
    // `readlines()` of a file opened in binary mode: lines end after each `\n`.
    let before = read_text(&name, false)?;
    exec(
        c,
        "file.comment_line",
        vec![
            ("path", json!(name)),
            ("regex", json!(regex)),
            ("char", json!(ch)),
            ("cmnt", json!(false)),
            ("backup", arg_or(c, "backup", json!(".bak"))),
        ],
    )
    .map_err(raised)?;
    let after = read_text(&name, false)?;
    let done = search(c, &name, &uncommented)?;
    set(&mut r, "result", json!(done));
    let slines: Vec<&str> = before.split_inclusive('\n').collect();
    let nlines: Vec<&str> = after.split_inclusive('\n').collect();
    if slines != nlines {
        let d = if is_text(&name) {
            unified(&slines, &nlines)
        } else {
            "Replace binary file".into()
        };
        changes(&mut r).insert("diff".into(), json!(d));
    }
    let comment = if done {
        "Uncommented lines successfully"
    } else {
        "Expected uncommented lines not found"
    };
    say(&mut r, comment);
    Ok(r)
}

/// The `changes`/`comment`/`result` of `file.replace`, `file.blockreplace` and `file.line`
/// from what the execution function returned (a diff, or whether the file changed).
fn edited(mut r: Ret, result: &Value, test: bool, would: &str) -> Ret {
    if json_truthy(result) {
        changes(&mut r).insert("diff".into(), result.clone());
        if test {
            set(&mut r, "result", Value::Null);
            say(&mut r, would);
        } else {
            set(&mut r, "result", json!(true));
            say(&mut r, "Changes were made");
        }
    } else {
        set(&mut r, "result", json!(true));
        say(&mut r, "No changes needed to be made");
    }
    r
}

pub(super) fn replace(c: &Call) -> Result<Ret, String> {
    let name = expanduser(&c.name());
    let mut r = ret(&name, json!(true), "", json!({}));
    if name.is_empty() {
        return error(r, "Must provide name to file.replace");
    }
    if let Err(msg) = check_file(&name) {
        if c.flag("ignore_if_missing", false) && msg.contains("file not found") {
            say(&mut r, "No changes needed to be made");
            return Ok(r);
        }
        return error(r, msg);
    }
    if let Some(encoding) = c.text("encoding") {
        return error(
            r,
            format!(
                "encoding {encoding} is not supported: Brine's file.replace edits the file's bytes"
            ),
        );
    }
    let kwargs = vec![
        ("path", json!(name)),
        ("pattern", arg_or(c, "pattern", Value::Null)),
        ("repl", arg_or(c, "repl", Value::Null)),
        ("count", arg_or(c, "count", json!(0))),
        ("flags", arg_or(c, "flags", json!(8))),
        ("bufsize", arg_or(c, "bufsize", json!(1))),
        (
            "append_if_not_found",
            arg_or(c, "append_if_not_found", json!(false)),
        ),
        (
            "prepend_if_not_found",
            arg_or(c, "prepend_if_not_found", json!(false)),
        ),
        (
            "not_found_content",
            arg_or(c, "not_found_content", Value::Null),
        ),
        ("backup", arg_or(c, "backup", json!(".bak"))),
        ("dry_run", json!(c.test)),
        ("show_changes", arg_or(c, "show_changes", json!(true))),
        (
            "ignore_if_missing",
            arg_or(c, "ignore_if_missing", json!(false)),
        ),
        (
            "backslash_literal",
            arg_or(c, "backslash_literal", json!(false)),
        ),
    ];
    let result = exec(c, "file.replace", kwargs).map_err(raised)?;
    Ok(edited(r, &result, c.test, "Changes would have been made"))
}

/// `file.accumulated`: `text` (a string, a mapping or a list of them) gathered under the
/// accumulator `name` for `filename`, for the `file.managed` template (`accumulator`) or the
/// `file.blockreplace` its `require_in`/`watch_in` name; an accumulator without such a
/// requisite on a `file` state is an orphan, as in Salt.
pub(super) fn accumulated(c: &Call) -> Result<Ret, String> {
    let name = c.name();
    let mut r = ret(&name, json!(true), "", json!({}));
    if !c.arg("name").is_some_and(json_truthy) {
        return error(r, "Must provide name to file.accumulated");
    }
    let Some(text) = c.arg("text") else {
        set(&mut r, "result", json!(false));
        set(&mut r, "comment", json!("No text supplied for accumulator"));
        return Ok(r);
    };
    let as_list = |v: Option<&Value>| match v {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items.clone(),
        Some(one) => vec![one.clone()],
    };
    let deps: Vec<Value> = [
        as_list(c.low.get("require_in")),
        as_list(c.low.get("watch_in")),
    ]
    .concat();
    let on_file = deps.iter().any(|d| match d {
        Value::Object(m) => m.contains_key("file"),
        other => py_text(other).contains("file"),
    });
    if !on_file {
        let field = |k: &str| c.low.get(k).map(py_text).unwrap_or_default();
        set(&mut r, "result", json!(false));
        let orphan = format!(
            "Orphaned accumulator {name} in {}:{}",
            field("__sls__"),
            field("__id__")
        );
        set(&mut r, "comment", json!(orphan));
        return Ok(r);
    }
    let names: Vec<Value> = deps
        .iter()
        .flat_map(|d| match d {
            Value::Object(m) => m.values().cloned().collect::<Vec<_>>(),
            other => py_text(other)
                .chars()
                .map(|ch| json!(ch.to_string()))
                .collect(),
        })
        .collect();
    let chunks = match text {
        Value::Array(items) => items.clone(),
        one => vec![one.clone()],
    };
    let filename = c.text("filename").unwrap_or_default();
    if c.accumulators.charge(&filename, &name, names, chunks) {
        let charged = format!("Accumulator {name} for file {filename} was charged by text");
        set(&mut r, "comment", json!(charged));
    }
    Ok(r)
}

pub(super) fn blockreplace(c: &Call) -> Result<Ret, String> {
    let name = expanduser(&c.name());
    let r = ret(&name, json!(false), "", json!({}));
    if name.is_empty() {
        return error(r, "Must provide name to file.blockreplace");
    }
    let sources = match unify_sources(c) {
        Ok(sources) => sources,
        Err(e) => return error(r, e),
    };
    if let Err(msg) = check_file(&name) {
        return error(r, msg);
    }
    let mut content = arg_or(c, "content", json!(""));
    // The file's accumulators: those declared for this state, else all of them.
    let gathered = c.accumulators.get();
    if let (Some(Value::Object(accs)), Value::String(text)) =
        (gathered.text.get(&name), &mut content)
    {
        let id = c.low.get("__id__").cloned().unwrap_or(Value::Null);
        let deps = gathered.deps.get(&name).and_then(Value::as_object);
        let mut chosen: Vec<&String> = deps
            .map(|d| {
                d.iter()
                    .filter(|(a, ids)| {
                        ids.as_array().is_some_and(|i| i.contains(&id)) && accs.contains_key(*a)
                    })
                    .map(|(a, _)| a)
                    .collect()
            })
            .unwrap_or_default();
        if chosen.is_empty() {
            chosen = accs.keys().collect();
        }
        for acc in chosen {
            for line in accs[acc].as_array().into_iter().flatten() {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(&py_text(line));
            }
        }
    }
    if !sources.is_empty() {
        let texts = match template_texts(c, &sources) {
            Ok(texts) => texts,
            Err(failed) => return Ok(failed),
        };
        if let Value::String(s) = &mut content {
            s.extend(texts);
        }
    }
    let kwargs = vec![
        ("path", json!(name)),
        (
            "marker_start",
            arg_or(c, "marker_start", json!("#-- start managed zone --")),
        ),
        (
            "marker_end",
            arg_or(c, "marker_end", json!("#-- end managed zone --")),
        ),
        ("content", content),
        (
            "append_if_not_found",
            arg_or(c, "append_if_not_found", json!(false)),
        ),
        (
            "prepend_if_not_found",
            arg_or(c, "prepend_if_not_found", json!(false)),
        ),
        (
            "insert_before_match",
            arg_or(c, "insert_before_match", Value::Null),
        ),
        (
            "insert_after_match",
            arg_or(c, "insert_after_match", Value::Null),
        ),
        ("backup", arg_or(c, "backup", json!(".bak"))),
        ("dry_run", json!(c.test)),
        ("show_changes", arg_or(c, "show_changes", json!(true))),
        ("append_newline", arg_or(c, "append_newline", Value::Null)),
    ];
    match exec(c, "file.blockreplace", kwargs) {
        Ok(result) => Ok(edited(r, &result, c.test, "Changes would be made")),
        Err(e) => {
            let (_, msg) = exception(&e);
            let mut r = r;
            set(
                &mut r,
                "comment",
                json!(format!(
                    "Encountered error managing block: {msg}. See the log for details."
                )),
            );
            Ok(r)
        }
    }
}

/// A copy of a file in the temporary directory, removed when dropped.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(bytes: &[u8]) -> Result<Scratch, String> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        use std::sync::atomic::{AtomicU64, Ordering};
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            ".brine-file-line-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let scratch = Scratch(path);
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&scratch.0)
            .and_then(|mut f| f.write_all(bytes))
            .map_err(|e| os_error(&e, &scratch.0.display().to_string()))?;
        Ok(scratch)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

pub(super) fn line(c: &Call) -> Result<Ret, String> {
    let name = expanduser(&c.name());
    let r = ret(&name, json!(true), "", json!({}));
    if name.is_empty() {
        return error(r, "Must provide name to file.line");
    }
    // Salt first runs `file.managed` (create, owner, mode; its return is not used).
    let mut low = Map::new();
    low.insert("name".into(), json!(name));
    low.insert("create".into(), json!(c.flag("create", false)));
    low.insert("replace".into(), json!(false));
    for (key, to) in [("user", "user"), ("group", "group"), ("file_mode", "mode")] {
        if let Some(v) = c.arg(key) {
            low.insert(to.into(), v.clone());
        }
    }
    sub_call(c, &low, super::managed)?;
    if let Err(msg) = check_file(&name) {
        return error(r, msg);
    }
    let mode = match c.arg("mode") {
        None => None,
        Some(Value::String(s)) => Some(s.to_lowercase()),
        Some(other) if json_truthy(other) => {
            return Err(format!(
                "AttributeError: '{}' object has no attribute 'lower'",
                py_type(other)
            ))
        }
        Some(other) => Some(py_text(other)),
    };
    let Some(mode) = mode else {
        return error(r, "Mode was not defined. How to process the file?");
    };
    if mode != "delete" && c.arg("content").is_none() {
        return error(r, "Content can only be empty if mode is ['delete']");
    }
    let mut kwargs = vec![
        ("content", arg_or(c, "content", Value::Null)),
        ("match", arg_or(c, "match", Value::Null)),
        ("mode", json!(mode)),
        ("location", arg_or(c, "location", Value::Null)),
        ("before", arg_or(c, "before", Value::Null)),
        ("after", arg_or(c, "after", Value::Null)),
        ("show_changes", arg_or(c, "show_changes", json!(true))),
        ("quiet", arg_or(c, "quiet", json!(false))),
        ("indent", arg_or(c, "indent", json!(true))),
    ];
    // Salt's `file.line` changes nothing when the minion runs in test mode; Brine's always
    // writes, so under test it edits a throwaway copy (its diff names no file).
    let result = if c.test && Path::new(&name).is_file() {
        let bytes = std::fs::read(&name).map_err(|e| os_error(&e, &name))?;
        let scratch = Scratch::new(&bytes)?;
        kwargs.push(("path", json!(scratch.0.display().to_string())));
        kwargs.push(("backup", json!(false)));
        exec(c, "file.line", kwargs)
    } else {
        kwargs.push(("path", json!(name)));
        kwargs.push(("backup", arg_or(c, "backup", json!(false))));
        exec(c, "file.line", kwargs)
    }
    .map_err(raised)?;
    Ok(edited(r, &result, c.test, "Changes would be made"))
}

pub(super) fn keyvalue(c: &Call) -> Result<Ret, String> {
    let name = expanduser(&c.name());
    let mut r = ret(&name, Value::Null, "", json!({}));
    if name.is_empty() {
        return error(r, "Must provide name to file.keyvalue");
    }
    let key_values: Map<String, Value> = match (c.arg("key"), c.arg("value")) {
        // Salt refuses `key_values` with `key` and `value` only when it is a plain `dict`;
        // from YAML it is an `OrderedDict`, and `key`/`value` win.
        (Some(key), Some(value)) => {
            let mut m = Map::new();
            m.insert(py_text(key), value.clone());
            m
        }
        _ => match c.arg("key_values") {
            Some(Value::Object(m)) if !m.is_empty() => m.clone(),
            other => {
                let msg = if other.is_some_and(json_truthy) {
                    "is not a dictionary"
                } else {
                    "is empty"
                };
                return error(
                    r,
                    format!("file.keyvalue key and value not supplied and key_values {msg}"),
                );
            }
        },
    };
    let separator = text_or(c, "separator", "=");
    let uncomment = match c.arg("uncomment") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err("TypeError: lstrip arg must be None or str".into()),
    };
    let count = match c.arg("count") {
        None => 1,
        Some(Value::Bool(b)) => i64::from(*b),
        Some(Value::Number(n)) if n.is_i64() => n.as_i64().unwrap_or(1),
        Some(other) => {
            return Err(format!(
                "TypeError: '>' not supported between instances of '{}' and 'int'",
                py_type(other)
            ))
        }
    };
    let key_ignore_case = c.flag("key_ignore_case", false);
    let value_ignore_case = c.flag("value_ignore_case", false);
    let mut append_if_not_found = c.flag("append_if_not_found", false);
    let text = match std::fs::read(&name) {
        Ok(bytes) => decode(bytes, false)?,
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound && c.flag("create_if_missing", false) =>
        {
            append_if_not_found = true;
            String::new()
        }
        Err(_) => {
            say(&mut r, format!("unable to open {name}"));
            set(&mut r, "result", json!(c.flag("ignore_if_missing", false)));
            return Ok(r);
        }
    };
    let mut diff: Vec<String> = Vec::new();
    let mut content: Vec<String> = Vec::new();
    let mut changed = 0;
    // How many more lines each key may have, in the order of `key_values`.
    let mut left: Vec<i64> = vec![count; key_values.len()];
    for original in fopen_lines(&text) {
        let mut line = original.to_string();
        let stripped = py_lstrip(original, uncomment.as_deref());
        let did_uncomment = stripped.len() < original.len();
        let test_line = if key_ignore_case {
            stripped.to_lowercase()
        } else {
            stripped.to_string()
        };
        for (i, (key, value)) in key_values.iter().enumerate() {
            let test_key = if key_ignore_case {
                key.to_lowercase()
            } else {
                key.clone()
            };
            if !test_line.starts_with(&test_key) {
                continue;
            }
            let working = if did_uncomment {
                py_lstrip(&line, uncomment.as_deref()).to_string()
            } else {
                line.clone()
            };
            if separator.is_empty() {
                return Err("ValueError: empty separator".into());
            }
            let Some((line_key, line_value)) = working.split_once(&separator) else {
                continue;
            };
            let keys_match = if key_ignore_case {
                line_key.to_lowercase() == test_key
            } else {
                line_key == test_key
            };
            if !keys_match {
                continue;
            }
            let value_text = py_text(value);
            let (mut have, mut want) = (
                py_strip(line_value).to_string(),
                py_strip(&value_text).to_string(),
            );
            if value_ignore_case {
                have = have.to_lowercase();
                want = want.to_lowercase();
            }
            let mut values_match = have == want;
            let mut needs_changing = false;
            if did_uncomment {
                // A commented-out line is uncommented while the key still wants lines.
                if left[i] > 0 {
                    needs_changing = true;
                } else if !values_match {
                    values_match = true;
                }
            } else if left[i] == 0 {
                // Seen enough times: any further line goes.
                needs_changing = true;
            }
            if !values_match || needs_changing {
                diff.push(format!("- {line}"));
                let new_line = if left[i] != 0 {
                    let new_line = format!("{line_key}{separator}{value_text}\n");
                    if value.is_string() {
                        diff.push(format!("+ {new_line}"));
                    } else {
                        diff.push(format!(
                            "+ {} (from {} type)\n",
                            new_line.trim_end_matches(py_space),
                            py_type(value)
                        ));
                    }
                    new_line
                } else {
                    String::new()
                };
                line = new_line;
                changed += 1;
            }
            if left[i] > 0 {
                left[i] -= 1;
            }
        }
        content.push(line);
    }
    if append_if_not_found {
        let mut added = Vec::new();
        for (i, (key, value)) in key_values.iter().enumerate() {
            if left[i] > 0 {
                let line = format!("{key}{separator}{}\n", py_text(value));
                added.push(format!("+ {line}"));
                content.push(line);
                changed += 1;
            }
        }
        if !added.is_empty() {
            diff.push("- <EOF>\n".into());
            diff.append(&mut added);
            diff.push("+ <EOF>\n".into());
        }
    } else if c.flag("prepend_if_not_found", false) {
        let mut started = false;
        for (i, (key, value)) in key_values.iter().enumerate() {
            if left[i] > 0 {
                let line = format!("{key}{separator}{}\n", py_text(value));
                if !started {
                    diff.insert(0, "  <SOF>\n".into());
                    started = true;
                }
                diff.insert(1, format!("+ {line}"));
                content.insert(0, line);
                changed += 1;
            }
        }
    }
    if changed == 0 {
        set(&mut r, "result", json!(true));
        return Ok(r);
    }
    let show_changes = c.flag("show_changes", true);
    if c.test {
        let mut comment = format!("File {name} is set to be changed ({changed} lines)");
        if show_changes {
            changes(&mut r).insert("diff".into(), json!(diff.concat()));
            comment.push_str("\nPredicted diff:\n\r\t\t");
            comment.push_str(&diff.join("\r\t\t"));
            set(&mut r, "result", Value::Null);
        }
        say(&mut r, comment);
        return Ok(r);
    }
    say(&mut r, format!("Changed {changed} lines"));
    if show_changes {
        changes(&mut r).insert("diff".into(), json!(diff.concat()));
    }
    if std::fs::write(&name, content.concat()).is_err() {
        say(&mut r, format!("{name} not writable"));
        set(&mut r, "result", json!(false));
        return Ok(r);
    }
    set(&mut r, "result", json!(true));
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_line_splitting() {
        assert_eq!(
            splitlines_keepends("a\r\nb\rc\x0cd\ne"),
            vec!["a\r\n", "b\r", "c\x0c", "d\n", "e"]
        );
        assert_eq!(splitlines_keepends(""), Vec::<&str>::new());
        assert_eq!(
            fopen_lines("a\r\nb\rc\x0cd\n"),
            vec!["a\r\n", "b\r", "c\x0cd\n"]
        );
        assert_eq!(dirname("/a/b/c"), "/a/b");
        assert_eq!(dirname("/c"), "/");
        assert_eq!(dirname("c"), "");
    }

    #[test]
    fn whitespace_regexes_as_salt_builds_them() {
        // Salt 3007's own outputs for these texts.
        assert_eq!(
            whitespace_split_regex("foo = \"bar baz\" x").unwrap(),
            r#"(?m)^(?:[\s]+)?foo(?:[\s]+)?=(?:[\s]+)?"bar(?:[\s]+)?baz"(?:[\s]+)?x(?:[\s]+)?$"#
        );
        assert_eq!(
            whitespace_split_regex("it's a\nb  c").unwrap(),
            r"(?m)^(?:[\s]+)?it's(?:[\s]+)?a(?:[\s]+)?(?:[\s]+)?b(?:[\s]+)?c(?:[\s]+)?$"
        );
        assert_eq!(
            shlex_words("say \"a b\"c it's").unwrap(),
            vec!["say", "\"a b\"", "c", "it's"]
        );
        // A quote is a quote only when the other kind appears too (Python's own results).
        assert_eq!(
            shlex_words("echo 'one two' three").unwrap(),
            vec!["echo", "'one", "two'", "three"]
        );
        assert_eq!(
            shlex_words("x \"a  b\" y").unwrap(),
            vec!["x", "\"a", "b\"", "y"]
        );
        assert_eq!(
            shlex_words("it's \"open").unwrap_err(),
            "ValueError: No closing quotation"
        );
        assert_eq!(
            re_escape("a b-c#d~e&f\tg/h_i:j"),
            "a\\ b\\-c\\#d\\~e\\&f\\\tg/h_i:j"
        );
    }

    #[test]
    fn comment_patterns_lose_flags_and_anchors() {
        assert_eq!(unanchor("^foo$"), "foo");
        assert_eq!(unanchor("(?i)^foo"), "foo");
        assert_eq!(unanchor("(?q)foo"), "(?q)foo");
        assert_eq!(unanchor("foo$$"), "foo$");
        assert_eq!(unanchor("^foo\n"), "foo\n");
        assert_eq!(unanchor("a\nb$"), "a\nb$");
    }

    #[test]
    fn append_diffs_join_lines_as_salt_does() {
        assert_eq!(
            unified_joined(&["one", "two"], &["one", "two", "three"]),
            "--- \n\n+++ \n\n@@ -1,2 +1,3 @@\n\n one\n two\n+three"
        );
        assert_eq!(unified_joined(&["a"], &["a"]), "");
    }

    #[test]
    fn execution_errors_as_python_exceptions() {
        assert_eq!(
            exception("ERROR executing 'file.replace': File not found: /x"),
            ("SaltInvocationError".into(), "File not found: /x".into())
        );
        assert_eq!(
            exception("ERROR: Unknown mode: \"x\""),
            ("CommandExecutionError".into(), "Unknown mode: \"x\"".into())
        );
        assert_eq!(
            exception("The minion function caused an exception: re.error: nothing to repeat at position 0"),
            ("re.error".into(), "nothing to repeat at position 0".into())
        );
        assert_eq!(
            raised("Passed invalid arguments to file.line: line() got an unexpected keyword argument 'x'\n\n    doc".into()),
            "TypeError: line() got an unexpected keyword argument 'x'"
        );
    }

    #[test]
    fn binary_blocks() {
        assert!(!is_binary(b""));
        assert!(!is_binary("héllo\n".as_bytes()));
        assert!(is_binary(b"a\0b"));
        assert!(is_binary(&[0x01, 0x02, 0x03, b'a']));
        assert_eq!(
            decode(vec![b'a', 0xff], false).unwrap_err(),
            "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position 1: invalid start byte"
        );
        assert_eq!(decode(vec![b'a', 0xff], true).unwrap(), "a\u{fffd}");
    }
}

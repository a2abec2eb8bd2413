//! Salt's data, text, file and hashing filters (`salt/utils/jinja.py`, `data.py`,
//! `stringutils.py`, `hashutils.py`, `dictupdate.py`, `files.py`, `path.py`, `user.py`), the
//! `itertools` filters and the `xml`/`python`/`dict_to_sls_yaml_params` serializers, Salt's
//! `match`/`equalto` tests and its `raise` global.

use std::io::Read as _;

use hmac::Mac as _;
use indexmap::IndexMap;
use md5::Digest as _;
use minijinja::value::{Kwargs, Rest, Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind};

use super::objects::{map_entries, seq_items, shallow_mut, Dict, List};
use super::pyargs::{
    bad, bind, int_value, parse_py_float, parse_py_int, py_iter, py_iter_or_err, py_type, Args,
};
use super::pyfmt;
use super::pyrandom::{sample, Mt, Source};

fn text_of(v: &Value, what: &str) -> Result<String, Error> {
    match v.as_str() {
        Some(s) => Ok(s.to_string()),
        None => Err(bad(format!(
            "{what}: expected str, bytes, or bytearray not {}",
            py_type(v)
        ))),
    }
}

/// Python's `in`: a substring of a string, an item of a sequence, a key of a mapping.
fn contains(container: &Value, item: &Value) -> bool {
    match (container.as_str(), item.as_str()) {
        (Some(hay), Some(needle)) => hay.contains(needle),
        (Some(_), None) => false,
        _ => py_iter(container).is_some_and(|items| items.contains(item)),
    }
}

fn unique(items: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(items.len());
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

fn tuple(items: Vec<Value>) -> Value {
    Value::from(minijinja::value::Tuple::from(items))
}

fn list(items: Vec<Value>) -> Value {
    List::value(items)
}

fn extreme(v: &Value, keep: std::cmp::Ordering, name: &str) -> Result<Value, Error> {
    let items = py_iter_or_err(v)?;
    let mut best: Option<Value> = None;
    for item in items {
        best = Some(match best {
            None => item,
            Some(b) if super::builtins::py_cmp(&item, &b)? == keep => item,
            Some(b) => b,
        });
    }
    best.ok_or_else(|| bad(format!("{name}() arg is an empty sequence")))
}

fn to_f64(v: &Value) -> Option<f64> {
    match v.kind() {
        ValueKind::Bool => Some(if v.is_true() { 1.0 } else { 0.0 }),
        ValueKind::Number => f64::try_from(v.clone()).ok(),
        _ => None,
    }
}

/// Salt's `to_num`/`str_to_num`: `int(text)`, else `float(text)`, else the value as it was.
fn to_num(v: Value) -> Result<Value, Error> {
    match v.kind() {
        ValueKind::Bool => Ok(Value::from(i64::from(v.is_true()))),
        ValueKind::Number if v.is_integer() => Ok(v),
        ValueKind::Number => {
            let f = f64::try_from(v.clone()).unwrap_or(0.0);
            if !f.is_finite() {
                return Err(bad("cannot convert float infinity or NaN to integer"));
            }
            Ok(int_value(f.trunc() as i128))
        }
        ValueKind::String => {
            let s = v.as_str().unwrap_or_default();
            if let Some(n) = parse_py_int(s, 10) {
                return Ok(int_value(n));
            }
            Ok(parse_py_float(s).map(Value::from).unwrap_or(v))
        }
        _ => Err(bad(format!(
            "int() argument must be a string, a bytes-like object or a real number, not '{}'",
            py_type(&v)
        ))),
    }
}

/// Salt's `human_to_bytes` of a template value (its `str()`).
fn human_to_bytes(size: &Value, default_unit: &str, handle_metric: bool) -> i128 {
    human_to_bytes_text(&pyfmt::str(size), default_unit, handle_metric)
}

/// Salt's `human_to_bytes`: `"2 MB"` is 2 MiB unless `handle_metric`; 0 for what it cannot
/// read.
pub fn human_to_bytes_text(text: &str, default_unit: &str, handle_metric: bool) -> i128 {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, rest) = text.split_at(split);
    let unit = rest.trim_start().to_lowercase();
    let unit = if unit.is_empty() {
        default_unit.to_lowercase()
    } else {
        unit
    };
    let value = match parse_py_int(number, 10) {
        Some(i) => i as f64,
        None => match parse_py_float(number) {
            Some(f) => f,
            None => return 0,
        },
    };
    let prefixes = "bkmgtpezy";
    let metric_unit = unit.len() == 2
        && unit.ends_with('b')
        && "kmgtpezy".contains(&unit[..1])
        && unit.is_char_boundary(1);
    let decimal = metric_unit && handle_metric;
    if !metric_unit {
        let ok = unit == "b"
            || (unit.len() == 1 && "kmgtpezy".contains(unit.as_str()))
            || (unit.len() == 3 && unit.ends_with("ib") && "kmgtpezy".contains(&unit[..1]));
        if !ok {
            return 0;
        }
    }
    let p = prefixes.find(&unit[..1]).unwrap_or(0) as i32;
    let scaled = if decimal {
        value * 10f64.powi(p * 3)
    } else {
        value * 2f64.powi(p * 10)
    };
    scaled as i128
}

/// Salt's `expr_match`: equal, a glob, or a whole-string regular expression.
fn expr_match(line: &str, expr: &str) -> bool {
    if brine_protocol::target::fnmatch(expr, line) {
        return true;
    }
    regex::Regex::new(&format!(r"\A(?:{expr})\z")).is_ok_and(|re| re.is_match(line))
}

fn patterns(v: Option<Value>, what: &str) -> Result<Vec<String>, Error> {
    match v {
        None => Ok(Vec::new()),
        Some(v) if !v.is_true() => Ok(Vec::new()),
        Some(v) => match v.as_str() {
            Some(s) => Ok(vec![s.to_string()]),
            None => match py_iter(&v) {
                Some(items) => Ok(items.iter().map(pyfmt::str).collect()),
                None => Err(bad(format!(
                    "Expecting iterable {what}, but got {} ({})",
                    py_type(&v),
                    pyfmt::str(&v)
                ))),
            },
        },
    }
}

/// Python's `re.escape`.
fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "()[]{}?*+-|^$\\.&~# \t\n\r\u{b}\u{c}".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `uuid.uuid5(namespace, name)` as Python formats it.
fn uuid5(namespace: [u8; 16], name: &str) -> String {
    let mut hasher = sha1::Sha1::new();
    hasher.update(namespace);
    hasher.update(name.as_bytes());
    let digest = hasher.finalize();
    let mut b = [0u8; 16];
    b.copy_from_slice(&digest[..16]);
    b[6] = (b[6] & 0x0f) | 0x50;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// Salt's `GLOBAL_UUID` (91633EBF-1C86-5E33-935A-28061F4B480E), the namespace of its `uuid`
/// filter.
const GLOBAL_UUID: [u8; 16] = [
    0x91, 0x63, 0x3e, 0xbf, 0x1c, 0x86, 0x5e, 0x33, 0x93, 0x5a, 0x28, 0x06, 0x1f, 0x4b, 0x48, 0x0e,
];

fn snake_case(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    for (i, c) in chars.iter().enumerate() {
        if i == 0 {
            out.extend(c.to_lowercase());
            continue;
        }
        if c.is_uppercase()
            && (chars[i - 1].is_lowercase()
                || (i != chars.len() - 1 && chars[i + 1].is_lowercase()))
        {
            out.push('_');
        }
        out.extend(c.to_lowercase());
    }
    out
}

/// Python's `str.capitalize`.
fn capitalize(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        None => String::new(),
        Some(first) => first
            .to_uppercase()
            .chain(chars.flat_map(char::to_lowercase))
            .collect(),
    }
}

fn camel_case(text: &str, upper: bool) -> String {
    let words: Vec<&str> = text.split('_').collect();
    let mut out = if upper {
        capitalize(words[0])
    } else {
        words[0].to_string()
    };
    for w in &words[1..] {
        out.push_str(&capitalize(w));
    }
    out
}

/// Salt's `flatten`.
fn flatten(
    data: &Value,
    levels: Option<i64>,
    preserve_nulls: bool,
    depth: usize,
) -> Result<Vec<Value>, Error> {
    if depth > 64 {
        return Err(bad("Reference cycle detected. Check input list."));
    }
    let mut out = Vec::new();
    for element in py_iter_or_err(data)? {
        let is_null = element.is_none()
            || element.is_undefined()
            || matches!(element.as_str(), Some("None" | "null"));
        if !preserve_nulls && is_null {
            continue;
        }
        let iterable = element.kind() != ValueKind::String && py_iter(&element).is_some();
        match (iterable, levels) {
            (true, None) => out.extend(flatten(&element, None, preserve_nulls, depth + 1)?),
            (true, Some(l)) if l >= 1 => {
                out.extend(flatten(&element, Some(l - 1), preserve_nulls, depth + 1)?)
            }
            _ => out.push(element),
        }
    }
    Ok(out)
}

/// Where a `random_sample`/`random_shuffle` seed leads: Salt seeds Python's generator with
/// the SHA-512 hex digest of the seed (its `salt.utils.data.hash`), which takes only text or
/// bytes.
fn random_source(seed: Option<Value>) -> Result<Source, Error> {
    let Some(seed) = seed.filter(|s| !s.is_none()) else {
        return Ok(Source::Os);
    };
    if seed.as_str().is_none() && seed.kind() != ValueKind::Bytes {
        return Err(bad("object supporting the buffer API required"));
    }
    let digest = hexdigest::<sha2::Sha512>(&bytes_of(&seed, "seed")?);
    Ok(Source::Seeded(Box::new(Mt::from_text(&digest))))
}

/// The dictionary `keys` (delimited) leads to, made mutable on the way, and the last key:
/// Salt's `_dict_rpartition` with `ensure_dict_key`.
fn dict_rpartition(
    in_dict: &Value,
    keys: &str,
    delimiter: &str,
) -> Result<(std::sync::Arc<Dict>, Value), Error> {
    let root = shallow_mut(in_dict);
    let mut pointer = root
        .downcast_object::<Dict>()
        .ok_or_else(|| bad(format!("'{}' object is not a dict", py_type(in_dict))))?;
    let parts: Vec<&str> = keys.split(delimiter).collect();
    let (last, path) = parts.split_last().unwrap_or((&"", &[]));
    for key in path {
        let key = Value::from(*key);
        let current = pointer.entries().get(&key).cloned();
        let next = match current {
            Some(v) if v.downcast_object_ref::<Dict>().is_some() => v,
            Some(v) if v.kind() == ValueKind::Map => {
                let copy = shallow_mut(&v);
                pointer.entries().insert(key.clone(), copy.clone());
                copy
            }
            Some(v) if v.is_true() => {
                return Err(bad(format!(
                    "Cannot create subkey {key} under a {}",
                    py_type(&v)
                )))
            }
            _ => {
                let fresh = Dict::value(IndexMap::new());
                pointer.entries().insert(key.clone(), fresh.clone());
                fresh
            }
        };
        pointer = next.downcast_object::<Dict>().expect("made a Dict above");
    }
    Ok((pointer, Value::from(*last)))
}

enum DictChange {
    Set,
    Update,
    Append,
    Extend,
}

fn change_dict_key(
    in_dict: Value,
    keys: String,
    value: Value,
    kw: Kwargs,
    change: DictChange,
) -> Result<Value, Error> {
    let delimiter: Option<String> = kw.get("delimiter")?;
    let _ordered: Option<bool> = kw.get("ordered_dict")?;
    kw.assert_all_used()?;
    let root = shallow_mut(&in_dict);
    let (pointer, last) = dict_rpartition(&root, &keys, delimiter.as_deref().unwrap_or(":"))?;
    let existing = pointer
        .entries()
        .get(&last)
        .cloned()
        .filter(|v| !v.is_none());
    match change {
        DictChange::Set => {
            pointer.entries().insert(last, value);
        }
        DictChange::Update => {
            let target = shallow_mut(&existing.unwrap_or_else(|| Dict::value(IndexMap::new())));
            let Some(dict) = target.downcast_object::<Dict>() else {
                return Err(bad(format!(
                    "The last key contains a <class '{}'>, which cannot update.",
                    py_type(&target)
                )));
            };
            let entries = map_entries(&value).ok_or_else(|| {
                bad(format!(
                    "Cannot update <class 'dict'> with a <class '{}'>.",
                    py_type(&value)
                ))
            })?;
            dict.entries().extend(entries);
            pointer.entries().insert(last, target);
        }
        DictChange::Append | DictChange::Extend => {
            let verb = if matches!(change, DictChange::Append) {
                "append"
            } else {
                "extend"
            };
            let target = shallow_mut(&existing.unwrap_or_else(|| List::value(Vec::new())));
            let Some(items) = target.downcast_object::<List>() else {
                return Err(bad(format!(
                    "The last key contains a <class '{}'>, which cannot {verb}.",
                    py_type(&target)
                )));
            };
            if matches!(change, DictChange::Append) {
                items.items().push(value);
            } else {
                let more = py_iter(&value).ok_or_else(|| {
                    bad(format!(
                        "Cannot extend <class 'list'> with a <class '{}'>.",
                        py_type(&value)
                    ))
                })?;
                items.items().extend(more);
            }
            pointer.entries().insert(last, target);
        }
    }
    Ok(root)
}

/// Strings as bytes, through lists and dicts: Salt's `json_encode_dict`/`json_encode_list`.
fn encode(v: &Value) -> Value {
    if let Some(s) = v.as_str() {
        return Value::from_bytes(s.as_bytes().to_vec());
    }
    if v.kind() == ValueKind::Map {
        return Dict::value(
            map_entries(v)
                .unwrap_or_default()
                .iter()
                .map(|(k, val)| (encode(k), encode(val)))
                .collect(),
        );
    }
    if v.kind() == ValueKind::Seq {
        return list(
            seq_items(v)
                .unwrap_or_default()
                .iter()
                .map(encode)
                .collect(),
        );
    }
    v.clone()
}

fn file_bytes(path: &str, limit: u64) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    std::fs::File::open(path)?
        .take(limit)
        .read_to_end(&mut buf)?;
    Ok(buf)
}

/// The most values the `itertools` filters make (tuples times their length): beyond it a
/// template is refused rather than left to run out of memory (Salt's iterators would be
/// consumed to the end by `| list`).
const MAX_ITERTOOLS_VALUES: usize = 1_000_000;

fn too_many(name: &str) -> Error {
    bad(format!(
        "{name}: more than {MAX_ITERTOOLS_VALUES} values to make; refused"
    ))
}

/// Room for one more tuple of `width` values.
fn room(out: &[Value], width: usize, name: &str) -> Result<(), Error> {
    if (out.len() + 1).saturating_mul(width.max(1)) > MAX_ITERTOOLS_VALUES {
        return Err(too_many(name));
    }
    Ok(())
}

/// `itertools.combinations(items, r)` (with replacement when `replace`).
fn combinations(items: &[Value], r: usize, replace: bool) -> Result<Vec<Value>, Error> {
    let name = if replace {
        "combinations_with_replacement"
    } else {
        "combinations"
    };
    let n = items.len();
    let mut out = Vec::new();
    if (!replace && r > n) || (replace && n == 0 && r > 0) {
        return Ok(out);
    }
    if r > MAX_ITERTOOLS_VALUES {
        return Err(too_many(name));
    }
    let mut idx: Vec<usize> = if replace {
        vec![0; r]
    } else {
        (0..r).collect()
    };
    loop {
        room(&out, r, name)?;
        out.push(tuple(idx.iter().map(|i| items[*i].clone()).collect()));
        // The rightmost index that can still move.
        let Some(i) = (0..r).rev().find(|&i| {
            if replace {
                idx[i] != n - 1
            } else {
                idx[i] != i + n - r
            }
        }) else {
            return Ok(out);
        };
        idx[i] += 1;
        for j in i + 1..r {
            idx[j] = if replace { idx[i] } else { idx[j - 1] + 1 };
        }
    }
}

/// `itertools.permutations(items, r)`.
fn permutations(items: &[Value], r: usize) -> Result<Vec<Value>, Error> {
    let n = items.len();
    let mut out = Vec::new();
    if r > n {
        return Ok(out);
    }
    let mut indices: Vec<usize> = (0..n).collect();
    let mut cycles: Vec<usize> = (n - r + 1..=n).rev().collect();
    out.push(tuple(
        indices[..r].iter().map(|i| items[*i].clone()).collect(),
    ));
    if n == 0 {
        return Ok(out);
    }
    'outer: loop {
        for i in (0..r).rev() {
            cycles[i] -= 1;
            if cycles[i] == 0 {
                let moved = indices.remove(i);
                indices.push(moved);
                cycles[i] = n - i;
            } else {
                let j = cycles[i];
                indices.swap(i, n - j);
                room(&out, r, "permutations")?;
                out.push(tuple(
                    indices[..r].iter().map(|k| items[*k].clone()).collect(),
                ));
                continue 'outer;
            }
        }
        break;
    }
    Ok(out)
}

/// `itertools.product(*pools)`.
fn product(pools: &[Vec<Value>]) -> Result<Vec<Value>, Error> {
    pools
        .iter()
        .try_fold(1usize, |acc, p| acc.checked_mul(p.len()))
        .and_then(|t| t.checked_mul(pools.len().max(1)))
        .filter(|t| *t <= MAX_ITERTOOLS_VALUES)
        .ok_or_else(|| too_many("product"))?;
    let mut result: Vec<Vec<Value>> = vec![Vec::new()];
    for pool in pools {
        let mut next = Vec::with_capacity(result.len() * pool.len());
        for prefix in &result {
            for item in pool {
                let mut t = prefix.clone();
                t.push(item.clone());
                next.push(t);
            }
        }
        result = next;
    }
    Ok(result.into_iter().map(tuple).collect())
}

/// Salt's `xml` filter: `minidom`'s pretty print (one space per level) of the element tree
/// Salt builds from dicts and lists.
fn format_xml(value: &Value) -> Result<String, Error> {
    struct Element {
        tag: String,
        attrs: Vec<(String, String)>,
        text: Option<String>,
        children: Vec<Element>,
    }
    fn normalize(v: &Value) -> Result<Vec<(Value, Value)>, Error> {
        match v.kind() {
            ValueKind::Seq => {
                let items = seq_items(v).unwrap_or_default();
                if items.first().is_some_and(|f| f.kind() == ValueKind::String) {
                    // Salt iterates such a list as (tag, attrs) pairs of its strings.
                    items
                        .iter()
                        .map(|s| {
                            let chars = py_iter(s).unwrap_or_default();
                            if chars.len() != 2 {
                                return Err(bad(format!(
                                    "too many values to unpack (expected 2, got {})",
                                    chars.len()
                                )));
                            }
                            Ok((chars[0].clone(), chars[1].clone()))
                        })
                        .collect()
                } else if items.is_empty() {
                    Err(bad("list index out of range"))
                } else {
                    Ok(Vec::new())
                }
            }
            ValueKind::Map => Ok(map_entries(v).unwrap_or_default()),
            _ => Err(bad("Value is not a dict or list. Cannot render as XML")),
        }
    }
    fn scalar(v: &Value) -> bool {
        matches!(
            v.kind(),
            ValueKind::String | ValueKind::Number | ValueKind::Bool
        )
    }
    fn container(v: &Value) -> bool {
        matches!(v.kind(), ValueKind::Map | ValueKind::Seq)
    }
    fn recurse(
        pairs: Vec<(Value, Value)>,
        parent: Option<&mut Element>,
        depth: usize,
    ) -> Result<Option<Element>, Error> {
        if depth > 64 {
            return Err(bad("XML nested too deep"));
        }
        let mut parent = parent;
        let mut sub: Option<Element> = None;
        for (tag, attrs) in pairs {
            if attrs.kind() == ValueKind::Seq && !attrs.is_tuple() {
                for attr in seq_items(&attrs).unwrap_or_default() {
                    recurse(vec![(tag.clone(), attr)], parent.as_deref_mut(), depth + 1)?;
                }
                continue;
            }
            let mut el = Element {
                tag: pyfmt::str(&tag),
                attrs: Vec::new(),
                text: None,
                children: Vec::new(),
            };
            if scalar(&attrs) {
                el.text = Some(pyfmt::str(&attrs));
            } else {
                if attrs.kind() == ValueKind::Map {
                    el.attrs = map_entries(&attrs)
                        .unwrap_or_default()
                        .into_iter()
                        .filter(|(_, v)| !container(v))
                        .map(|(k, v)| (pyfmt::str(&k), pyfmt::str(&v)))
                        .collect();
                }
                for (t, v) in normalize(&attrs)?.into_iter().filter(|(_, v)| container(v)) {
                    recurse(vec![(t, v)], Some(&mut el), depth + 1)?;
                }
            }
            match parent.as_deref_mut() {
                Some(p) => p.children.push(el),
                None => sub = Some(el),
            }
        }
        Ok(sub)
    }
    fn escape(text: &str, attr: bool) -> String {
        let mut out = text
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        if attr {
            out = out
                .replace('"', "&quot;")
                .replace('\r', "&#13;")
                .replace('\n', "&#10;")
                .replace('\t', "&#9;");
        }
        out
    }
    fn write(el: &Element, indent: &str, out: &mut String) {
        out.push_str(indent);
        out.push('<');
        out.push_str(&el.tag);
        for (k, v) in &el.attrs {
            out.push_str(&format!(" {k}=\"{}\"", escape(v, true)));
        }
        match (&el.text, el.children.is_empty()) {
            (None, true) => out.push_str("/>\n"),
            (Some(t), true) => out.push_str(&format!(">{}</{}>\n", escape(t, false), el.tag)),
            (text, false) => {
                out.push_str(">\n");
                if let Some(t) = text {
                    out.push_str(&format!("{indent} {}\n", escape(t, false)));
                }
                for c in &el.children {
                    write(c, &format!("{indent} "), out);
                }
                out.push_str(&format!("{indent}</{}>\n", el.tag));
            }
        }
    }
    let root = recurse(normalize(value)?, None, 0)?
        .ok_or_else(|| bad("'NoneType' object has no attribute 'iter'"))?;
    let mut out = String::from("<?xml version=\"1.0\" ?>\n");
    write(&root, "", &mut out);
    Ok(out)
}

/// Salt's `salt.utils.path.which` (the `which` filter, and the minion's `cmd.which` and its
/// modules' command lookups): the name itself when it is an executable path, else the first
/// executable of that name on `PATH` and then the usual system directories.
pub fn which(exe: &str) -> Option<String> {
    use std::os::unix::fs::PermissionsExt as _;
    if exe.is_empty() {
        return None;
    }
    let executable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if executable(std::path::Path::new(exe)) {
        return Some(exe.to_string());
    }
    let path = std::env::var("PATH").unwrap_or_default();
    let mut dirs: Vec<String> = path.split(':').map(str::to_string).collect();
    for extra in [
        "/sbin",
        "/bin",
        "/usr/sbin",
        "/usr/bin",
        "/usr/local/sbin",
        "/usr/local/bin",
    ] {
        if !dirs.iter().any(|d| d == extra) {
            dirs.push(extra.to_string());
        }
    }
    dirs.iter()
        .map(|d| brine_protocol::posixpath::normpath(&brine_protocol::posixpath::join(d, exe)))
        .find(|p| executable(std::path::Path::new(p)))
}

/// Salt's `get_uid`: the user's uid from the system's user database (`None` when unknown);
/// without a name, the process's effective uid.
fn get_uid(user: Option<&str>) -> Option<u32> {
    match user {
        None => Some(nix::unistd::geteuid().as_raw()),
        Some(name) => nix::unistd::User::from_name(name)
            .ok()
            .flatten()
            .map(|u| u.uid.as_raw()),
    }
}

fn none() -> Value {
    Value::from(())
}

fn opt_bool(v: &Option<Value>) -> Option<bool> {
    v.as_ref().filter(|v| !v.is_none()).map(Value::is_true)
}

fn opt_usize(v: &Option<Value>, what: &str) -> Result<Option<usize>, Error> {
    v.as_ref()
        .filter(|v| !v.is_none())
        .map(|v| {
            usize::try_from(v.clone()).map_err(|_| {
                bad(format!(
                    "{what} must be a non-negative integer, not {}",
                    pyfmt::repr(v)
                ))
            })
        })
        .transpose()
}

fn hexdigest<D: md5::Digest>(data: &[u8]) -> String {
    hex::encode(D::digest(data))
}

/// `hashlib.new(form)`'s hex digest of a file, read in chunks (a device such as /dev/zero is
/// refused: it never ends).
fn file_hashsum(path: &str, form: &str) -> Result<String, Error> {
    fn digest<D: md5::Digest>(mut file: std::fs::File) -> std::io::Result<String> {
        let mut hasher = D::new();
        let mut buf = vec![0u8; 65536];
        loop {
            let n = file.read(&mut buf)?;
            if n == 0 {
                return Ok(hex::encode(hasher.finalize()));
            }
            hasher.update(&buf[..n]);
        }
    }
    let os = |e: std::io::Error| bad(brine_protocol::pyrepr::os_error(&e, Some(path)));
    let file = std::fs::File::open(path).map_err(os)?;
    if !file.metadata().map_err(os)?.is_file() {
        return Err(bad(format!("file_hashsum: {path} is not a regular file")));
    }
    match form {
        "md5" => digest::<md5::Md5>(file),
        "sha1" => digest::<sha1::Sha1>(file),
        "sha224" => digest::<sha2::Sha224>(file),
        "sha256" => digest::<sha2::Sha256>(file),
        "sha384" => digest::<sha2::Sha384>(file),
        "sha512" => digest::<sha2::Sha512>(file),
        other => return Err(bad(format!("Invalid hash type: {other}"))),
    }
    .map_err(os)
}

pub(crate) fn register(env: &mut Environment<'_>) {
    register_lists(env);
    register_text(env);
    register_dicts(env);
    register_files(env);
    register_itertools(env);
    register_serializers(env);
    env.add_test(
        "match",
        |txt: String, rgx: String, kw: Kwargs| -> Result<bool, Error> {
            let ignorecase: Option<bool> = kw.get("ignorecase")?;
            let multiline: Option<bool> = kw.get("multiline")?;
            kw.assert_all_used()?;
            let re = regex::RegexBuilder::new(&format!(r"\A(?:{rgx})"))
                .case_insensitive(ignorecase.unwrap_or(false))
                .multi_line(multiline.unwrap_or(false))
                .build()
                .map_err(|e| bad(format!("invalid regular expression: {e}")))?;
            Ok(re.is_match(&txt))
        },
    );
    env.add_test("equalto", |v: Value, other: Value| {
        super::builtins::py_eq(&v, &other)
    });
    env.add_function("raise", |msg: Value| -> Result<Value, Error> {
        Err(Error::new(ErrorKind::InvalidOperation, pyfmt::str(&msg)))
    });
}

fn register_lists(env: &mut Environment<'_>) {
    env.add_filter("min", |v: Value| {
        extreme(&v, std::cmp::Ordering::Less, "min")
    });
    env.add_filter("max", |v: Value| {
        extreme(&v, std::cmp::Ordering::Greater, "max")
    });
    env.add_filter("avg", |v: Value| -> Result<Value, Error> {
        if matches!(v.kind(), ValueKind::Map) || (v.kind() == ValueKind::Seq && !v.is_tuple()) {
            let items = py_iter_or_err(&v)?;
            if items.is_empty() {
                return Err(bad("division by zero"));
            }
            let mut sum = 0.0;
            for item in &items {
                sum += to_f64(item).ok_or_else(|| {
                    bad(format!(
                        "unsupported operand type(s) for +: 'int' and '{}'",
                        py_type(item)
                    ))
                })?;
            }
            return Ok(Value::from(sum / items.len() as f64));
        }
        match v.kind() {
            ValueKind::String => parse_py_float(v.as_str().unwrap_or_default())
                .map(Value::from)
                .ok_or_else(|| {
                    bad(format!(
                        "could not convert string to float: {}",
                        pyfmt::repr(&v)
                    ))
                }),
            _ => to_f64(&v).map(Value::from).ok_or_else(|| {
                bad(format!(
                    "float() argument must be a string or a real number, not '{}'",
                    py_type(&v)
                ))
            }),
        }
    });
    let set_op = |name: &'static str| {
        move |a: Value, b: Value| -> Result<Value, Error> {
            let (x, y) = (py_iter_or_err(&a)?, py_iter_or_err(&b)?);
            let out = match name {
                "union" => unique(x.into_iter().chain(y).collect()),
                "intersect" => unique(x.into_iter().filter(|e| y.contains(e)).collect()),
                "difference" => unique(x.into_iter().filter(|e| !y.contains(e)).collect()),
                _ => {
                    let both: Vec<Value> = x.iter().filter(|e| y.contains(e)).cloned().collect();
                    unique(
                        x.into_iter()
                            .chain(y)
                            .filter(|e| !both.contains(e))
                            .collect(),
                    )
                }
            };
            Ok(list(out))
        }
    };
    for name in ["union", "intersect", "difference", "symmetric_difference"] {
        env.add_filter(name, set_op(name));
    }
    env.add_filter("flatten", |v: Value, args: Args| -> Result<Value, Error> {
        let b = bind("flatten", args, ["levels", "preserve_nulls"], 0)?;
        let levels = b[0]
            .as_ref()
            .filter(|l| !l.is_none())
            .map(|l| {
                i64::try_from(l.clone())
                    .map_err(|_| bad(format!("levels must be an integer, not {}", py_type(l))))
            })
            .transpose()?;
        Ok(list(flatten(
            &v,
            levels,
            opt_bool(&b[1]).unwrap_or(false),
            0,
        )?))
    });
    env.add_filter(
        "exactly_n_true",
        |v: Value, args: Args| -> Result<bool, Error> {
            let b = bind("exactly_n_true", args, ["amount"], 0)?;
            let amount = opt_usize(&b[0], "amount")?.unwrap_or(1);
            Ok(py_iter_or_err(&v)?.iter().filter(|i| i.is_true()).count() == amount)
        },
    );
    env.add_filter("exactly_one_true", |v: Value| -> Result<bool, Error> {
        Ok(py_iter_or_err(&v)?.iter().filter(|i| i.is_true()).count() == 1)
    });
    env.add_filter(
        "substring_in_list",
        |needle: Value, hay: Value| -> Result<bool, Error> {
            Ok(py_iter_or_err(&hay)?.iter().any(|h| contains(h, &needle)))
        },
    );
    env.add_filter("is_iter", |v: Value| {
        v.kind() != ValueKind::String && py_iter(&v).is_some()
    });
    env.add_filter("sorted_ignorecase", |v: Value| -> Result<Value, Error> {
        let mut items = py_iter_or_err(&v)?;
        for i in &items {
            if i.as_str().is_none() {
                return Err(bad(format!(
                    "'{}' object has no attribute 'lower'",
                    py_type(i)
                )));
            }
        }
        items.sort_by_key(|i| i.as_str().unwrap_or_default().to_lowercase());
        Ok(list(items))
    });
    env.add_filter(
        "random_sample",
        |v: Value, args: Args| -> Result<Value, Error> {
            let b = bind("random_sample", args, ["size", "seed"], 0)?;
            let size = opt_usize(&b[0], "size")?
                .ok_or_else(|| bad("sample() missing 1 required positional argument: 'size'"))?;
            let items = py_iter_or_err(&v)?;
            sample(&items, size, &mut random_source(b[1].clone())?)
                .map(list)
                .map_err(bad)
        },
    );
    env.add_filter(
        "random_shuffle",
        |v: Value, args: Args| -> Result<Value, Error> {
            let b = bind("random_shuffle", args, ["seed"], 0)?;
            let items = py_iter_or_err(&v)?;
            sample(&items, items.len(), &mut random_source(b[0].clone())?)
                .map(list)
                .map_err(bad)
        },
    );
    env.add_filter(
        "compare_lists",
        |old: Value, new: Value| -> Result<Value, Error> {
            let (old, new) = (py_iter_or_err(&old)?, py_iter_or_err(&new)?);
            let mut out = IndexMap::new();
            let added: Vec<Value> = new.iter().filter(|i| !old.contains(i)).cloned().collect();
            let removed: Vec<Value> = old.iter().filter(|i| !new.contains(i)).cloned().collect();
            if !added.is_empty() {
                out.insert(Value::from("new"), list(added));
            }
            if !removed.is_empty() {
                out.insert(Value::from("old"), list(removed));
            }
            Ok(Dict::value(out))
        },
    );
    env.add_filter(
        "method_call",
        |obj: Value, name: String, args: Rest<Value>| -> Result<Value, Error> {
            match super::methods::call_on(&obj, &name, &args) {
                Err(e) if e.kind() == ErrorKind::UnknownMethod => Ok(none()),
                other => other,
            }
        },
    );
}

fn register_text(env: &mut Environment<'_>) {
    env.add_filter("skip", |_: Value| String::new());
    env.add_filter("quote", |v: Value| -> Result<String, Error> {
        Ok(brine_protocol::pyrepr::shlex_quote(&text_of(&v, "quote")?))
    });
    env.add_filter("regex_escape", |v: Value| -> Result<String, Error> {
        Ok(regex_escape(&text_of(&v, "regex_escape")?))
    });
    env.add_filter("uuid", |v: Value| -> Result<String, Error> {
        Ok(uuid5(GLOBAL_UUID, &text_of(&v, "uuid")?))
    });
    env.add_filter("to_num", to_num);
    env.add_filter("str_to_num", to_num);
    env.add_filter("is_hex", |v: Value| -> bool {
        v.as_str().is_some_and(|s| parse_py_int(s, 16).is_some())
    });
    env.add_filter("contains_whitespace", |v: Value| -> Result<bool, Error> {
        Ok(text_of(&v, "contains_whitespace")?
            .chars()
            .any(char::is_whitespace))
    });
    env.add_filter(
        "human_to_bytes",
        |v: Value, args: Args| -> Result<Value, Error> {
            let b = bind("human_to_bytes", args, ["default_unit", "handle_metric"], 0)?;
            let unit = b[0].as_ref().map_or_else(|| "B".to_string(), pyfmt::str);
            Ok(int_value(human_to_bytes(
                &v,
                &unit,
                opt_bool(&b[1]).unwrap_or(false),
            )))
        },
    );
    env.add_filter(
        "check_whitelist_blacklist",
        |v: Value, kw: Kwargs| -> Result<bool, Error> {
            let white = patterns(kw.get("whitelist")?, "whitelist")?;
            let black = patterns(kw.get("blacklist")?, "blacklist")?;
            kw.assert_all_used()?;
            let line = pyfmt::str(&v);
            let in_black = black.iter().any(|e| expr_match(&line, e));
            let in_white = white.iter().any(|e| expr_match(&line, e));
            Ok(match (black.is_empty(), white.is_empty()) {
                (false, true) => !in_black,
                (true, false) => in_white,
                (false, false) => !in_black && in_white,
                (true, true) => true,
            })
        },
    );
    env.add_filter("to_snake_case", |v: Value| -> Result<String, Error> {
        let text = text_of(&v, "to_snake_case")?;
        if text.is_empty() {
            return Err(bad("string index out of range"));
        }
        Ok(snake_case(&text))
    });
    env.add_filter(
        "to_camelcase",
        |v: Value, args: Args| -> Result<String, Error> {
            let b = bind("to_camelcase", args, ["uppercamel"], 0)?;
            Ok(camel_case(
                &text_of(&v, "to_camelcase")?,
                opt_bool(&b[0]).unwrap_or(false),
            ))
        },
    );
    env.add_filter(
        "random_str",
        |size: Option<usize>| -> Result<String, Error> {
            use base64::Engine as _;
            let size = size.unwrap_or(32);
            if size > 1 << 20 {
                return Err(bad(format!("random_str: {size} bytes is too large")));
            }
            let bytes: Vec<u8> = (0..size).map(|_| rand::random::<u8>()).collect();
            let mut text = base64::engine::general_purpose::STANDARD.encode(bytes);
            text.truncate(size);
            Ok(text)
        },
    );
    let random_hash = |size: Option<Value>, hash_type: Option<String>| -> Result<String, Error> {
        let size = match size {
            None => 9_999_999_999i64,
            Some(v) => i64::try_from(v.clone()).map_err(|_| {
                bad(format!(
                    "can only concatenate str (not \"int\") to str: size {}",
                    pyfmt::repr(&v)
                ))
            })?,
        };
        if size < 0 {
            return Err(bad(format!("empty range in randrange(0, {})", size + 1)));
        }
        let n = rand::Rng::gen_range(&mut rand::thread_rng(), 0..=size);
        let text = n.to_string();
        Ok(match hash_type.as_deref().unwrap_or("md5") {
            "md5" => hexdigest::<md5::Md5>(text.as_bytes()),
            "sha1" => hexdigest::<sha1::Sha1>(text.as_bytes()),
            "sha224" => hexdigest::<sha2::Sha224>(text.as_bytes()),
            "sha256" => hexdigest::<sha2::Sha256>(text.as_bytes()),
            "sha384" => hexdigest::<sha2::Sha384>(text.as_bytes()),
            "sha512" => hexdigest::<sha2::Sha512>(text.as_bytes()),
            other => return Err(bad(format!("module 'hashlib' has no attribute '{other}'"))),
        })
    };
    env.add_filter("random_hash", random_hash);
    env.add_filter("rand_str", random_hash);
    env.add_filter("sha1", |v: Value| -> Result<String, Error> {
        Ok(hexdigest::<sha1::Sha1>(bytes_of(&v, "sha1")?.as_slice()))
    });
    env.add_filter(
        "hmac",
        |v: Value, secret: Value, challenge: Value| -> Result<bool, Error> {
            use base64::Engine as _;
            let digest = hmac_sha256(&bytes_of(&secret, "hmac")?, &bytes_of(&v, "hmac")?);
            let valid = base64::engine::general_purpose::STANDARD.encode(digest);
            Ok(valid.as_bytes() == bytes_of(&challenge, "hmac")?.as_slice())
        },
    );
    env.add_filter(
        "hmac_compute",
        |v: Value, secret: Value| -> Result<String, Error> {
            Ok(hex::encode(hmac_sha256(
                &bytes_of(&secret, "hmac_compute")?,
                &bytes_of(&v, "hmac_compute")?,
            )))
        },
    );
    env.add_filter("to_bytes", |v: Value| -> Result<Value, Error> {
        Ok(Value::from_bytes(bytes_of(&v, "to_bytes")?))
    });
    env.add_filter("json_encode_dict", |v: Value| encode(&v));
    env.add_filter("json_decode_dict", |v: Value| encode(&v));
    env.add_filter("json_encode_list", |v: Value| encode(&v));
    env.add_filter(
        "path_join",
        |first: Value, rest: Rest<Value>, kw: Kwargs| -> Result<String, Error> {
            let _posix: Option<Value> = kw.get("use_posixpath")?;
            kw.assert_all_used()?;
            let mut parts = std::iter::once(first)
                .chain(rest.iter().cloned())
                .map(|p| text_of(&p, "path_join"))
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .map(|p| brine_protocol::posixpath::normpath(&p));
            let mut joined = parts.next().unwrap_or_default();
            for p in parts {
                joined = brine_protocol::posixpath::join(&joined, p.trim_start_matches('/'));
            }
            Ok(brine_protocol::posixpath::normpath(&joined))
        },
    );
    env.add_filter("which", |v: Value| -> Value {
        v.as_str().and_then(which).map_or_else(none, Value::from)
    });
    env.add_filter("get_uid", |v: Option<Value>| -> Value {
        let name = v.filter(|v| !v.is_none()).map(|v| pyfmt::str(&v));
        get_uid(name.as_deref()).map_or_else(none, Value::from)
    });
}

fn hmac_sha256(key: &[u8], msg: &[u8]) -> Vec<u8> {
    let mut mac =
        hmac::Hmac::<sha2::Sha256>::new_from_slice(key).expect("HMAC takes keys of any size");
    mac.update(msg);
    mac.finalize().into_bytes().to_vec()
}

/// Salt's `to_bytes` of a value: text as UTF-8, bytes as they are, anything else refused.
fn bytes_of(v: &Value, what: &str) -> Result<Vec<u8>, Error> {
    if let Some(b) = v.as_bytes().filter(|_| v.kind() == ValueKind::Bytes) {
        return Ok(b.to_vec());
    }
    Ok(text_of(v, what)?.into_bytes())
}

fn register_dicts(env: &mut Environment<'_>) {
    env.add_filter(
        "set_dict_key_value",
        |d: Value, keys: String, value: Value, kw: Kwargs| {
            change_dict_key(d, keys, value, kw, DictChange::Set)
        },
    );
    env.add_filter(
        "update_dict_key_value",
        |d: Value, keys: String, value: Value, kw: Kwargs| {
            change_dict_key(d, keys, value, kw, DictChange::Update)
        },
    );
    env.add_filter(
        "append_dict_key_value",
        |d: Value, keys: String, value: Value, kw: Kwargs| {
            change_dict_key(d, keys, value, kw, DictChange::Append)
        },
    );
    env.add_filter(
        "extend_dict_key_value",
        |d: Value, keys: String, value: Value, kw: Kwargs| {
            change_dict_key(d, keys, value, kw, DictChange::Extend)
        },
    );
    env.add_filter("to_entries", |v: Value| -> Result<Value, Error> {
        let entry = |k: Value, v: Value| {
            Dict::value(IndexMap::from([
                (Value::from("key"), k),
                (Value::from("value"), v),
            ]))
        };
        match v.kind() {
            ValueKind::Map => Ok(list(
                map_entries(&v)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| entry(k, v))
                    .collect(),
            )),
            ValueKind::Seq if !v.is_tuple() => Ok(list(
                seq_items(&v)
                    .unwrap_or_default()
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| entry(Value::from(i), v))
                    .collect(),
            )),
            _ => Err(bad("Input data must be a dict or list")),
        }
    });
    env.add_filter("from_entries", |v: Value| -> Result<Value, Error> {
        let mut out = IndexMap::new();
        for entry in py_iter_or_err(&v)? {
            let fields = map_entries(&entry)
                .ok_or_else(|| bad(format!("'{}' object is not a mapping", py_type(&entry))))?;
            let get = |name: &str| {
                fields
                    .iter()
                    .rev()
                    .find(|(k, _)| k.as_str().is_some_and(|k| k.eq_ignore_ascii_case(name)))
                    .map(|(_, v)| v.clone())
            };
            for key in ["key", "name"] {
                if let Some(k) = get(key).filter(Value::is_true) {
                    out.insert(k, get("value").unwrap_or_else(none));
                    break;
                }
            }
        }
        Ok(Dict::value(out))
    });
    env.add_filter(
        "compare_dicts",
        |old: Value, new: Value| -> Result<Value, Error> {
            let old = map_entries(&old).unwrap_or_default();
            let new = map_entries(&new).unwrap_or_default();
            let find = |entries: &[(Value, Value)], k: &Value| {
                entries
                    .iter()
                    .find(|(key, _)| key == k)
                    .map(|(_, v)| v.clone())
            };
            let change = |o: Value, n: Value| {
                Dict::value(IndexMap::from([
                    (Value::from("old"), o),
                    (Value::from("new"), n),
                ]))
            };
            let mut out = IndexMap::new();
            let keys = unique(
                new.iter()
                    .chain(old.iter())
                    .map(|(k, _)| k.clone())
                    .collect(),
            );
            for k in keys {
                match (find(&old, &k), find(&new, &k)) {
                    (None, Some(n)) => {
                        out.insert(k, change(Value::from(""), n));
                    }
                    (Some(o), None) => {
                        out.insert(
                            k,
                            Dict::value(IndexMap::from([
                                (Value::from("new"), Value::from("")),
                                (Value::from("old"), o),
                            ])),
                        );
                    }
                    (Some(o), Some(n)) if o != n => {
                        out.insert(k, change(o, n));
                    }
                    _ => {}
                }
            }
            Ok(Dict::value(out))
        },
    );
    env.add_filter(
        "mysql_to_dict",
        |data: Value, key: String| -> Result<Value, Error> {
            let lines = py_iter_or_err(&data)?;
            let mut headers: Vec<String> = vec![String::new()];
            let mut out = IndexMap::new();
            for line in lines {
                let line = pyfmt::str(&line);
                if line.is_empty() || line.starts_with('+') {
                    continue;
                }
                let comps: Vec<String> = line.split('|').map(|c| c.trim().to_string()).collect();
                if headers.len() > 1 {
                    let mut row = IndexMap::new();
                    for (field, header) in
                        headers.iter().enumerate().take(headers.len() - 1).skip(1)
                    {
                        let value = comps.get(field).cloned().unwrap_or_default();
                        row.insert(Value::from(header.as_str()), to_num(Value::from(value))?);
                    }
                    let id = row
                        .get(&Value::from(key.as_str()))
                        .cloned()
                        .ok_or_else(|| {
                            bad(format!(
                                "KeyError: {}",
                                pyfmt::repr(&Value::from(key.as_str()))
                            ))
                        })?;
                    out.insert(id, Dict::value(row));
                } else {
                    headers = comps;
                }
            }
            Ok(Dict::value(out))
        },
    );
    env.add_filter(
        "json_query",
        |data: Value, expr: String| -> Result<Value, Error> {
            let compiled = jmespath::compile(&expr).map_err(|e| bad(e.to_string()))?;
            let json = pyfmt::to_json(&data);
            let variable =
                jmespath::Variable::from_serializable(&json).map_err(|e| bad(e.to_string()))?;
            let found = compiled.search(variable).map_err(|e| bad(e.to_string()))?;
            let back = serde_json::to_value(&*found).map_err(|e| bad(e.to_string()))?;
            Ok(pyfmt::from_json(&back))
        },
    );
}

fn register_files(env: &mut Environment<'_>) {
    env.add_filter("is_empty", |path: Value| -> bool {
        std::fs::metadata(pyfmt::str(&path)).is_ok_and(|m| m.len() == 0)
    });
    env.add_filter("is_text_file", |path: Value| -> bool {
        file_bytes(&pyfmt::str(&path), 512).is_ok_and(|b| !brine_protocol::nested::is_binary(&b))
    });
    env.add_filter("is_bin_file", |path: Value| -> bool {
        let path = pyfmt::str(&path);
        std::fs::metadata(&path).is_ok_and(|m| m.is_file())
            && file_bytes(&path, 2048).is_ok_and(|b| brine_protocol::nested::is_binary(&b))
    });
    env.add_filter("list_files", |dir: Value| -> Value {
        let root = pyfmt::str(&dir);
        let mut found = vec![root.clone()];
        let mut stack = vec![std::path::PathBuf::from(&root)];
        while let Some(d) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in rd.flatten() {
                let p = e.path();
                found.push(p.to_string_lossy().into_owned());
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push(p);
                }
            }
            if found.len() > 100_000 {
                break;
            }
        }
        found.sort();
        found.dedup();
        list(found.into_iter().map(Value::from).collect())
    });
    env.add_filter(
        "file_hashsum",
        |path: Value, form: Option<String>| -> Result<String, Error> {
            file_hashsum(&pyfmt::str(&path), form.as_deref().unwrap_or("sha256"))
        },
    );
}

fn register_itertools(env: &mut Environment<'_>) {
    env.add_filter(
        "combinations",
        |v: Value, r: usize| -> Result<Value, Error> {
            Ok(list(combinations(&py_iter_or_err(&v)?, r, false)?))
        },
    );
    env.add_filter(
        "combinations_with_replacement",
        |v: Value, r: usize| -> Result<Value, Error> {
            Ok(list(combinations(&py_iter_or_err(&v)?, r, true)?))
        },
    );
    env.add_filter(
        "permutations",
        |v: Value, args: Args| -> Result<Value, Error> {
            let b = bind("permutations", args, ["r"], 0)?;
            let items = py_iter_or_err(&v)?;
            let r = opt_usize(&b[0], "r")?.unwrap_or(items.len());
            Ok(list(permutations(&items, r)?))
        },
    );
    env.add_filter(
        "compress",
        |v: Value, selectors: Value| -> Result<Value, Error> {
            let (items, sel) = (py_iter_or_err(&v)?, py_iter_or_err(&selectors)?);
            Ok(list(
                items
                    .into_iter()
                    .zip(sel)
                    .filter(|(_, s)| s.is_true())
                    .map(|(i, _)| i)
                    .collect(),
            ))
        },
    );
    env.add_filter(
        "product",
        |v: Value, rest: Rest<Value>, kw: Kwargs| -> Result<Value, Error> {
            let repeat: Option<usize> = kw.get("repeat")?;
            kw.assert_all_used()?;
            let pools: Vec<Vec<Value>> = std::iter::once(v)
                .chain(rest.iter().cloned())
                .map(|p| py_iter_or_err(&p))
                .collect::<Result<_, _>>()?;
            let repeat = repeat.unwrap_or(1);
            if repeat.saturating_mul(pools.len()) > MAX_ITERTOOLS_VALUES {
                return Err(too_many("product"));
            }
            let all: Vec<Vec<Value>> = (0..repeat).flat_map(|_| pools.clone()).collect();
            Ok(list(product(&all)?))
        },
    );
    env.add_filter(
        "zip",
        |v: Value, rest: Rest<Value>| -> Result<Value, Error> {
            let pools: Vec<Vec<Value>> = std::iter::once(v)
                .chain(rest.iter().cloned())
                .map(|p| py_iter_or_err(&p))
                .collect::<Result<_, _>>()?;
            let len = pools.iter().map(Vec::len).min().unwrap_or(0);
            Ok(list(
                (0..len)
                    .map(|i| tuple(pools.iter().map(|p| p[i].clone()).collect()))
                    .collect(),
            ))
        },
    );
    env.add_filter(
        "zip_longest",
        |v: Value, rest: Rest<Value>, kw: Kwargs| -> Result<Value, Error> {
            let fill: Option<Value> = kw.get("fillvalue")?;
            kw.assert_all_used()?;
            let fill = fill.unwrap_or_else(none);
            let pools: Vec<Vec<Value>> = std::iter::once(v)
                .chain(rest.iter().cloned())
                .map(|p| py_iter_or_err(&p))
                .collect::<Result<_, _>>()?;
            let len = pools.iter().map(Vec::len).max().unwrap_or(0);
            Ok(list(
                (0..len)
                    .map(|i| {
                        tuple(
                            pools
                                .iter()
                                .map(|p| p.get(i).cloned().unwrap_or_else(|| fill.clone()))
                                .collect(),
                        )
                    })
                    .collect(),
            ))
        },
    );
}

fn register_serializers(env: &mut Environment<'_>) {
    env.add_filter("json", |v: Value, args: Args| -> Result<String, Error> {
        let b = bind("json", args, ["sort_keys", "indent"], 0)?;
        let indent = b[1]
            .as_ref()
            .filter(|i| !i.is_none())
            .map(|i| i64::try_from(i.clone()))
            .transpose()?;
        let style = brine_protocol::pyjson::JsonStyle {
            sort_keys: opt_bool(&b[0]).unwrap_or(true),
            ..brine_protocol::pyjson::JsonStyle::new(indent, true)
        };
        Ok(brine_protocol::pyjson::dumps(&pyfmt::to_json(&v), &style)
            .trim()
            .to_string())
    });
    env.add_filter("python", |v: Value| -> String {
        super::builtins::pprint::pformat(&v).trim().to_string()
    });
    env.add_filter("xml", |v: Value| format_xml(&v));
    env.add_filter(
        "dict_to_sls_yaml_params",
        |v: Value, args: Args| -> Result<String, Error> {
            let b = bind("dict_to_sls_yaml_params", args, ["flow_style"], 0)?;
            let entries = map_entries(&v)
                .ok_or_else(|| bad(format!("'{}' object has no attribute 'items'", py_type(&v))))?;
            let params: Vec<Value> = entries
                .into_iter()
                .map(|(k, val)| Dict::value(IndexMap::from([(k, val)])))
                .collect();
            let style = if opt_bool(&b[0]).unwrap_or(false) {
                brine_protocol::yaml::Style::Flow
            } else {
                brine_protocol::yaml::Style::Block(2)
            };
            let text = brine_protocol::yaml::safe_dump(&pyfmt::to_json(&list(params)), style);
            let text = text.trim();
            Ok(text.strip_suffix("\n...").unwrap_or(text).to_string())
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_numbers_and_units() {
        assert_eq!(parse_py_int(" 1_000 ", 10), Some(1000));
        assert_eq!(parse_py_int("1__0", 10), None);
        assert_eq!(parse_py_int("0xff", 16), Some(255));
        assert_eq!(parse_py_int("zz", 16), None);
        assert_eq!(human_to_bytes(&Value::from("1K"), "B", false), 1024);
        assert_eq!(human_to_bytes(&Value::from("2 MB"), "B", false), 2 << 20);
        assert_eq!(human_to_bytes(&Value::from("2 MB"), "B", true), 2_000_000);
        assert_eq!(human_to_bytes(&Value::from("2 XB"), "B", false), 0);
        assert_eq!(human_to_bytes(&Value::from("1.5 KiB"), "B", false), 1536);
    }

    #[test]
    fn names_and_patterns() {
        assert_eq!(snake_case("fooBarBaz"), "foo_bar_baz");
        assert_eq!(snake_case("HTTPServer"), "http_server");
        assert_eq!(camel_case("foo_bar_baz", false), "fooBarBaz");
        assert_eq!(camel_case("foo_bar", true), "FooBar");
        assert!(expr_match("web1", "web*"));
        assert!(expr_match("web1", r"web\d"));
        assert!(!expr_match("web1", "db*"));
        assert_eq!(regex_escape("a.b*c d"), r"a\.b\*c\ d");
        assert_eq!(
            uuid5(GLOBAL_UUID, "x"),
            "2282f7df-3d51-52be-9994-2d3a56986ebd"
        );
    }

    #[test]
    fn itertools_orders() {
        let items: Vec<Value> = (1..=4).map(Value::from).collect();
        let show = |v: Vec<Value>| pyfmt::repr(&list(v));
        assert_eq!(
            show(combinations(&items[..3], 2, false).unwrap()),
            "[(1, 2), (1, 3), (2, 3)]"
        );
        assert_eq!(
            show(combinations(&items[..2], 2, true).unwrap()),
            "[(1, 1), (1, 2), (2, 2)]"
        );
        assert_eq!(
            show(permutations(&items[..3], 2).unwrap()),
            "[(1, 2), (1, 3), (2, 1), (2, 3), (3, 1), (3, 2)]"
        );
        assert_eq!(show(combinations(&items[..2], 3, false).unwrap()), "[]");
        // Refused before memory runs out.
        let many: Vec<Value> = (0..100).map(Value::from).collect();
        assert!(permutations(&many, 6).is_err());
        assert!(combinations(&many[..2], usize::MAX, true).is_err());
        assert!(product(&vec![many.clone(); 5]).is_err());
    }
}

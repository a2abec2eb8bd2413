//! Salt's `subdict_match`: does `key:subkey:value` match nested grains or pillar data?
//!
//! The expression is split at every delimiter and the longest key path is tried first, so
//! `foo:bar:baz` matches `{"foo": {"bar": "baz"}}` and also `{"foo": "bar:baz"}`. Values are
//! compared as their Python `str()`, both sides lower-cased, by glob, regex (anchored at the
//! start) or equality. Lists match when one member matches; maps match on a key, on a
//! nested expression, or (with a `*:` prefix) on any value below them.

use std::cell::RefCell;
use std::collections::HashMap;

use regex::Regex;
use rmpv::Value;

use super::fnmatch::Glob;
use super::py_regex;
use super::pyvalue::{key_equals, py_int, py_str, yaml_key};

/// How the final value is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MatchMode {
    Glob,
    Regex,
    Exact,
}

/// Compiled lower-cased patterns, shared by every minion a target is checked against.
/// A pattern that does not compile simply never matches, as in Salt.
#[derive(Debug, Default)]
pub(crate) struct PatternCache {
    globs: RefCell<HashMap<String, Glob>>,
    regexes: RefCell<HashMap<String, Option<Regex>>>,
}

impl PatternCache {
    fn value_matches(&self, mode: MatchMode, target: &Value, pattern: &str) -> bool {
        let target = py_str(target).to_lowercase();
        let pattern = pattern.to_lowercase();
        match mode {
            MatchMode::Exact => target == pattern,
            MatchMode::Glob => {
                let mut globs = self.globs.borrow_mut();
                globs
                    .entry(pattern)
                    .or_insert_with_key(|p| Glob::new(p))
                    .is_match(&target)
            }
            MatchMode::Regex => {
                let mut regexes = self.regexes.borrow_mut();
                let re = regexes
                    .entry(pattern)
                    .or_insert_with_key(|p| py_regex(p).ok());
                re.as_ref().is_some_and(|re| re.is_match(&target))
            }
        }
    }
}

/// The candidate value patterns an expression can produce (every suffix after a delimiter,
/// lower-cased), so a regex target can be rejected up front when none of them compiles.
pub(crate) fn regex_candidates(expr: &str, delimiter: &str) -> Vec<String> {
    let splits: Vec<&str> = expr.split(delimiter).collect();
    let mut out: Vec<String> = (1..splits.len())
        .map(|idx| splits[idx..].join(delimiter).to_lowercase())
        .collect();
    out.push(expr.to_lowercase());
    out
}

/// One `subdict_match` call (with its memo of map/pattern pairs already tried, which keeps
/// long expressions over deep data from going exponential).
pub(crate) struct SubdictMatch<'a> {
    mode: MatchMode,
    cache: &'a PatternCache,
    memo: HashMap<(usize, String), bool>,
}

impl<'a> SubdictMatch<'a> {
    pub(crate) fn new(mode: MatchMode, cache: &'a PatternCache) -> Self {
        SubdictMatch {
            mode,
            cache,
            memo: HashMap::new(),
        }
    }

    /// `subdict_match(data, expr, delimiter)`. `delimiter` must not be empty.
    pub(crate) fn matches(&mut self, data: &Value, expr: &str, delimiter: &str) -> bool {
        let splits: Vec<&str> = expr.split(delimiter).collect();
        if splits.len() < 2 {
            return false;
        }
        for idx in (1..splits.len()).rev() {
            let key = splits[..idx].join(delimiter);
            let (matchstr, found) = if key == "*" {
                (expr.to_owned(), Some(data))
            } else {
                (
                    splits[idx..].join(delimiter),
                    traverse(data, &key, delimiter),
                )
            };
            let Some(found) = found else { continue };
            match found {
                // Salt compares against its `{}` default, so an empty map is skipped too.
                Value::Map(pairs) if pairs.is_empty() => continue,
                Value::Map(_) => {
                    if self.dict_match(found, &matchstr) {
                        return true;
                    }
                }
                Value::Array(members) => {
                    for member in members {
                        if member.is_map() && self.dict_match(member, &matchstr) {
                            return true;
                        }
                        if self.value_matches(member, &matchstr) {
                            return true;
                        }
                    }
                }
                scalar => {
                    if self.value_matches(scalar, &matchstr) {
                        return true;
                    }
                }
            }
        }
        false
    }

    fn value_matches(&self, target: &Value, pattern: &str) -> bool {
        self.cache.value_matches(self.mode, target, pattern)
    }

    /// `_dict_match`: `target` is a map.
    fn dict_match(&mut self, target: &Value, pattern: &str) -> bool {
        let memo_key = (target as *const Value as usize, pattern.to_owned());
        if let Some(&known) = self.memo.get(&memo_key) {
            return known;
        }
        // Guard against re-entry on the same (map, pattern) while it is being computed.
        self.memo.insert(memo_key.clone(), false);
        let result = self.dict_match_uncached(target, pattern);
        self.memo.insert(memo_key, result);
        result
    }

    fn dict_match_uncached(&mut self, target: &Value, pattern: &str) -> bool {
        let Value::Map(pairs) = target else {
            return false;
        };
        let (wildcard, pattern) = match pattern.strip_prefix("*:") {
            Some(rest) => (true, rest),
            None => (false, pattern),
        };
        if pattern == "*" {
            return true;
        }
        if pairs.iter().any(|(k, _)| k.as_str() == Some(pattern)) {
            return true;
        }
        if pairs.iter().any(|(k, _)| self.value_matches(k, pattern)) {
            return true;
        }
        // Salt recurses with the default ":" delimiter here, whatever the caller used.
        if self.matches(target, pattern, ":") {
            return true;
        }
        if wildcard {
            for (_, value) in pairs {
                match value {
                    Value::Map(_) => {
                        if self.dict_match(value, pattern) {
                            return true;
                        }
                    }
                    Value::Array(items) => {
                        if items.iter().any(|item| self.value_matches(item, pattern)) {
                            return true;
                        }
                    }
                    other => {
                        if self.value_matches(other, pattern) {
                            return true;
                        }
                    }
                }
            }
        }
        false
    }
}

/// `traverse_dict_and_list(data, key, default={})`; `None` stands for the default.
pub(crate) fn traverse<'v>(data: &'v Value, key: &str, delimiter: &str) -> Option<&'v Value> {
    let mut ptr = data;
    for each in key.split(delimiter) {
        ptr = match ptr {
            Value::Array(items) => step_into_list(items, each)?,
            Value::Map(pairs) => step_into_map(pairs, each)?,
            _ => return None,
        };
    }
    Some(ptr)
}

fn step_into_list<'v>(items: &'v [Value], each: &str) -> Option<&'v Value> {
    let embedded = || items.iter().filter_map(Value::as_map);
    match py_int(each) {
        None => embedded().find_map(|pairs| lookup_str(pairs, each)),
        Some(idx) => {
            let by_key = embedded().find_map(|pairs| {
                pairs
                    .iter()
                    .find(|(k, _)| key_equals(k, &super::pyvalue::YamlKey::Int(idx)))
                    .map(|(_, v)| v)
            });
            by_key.or_else(|| {
                let len = items.len() as i64;
                let pos = if idx < 0 { idx + len } else { idx };
                if (0..len).contains(&pos) {
                    items.get(pos as usize)
                } else {
                    None
                }
            })
        }
    }
}

fn step_into_map<'v>(pairs: &'v [(Value, Value)], each: &str) -> Option<&'v Value> {
    if let Some(v) = lookup_str(pairs, each) {
        return Some(v);
    }
    let loaded = yaml_key(each)?;
    pairs
        .iter()
        .find(|(k, _)| key_equals(k, &loaded))
        .map(|(_, v)| v)
}

fn lookup_str<'v>(pairs: &'v [(Value, Value)], key: &str) -> Option<&'v Value> {
    pairs
        .iter()
        .find(|(k, _)| k.as_str() == Some(key))
        .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(json: serde_json::Value) -> Value {
        fn conv(j: &serde_json::Value) -> Value {
            match j {
                serde_json::Value::Null => Value::Nil,
                serde_json::Value::Bool(b) => Value::from(*b),
                serde_json::Value::Number(n) => match n.as_i64() {
                    Some(i) => Value::from(i),
                    None => Value::F64(n.as_f64().unwrap_or(0.0)),
                },
                serde_json::Value::String(s) => Value::from(s.as_str()),
                serde_json::Value::Array(a) => Value::Array(a.iter().map(conv).collect()),
                serde_json::Value::Object(o) => Value::Map(
                    o.iter()
                        .map(|(k, v)| (Value::from(k.as_str()), conv(v)))
                        .collect(),
                ),
            }
        }
        conv(&json)
    }

    fn check(data: &Value, expr: &str, mode: MatchMode) -> bool {
        let cache = PatternCache::default();
        SubdictMatch::new(mode, &cache).matches(data, expr, ":")
    }

    fn glob(data: &Value, expr: &str) -> bool {
        check(data, expr, MatchMode::Glob)
    }

    fn grains() -> Value {
        v(serde_json::json!({
            "os": "Debian",
            "os_family": "Debian",
            "osrelease": "12",
            "num_cpus": 4,
            "virtual": "physical",
            "biosreleasedate": "2024-01-01",
            "ipv4": ["127.0.0.1", "10.0.0.5"],
            "roles": ["web", "db"],
            "locale_info": {"defaultlanguage": "en_US", "detectedencoding": "utf-8"},
            "ssds": [],
            "gpus": [{"model": "GeForce", "vendor": "nvidia"}],
            "selinux": {"enabled": false, "enforced": "Disabled"},
            "url": "http://x:8080/y",
            "empty": {},
            "nested": {"a": {"b": {"c": "deep"}}},
        }))
    }

    #[test]
    fn simple_value_glob_is_case_insensitive() {
        let g = grains();
        assert!(glob(&g, "os:Debian"));
        assert!(glob(&g, "os:debian"));
        assert!(glob(&g, "os:DEB*"));
        assert!(!glob(&g, "os:Ubuntu"));
        assert!(!glob(&g, "nosuch:Debian"));
        assert!(!glob(&g, "os"), "no delimiter never matches");
    }

    #[test]
    fn numbers_and_bools_compare_as_python_str() {
        let g = grains();
        assert!(glob(&g, "num_cpus:4"));
        assert!(glob(&g, "num_cpus:[0-9]"));
        assert!(!glob(&g, "num_cpus:5"));
        assert!(glob(&g, "selinux:enabled:False"));
        assert!(
            glob(&g, "selinux:enabled:false"),
            "both sides are lower-cased"
        );
        assert!(!glob(&g, "selinux:enabled:0"));
    }

    #[test]
    fn nested_maps_and_delimiter_inside_value() {
        let g = grains();
        assert!(glob(&g, "locale_info:defaultlanguage:en_US"));
        assert!(glob(&g, "nested:a:b:c:deep"));
        assert!(glob(&g, "nested:a:b:c:d*"));
        assert!(!glob(&g, "nested:a:b:c:shallow"));
        // The value itself contains the delimiter.
        assert!(glob(&g, "url:http://x:8080/y"));
        assert!(glob(&g, "url:http*8080*"));
    }

    #[test]
    fn lists_match_any_member() {
        let g = grains();
        assert!(glob(&g, "roles:web"));
        assert!(glob(&g, "roles:db"));
        assert!(glob(&g, "roles:w*"));
        assert!(!glob(&g, "roles:cache"));
        assert!(glob(&g, "ipv4:10.0.0.*"));
        assert!(!glob(&g, "ssds:*"), "empty list has no member");
    }

    #[test]
    fn lists_of_maps_are_walked() {
        let g = grains();
        assert!(glob(&g, "gpus:model:GeForce"));
        assert!(glob(&g, "gpus:vendor:nv*"));
        assert!(!glob(&g, "gpus:vendor:amd"));
        // Numeric segment indexes the list.
        assert!(glob(&g, "gpus:0:model:GeForce"));
        assert!(glob(&g, "roles:1:db"));
        assert!(glob(&g, "roles:-1:db"), "Python negative index");
        assert!(!glob(&g, "roles:5:db"));
        // A list member that is a map matches on its keys.
        assert!(glob(&g, "gpus:model"));
    }

    #[test]
    fn map_matches_on_key_and_wildcards() {
        let g = grains();
        assert!(glob(&g, "locale_info:defaultlanguage"), "key exists");
        assert!(glob(&g, "locale_info:default*"), "key glob");
        assert!(glob(&g, "locale_info:*"), "any key");
        assert!(!glob(&g, "locale_info:nokey"));
        assert!(
            !glob(&g, "empty:*"),
            "empty map is skipped like Salt's {{}} default"
        );
        // "*:" prefix searches the values below the map.
        assert!(glob(&g, "locale_info:*:utf-8"));
        assert!(glob(&g, "nested:a:b:*:deep"));
        assert!(!glob(&g, "nested:*:deep"), "'*:' looks one level down only");
        assert!(glob(&g, "*:Debian"), "top-level * searches every value");
        assert!(glob(&g, "*:web"));
        assert!(!glob(&g, "*:nothing-like-this"));
    }

    #[test]
    fn integer_and_bool_keys_found_through_yaml() {
        let data = Value::Map(vec![
            (
                Value::from("ports"),
                Value::Map(vec![(Value::from(8080), Value::from("http"))]),
            ),
            (
                Value::from("flags"),
                Value::Map(vec![(Value::from(true), Value::from("on"))]),
            ),
        ]);
        assert!(glob(&data, "ports:8080:http"));
        assert!(glob(&data, "flags:yes:on"));
        assert!(glob(&data, "flags:1:on"), "True == 1 in Python");
        assert!(!glob(&data, "ports:8081:http"));
    }

    #[test]
    fn regex_mode_anchors_at_start_only() {
        let g = grains();
        let re = |e: &str| check(&g, e, MatchMode::Regex);
        assert!(re("os:Deb"));
        assert!(re("os:deb.*n$"));
        assert!(!re("os:ebian"));
        assert!(re("roles:(web|cache)"));
        assert!(re("osrelease:1[0-9]"));
        assert!(!re("os:[unclosed"), "a bad regex never matches");
    }

    #[test]
    fn exact_mode_is_equality_after_lowercasing() {
        let g = grains();
        let ex = |e: &str| check(&g, e, MatchMode::Exact);
        assert!(ex("os:Debian"));
        assert!(ex("os:debian"));
        assert!(!ex("os:Deb*"));
        assert!(ex("roles:web"));
        assert!(!ex("roles:we"));
    }

    #[test]
    fn custom_delimiter() {
        let g = grains();
        let cache = PatternCache::default();
        let mut m = SubdictMatch::new(MatchMode::Glob, &cache);
        assert!(m.matches(&g, "locale_info|defaultlanguage|en_US", "|"));
        assert!(m.matches(&g, "url|http://x:8080/y", "|"));
        assert!(!m.matches(&g, "os:Debian", "|"));
    }

    #[test]
    fn non_map_data_never_matches() {
        assert!(!glob(&Value::Nil, "os:Debian"));
        assert!(!glob(&Value::from("os:Debian"), "os:Debian"));
    }

    #[test]
    fn deep_expressions_stay_fast() {
        // 40 levels of {"k": {...}}: without the memo this is 2^40 work.
        let mut data = Value::from("leaf");
        for _ in 0..40 {
            data = Value::Map(vec![(Value::from("k"), data)]);
        }
        let mut expr = vec!["k"; 40].join(":");
        expr.push_str(":nomatch");
        assert!(!glob(&data, &expr));
        let ok = format!("{}:leaf", vec!["k"; 40].join(":"));
        assert!(glob(&data, &ok));
    }

    #[test]
    fn traverse_like_salt() {
        let g = grains();
        assert_eq!(
            traverse(&g, "nested:a:b:c", ":").and_then(Value::as_str),
            Some("deep")
        );
        assert!(traverse(&g, "os:x", ":").is_none(), "cannot index a string");
        assert!(traverse(&g, "roles:x", ":").is_none());
    }
}

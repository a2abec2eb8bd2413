//! Salt's target matching, on both ends of a publish.
//!
//! * Minion side, [`matches`]: does this publish (`tgt`, `tgt_type`, `delimiter`) target
//!   me? Salt's `Minion._target_load` with the `*_match` matchers.
//! * Master side, [`check_minions`]: which accepted minions are expected to answer?
//!   `CkMinions.check_minions` in greedy mode, grain/pillar/ipcidr from the minion data
//!   cache.
//!
//! Semantics follow Salt 3007 (`salt/matchers`, `salt/utils/minions.py`,
//! `salt/utils/data.py::subdict_match`); deliberate differences are listed on each item.
//! Regular expressions use the `regex` crate: Python-only syntax (look-around,
//! back-references) is reported as [`TargetError::BadRegex`].

// The submodules live in `targeting/`: the workspace .gitignore ignores every `target/`.
#[path = "targeting/cidr.rs"]
mod cidr;
#[path = "targeting/compound.rs"]
mod compound;
#[path = "targeting/fnmatch.rs"]
mod fnmatch;
#[path = "targeting/pyvalue.rs"]
mod pyvalue;
#[path = "targeting/subdict.rs"]
mod subdict;
#[cfg(test)]
#[path = "targeting/tests.rs"]
mod tests;

use std::cell::OnceCell;
use std::collections::{BTreeMap, HashSet};

use regex::Regex;
use rmpv::Value;

use cidr::IpTarget;
use compound::{compile_id_regex, Compound, Leaf, LeafNode, Side, Source};
use subdict::{MatchMode, PatternCache, SubdictMatch};

pub use compound::{nodegroup_comp, nodegroup_comp_lenient};
pub use fnmatch::fnmatch;

/// Why a target cannot be evaluated. Salt mostly logs these and matches nothing; callers
/// here can tell the user why.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// `tgt_type` names no matcher (or one only the other side has).
    #[error("unknown target type {0:?}")]
    UnknownTgtType(String),
    /// `tgt` has the wrong shape for its `tgt_type`.
    #[error("a {tgt_type} target must be {expected}")]
    BadTarget {
        /// The target type.
        tgt_type: String,
        /// What it needs.
        expected: &'static str,
    },
    /// A regular expression that does not compile.
    #[error("invalid regular expression {pattern:?}: {source}")]
    BadRegex {
        /// The pattern as given.
        pattern: String,
        /// The compiler's complaint.
        #[source]
        source: regex::Error,
    },
    /// Not an IP address nor a network (host bits set count as invalid, as in Python).
    #[error("invalid IP address or CIDR network {0:?}")]
    BadCidr(String),
    /// The grain/pillar delimiter is empty.
    #[error("the target delimiter is empty")]
    EmptyDelimiter,
    /// Compound syntax error: unbalanced parentheses, dangling operator, ...
    #[error("invalid compound target {tgt:?}: {reason}")]
    Compound {
        /// The whole target.
        tgt: String,
        /// What is wrong.
        reason: String,
    },
    /// An engine letter Brine does not implement (`R@`, range).
    #[error("target engine {0}@ is not supported")]
    UnsupportedEngine(char),
    /// `N@` (or tgt_type `nodegroup`) reached a minion; the sender must expand it.
    #[error("nodegroups must be expanded before a publish reaches a minion")]
    NodegroupOnMinion,
    /// A nodegroup that is not configured.
    #[error("unknown nodegroup {0:?}")]
    UnknownNodegroup(String),
    /// A nodegroup that includes itself.
    #[error("nodegroup {0:?} includes itself")]
    NodegroupCycle(String),
    /// A nodegroup definition that cannot be used.
    #[error("nodegroup {name:?} is {reason}")]
    BadNodegroup {
        /// The group.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// What is known of one minion: its id, and (when known) its grains and pillar maps.
#[derive(Debug, Clone, Copy)]
pub struct MinionData<'a> {
    /// The minion id.
    pub id: &'a str,
    /// The grains map, if known.
    pub grains: Option<&'a Value>,
    /// The pillar map, if known.
    pub pillar: Option<&'a Value>,
}

/// The master's expectation for one publish.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expected {
    /// Accepted minions expected to answer.
    pub minions: Vec<String>,
    /// Listed ids (`list` targets and `L@` words not right after `not`) with no accepted key.
    pub missing: Vec<String>,
}

/// Python's `re.match(pattern, s)`: compiled so that it is anchored at the start only.
pub(crate) fn py_regex(pattern: &str) -> Result<Regex, regex::Error> {
    let mut translated = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        translated.push(c);
        if c == '\\' {
            match chars.next() {
                Some('Z') => translated.push('z'),
                Some(other) => translated.push(other),
                None => {}
            }
        }
    }
    // Validate alone first, so that a stray ')' cannot close the wrapping group.
    Regex::new(&translated)?;
    Regex::new(&format!("^(?:{translated})"))
}

fn tgt_str<'v>(tgt: &'v Value, tgt_type: &str) -> Result<&'v str, TargetError> {
    tgt.as_str().ok_or_else(|| TargetError::BadTarget {
        tgt_type: tgt_type.to_owned(),
        expected: "a string",
    })
}

fn check_delimiter(delimiter: &str) -> Result<(), TargetError> {
    if delimiter.is_empty() {
        Err(TargetError::EmptyDelimiter)
    } else {
        Ok(())
    }
}

/// The grain/pillar target types: (data source, comparison).
fn data_kind(tgt_type: &str) -> Option<(Source, MatchMode)> {
    Some(match tgt_type {
        "grain" => (Source::Grains, MatchMode::Glob),
        "grain_pcre" => (Source::Grains, MatchMode::Regex),
        "pillar" => (Source::Pillar, MatchMode::Glob),
        "pillar_pcre" => (Source::Pillar, MatchMode::Regex),
        "pillar_exact" => (Source::Pillar, MatchMode::Exact),
        _ => return None,
    })
}

/// Salt's minion-side list matcher for a comma string.
fn in_comma_list(list: &str, id: &str) -> bool {
    list.contains(&format!(",{id},"))
        || list.starts_with(&format!("{id},"))
        || list.ends_with(&format!(",{id}"))
        || list == id
}

/// Minion side: does this publish target this minion?
///
/// `tgt` is a string, or a list of strings for `list` (and `compound`). `delimiter`
/// (Salt's default is `":"`) applies to the grain and pillar types; compound words carry
/// their own (`G|@os|Debian`). A publish without `tgt_type` is a `glob`.
///
/// Differences from Salt: `pillar_pcre` and `pillar_exact` honour `delimiter` too (Salt's
/// minion passes it to grain, grain_pcre and pillar only); errors are returned where Salt
/// logs and ignores the publish.
pub fn matches(
    tgt: &Value,
    tgt_type: &str,
    delimiter: &str,
    me: &MinionData,
) -> Result<bool, TargetError> {
    if let Some((source, mode)) = data_kind(tgt_type) {
        check_delimiter(delimiter)?;
        let expr = tgt_str(tgt, tgt_type)?;
        if mode == MatchMode::Regex {
            compound::check_data_regex(expr, delimiter)?;
        }
        let cache = PatternCache::default();
        return Ok(minion_data_match(me, source, expr, delimiter, mode, &cache));
    }
    match tgt_type {
        "glob" => Ok(fnmatch(tgt_str(tgt, tgt_type)?, me.id)),
        "pcre" => Ok(compile_id_regex(tgt_str(tgt, tgt_type)?)?.is_match(me.id)),
        "list" => match tgt {
            Value::String(_) => Ok(in_comma_list(tgt_str(tgt, tgt_type)?, me.id)),
            Value::Array(items) => Ok(items.iter().any(|i| i.as_str() == Some(me.id))),
            _ => Err(TargetError::BadTarget {
                tgt_type: tgt_type.into(),
                expected: "a comma-separated string or a list of strings",
            }),
        },
        "ipcidr" => {
            let target = IpTarget::parse(tgt_str(tgt, tgt_type)?)?;
            Ok(me.grains.is_some_and(|g| target.matches_grains(g)))
        }
        "compound" => {
            let parsed = Compound::parse(tgt, &Side::Minion, false)?;
            let cache = PatternCache::default();
            Ok(parsed.eval(&mut |leaf| minion_leaf(me, leaf, &cache)))
        }
        "nodegroup" => Err(TargetError::NodegroupOnMinion),
        other => Err(TargetError::UnknownTgtType(other.to_owned())),
    }
}

fn minion_data_match(
    me: &MinionData,
    source: Source,
    expr: &str,
    delimiter: &str,
    mode: MatchMode,
    cache: &PatternCache,
) -> bool {
    let data = match source {
        Source::Grains => me.grains,
        Source::Pillar => me.pillar,
    };
    data.is_some_and(|data| SubdictMatch::new(mode, cache).matches(data, expr, delimiter))
}

fn minion_leaf(me: &MinionData, node: &LeafNode, cache: &PatternCache) -> bool {
    match &node.leaf {
        Leaf::Glob(g) => g.is_match(me.id),
        Leaf::Pcre(re) => re.is_match(me.id),
        Leaf::List(list) => in_comma_list(list, me.id),
        Leaf::Data {
            source,
            expr,
            delimiter,
            mode,
        } => minion_data_match(me, *source, expr, delimiter, *mode, cache),
        Leaf::Ip(target) => me.grains.is_some_and(|g| target.matches_grains(g)),
    }
}

/// A minion data cache entry as `check_minions` gets it: `None` when the minion has no
/// entry, else its (grains, pillar), each possibly absent.
pub type CachedData = Option<(Option<Value>, Option<Value>)>;

/// The accepted ids in Salt's order (case-insensitive sort, dot files skipped), each with
/// its data-cache entry fetched on first use.
struct Universe<'a> {
    ids: Vec<&'a str>,
    set: HashSet<&'a str>,
    data: Vec<OnceCell<CachedData>>,
    lookup: &'a dyn Fn(&str) -> CachedData,
}

impl<'a> Universe<'a> {
    fn new(ids: &'a [String], lookup: &'a dyn Fn(&str) -> CachedData) -> Self {
        let mut seen = HashSet::new();
        let mut ids: Vec<&str> = ids
            .iter()
            .map(String::as_str)
            .filter(|id| !id.starts_with('.') && seen.insert(*id))
            .collect();
        ids.sort_by_cached_key(|id| id.to_lowercase());
        let data = ids.iter().map(|_| OnceCell::new()).collect();
        Universe {
            set: seen,
            ids,
            data,
            lookup,
        }
    }

    fn cached(&self, idx: usize) -> &CachedData {
        self.data[idx].get_or_init(|| (self.lookup)(self.ids[idx]))
    }

    fn grains(&self, idx: usize) -> Option<&Value> {
        self.cached(idx).as_ref().and_then(|(g, _)| g.as_ref())
    }

    fn pillar(&self, idx: usize) -> Option<&Value> {
        self.cached(idx).as_ref().and_then(|(_, p)| p.as_ref())
    }

    fn contains(&self, id: &str) -> bool {
        self.set.contains(id)
    }

    fn select(&self, mut keep: impl FnMut(usize, &str) -> bool) -> Vec<String> {
        self.ids
            .iter()
            .enumerate()
            .filter(|(i, id)| keep(*i, id))
            .map(|(_, id)| (*id).to_owned())
            .collect()
    }

    fn data_match(
        &self,
        idx: usize,
        source: Source,
        expr: &str,
        delimiter: &str,
        mode: MatchMode,
        cache: &PatternCache,
    ) -> bool {
        let data = match source {
            Source::Grains => self.grains(idx),
            Source::Pillar => self.pillar(idx),
        };
        data.is_some_and(|data| SubdictMatch::new(mode, cache).matches(data, expr, delimiter))
    }
}

/// Appends `item` unless `seen` already had it.
fn push_unique(out: &mut Vec<String>, seen: &mut HashSet<String>, item: String) {
    if seen.insert(item.clone()) {
        out.push(item);
    }
}

/// The entries of a `list` target / `L@` word: a list, or a comma string (empty items
/// dropped).
fn list_entries(tgt: &Value) -> Result<Vec<String>, TargetError> {
    match tgt {
        Value::String(_) => Ok(tgt_str(tgt, "list")?
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()),
        Value::Array(items) => Ok(items.iter().map(pyvalue::py_str).collect()),
        _ => Err(TargetError::BadTarget {
            tgt_type: "list".into(),
            expected: "a comma-separated string or a list of strings",
        }),
    }
}

/// Master side: `CkMinions.check_minions(tgt, tgt_type, delimiter, greedy=True)`.
///
/// `ids` are the accepted keys; `lookup(id)` gives the minion data cache entry
/// `(grains, pillar)`, or `None` when there is none. `nodegroups` is the master's
/// `nodegroups` option (name to compound string or list of ids).
///
/// `minions` keeps Salt's order where Salt has one: accepted ids sorted case-insensitively
/// for glob, pcre and the data types, the target's own order for `list`. Salt returns
/// compound results in Python set order; Brine uses the sorted order there too.
/// Differences from Salt: duplicates are dropped; a minion without cached grains never
/// matches an `ipcidr` target (Salt keeps uncached minions for ipcidr, but not for grains);
/// invalid targets are errors instead of an empty result.
pub fn check_minions(
    tgt: &Value,
    tgt_type: &str,
    delimiter: &str,
    ids: &[String],
    lookup: &dyn Fn(&str) -> CachedData,
    nodegroups: &BTreeMap<String, Value>,
) -> Result<Expected, TargetError> {
    let universe = Universe::new(ids, lookup);
    let only = |minions: Vec<String>| Expected {
        minions,
        missing: Vec::new(),
    };
    if let Some((source, mode)) = data_kind(tgt_type) {
        check_delimiter(delimiter)?;
        let expr = tgt_str(tgt, tgt_type)?;
        if mode == MatchMode::Regex {
            compound::check_data_regex(expr, delimiter)?;
        }
        let cache = PatternCache::default();
        return Ok(only(universe.select(|i, _| {
            universe.data_match(i, source, expr, delimiter, mode, &cache)
        })));
    }
    match tgt_type {
        "glob" => {
            let glob = fnmatch::Glob::new(tgt_str(tgt, tgt_type)?);
            Ok(only(universe.select(|_, id| glob.is_match(id))))
        }
        "pcre" => {
            let re = compile_id_regex(tgt_str(tgt, tgt_type)?)?;
            Ok(only(universe.select(|_, id| re.is_match(id))))
        }
        "list" => {
            let mut expected = Expected::default();
            let mut seen = HashSet::new();
            for entry in list_entries(tgt)? {
                if universe.contains(&entry) {
                    push_unique(&mut expected.minions, &mut seen, entry);
                } else {
                    push_unique(&mut expected.missing, &mut seen, entry);
                }
            }
            Ok(expected)
        }
        "ipcidr" => {
            let target = IpTarget::parse(tgt_str(tgt, tgt_type)?)?;
            Ok(only(universe.select(|i, _| {
                universe.grains(i).is_some_and(|g| target.matches_grains(g))
            })))
        }
        "compound" | "compound_pillar_exact" => {
            let side = Side::Master { nodegroups };
            let parsed = Compound::parse(tgt, &side, tgt_type == "compound_pillar_exact")?;
            Ok(master_compound(&parsed, &universe))
        }
        "nodegroup" => {
            let words = nodegroup_comp(tgt_str(tgt, tgt_type)?, nodegroups)?;
            let words = Value::Array(words.into_iter().map(Value::from).collect());
            let parsed = Compound::parse(&words, &Side::Master { nodegroups }, false)?;
            Ok(master_compound(&parsed, &universe))
        }
        other => Err(TargetError::UnknownTgtType(other.to_owned())),
    }
}

fn master_compound(parsed: &Compound, universe: &Universe) -> Expected {
    let cache = PatternCache::default();
    let mut missing = Vec::new();
    let mut seen = HashSet::new();
    for node in &parsed.leaves {
        if let (Leaf::List(list), false) = (&node.leaf, node.after_not) {
            for entry in list.split(',').filter(|s| !s.is_empty()) {
                if !universe.contains(entry) {
                    push_unique(&mut missing, &mut seen, entry.to_owned());
                }
            }
        }
    }
    let lists: Vec<Option<HashSet<&str>>> = parsed
        .leaves
        .iter()
        .map(|node| match &node.leaf {
            Leaf::List(list) => Some(list.split(',').collect()),
            _ => None,
        })
        .collect();
    let minions = universe.select(|i, id| {
        parsed.eval(&mut |node| match &node.leaf {
            Leaf::Glob(g) => g.is_match(id),
            Leaf::Pcre(re) => re.is_match(id),
            Leaf::List(_) => lists[node.index].as_ref().is_some_and(|l| l.contains(id)),
            Leaf::Data {
                source,
                expr,
                delimiter,
                mode,
            } => universe.data_match(i, *source, expr, delimiter, *mode, &cache),
            Leaf::Ip(target) => universe.grains(i).is_some_and(|g| target.matches_grains(g)),
        })
    });
    Expected { minions, missing }
}

/// What a client does before publishing (LocalClient `_prep_pub`): a `nodegroup` target
/// becomes a compound one, and `N@` words in a compound target are replaced by their
/// expansion. Other targets are returned unchanged. Returns the new (tgt, tgt_type).
pub fn resolve_nodegroups(
    tgt: &Value,
    tgt_type: &str,
    nodegroups: &BTreeMap<String, Value>,
) -> Result<(Value, String), TargetError> {
    let (words, tgt_type): (Vec<String>, &str) = match tgt_type {
        "nodegroup" => (
            nodegroup_comp(tgt_str(tgt, tgt_type)?, nodegroups)?,
            "compound",
        ),
        "compound" => {
            let words: Vec<String> = match tgt {
                Value::String(_) => pyvalue::py_str(tgt)
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect(),
                Value::Array(items) => items.iter().map(pyvalue::py_str).collect(),
                _ => {
                    return Err(TargetError::BadTarget {
                        tgt_type: tgt_type.into(),
                        expected: "a string or a list of strings",
                    })
                }
            };
            let mut out = Vec::with_capacity(words.len());
            for word in words {
                match word.strip_prefix("N@") {
                    Some(name) if !name.is_empty() => out.extend(nodegroup_comp(name, nodegroups)?),
                    _ => out.push(word),
                }
            }
            (out, "compound")
        }
        _ => return Ok((tgt.clone(), tgt_type.to_owned())),
    };
    Ok((Value::from(words.join(" ")), tgt_type.to_owned()))
}

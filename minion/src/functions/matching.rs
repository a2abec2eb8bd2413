//! The `match` execution module: does this minion (or another minion id) match a target?
//! Salt's `salt/modules/match.py` with the minion-side matchers of `salt/matchers`.
//!
//! Each target word is decided by the minion's own target matcher
//! ([`brine_protocol::target::matches`]); what Salt's module adds on top is reproduced here:
//!
//! * `compound` is Salt's compound matcher: every word is evaluated (`N@` words are expanded
//!   from the minion's `nodegroups` option, an unknown group is dropped), the results are
//!   joined with the operators and the text is evaluated as a Python expression. So a
//!   syntax error or an invalid `E@` regex matches nothing, an invalid `S@` address is `[]`,
//!   and `( )` is an empty tuple, as in Salt.
//! * the grain and pillar functions read this minion's data whatever `minion_id` says; the
//!   id functions (`glob`, `pcre`, `list`, `compound`) match `minion_id` when it is given.
//! * `filter_by`, `search_by` and `ifelse` call the module's own functions by name
//!   (`tgt_type`), with the target and, when it is truthy, `minion_id` as the second
//!   positional argument, as Salt's do (so `tgt_type=grain` takes it as the delimiter and
//!   `tgt_type=list` is a `KeyError`: the function is `list_`).
//! * `data` always answers False: Salt 3007's data matcher calls `data.getval`, which no
//!   longer exists.
//!
//! Salt 3007's module has no `nodegroup` function (`match.nodegroup` is "not available"
//! there too): the minion's nodegroups are reached through `N@` words of `compound`.

use std::collections::{BTreeMap, VecDeque};

use rmpv::Value;

use super::args::{hashable, py_repr, py_str, py_type_name, Bound, Signature};
use super::{CallState, Context, FnError, Spec};
use brine_protocol::dictupdate;
use brine_protocol::payload::{from_json, py_truthy};
use brine_protocol::pyeq::py_eq;
use brine_protocol::target::{matches, nodegroup_comp_lenient, MinionData};

super::spec_table! {
    /// The functions of the `match` module.
    Compound => ("match.compound", "compound", ["tgt", "minion_id"], 1, false, false, r#"
    Return True if the minion ID matches the given compound target

    minion_id
        Specify the minion ID to match against the target expression

        .. versionadded:: 2014.7.0

    CLI Example:

    .. code-block:: bash

        salt '*' match.compound 'L@cheese,foo and *'
    "#),
    Ipcidr => ("match.ipcidr", "ipcidr", ["tgt"], 1, false, false, r#"
    Return True if the minion matches the given ipcidr target

    CLI Example:

    .. code-block:: bash

        salt '*' match.ipcidr '192.168.44.0/24'

    delimiter
    Pillar Example:

    .. code-block:: yaml

       '172.16.0.0/12':
         - match: ipcidr
         - nodeclass: internal

    "#),
    PillarPcre => ("match.pillar_pcre", "pillar_pcre", ["tgt", "delimiter"], 1, false, false, r#"
    Return True if the minion matches the given pillar_pcre target. The
    ``delimiter`` argument can be used to specify a different delimiter.

    CLI Example:

    .. code-block:: bash

        salt '*' match.pillar_pcre 'cheese:(swiss|american)'
        salt '*' match.pillar_pcre 'clone_url|https://github\.com/.*\.git' delimiter='|'

    delimiter
        Specify an alternate delimiter to use when traversing a nested dict

        .. versionadded:: 2014.7.0

    delim
        Specify an alternate delimiter to use when traversing a nested dict

        .. versionadded:: 0.16.4
        .. deprecated:: 2015.8.0
    "#),
    Pillar => ("match.pillar", "pillar", ["tgt", "delimiter"], 1, false, false, r#"
    Return True if the minion matches the given pillar target. The
    ``delimiter`` argument can be used to specify a different delimiter.

    CLI Example:

    .. code-block:: bash

        salt '*' match.pillar 'cheese:foo'
        salt '*' match.pillar 'clone_url|https://github.com/saltstack/salt.git' delimiter='|'

    delimiter
        Specify an alternate delimiter to use when traversing a nested dict

        .. versionadded:: 2014.7.0

    delim
        Specify an alternate delimiter to use when traversing a nested dict

        .. versionadded:: 0.16.4
        .. deprecated:: 2015.8.0
    "#),
    Data => ("match.data", "data", ["tgt"], 1, false, false, r#"
    Return True if the minion matches the given data target

    CLI Example:

    .. code-block:: bash

        salt '*' match.data 'spam:eggs'
    "#),
    GrainPcre => ("match.grain_pcre", "grain_pcre", ["tgt", "delimiter"], 1, false, false, r#"
    Return True if the minion matches the given grain_pcre target. The
    ``delimiter`` argument can be used to specify a different delimiter.

    CLI Example:

    .. code-block:: bash

        salt '*' match.grain_pcre 'os:Fedo.*'
        salt '*' match.grain_pcre 'ipv6|2001:.*' delimiter='|'

    delimiter
        Specify an alternate delimiter to use when traversing a nested dict

        .. versionadded:: 2014.7.0

    delim
        Specify an alternate delimiter to use when traversing a nested dict

        .. versionadded:: 0.16.4
        .. deprecated:: 2015.8.0
    "#),
    Grain => ("match.grain", "grain", ["tgt", "delimiter"], 1, false, false, r#"
    Return True if the minion matches the given grain target. The ``delimiter``
    argument can be used to specify a different delimiter.

    CLI Example:

    .. code-block:: bash

        salt '*' match.grain 'os:Ubuntu'
        salt '*' match.grain 'ipv6|2001:db8::ff00:42:8329' delimiter='|'

    delimiter
        Specify an alternate delimiter to use when traversing a nested dict

        .. versionadded:: 2014.7.0

    delim
        Specify an alternate delimiter to use when traversing a nested dict

        .. versionadded:: 0.16.4
        .. deprecated:: 2015.8.0
    "#),
    List => ("match.list", "list_", ["tgt", "minion_id"], 1, false, false, r#"
    Return True if the minion ID matches the given list target

    minion_id
        Specify the minion ID to match against the target expression

        .. versionadded:: 2014.7.0

    CLI Example:

    .. code-block:: bash

        salt '*' match.list 'server1,server2'
    "#),
    Pcre => ("match.pcre", "pcre", ["tgt", "minion_id"], 1, false, false, r#"
    Return True if the minion ID matches the given pcre target

    minion_id
        Specify the minion ID to match against the target expression

        .. versionadded:: 2014.7.0

    CLI Example:

    .. code-block:: bash

        salt '*' match.pcre '.*'
    "#),
    Glob => ("match.glob", "glob", ["tgt", "minion_id"], 1, false, false, r#"
    Return True if the minion ID matches the given glob target

    minion_id
        Specify the minion ID to match against the target expression

        .. versionadded:: 2014.7.0

    CLI Example:

    .. code-block:: bash

        salt '*' match.glob '*'
    "#),
    FilterBy => ("match.filter_by", "filter_by", ["lookup", "tgt_type", "minion_id", "merge", "merge_lists", "default"], 1, false, false, r#"
    Return the first match in a dictionary of target patterns

    .. versionadded:: 2014.7.0

    CLI Example:

    .. code-block:: bash

        salt '*' match.filter_by '{foo*: Foo!, bar*: Bar!}' minion_id=bar03

    Pillar Example:

    .. code-block:: jinja

        # Filter the data for the current minion into a variable:
        {% set roles = salt['match.filter_by']({
            'web*': ['app', 'caching'],
            'db*': ['db'],
        }, minion_id=grains['id'], default='web*') %}

        # Make the filtered data available to Pillar:
        roles: {{ roles | yaml() }}
    "#),
    SearchBy => ("match.search_by", "search_by", ["lookup", "tgt_type", "minion_id"], 1, false, false, r#"
    Search a dictionary of target strings for matching targets

    This is the inverse of :py:func:`match.filter_by
    <salt.modules.match.filter_by>` and allows matching values instead of
    matching keys. A minion can be matched by multiple entries.

    .. versionadded:: 2017.7.0

    CLI Example:

    .. code-block:: bash

        salt '*' match.search_by '{web: [node1, node2], db: [node2, node]}'

    Pillar Example:

    .. code-block:: jinja

        {% set roles = salt['match.search_by']({
            'web': ['G@os_family:Debian not nodeX'],
            'db': ['L@node2,node3 and G@datacenter:west'],
            'caching': ['node3', 'node4'],
        }) %}

        # Make the filtered data available to Pillar:
        roles: {{ roles | yaml() }}
    "#),
    Ifelse => ("match.ifelse", "ifelse", [], 0, true, true, r#"
    .. versionadded:: 3006.0

    Evaluate each pair of arguments up to the last one as a (matcher, value)
    tuple, returning ``value`` if matched.  If none match, returns the last
    argument.

    The ``ifelse`` function is like a multi-level if-else statement. It was
    inspired by CFEngine's ``ifelse`` function which in turn was inspired by
    Oracle's ``DECODE`` function. It must have an odd number of arguments (from
    1 to N). The last argument is the default value, like the ``else`` clause in
    standard programming languages. Every pair of arguments before the last one
    are evaluated as a pair. If the first one evaluates true then the second one
    is returned, as if you had used the first one in a compound match
    expression. Boolean values can also be used as the first item in a pair,
    as it will be translated to a match that will always match ("*") or never
    match ("SALT_IFELSE_MATCH_NOTHING") a target system.

    This is essentially another way to express the ``filter_by`` functionality
    in way that's familiar to CFEngine or Oracle users. Consider using
    ``filter_by`` unless this function fits your workflow.

    CLI Example:

    .. code-block:: bash

        salt '*' match.ifelse 'foo*' 'Foo!' 'bar*' 'Bar!' minion_id=bar03
    "#),
}

/// Salt's default target delimiter.
const DEFAULT_DELIMITER: &str = ":";
/// The key `ifelse` gives its default value in the lookup it hands to `filter_by`.
const IFELSE_DEFAULT: &str = "SALT_IFELSE_FUNCTION_DEFAULT";
/// What `ifelse` puts for a `False` condition: a target nothing matches.
const IFELSE_NOTHING: &str = "SALT_IFELSE_MATCH_NOTHING";
/// The keyword-only parameters of `ifelse`.
const IFELSE_KWARGS: [&str; 4] = ["tgt_type", "minion_id", "merge", "merge_lists"];
/// The functions of Salt's module by their Python names: what `tgt_type` may name.
const PY_FUNCTIONS: [&str; 14] = [
    "_load_matchers",
    "compound",
    "data",
    "filter_by",
    "glob",
    "grain",
    "grain_pcre",
    "ifelse",
    "ipcidr",
    "list_",
    "pcre",
    "pillar",
    "pillar_pcre",
    "search_by",
];
/// How deep `filter_by` may call itself through `tgt_type` (it cannot go far: the inner
/// calls get no `minion_id`).
const MAX_NESTING: usize = 16;

impl Fun {
    pub(crate) async fn run(
        self,
        ctx: &Context,
        b: &Bound,
        _st: &mut CallState,
    ) -> Result<Value, FnError> {
        let m = Matcher::new(ctx);
        let nil = Value::Nil;
        let tgt = b.get("tgt").unwrap_or(&nil);
        let minion_id = b.get("minion_id").unwrap_or(&nil);
        let default_delimiter = Value::from(DEFAULT_DELIMITER);
        let delimiter = b.get("delimiter").unwrap_or(&default_delimiter);
        let compound = Value::from("compound");
        let tgt_type = b.get("tgt_type").unwrap_or(&compound);
        Ok(match self {
            Fun::Compound => m.compound(tgt, minion_id).into(),
            Fun::Ipcidr => m.ipcidr(tgt).into(),
            Fun::PillarPcre => m.subdict("pillar_pcre", tgt, delimiter).into(),
            Fun::Pillar => m.subdict("pillar", tgt, delimiter).into(),
            Fun::Data => false.into(),
            Fun::GrainPcre => m.subdict("grain_pcre", tgt, delimiter).into(),
            Fun::Grain => m.subdict("grain", tgt, delimiter).into(),
            Fun::List => m.list(tgt, minion_id).into(),
            Fun::Pcre => m.pcre(tgt, minion_id).into(),
            Fun::Glob => m.glob(tgt, minion_id).into(),
            Fun::FilterBy => {
                let default = Value::from("default");
                let opts = FilterBy {
                    tgt_type,
                    minion_id,
                    merge: b.get("merge").unwrap_or(&nil),
                    merge_lists: b.get("merge_lists").is_some_and(py_truthy),
                    default: b.get("default").unwrap_or(&default),
                };
                m.filter_by(b.get("lookup").unwrap_or(&nil), &opts, 0)?
            }
            Fun::SearchBy => {
                m.search_by(b.get("lookup").unwrap_or(&nil), tgt_type, minion_id, 0)?
            }
            Fun::Ifelse => {
                ifelse_kwargs_valid(b)?;
                let tgt_type = b.kwarg("tgt_type").unwrap_or(&compound);
                let opts = FilterBy {
                    tgt_type,
                    minion_id: b.kwarg("minion_id").unwrap_or(&nil),
                    merge: b.kwarg("merge").unwrap_or(&nil),
                    merge_lists: b.kwarg("merge_lists").is_some_and(py_truthy),
                    default: &nil,
                };
                m.ifelse(&b.varargs, &opts, 0)?
            }
        })
    }
}

/// `ifelse` has keyword-only parameters and no `**kwargs`: any other keyword is refused, by
/// the argument parsing of a command line or a publish (whose calls carry `__pub_` keywords)
/// with its SaltInvocationError, by Python's call otherwise.
fn ifelse_kwargs_valid(b: &Bound) -> Result<(), FnError> {
    let published = b.kwargs.iter().any(|(k, _)| k.starts_with("__pub_"));
    let invalid: Vec<&(String, Value)> = b
        .kwargs
        .iter()
        .filter(|(k, _)| !k.starts_with("__pub_") && !IFELSE_KWARGS.contains(&k.as_str()))
        .collect();
    let Some((first, _)) = invalid.first() else {
        return Ok(());
    };
    if published {
        let listed: Vec<String> = invalid
            .iter()
            .map(|(k, v)| format!("{k}={}", py_str(v)))
            .collect();
        return Err(FnError::Invocation(format!(
            "The following keyword arguments are not valid: {}",
            listed.join(", ")
        )));
    }
    Err(FnError::InvalidArgs(format!(
        "ifelse() got an unexpected keyword argument '{first}'"
    )))
}

/// A Python value a compound target evaluates to: Salt joins the words' results (`True`,
/// `False`, and `[]` for an invalid `S@` address) with the operators and `eval`s the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PyVal {
    Bool(bool),
    /// `[]`.
    EmptyList,
    /// `()`, from an empty pair of parentheses.
    EmptyTuple,
}

impl PyVal {
    fn truthy(self) -> bool {
        self == PyVal::Bool(true)
    }
}

impl From<PyVal> for Value {
    fn from(v: PyVal) -> Value {
        match v {
            PyVal::Bool(b) => Value::Boolean(b),
            PyVal::EmptyList | PyVal::EmptyTuple => Value::Array(Vec::new()),
        }
    }
}

/// `filter_by`'s parameters besides the lookup.
struct FilterBy<'a> {
    tgt_type: &'a Value,
    minion_id: &'a Value,
    merge: &'a Value,
    merge_lists: bool,
    default: &'a Value,
}

/// What the functions match against: this minion's id, grains, pillar and nodegroups.
struct Matcher<'a> {
    id: &'a str,
    grains: &'a Value,
    pillar: &'a Value,
    /// The minion's `nodegroups` option (empty unless it is a mapping).
    nodegroups: BTreeMap<String, Value>,
}

impl<'a> Matcher<'a> {
    fn new(ctx: &'a Context) -> Self {
        let nodegroups = match ctx.services.opts.get("nodegroups") {
            Some(serde_json::Value::Object(groups)) => groups
                .iter()
                .map(|(name, def)| (name.clone(), from_json(def)))
                .collect(),
            _ => BTreeMap::new(),
        };
        Matcher {
            id: &ctx.id,
            grains: &ctx.grains,
            pillar: &ctx.pillar,
            nodegroups,
        }
    }

    fn me<'s>(&'s self, id: &'s str) -> MinionData<'s> {
        MinionData {
            id,
            grains: Some(self.grains),
            pillar: Some(self.pillar),
        }
    }

    /// The id to match: `str(minion_id)` when it is given and not empty, else this minion's.
    fn id_for(&self, minion_id: &Value) -> String {
        match minion_id {
            Value::Nil => self.id.to_owned(),
            other => {
                let id = py_str(other);
                if id.is_empty() {
                    self.id.to_owned()
                } else {
                    id
                }
            }
        }
    }

    fn glob(&self, tgt: &Value, minion_id: &Value) -> bool {
        tgt.is_str()
            && matches(
                tgt,
                "glob",
                DEFAULT_DELIMITER,
                &self.me(&self.id_for(minion_id)),
            )
            .unwrap_or(false)
    }

    /// `re.match(tgt, id)`; an invalid regex matches nothing.
    fn pcre(&self, tgt: &Value, minion_id: &Value) -> bool {
        tgt.is_str()
            && matches(
                tgt,
                "pcre",
                DEFAULT_DELIMITER,
                &self.me(&self.id_for(minion_id)),
            )
            .unwrap_or(false)
    }

    /// Salt's list matcher: a comma-separated string, else Python's `in` on the target (a
    /// list's items, a dict's keys), tried with `,<id>,` and with the id.
    fn list(&self, tgt: &Value, minion_id: &Value) -> bool {
        let id = self.id_for(minion_id);
        let wrapped = format!(",{id},");
        let hit = |v: &Value| v.as_str().is_some_and(|s| s == wrapped || s == id);
        match tgt {
            Value::String(_) => {
                matches(tgt, "list", DEFAULT_DELIMITER, &self.me(&id)).unwrap_or(false)
            }
            Value::Array(items) => items.iter().any(hit),
            Value::Map(pairs) => pairs.iter().any(|(k, _)| hit(k)),
            _ => false,
        }
    }

    /// The grain and pillar matchers (`kind` is the target type): the target must be a string
    /// holding the delimiter.
    fn subdict(&self, kind: &str, tgt: &Value, delimiter: &Value) -> bool {
        match (tgt.is_str(), delimiter.as_str()) {
            (true, Some(delimiter)) => {
                matches(tgt, kind, delimiter, &self.me(self.id)).unwrap_or(false)
            }
            _ => false,
        }
    }

    /// Salt's ipcidr matcher: an address (an integer is one, as for Python's `ipaddress`) or
    /// a network against the `ipv4`/`ipv6` grains; `[]` for a target that is neither.
    fn ipcidr(&self, tgt: &Value) -> PyVal {
        let text = match tgt {
            Value::String(s) => match s.as_str() {
                Some(s) => s.to_owned(),
                None => return PyVal::EmptyList,
            },
            Value::Boolean(b) => std::net::Ipv4Addr::from(u32::from(*b)).to_string(),
            Value::Integer(i) => match i.as_u64() {
                Some(n) => match u32::try_from(n) {
                    Ok(v4) => std::net::Ipv4Addr::from(v4).to_string(),
                    Err(_) => std::net::Ipv6Addr::from(u128::from(n)).to_string(),
                },
                None => return PyVal::EmptyList,
            },
            _ => return PyVal::EmptyList,
        };
        match matches(
            &Value::from(text),
            "ipcidr",
            DEFAULT_DELIMITER,
            &self.me(self.id),
        ) {
            Ok(hit) => PyVal::Bool(hit),
            Err(_) => PyVal::EmptyList,
        }
    }

    /// `match.compound`: False for anything Salt's compound matcher fails on.
    fn compound(&self, tgt: &Value, minion_id: &Value) -> PyVal {
        let id = self.id_for(minion_id);
        self.compound_eval(tgt, &id).unwrap_or(PyVal::Bool(false))
    }

    /// Salt's compound matcher: `None` where it logs an error or raises.
    fn compound_eval(&self, tgt: &Value, id: &str) -> Option<PyVal> {
        let mut words: VecDeque<Value> = match tgt {
            Value::String(_) => py_split(tgt.as_str()?)
                .into_iter()
                .map(Value::from)
                .collect(),
            Value::Array(items) => items.iter().cloned().collect(),
            _ => return None,
        };
        let me = self.me(id);
        let mut results: Vec<Tok> = Vec::new();
        while let Some(word) = words.pop_front() {
            // Salt's parse_target raises on anything but a string.
            let word = word.as_str()?.to_owned();
            if let Some(op) = Tok::operator(&word) {
                match results.last() {
                    Some(last) => {
                        if *last == Tok::Open && matches!(op, Tok::And | Tok::Or) {
                            return None;
                        }
                        if op == Tok::Not && !matches!(last, Tok::And | Tok::Or | Tok::Open) {
                            results.push(Tok::And);
                        }
                    }
                    None if !matches!(op, Tok::Open | Tok::Not) => return None,
                    None => {}
                }
                results.push(op);
                continue;
            }
            let value = match parse_target(&word) {
                None => PyVal::Bool(
                    matches(&Value::from(word.as_str()), "glob", DEFAULT_DELIMITER, &me)
                        .unwrap_or(false),
                ),
                Some(('N', _, group)) => {
                    let expanded = nodegroup_comp_lenient(group, &self.nodegroups);
                    for w in expanded.into_iter().rev() {
                        words.push_front(Value::from(w));
                    }
                    continue;
                }
                Some(('S', _, pattern)) => self.ipcidr(&Value::from(pattern)),
                Some((engine, delimiter, pattern)) => {
                    let kind = match engine {
                        'G' => "grain",
                        'P' => "grain_pcre",
                        'I' => "pillar",
                        'J' => "pillar_pcre",
                        'L' => "list",
                        'E' => "pcre",
                        // R@ (range): Salt has no range matcher without `seco.range`.
                        _ => return None,
                    };
                    let delimiter =
                        delimiter.map_or_else(|| DEFAULT_DELIMITER.to_owned(), String::from);
                    match matches(&Value::from(pattern), kind, &delimiter, &me) {
                        Ok(hit) => PyVal::Bool(hit),
                        // Salt's pcre matcher raises on a bad regex: the whole target fails.
                        Err(_) if engine == 'E' => return None,
                        // The grain and pillar matchers log it and do not match.
                        Err(_) => PyVal::Bool(false),
                    }
                }
            };
            results.push(Tok::Val(value));
        }
        py_eval(&results)
    }

    /// `expr_funcs[tgt_type](*params)`: the module's function named `tgt_type`, called with
    /// one or two positional arguments.
    fn call_by_name(
        &self,
        tgt_type: &Value,
        params: &[Value],
        depth: usize,
    ) -> Result<Value, FnError> {
        let name = tgt_type
            .as_str()
            .filter(|n| PY_FUNCTIONS.contains(n))
            .ok_or_else(|| FnError::Exception(format!("KeyError: {}", py_repr(tgt_type))))?;
        if depth > MAX_NESTING {
            return Err(FnError::Exception(
                "RecursionError: maximum recursion depth exceeded".into(),
            ));
        }
        let nil = Value::Nil;
        let first = &params[0];
        let second = params.get(1);
        let given = params.len();
        let one_only = |name: &str| {
            if given > 1 {
                Err(FnError::InvalidArgs(format!(
                    "{name}() takes 1 positional argument but {given} were given"
                )))
            } else {
                Ok(())
            }
        };
        let default_delimiter = Value::from(DEFAULT_DELIMITER);
        let compound = Value::from("compound");
        Ok(match name {
            "compound" => self.compound(first, second.unwrap_or(&nil)).into(),
            "glob" => self.glob(first, second.unwrap_or(&nil)).into(),
            "pcre" => self.pcre(first, second.unwrap_or(&nil)).into(),
            "list_" => self.list(first, second.unwrap_or(&nil)).into(),
            "grain" | "grain_pcre" | "pillar" | "pillar_pcre" => self
                .subdict(name, first, second.unwrap_or(&default_delimiter))
                .into(),
            "ipcidr" => {
                one_only(name)?;
                self.ipcidr(first).into()
            }
            "data" => {
                one_only(name)?;
                false.into()
            }
            "filter_by" => {
                let default = Value::from("default");
                let opts = FilterBy {
                    tgt_type: second.unwrap_or(&compound),
                    minion_id: &nil,
                    merge: &nil,
                    merge_lists: false,
                    default: &default,
                };
                self.filter_by(first, &opts, depth + 1)?
            }
            "search_by" => self.search_by(first, second.unwrap_or(&compound), &nil, depth + 1)?,
            "ifelse" => {
                let opts = FilterBy {
                    tgt_type: &compound,
                    minion_id: &nil,
                    merge: &nil,
                    merge_lists: false,
                    default: &nil,
                };
                self.ifelse(params, &opts, depth + 1)?
            }
            _ => {
                let verb = if given == 1 { "was" } else { "were" };
                return Err(FnError::InvalidArgs(format!(
                    "{name}() takes 0 positional arguments but {given} {verb} given"
                )));
            }
        })
    }

    /// Does `target` match as a `tgt_type` target (with `minion_id` when it is truthy)?
    fn target_matches(
        &self,
        target: &Value,
        tgt_type: &Value,
        minion_id: &Value,
        depth: usize,
    ) -> Result<bool, FnError> {
        let params = if py_truthy(minion_id) {
            vec![target.clone(), minion_id.clone()]
        } else {
            vec![target.clone()]
        };
        Ok(py_truthy(&self.call_by_name(tgt_type, &params, depth)?))
    }

    /// `filter_by`: the value of the first key of `lookup` that matches, merged with
    /// `merge`; else the value of the `default` key.
    fn filter_by(&self, lookup: &Value, o: &FilterBy, depth: usize) -> Result<Value, FnError> {
        for key in py_iter(lookup)? {
            if !self.target_matches(&key, o.tgt_type, o.minion_id, depth)? {
                continue;
            }
            if py_truthy(o.merge) {
                let Value::Map(merge) = o.merge else {
                    return Err(FnError::Exception(
                        "salt.exceptions.SaltException: filter_by merge argument must be a dictionary."
                            .into(),
                    ));
                };
                return match py_index(lookup, &key)? {
                    Value::Nil => Ok(o.merge.clone()),
                    Value::Map(mut dest) => {
                        dictupdate::update(&mut dest, merge, o.merge_lists);
                        Ok(Value::Map(dest))
                    }
                    _ => Err(FnError::InvalidArgs(dictupdate::NotDicts.to_string())),
                };
            }
            return py_index(lookup, &key);
        }
        match lookup {
            Value::Map(pairs) => {
                hashable(o.default)?;
                Ok(pairs
                    .iter()
                    .find(|(k, _)| py_eq(k, o.default))
                    .map_or(Value::Nil, |(_, v)| v.clone()))
            }
            other => Err(FnError::Exception(format!(
                "AttributeError: '{}' object has no attribute 'get'",
                py_type_name(other)
            ))),
        }
    }

    /// `search_by`: the keys of `lookup` once for each of their targets that matches; None
    /// when none does.
    fn search_by(
        &self,
        lookup: &Value,
        tgt_type: &Value,
        minion_id: &Value,
        depth: usize,
    ) -> Result<Value, FnError> {
        let Value::Map(pairs) = lookup else {
            return Err(FnError::Exception(format!(
                "AttributeError: '{}' object has no attribute 'items'",
                py_type_name(lookup)
            )));
        };
        let mut found = Vec::new();
        for (key, targets) in pairs {
            for target in py_iter(targets)? {
                if self.target_matches(&target, tgt_type, minion_id, depth)? {
                    found.push(key.clone());
                }
            }
        }
        Ok(if found.is_empty() {
            Value::Nil
        } else {
            Value::Array(found)
        })
    }

    /// `ifelse`: (target, value) pairs then a default, looked up with `filter_by`.
    fn ifelse(&self, args: &[Value], o: &FilterBy, depth: usize) -> Result<Value, FnError> {
        if args.len().is_multiple_of(2) {
            return Err(FnError::Exception(
                "salt.exceptions.SaltException: The ifelse function must have an odd number of arguments!"
                    .into(),
            ));
        }
        let (last, pairs) = args.split_last().expect("an odd number of arguments");
        if pairs.is_empty() {
            return Ok(last.clone());
        }
        let mut lookup: Vec<(Value, Value)> = Vec::new();
        for pair in pairs.chunks_exact(2) {
            let key = match &pair[0] {
                Value::Boolean(true) => Value::from("*"),
                Value::Boolean(false) => Value::from(IFELSE_NOTHING),
                other => other.clone(),
            };
            hashable(&key)?;
            py_dict_set(&mut lookup, key, pair[1].clone());
        }
        py_dict_set(&mut lookup, Value::from(IFELSE_DEFAULT), last.clone());
        let default = Value::from(IFELSE_DEFAULT);
        let opts = FilterBy {
            default: &default,
            ..*o
        };
        self.filter_by(&Value::Map(lookup), &opts, depth)
    }
}

/// `d[key] = value`: an equal key keeps its place.
fn py_dict_set(d: &mut Vec<(Value, Value)>, key: Value, value: Value) {
    match d.iter_mut().find(|(k, _)| py_eq(k, &key)) {
        Some(slot) => slot.1 = value,
        None => d.push((key, value)),
    }
}


/// `for item in v`: a dict's keys, a string's characters, a list's items.
fn py_iter(v: &Value) -> Result<Vec<Value>, FnError> {
    match v {
        Value::Map(pairs) => Ok(pairs.iter().map(|(k, _)| k.clone()).collect()),
        Value::Array(items) => Ok(items.clone()),
        Value::String(s) => Ok(match s.as_str() {
            Some(text) => text.chars().map(|c| Value::from(c.to_string())).collect(),
            None => s.as_bytes().iter().map(|b| Value::from(*b)).collect(),
        }),
        Value::Binary(bytes) => Ok(bytes.iter().map(|b| Value::from(*b)).collect()),
        other => Err(FnError::InvalidArgs(format!(
            "'{}' object is not iterable",
            py_type_name(other)
        ))),
    }
}

/// `container[key]`, with Python's errors.
fn py_index(container: &Value, key: &Value) -> Result<Value, FnError> {
    match container {
        Value::Map(pairs) => pairs
            .iter()
            .find(|(k, _)| py_eq(k, key))
            .map(|(_, v)| v.clone())
            .ok_or_else(|| FnError::Exception(format!("KeyError: {}", py_repr(key)))),
        Value::Array(items) => {
            let index = match key {
                Value::Boolean(b) => i64::from(*b),
                Value::Integer(i) => i.as_i64().unwrap_or(i64::MAX),
                other => {
                    return Err(FnError::InvalidArgs(format!(
                        "list indices must be integers or slices, not {}",
                        py_type_name(other)
                    )))
                }
            };
            let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
            let at = if index < 0 { index + len } else { index };
            usize::try_from(at)
                .ok()
                .and_then(|at| items.get(at))
                .cloned()
                .ok_or_else(|| FnError::Exception("IndexError: list index out of range".into()))
        }
        Value::String(_) => Err(FnError::InvalidArgs(format!(
            "string indices must be integers, not '{}'",
            py_type_name(key)
        ))),
        other => Err(FnError::InvalidArgs(format!(
            "'{}' object is not subscriptable",
            py_type_name(other)
        ))),
    }
}

use brine_protocol::pystr::split as py_split;

/// Salt's `parse_target` (its `TARGET_REX`): the engine letter, the delimiter (G, P, I and J
/// only) and the pattern of an `X@pattern` word; `None` for a bare word.
fn parse_target(word: &str) -> Option<(char, Option<char>, &str)> {
    // The pattern (`.+$`) runs to the end, or to a final newline, with no line break in it.
    let line = word.strip_suffix('\n').unwrap_or(word);
    if line.contains('\n') {
        return None;
    }
    let mut chars = line.char_indices();
    let (_, engine) = chars.next()?;
    if !"GPIJLNSER".contains(engine) {
        return None;
    }
    let rest: Vec<(usize, char)> = chars.collect();
    if "GPIJ".contains(engine) && rest.len() >= 3 && rest[1].1 == '@' {
        return Some((engine, Some(rest[0].1), &line[rest[2].0..]));
    }
    if rest.len() >= 2 && rest[0].1 == '@' {
        return Some((engine, None, &line[rest[1].0..]));
    }
    None
}


/// A word of the text Salt's compound matcher evaluates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    Val(PyVal),
    And,
    Or,
    Not,
    Open,
    Close,
}

impl Tok {
    fn operator(word: &str) -> Option<Tok> {
        Some(match word {
            "and" => Tok::And,
            "or" => Tok::Or,
            "not" => Tok::Not,
            "(" => Tok::Open,
            ")" => Tok::Close,
            _ => return None,
        })
    }
}

/// A parsed Python expression over the compound words.
#[derive(Debug)]
enum Expr {
    Val(PyVal),
    Not(Box<Expr>),
    And(Vec<Expr>),
    Or(Vec<Expr>),
    /// `x ( ... )`: calling a value, a TypeError when it is evaluated.
    Call,
}

/// Deepest nesting Python's parser accepts.
const MAX_PARENS: usize = 200;

/// Python's `eval` of the words: `None` for a syntax error or an exception.
fn py_eval(toks: &[Tok]) -> Option<PyVal> {
    let mut parser = PyParser {
        toks,
        pos: 0,
        depth: 0,
    };
    let expr = parser.or_test()?;
    if parser.pos != toks.len() {
        return None;
    }
    eval(&expr)
}

fn eval(expr: &Expr) -> Option<PyVal> {
    match expr {
        Expr::Val(v) => Some(*v),
        Expr::Not(inner) => Some(PyVal::Bool(!eval(inner)?.truthy())),
        Expr::And(items) => {
            let mut last = PyVal::Bool(true);
            for item in items {
                last = eval(item)?;
                if !last.truthy() {
                    break;
                }
            }
            Some(last)
        }
        Expr::Or(items) => {
            let mut last = PyVal::Bool(false);
            for item in items {
                last = eval(item)?;
                if last.truthy() {
                    break;
                }
            }
            Some(last)
        }
        Expr::Call => None,
    }
}

struct PyParser<'t> {
    toks: &'t [Tok],
    pos: usize,
    depth: usize,
}

impl PyParser<'_> {
    fn peek(&self) -> Option<Tok> {
        self.toks.get(self.pos).copied()
    }

    fn eat(&mut self, tok: Tok) -> bool {
        let found = self.peek() == Some(tok);
        if found {
            self.pos += 1;
        }
        found
    }

    fn or_test(&mut self) -> Option<Expr> {
        let mut items = vec![self.and_test()?];
        while self.eat(Tok::Or) {
            items.push(self.and_test()?);
        }
        Some(if items.len() == 1 {
            items.pop()?
        } else {
            Expr::Or(items)
        })
    }

    fn and_test(&mut self) -> Option<Expr> {
        let mut items = vec![self.not_test()?];
        while self.eat(Tok::And) {
            items.push(self.not_test()?);
        }
        Some(if items.len() == 1 {
            items.pop()?
        } else {
            Expr::And(items)
        })
    }

    fn not_test(&mut self) -> Option<Expr> {
        if self.eat(Tok::Not) {
            self.nest()?;
            let inner = self.not_test()?;
            self.depth -= 1;
            return Some(Expr::Not(Box::new(inner)));
        }
        self.primary()
    }

    fn nest(&mut self) -> Option<()> {
        self.depth += 1;
        (self.depth <= MAX_PARENS).then_some(())
    }

    /// An atom, then any calls on it.
    fn primary(&mut self) -> Option<Expr> {
        let mut expr = match self.peek()? {
            Tok::Val(v) => {
                self.pos += 1;
                Expr::Val(v)
            }
            Tok::Open => {
                self.pos += 1;
                self.parenthesized()?
                    .unwrap_or(Expr::Val(PyVal::EmptyTuple))
            }
            _ => return None,
        };
        while self.eat(Tok::Open) {
            self.parenthesized()?;
            expr = Expr::Call;
        }
        Some(expr)
    }

    /// After a `(`: the expression inside (`None` inside for `()`) and the `)`.
    fn parenthesized(&mut self) -> Option<Option<Expr>> {
        if self.eat(Tok::Close) {
            return Some(None);
        }
        self.nest()?;
        let inner = self.or_test()?;
        self.depth -= 1;
        self.eat(Tok::Close).then_some(Some(inner))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::testutil::*;
    use super::super::{call, Services};
    use super::*;
    use serde_json::json;

    /// `web01`: role web, addresses in 10.1.2.0/24 and fe80::/10, an `app` pillar, and
    /// nodegroups.
    fn minion() -> Context {
        let mut services = Services::detached();
        services.opts = json!({
            "id": "web01",
            "nodegroups": {
                "webs": "web*",
                "listed": ["web01", "db01"],
                "nested": "N@webs and G@role:web",
                "broken": "N@nope or db*",
            },
        })
        .as_object()
        .cloned()
        .unwrap();
        let mut c = ctx();
        c.id = "web01".into();
        c.grains = Arc::new(from_json(&json!({
            "id": "web01",
            "role": "web",
            "roles": ["app", "cache"],
            "deep": {"a": {"b": "c"}},
            "ipv4": ["10.1.2.3", "127.0.0.1"],
            "ipv6": ["::1", "fe80::1"],
        })));
        c.pillar = Arc::new(from_json(&json!({
            "app": {"name": "shop", "port": 8080, "users": ["ann", "bob"]},
            "env": "prod",
        })));
        c.services = Arc::new(services);
        c
    }

    fn j(v: serde_json::Value) -> Value {
        from_json(&v)
    }

    async fn run(fun: &str, args: &[Value]) -> Value {
        call(&minion(), fun, args).await.ret
    }

    async fn yes(fun: &str, args: &[Value]) -> bool {
        match run(fun, args).await {
            Value::Boolean(b) => b,
            other => panic!("{fun} {args:?}: {other:?}"),
        }
    }

    async fn c(tgt: &str) -> Value {
        run("match.compound", &[s(tgt)]).await
    }

    fn id(minion_id: &str) -> Value {
        kw(&[("minion_id", s(minion_id))])
    }

    #[tokio::test]
    async fn id_matchers_use_minion_id_when_given() {
        assert!(yes("match.glob", &[s("web*")]).await);
        assert!(!yes("match.glob", &[s("db*")]).await);
        assert!(yes("match.glob", &[s("db*"), id("db01")]).await);
        assert!(!yes("match.glob", &[s("web*"), id("db01")]).await);
        // An empty id is this minion's; a non-string one is its str().
        assert!(yes("match.glob", &[s("web*"), id("")]).await);
        assert!(
            yes(
                "match.glob",
                &[s("5"), kw(&[("minion_id", Value::from(5))])]
            )
            .await
        );
        assert!(!yes("match.glob", &[Value::from(5)]).await);

        assert!(yes("match.pcre", &[s(r"web\d+")]).await);
        assert!(
            !yes("match.pcre", &[s("eb01")]).await,
            "anchored at the start"
        );
        assert!(yes("match.pcre", &[s("^db"), id("db01")]).await);
        assert!(!yes("match.pcre", &[s("[")]).await, "an invalid regex");

        assert!(yes("match.list", &[s("db01,web01")]).await);
        assert!(yes("match.list", &[s("web01")]).await);
        assert!(!yes("match.list", &[s("web01"), id("db01")]).await);
        assert!(yes("match.list", &[j(json!(["db", "web01"]))]).await);
        assert!(yes("match.list", &[j(json!([",web01,"]))]).await);
        assert!(yes("match.list", &[j(json!({"web01": 1}))]).await);
        assert!(!yes("match.list", &[Value::from(5)]).await);
    }

    #[tokio::test]
    async fn grain_and_pillar_matchers_read_this_minions_data() {
        assert!(yes("match.grain", &[s("role:web")]).await);
        assert!(yes("match.grain", &[s("role:w*")]).await);
        assert!(yes("match.grain", &[s("roles:cache")]).await);
        assert!(yes("match.grain", &[s("deep:a:b:c")]).await);
        assert!(!yes("match.grain", &[s("role:db")]).await);
        assert!(!yes("match.grain", &[s("role")]).await, "no delimiter");
        let pipe = kw(&[("delimiter", s("|"))]);
        assert!(yes("match.grain", &[s("deep|a|b|c"), pipe.clone()]).await);
        assert!(!yes("match.grain", &[s("role:web"), kw(&[("delimiter", s(""))])]).await);
        assert!(
            !yes(
                "match.grain",
                &[s("role:web"), kw(&[("delimiter", Value::from(5))])]
            )
            .await
        );
        assert!(!yes("match.grain", &[j(json!(["role:web"]))]).await);
        assert!(yes("match.grain_pcre", &[s("role:w.b")]).await);
        assert!(!yes("match.grain_pcre", &[s("role:[")]).await);
        assert!(yes("match.pillar", &[s("app:name:shop")]).await);
        assert!(yes("match.pillar", &[s("app:users:bob")]).await);
        assert!(yes("match.pillar", &[s("env|prod"), pipe]).await);
        assert!(!yes("match.pillar", &[s("env:dev")]).await);
        assert!(yes("match.pillar_pcre", &[s("app:port:80[0-9]+")]).await);
        assert!(!yes("match.pillar_pcre", &[s("app:name:x.*")]).await);
        // Salt's data matcher calls `data.getval`, which Salt 3007 no longer has.
        assert!(!yes("match.data", &[s("a:b")]).await);
    }

    #[tokio::test]
    async fn ipcidr_matches_the_address_grains() {
        assert!(yes("match.ipcidr", &[s("10.0.0.0/8")]).await);
        assert!(yes("match.ipcidr", &[s("10.1.2.3")]).await);
        assert!(yes("match.ipcidr", &[s("fe80::/10")]).await);
        assert!(!yes("match.ipcidr", &[s("10.1.2.4")]).await);
        assert!(!yes("match.ipcidr", &[s("192.168.0.0/16")]).await);
        // An integer is an address, as for Python's ipaddress: 167838211 is 10.1.2.3.
        assert!(yes("match.ipcidr", &[Value::from(167_838_211)]).await);
        // Neither an address nor a network: Salt's matcher returns [].
        let empty = Value::Array(vec![]);
        assert_eq!(run("match.ipcidr", &[s("bad")]).await, empty);
        assert_eq!(run("match.ipcidr", &[s("10.0.0.1/8")]).await, empty);
        assert_eq!(run("match.ipcidr", &[Value::from(-1)]).await, empty);
    }

    #[tokio::test]
    async fn compound_is_salts_evaluation_of_the_words() {
        let t = Value::Boolean(true);
        let f = Value::Boolean(false);
        let empty = Value::Array(vec![]);
        assert_eq!(c("web* and G@role:web").await, t);
        assert_eq!(c("web* and not G@role:web").await, f);
        assert_eq!(
            c("web01 not db01").await,
            t,
            "'not' after a word is 'and not'"
        );
        assert_eq!(c("G@role:db or I@env:prod").await, t);
        assert_eq!(c("L@db01,web01 and E@web\\d+").await, t);
        assert_eq!(
            c("S@10.0.0.0/8 and P@role:w.b and J@app:port:80..").await,
            t
        );
        assert_eq!(c("G|@deep|a|b|c").await, t);
        assert_eq!(c("( web01 or db ) and not G@role:db").await, t);
        assert_eq!(
            c("web01 and ( db01 or ( G@role:web and not L@x ) )").await,
            t
        );
        // Parentheses must stand alone: "(web01" is a glob.
        assert_eq!(c("(web01 or db)").await, f);
        // An invalid S@ word is [], which the expression carries.
        assert_eq!(c("S@bad").await, empty);
        assert_eq!(c("S@bad and web01").await, empty);
        assert_eq!(c("S@bad or web01").await, t);
        assert_eq!(c("not S@bad").await, t);
        assert_eq!(c("( )").await, empty, "an empty tuple");
        // A bad E@ regex fails the whole target; a bad P@ one only its word.
        assert_eq!(c("E@[ or web01").await, f);
        assert_eq!(c("P@role:[ or web01").await, t);
        // Syntax errors match nothing; a call is only an error where it is evaluated.
        for bad in [
            "",
            "not",
            "(",
            "web01 )",
            "and web01",
            "( and web01 )",
            "not not web01",
            "web01 S@bad",
            "web01 and db ( x )",
            "R@%foo or web01",
        ] {
            assert_eq!(c(bad).await, f, "{bad:?}");
        }
        assert_eq!(c("web01 or db ( x )").await, t);
        // Words in a list; anything but strings and lists is no target.
        assert_eq!(
            run("match.compound", &[j(json!(["web01", "or", "db"]))]).await,
            t
        );
        assert_eq!(run("match.compound", &[j(json!(["web01", 5]))]).await, f);
        assert_eq!(run("match.compound", &[Value::from(5)]).await, f);
        // Another id.
        assert_eq!(
            run("match.compound", &[s("db* or G@role:db"), id("db01")]).await,
            t
        );
        assert_eq!(run("match.compound", &[s("web*"), id("db01")]).await, f);
    }

    #[tokio::test]
    async fn compound_expands_the_minions_nodegroups() {
        let t = Value::Boolean(true);
        let f = Value::Boolean(false);
        assert_eq!(c("N@webs").await, t);
        assert_eq!(c("not N@webs").await, f);
        assert_eq!(c("N@listed and not db*").await, t);
        assert_eq!(c("N@nested").await, t);
        assert_eq!(run("match.compound", &[s("N@listed"), id("db01")]).await, t);
        assert_eq!(run("match.compound", &[s("N@webs"), id("db01")]).await, f);
        // An unknown group is dropped: what is left must still be an expression.
        assert_eq!(c("N@nope").await, f);
        assert_eq!(c("N@nope or web*").await, f);
        assert_eq!(c("web* or N@nope").await, f);
        assert_eq!(c("N@broken").await, f);
    }

    #[test]
    fn nodegroups_expand_as_salts() {
        let c = minion();
        let m = Matcher::new(&c);
        let comp = |name: &str| nodegroup_comp_lenient(name, &m.nodegroups);
        assert_eq!(comp("webs"), ["web*"]);
        assert_eq!(comp("listed"), ["L@web01,db01"]);
        assert_eq!(
            comp("nested"),
            ["(", "(", "web*", ")", "and", "G@role:web", ")"]
        );
        assert_eq!(comp("broken"), ["(", "or", "db*", ")"]);
        assert!(comp("nope").is_empty());
    }

    #[test]
    fn targets_parse_as_salts_target_regex() {
        assert_eq!(parse_target("G@os:Debian"), Some(('G', None, "os:Debian")));
        assert_eq!(
            parse_target("G|@os|Debian"),
            Some(('G', Some('|'), "os|Debian"))
        );
        assert_eq!(parse_target("G@@x"), Some(('G', Some('@'), "x")));
        assert_eq!(parse_target("G@@"), Some(('G', None, "@")));
        assert_eq!(
            parse_target("L|@a"),
            None,
            "a delimiter only for G, P, I and J"
        );
        assert_eq!(parse_target("G@"), None);
        assert_eq!(parse_target("web*"), None);
        assert_eq!(parse_target("E@x\n"), Some(('E', None, "x")));
        assert_eq!(parse_target("E@x\ny"), None);
    }

    #[test]
    fn the_words_evaluate_as_python_does() {
        use PyVal::*;
        use Tok::*;
        let t = Val(Bool(true));
        let f = Val(Bool(false));
        let l = Val(EmptyList);
        assert_eq!(py_eval(&[t, And, f, Or, t]), Some(Bool(true)));
        assert_eq!(
            py_eval(&[t, Or, f, And, f]),
            Some(Bool(true)),
            "and binds tighter"
        );
        assert_eq!(py_eval(&[Not, Open, t, Or, f, Close]), Some(Bool(false)));
        assert_eq!(py_eval(&[l, And, t]), Some(EmptyList));
        assert_eq!(py_eval(&[f, Or, l]), Some(EmptyList));
        assert_eq!(py_eval(&[Open, Close]), Some(EmptyTuple));
        assert_eq!(py_eval(&[Open, Open, Close, Close]), Some(EmptyTuple));
        assert_eq!(py_eval(&[t, Or, f, Open, Close]), Some(Bool(true)));
        assert_eq!(py_eval(&[t, And, f, Open, t, Close]), None);
        for bad in [
            &[][..],
            &[t, f],
            &[Not],
            &[Open, t],
            &[t, Close],
            &[And, t],
            &[t, l],
        ] {
            assert_eq!(py_eval(bad), None, "{bad:?}");
        }
        let mut deep = vec![Open; 300];
        deep.push(t);
        deep.extend(vec![Close; 300]);
        assert_eq!(py_eval(&deep), None, "too deeply nested");
        let mut long = vec![t];
        for _ in 0..100_000 {
            long.extend([And, t]);
        }
        assert_eq!(py_eval(&long), Some(Bool(true)));
    }

    #[tokio::test]
    async fn filter_by_returns_the_first_matching_keys_value() {
        let lookup = j(json!({"web*": "Web", "db*": "Db", "default": "Dflt"}));
        assert_eq!(
            run("match.filter_by", std::slice::from_ref(&lookup)).await,
            s("Web")
        );
        assert_eq!(
            run("match.filter_by", &[lookup.clone(), id("db01")]).await,
            s("Db")
        );
        assert_eq!(
            run("match.filter_by", &[lookup, id("x01")]).await,
            s("Dflt")
        );
        let lookup = j(json!({"x*": "X", "other": "O"}));
        assert_eq!(
            run("match.filter_by", std::slice::from_ref(&lookup)).await,
            Value::Nil
        );
        let other = kw(&[("default", s("other"))]);
        assert_eq!(run("match.filter_by", &[lookup, other]).await, s("O"));
        // Compound keys, other target types.
        let lookup = j(json!({"G@role:db": 1, "G@role:web and I@env:prod": 2}));
        assert_eq!(run("match.filter_by", &[lookup]).await, Value::from(2));
        let grain = kw(&[("tgt_type", s("grain"))]);
        let lookup = j(json!({"role:db": 1, "role:web": 2}));
        assert_eq!(
            run("match.filter_by", &[lookup, grain]).await,
            Value::from(2)
        );
        // minion_id is the second positional argument: the delimiter of a grain target.
        let args = kw(&[("tgt_type", s("grain")), ("minion_id", s("|"))]);
        let lookup = j(json!({"role|web": 1}));
        assert_eq!(
            run("match.filter_by", &[lookup, args]).await,
            Value::from(1)
        );
        let lookup = j(json!({"10.0.0.0/8": "net"}));
        let ipcidr = kw(&[("tgt_type", s("ipcidr"))]);
        assert_eq!(run("match.filter_by", &[lookup, ipcidr]).await, s("net"));
        let lookup = j(json!({"web01": 1}));
        let list = kw(&[("tgt_type", s("list_"))]);
        assert_eq!(
            run("match.filter_by", &[lookup, list]).await,
            Value::from(1)
        );
    }

    #[tokio::test]
    async fn filter_by_merges_over_the_match() {
        let lookup = j(json!({"web*": {"a": 1, "l": [1]}}));
        let merge = kw(&[("merge", j(json!({"b": 2, "l": [2]})))]);
        assert_eq!(
            run("match.filter_by", &[lookup.clone(), merge]).await,
            j(json!({"a": 1, "l": [2], "b": 2}))
        );
        let merge = kw(&[
            ("merge", j(json!({"b": 2, "l": [2]}))),
            ("merge_lists", Value::Boolean(true)),
        ]);
        assert_eq!(
            run("match.filter_by", &[lookup, merge]).await,
            j(json!({"a": 1, "l": [1, 2], "b": 2}))
        );
        let merge = kw(&[("merge", j(json!({"b": 2})))]);
        let lookup = j(json!({"web*": null}));
        assert_eq!(
            run("match.filter_by", &[lookup, merge.clone()]).await,
            j(json!({"b": 2}))
        );
        // Nothing matched: the default, unmerged.
        let lookup = j(json!({"x*": 1, "default": {"d": 1}}));
        assert_eq!(
            run("match.filter_by", &[lookup, merge]).await,
            j(json!({"d": 1}))
        );
    }

    #[tokio::test]
    async fn filter_by_fails_as_salts() {
        let c = minion();
        let fails = |args: Vec<Value>| {
            let c = c.clone();
            async move { call(&c, "match.filter_by", &args).await }
        };
        let r = fails(vec![
            j(json!({"web*": 1})),
            kw(&[("merge", Value::from(5))]),
        ])
        .await;
        assert_eq!(
            r.ret,
            s("The minion function caused an exception: salt.exceptions.SaltException: filter_by merge argument must be a dictionary.")
        );
        assert_eq!(r.retcode, 1);
        let r = fails(vec![
            j(json!({"web*": 1})),
            kw(&[("merge", j(json!({"b": 1})))]),
        ])
        .await;
        assert!(
            r.ret.as_str().unwrap().starts_with(
                "Passed invalid arguments to match.filter_by: Cannot update using non-dict types in dictupdate.update()\n"
            ),
            "{:?}",
            r.ret
        );
        let r = fails(vec![j(json!({"web*": 1})), kw(&[("tgt_type", s("list"))])]).await;
        assert_eq!(
            r.ret,
            s("The minion function caused an exception: KeyError: 'list'")
        );
        let args = kw(&[("tgt_type", s("ipcidr")), ("minion_id", s("x"))]);
        let r = fails(vec![j(json!({"web*": 1})), args]).await;
        assert!(r.ret.as_str().unwrap().starts_with(
            "Passed invalid arguments to match.filter_by: ipcidr() takes 1 positional argument but 2 were given\n"
        ));
        let r = fails(vec![
            j(json!({"web*": 1})),
            kw(&[("tgt_type", s("_load_matchers"))]),
        ])
        .await;
        assert!(r
            .ret
            .as_str()
            .unwrap()
            .contains("_load_matchers() takes 0 positional arguments but 1 was given"));
        // A lookup that is a string: its characters are the targets.
        let r = fails(vec![s("web*")]).await;
        assert!(r
            .ret
            .as_str()
            .unwrap()
            .contains("string indices must be integers, not 'str'"));
        let r = fails(vec![s("xyz")]).await;
        assert_eq!(
            r.ret,
            s("The minion function caused an exception: AttributeError: 'str' object has no attribute 'get'")
        );
        let r = fails(vec![Value::from(5)]).await;
        assert!(r
            .ret
            .as_str()
            .unwrap()
            .contains("'int' object is not iterable"));
        // Nothing to match: an unknown tgt_type is never looked up.
        let r = fails(vec![j(json!({})), kw(&[("tgt_type", s("bogus"))])]).await;
        assert_eq!((r.ret, r.retcode), (Value::Nil, 0));
    }

    #[tokio::test]
    async fn search_by_lists_the_keys_of_matching_targets() {
        let lookup = j(json!({"a": ["web*", "w*"], "b": "x*", "c": ["db*"]}));
        // Once per matching target; a string's characters are its targets ('*' matches).
        assert_eq!(
            run("match.search_by", &[lookup]).await,
            j(json!(["a", "a", "b"]))
        );
        let lookup = j(json!({"web": ["G@role:web"], "db": ["G@role:db"]}));
        assert_eq!(run("match.search_by", &[lookup]).await, j(json!(["web"])));
        let lookup = j(json!({"web": ["web01"], "db": ["db01"]}));
        assert_eq!(
            run("match.search_by", &[lookup, id("db01")]).await,
            j(json!(["db"]))
        );
        let lookup = j(json!({"a": ["db*"]}));
        assert_eq!(run("match.search_by", &[lookup]).await, Value::Nil);
        let r = call(&minion(), "match.search_by", &[j(json!([1]))]).await;
        assert_eq!(
            r.ret,
            s("The minion function caused an exception: AttributeError: 'list' object has no attribute 'items'")
        );
        let r = call(&minion(), "match.search_by", &[j(json!({"a": 5}))]).await;
        assert!(r
            .ret
            .as_str()
            .unwrap()
            .contains("'int' object is not iterable"));
    }

    #[tokio::test]
    async fn ifelse_pairs_targets_with_values() {
        assert_eq!(
            run("match.ifelse", &[s("web*"), s("A"), s("B")]).await,
            s("A")
        );
        assert_eq!(
            run("match.ifelse", &[s("db*"), s("A"), s("B")]).await,
            s("B")
        );
        assert_eq!(
            run("match.ifelse", &[s("web*"), s("A"), s("B"), id("db01")]).await,
            s("B")
        );
        let glob = kw(&[("tgt_type", s("glob"))]);
        assert_eq!(
            run("match.ifelse", &[s("G@role:web"), s("A"), s("B"), glob]).await,
            s("B")
        );
        assert_eq!(run("match.ifelse", &[s("only")]).await, s("only"));
        let (t, f) = (Value::Boolean(true), Value::Boolean(false));
        assert_eq!(
            run("match.ifelse", &[f.clone(), s("A"), t, s("B"), s("C")]).await,
            s("B")
        );
        assert_eq!(run("match.ifelse", &[f, s("A"), s("C")]).await, s("C"));
        // A repeated target keeps its place and takes the later value.
        let args = [s("web*"), s("A"), s("web*"), s("B"), s("C")];
        assert_eq!(run("match.ifelse", &args).await, s("B"));
        let merge = kw(&[("merge", j(json!({"b": 2})))]);
        let args = [s("G@role:web"), j(json!({"a": 1})), s("D"), merge];
        assert_eq!(run("match.ifelse", &args).await, j(json!({"a": 1, "b": 2})));
    }

    #[tokio::test]
    async fn ifelse_fails_as_salts() {
        let r = call(&minion(), "match.ifelse", &[s("a"), s("b")]).await;
        assert_eq!(
            r.ret,
            s("The minion function caused an exception: salt.exceptions.SaltException: The ifelse function must have an odd number of arguments!")
        );
        assert_eq!(r.retcode, 1);
        let r = call(&minion(), "match.ifelse", &[]).await;
        assert_eq!(r.retcode, 1);
        let r = call(&minion(), "match.ifelse", &[j(json!([1])), s("A"), s("B")]).await;
        assert!(r.ret.as_str().unwrap().contains("unhashable type: 'list'"));
        // A keyword it does not take: refused by the argument parsing of a job...
        let mut c = minion();
        c.pub_load = j(json!({"fun": "match.ifelse", "jid": "1"}));
        let r = call(&c, "match.ifelse", &[s("a"), s("b"), s("c"), s("bogus=1")]).await;
        assert_eq!(
            r.ret,
            s("ERROR executing 'match.ifelse': The following keyword arguments are not valid: bogus=1")
        );
        // ...and by Python when code calls it.
        let r = call(
            &minion(),
            "match.ifelse",
            &[s("a"), s("b"), s("c"), s("bogus=1")],
        )
        .await;
        assert!(r.ret.as_str().unwrap().starts_with(
            "Passed invalid arguments to match.ifelse: ifelse() got an unexpected keyword argument 'bogus'\n"
        ));
    }

    #[test]
    fn every_function_is_listed() {
        let names: Vec<&str> = Fun::ALL.iter().map(|f| f.spec().name).collect();
        for f in [
            "compound",
            "ipcidr",
            "pillar_pcre",
            "pillar",
            "data",
            "grain_pcre",
            "grain",
            "list",
            "pcre",
            "glob",
            "filter_by",
            "search_by",
            "ifelse",
        ] {
            assert!(names.contains(&format!("match.{f}").as_str()), "{f}");
        }
        assert_eq!(Fun::List.spec().pyname, "list_");
    }
}

//! Compound targets (`G@os:Debian and web* or not L@db1,db2`): words, `and`/`or`/`not`
//! and parentheses, parsed into an expression tree instead of Salt's `eval` of rewritten
//! text. Precedence is Python's (`not` > `and` > `or`), `not` after a target or `)` means
//! `and not`, and `not not`, adjacent targets, empty groups, a leading `and`/`or` or a
//! trailing operator are errors (they make Salt's `eval` fail, which targets nothing).
//!
//! Brine extension: parentheses glued to a word (`(G@os:Debian`, `web*)`) are split off
//! (leading ones always, trailing ones when unbalanced). Salt needs them space-separated
//! and would read such a word as a glob that matches nothing.

use std::collections::{BTreeMap, VecDeque};

use regex::Regex;
use rmpv::Value;

use super::cidr::IpTarget;
use super::fnmatch::Glob;
use super::pyvalue::py_str;
use super::subdict::{regex_candidates, MatchMode};
use super::{py_regex, TargetError};

/// Most words one target may grow to through nodegroup expansion.
const MAX_WORDS: usize = 10_000;
/// Deepest parenthesis nesting accepted.
const MAX_DEPTH: usize = 64;

/// Which data a grain/pillar word reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    Grains,
    Pillar,
}

/// One target word, compiled.
#[derive(Debug)]
pub(crate) enum Leaf {
    /// Bare word: glob on the minion id.
    Glob(Glob),
    /// `E@`: regex on the id, anchored at the start.
    Pcre(Regex),
    /// `L@a,b`: the raw comma list.
    List(String),
    /// `G@`, `P@`, `I@`, `J@`: `subdict_match` on grains or pillar.
    Data {
        source: Source,
        expr: String,
        delimiter: String,
        mode: MatchMode,
    },
    /// `S@`: address or network against the ipv4/ipv6 grains.
    Ip(IpTarget),
}

/// A leaf and where it stood.
#[derive(Debug)]
pub(crate) struct LeafNode {
    pub(crate) leaf: Leaf,
    /// Position in [`Compound::leaves`].
    pub(crate) index: usize,
    /// Directly preceded by `not` (Salt then ignores the missing ids of an `L@` word).
    pub(crate) after_not: bool,
}

#[derive(Debug)]
enum Expr {
    Leaf(usize),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
}

/// A parsed compound target.
#[derive(Debug)]
pub(crate) struct Compound {
    expr: Expr,
    pub(crate) leaves: Vec<LeafNode>,
}

/// Where the target is evaluated: the minion refuses `N@`, the master expands it.
pub(crate) enum Side<'a> {
    Minion,
    Master {
        nodegroups: &'a BTreeMap<String, Value>,
    },
}

#[derive(Debug)]
enum Token {
    And,
    Or,
    Not,
    Open,
    Close,
    Word(usize),
}

impl Compound {
    /// Parses `tgt` (a string, or a list of words). `pillar_exact` makes `I@`/`J@` exact
    /// pillar matches (`compound_pillar_exact`).
    pub(crate) fn parse(tgt: &Value, side: &Side, pillar_exact: bool) -> Result<Self, TargetError> {
        let text = py_str(tgt);
        let err = |reason: String| TargetError::Compound {
            tgt: text.clone(),
            reason,
        };
        let mut queue: VecDeque<String> = match tgt {
            Value::String(_) => text.split_whitespace().map(str::to_owned).collect(),
            Value::Array(items) => items
                .iter()
                .map(|w| {
                    w.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| TargetError::BadTarget {
                            tgt_type: "compound".into(),
                            expected: "a string or a list of strings",
                        })
                })
                .collect::<Result<_, _>>()?,
            _ => {
                return Err(TargetError::BadTarget {
                    tgt_type: "compound".into(),
                    expected: "a string or a list of strings",
                })
            }
        };

        let mut tokens = Vec::new();
        let mut leaves = Vec::new();
        let mut seen_words = 0usize;
        while let Some(word) = queue.pop_front() {
            seen_words += 1;
            if seen_words > MAX_WORDS {
                return Err(err("too many words after nodegroup expansion".into()));
            }
            let (opens, core, closes) = peel_parens(&word);
            tokens.extend((0..opens).map(|_| Token::Open));
            if !core.is_empty() {
                match core {
                    "and" => tokens.push(Token::And),
                    "or" => tokens.push(Token::Or),
                    "not" => tokens.push(Token::Not),
                    _ => {
                        let (engine, delim, pattern) = parse_target(core);
                        if engine == Some('N') {
                            let Side::Master { nodegroups } = side else {
                                return Err(TargetError::NodegroupOnMinion);
                            };
                            let mut expanded = nodegroup_comp(pattern, nodegroups)?;
                            // Parentheses peeled off the N@ word wrap its expansion.
                            expanded.extend((0..closes).map(|_| ")".to_owned()));
                            for w in expanded.into_iter().rev() {
                                queue.push_front(w);
                            }
                            continue;
                        }
                        let leaf = make_leaf(engine, delim, pattern, core, pillar_exact)?;
                        let after_not = matches!(tokens.last(), Some(Token::Not));
                        leaves.push(LeafNode {
                            leaf,
                            index: leaves.len(),
                            after_not,
                        });
                        tokens.push(Token::Word(leaves.len() - 1));
                    }
                }
            }
            tokens.extend((0..closes).map(|_| Token::Close));
        }

        let mut parser = Parser {
            tokens: &tokens,
            pos: 0,
            depth: 0,
        };
        let expr = parser.parse_or().map_err(err)?;
        if let Some(tok) = tokens.get(parser.pos) {
            let reason = match tok {
                Token::Close => "unbalanced parentheses: unexpected ')'".to_owned(),
                _ => "two targets without 'and'/'or' between them".to_owned(),
            };
            return Err(err(reason));
        }
        Ok(Compound { expr, leaves })
    }

    /// Evaluates with `leaf_matches` deciding each word.
    pub(crate) fn eval(&self, leaf_matches: &mut dyn FnMut(&LeafNode) -> bool) -> bool {
        eval_expr(&self.expr, &self.leaves, leaf_matches)
    }
}

fn eval_expr(expr: &Expr, leaves: &[LeafNode], f: &mut dyn FnMut(&LeafNode) -> bool) -> bool {
    match expr {
        Expr::Leaf(i) => f(&leaves[*i]),
        Expr::Not(e) => !eval_expr(e, leaves, f),
        Expr::And(a, b) => eval_expr(a, leaves, f) && eval_expr(b, leaves, f),
        Expr::Or(a, b) => eval_expr(a, leaves, f) || eval_expr(b, leaves, f),
    }
}

struct Parser<'t> {
    tokens: &'t [Token],
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn parse_or(&mut self) -> Result<Expr, String> {
        let mut left = self.parse_and()?;
        while let Some(Token::Or) = self.peek() {
            self.pos += 1;
            let right = self.parse_and()?;
            left = Expr::Or(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn parse_and(&mut self) -> Result<Expr, String> {
        let mut left = self.parse_not()?;
        loop {
            match self.peek() {
                Some(Token::And) => self.pos += 1,
                // "a not b" reads as "a and not b".
                Some(Token::Not) => {}
                _ => break,
            }
            let right = self.parse_not()?;
            left = Expr::And(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn parse_not(&mut self) -> Result<Expr, String> {
        if let Some(Token::Not) = self.peek() {
            self.pos += 1;
            if let Some(Token::Not) = self.peek() {
                return Err("'not' directly after 'not'".into());
            }
            return Ok(Expr::Not(Box::new(self.parse_primary("not")?)));
        }
        self.parse_primary("")
    }

    fn parse_primary(&mut self, after: &str) -> Result<Expr, String> {
        let dangling = |what: &str| {
            if after.is_empty() {
                format!("expected a target, found {what}")
            } else {
                format!("expected a target after '{after}', found {what}")
            }
        };
        match self.peek() {
            Some(Token::Word(i)) => {
                let i = *i;
                self.pos += 1;
                Ok(Expr::Leaf(i))
            }
            Some(Token::Open) => {
                self.depth += 1;
                if self.depth > MAX_DEPTH {
                    return Err("parentheses nested too deeply".into());
                }
                self.pos += 1;
                let inner = self.parse_or()?;
                match self.peek() {
                    Some(Token::Close) => self.pos += 1,
                    None => return Err("unbalanced parentheses: missing ')'".into()),
                    Some(_) => return Err("two targets without 'and'/'or' between them".into()),
                }
                self.depth -= 1;
                Ok(inner)
            }
            Some(Token::Close) => Err(dangling("')'")),
            Some(Token::And) => Err(dangling("'and'")),
            Some(Token::Or) => Err(dangling("'or'")),
            Some(Token::Not) => Err(dangling("'not'")),
            None if self.pos == 0 => Err("empty target".into()),
            None => Err(dangling("the end of the target")),
        }
    }
}

/// Splits parentheses glued to a word: every leading '(' (no target starts with one),
/// then as many trailing ')' as the rest of the word leaves unbalanced, so
/// `(E@(a|b))` gives `(`, `E@(a|b)`, `)`. Returns (leading count, core, trailing count).
fn peel_parens(word: &str) -> (usize, &str, usize) {
    let core = word.trim_start_matches('(');
    let lead = word.len() - core.len();
    let opens = core.matches('(').count();
    let closes = core.matches(')').count();
    let mut core = core;
    let mut trail = 0;
    while trail < closes.saturating_sub(opens) && core.ends_with(')') {
        core = &core[..core.len() - 1];
        trail += 1;
    }
    (lead, core, trail)
}

/// Salt's `parse_target`: optional engine letter, optional one-character delimiter (for
/// G, P, I and J only), `@`, then a non-empty pattern. Anything else is a bare word.
pub(crate) fn parse_target(word: &str) -> (Option<char>, Option<char>, &str) {
    let mut chars = word.char_indices();
    let Some((_, engine)) = chars.next() else {
        return (None, None, word);
    };
    if !"GPIJLNSER".contains(engine) {
        return (None, None, word);
    }
    let rest: Vec<(usize, char)> = chars.collect();
    // With a delimiter: E D @ pattern.
    if "GPIJ".contains(engine) && rest.len() >= 3 && rest[1].1 == '@' {
        return (Some(engine), Some(rest[0].1), &word[rest[2].0..]);
    }
    if rest.len() >= 2 && rest[0].1 == '@' {
        return (Some(engine), None, &word[rest[1].0..]);
    }
    (None, None, word)
}

fn make_leaf(
    engine: Option<char>,
    delim: Option<char>,
    pattern: &str,
    word: &str,
    pillar_exact: bool,
) -> Result<Leaf, TargetError> {
    let data = |source: Source, mode: MatchMode| -> Result<Leaf, TargetError> {
        let delimiter = delim.map(String::from).unwrap_or_else(|| ":".into());
        if mode == MatchMode::Regex {
            check_data_regex(pattern, &delimiter)?;
        }
        Ok(Leaf::Data {
            source,
            expr: pattern.to_owned(),
            delimiter,
            mode,
        })
    };
    let pillar_mode = |m: MatchMode| if pillar_exact { MatchMode::Exact } else { m };
    match engine {
        None => Ok(Leaf::Glob(Glob::new(word))),
        Some('G') => data(Source::Grains, MatchMode::Glob),
        Some('P') => data(Source::Grains, MatchMode::Regex),
        Some('I') => data(Source::Pillar, pillar_mode(MatchMode::Glob)),
        Some('J') => data(Source::Pillar, pillar_mode(MatchMode::Regex)),
        Some('L') => Ok(Leaf::List(pattern.to_owned())),
        Some('E') => Ok(Leaf::Pcre(compile_id_regex(pattern)?)),
        Some('S') => Ok(Leaf::Ip(IpTarget::parse(pattern)?)),
        Some(other) => Err(TargetError::UnsupportedEngine(other)),
    }
}

/// Compiles a regex matched against minion ids.
pub(crate) fn compile_id_regex(pattern: &str) -> Result<Regex, TargetError> {
    py_regex(pattern).map_err(|source| TargetError::BadRegex {
        pattern: pattern.to_owned(),
        source,
    })
}

/// A grain/pillar regex target is refused when no way of splitting it yields a value
/// pattern that compiles (Salt would silently match nothing).
pub(crate) fn check_data_regex(expr: &str, delimiter: &str) -> Result<(), TargetError> {
    let mut first_err = None;
    for candidate in regex_candidates(expr, delimiter) {
        match py_regex(&candidate) {
            Ok(_) => return Ok(()),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(source) => Err(TargetError::BadRegex {
            pattern: expr.to_owned(),
            source,
        }),
        None => Ok(()),
    }
}

const OPERATORS: [&str; 5] = ["and", "or", "not", "(", ")"];

/// Salt's `nodegroup_comp`: the words a nodegroup stands for, nested `N@` groups expanded.
///
/// A definition is a compound string or a list of words. A definition without operators,
/// wildcards or engine prefixes is a list of ids and becomes one `L@a,b` word (or `E@a,b`
/// when a word has regex characters). As in Salt, a group is wrapped in parentheses only
/// when it is nested or includes nested groups, so a plain top-level expression is spliced
/// in as it is. Unknown groups, cycles and empty groups are errors (Salt logs them and
/// drops the words).
pub fn nodegroup_comp(
    name: &str,
    nodegroups: &BTreeMap<String, Value>,
) -> Result<Vec<String>, TargetError> {
    let mut stack = Vec::new();
    let words = comp(name, nodegroups, &mut stack, true, false)?;
    if words.is_empty() {
        return Err(TargetError::BadNodegroup {
            name: name.to_owned(),
            reason: "empty",
        });
    }
    Ok(words)
}

/// [`nodegroup_comp`] as a minion expands the `N@` words of its own `compound` matches:
/// an unknown, looping or malformed group stands for nothing (Salt logs it and drops it).
pub fn nodegroup_comp_lenient(name: &str, nodegroups: &BTreeMap<String, Value>) -> Vec<String> {
    comp(name, nodegroups, &mut Vec::new(), true, true).unwrap_or_default()
}

fn comp(
    name: &str,
    nodegroups: &BTreeMap<String, Value>,
    stack: &mut Vec<String>,
    first_call: bool,
    lenient: bool,
) -> Result<Vec<String>, TargetError> {
    // Leniently, a group that cannot be expanded stands for nothing.
    let fail = |e: TargetError| if lenient { Ok(Vec::new()) } else { Err(e) };
    if stack.iter().any(|s| s == name) {
        return fail(TargetError::NodegroupCycle(name.to_owned()));
    }
    if stack.len() >= MAX_DEPTH {
        return fail(TargetError::BadNodegroup {
            name: name.to_owned(),
            reason: "nested too deeply",
        });
    }
    let Some(definition) = nodegroups.get(name) else {
        return fail(TargetError::UnknownNodegroup(name.to_owned()));
    };
    let words: Vec<String> = match definition {
        Value::String(_) => py_str(definition)
            .split_whitespace()
            .map(str::to_owned)
            .collect(),
        Value::Array(items) => items.iter().map(py_str).collect(),
        _ => {
            return fail(TargetError::BadNodegroup {
                name: name.to_owned(),
                reason: "neither a string nor a list",
            })
        }
    };
    stack.push(name.to_owned());
    let mut ret = Vec::new();
    let mut expanded = false;
    for word in &words {
        if OPERATORS.contains(&word.as_str()) {
            ret.push(word.clone());
        } else if word.chars().count() >= 3 && word.starts_with("N@") {
            expanded = true;
            ret.extend(comp(&word[2..], nodegroups, stack, false, lenient)?);
        } else {
            ret.push(word.clone());
        }
    }
    stack.pop();
    if !ret.is_empty() {
        ret.insert(0, "(".into());
        ret.push(")".into());
    }
    if expanded || !first_call {
        if !first_call {
            if let Some(joined) = list_shorthand(&words) {
                return Ok(vec![joined]);
            }
        }
        return Ok(ret);
    }
    if let Some(joined) = list_shorthand(&words) {
        return Ok(vec![joined]);
    }
    Ok(words)
}

/// Salt's `_nodegroup_regex`: a plain list of names becomes `L@a,b` (or `E@a,b`).
fn list_shorthand(words: &[String]) -> Option<String> {
    if words.is_empty() || words.iter().any(|w| OPERATORS.contains(&w.as_str())) {
        return None;
    }
    let engine_prefix = |w: &str| {
        let b = w.as_bytes();
        b.len() >= 2 && b[0].is_ascii_uppercase() && b[1] == b'@'
    };
    if words.iter().any(|w| w.contains('*') || engine_prefix(w)) {
        return None;
    }
    const REGEX_CHARS: [char; 8] = ['(', '[', '{', '\\', '?', '}', ']', ')'];
    let engine = if words.iter().any(|w| w.contains(REGEX_CHARS)) {
        "E@"
    } else {
        "L@"
    };
    Some(format!("{engine}{}", words.join(",")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_target_like_salt() {
        assert_eq!(parse_target("G@os:Debian"), (Some('G'), None, "os:Debian"));
        assert_eq!(
            parse_target("G|@os|Debian"),
            (Some('G'), Some('|'), "os|Debian")
        );
        assert_eq!(parse_target("L@a,b"), (Some('L'), None, "a,b"));
        assert_eq!(
            parse_target("L|@a"),
            (None, None, "L|@a"),
            "no delimiter for L"
        );
        assert_eq!(parse_target("web*"), (None, None, "web*"));
        assert_eq!(
            parse_target("G@"),
            (None, None, "G@"),
            "empty pattern: bare word"
        );
        assert_eq!(parse_target("G@@x"), (Some('G'), Some('@'), "x"));
        assert_eq!(parse_target("G@@"), (Some('G'), None, "@"));
        assert_eq!(parse_target("X@foo"), (None, None, "X@foo"));
        assert_eq!(parse_target(""), (None, None, ""));
        assert_eq!(parse_target("Gé@k:v"), (Some('G'), Some('é'), "k:v"));
    }

    #[test]
    fn peel_glued_parens() {
        assert_eq!(peel_parens("(G@os:Debian"), (1, "G@os:Debian", 0));
        assert_eq!(peel_parens("web*)"), (0, "web*", 1));
        assert_eq!(peel_parens("(("), (2, "", 0));
        assert_eq!(peel_parens("())"), (1, "", 2));
        assert_eq!(peel_parens("(N@ex)"), (1, "N@ex", 1));
        assert_eq!(peel_parens("E@(a|b)"), (0, "E@(a|b)", 0));
        assert_eq!(peel_parens("(E@(a|b)"), (1, "E@(a|b)", 0));
        assert_eq!(peel_parens("(E@(a|b))"), (1, "E@(a|b)", 1));
        assert_eq!(peel_parens("E@(a|b))"), (0, "E@(a|b)", 1));
        assert_eq!(peel_parens("E@x)|(y"), (0, "E@x)|(y", 0));
        assert_eq!(peel_parens("web"), (0, "web", 0));
    }

    fn groups(pairs: &[(&str, Value)]) -> BTreeMap<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    fn list(items: &[&str]) -> Value {
        Value::Array(items.iter().map(|s| Value::from(*s)).collect())
    }

    #[test]
    fn nodegroup_expansion_like_salt() {
        let ng = groups(&[
            ("plain", Value::from("m1 m2")),
            ("listed", list(&["m1", "m2"])),
            ("regexy", Value::from("web[12] db")),
            ("expr", Value::from("G@os:Debian or web*")),
            ("nested", Value::from("N@plain or N@expr")),
            ("loop_a", Value::from("N@loop_b or x")),
            ("loop_b", Value::from("N@loop_a")),
            ("empty", Value::from("")),
            ("bad", Value::from(3)),
            ("missing_inner", Value::from("N@nope and m1")),
        ]);
        let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
        assert_eq!(nodegroup_comp("plain", &ng).unwrap(), s(&["L@m1,m2"]));
        assert_eq!(nodegroup_comp("listed", &ng).unwrap(), s(&["L@m1,m2"]));
        assert_eq!(nodegroup_comp("regexy", &ng).unwrap(), s(&["E@web[12],db"]));
        assert_eq!(
            nodegroup_comp("expr", &ng).unwrap(),
            s(&["G@os:Debian", "or", "web*"])
        );
        assert_eq!(
            nodegroup_comp("nested", &ng).unwrap(),
            s(&[
                "(",
                "L@m1,m2",
                "or",
                "(",
                "G@os:Debian",
                "or",
                "web*",
                ")",
                ")"
            ])
        );
        assert!(matches!(
            nodegroup_comp("loop_a", &ng),
            Err(TargetError::NodegroupCycle(_))
        ));
        assert!(matches!(
            nodegroup_comp("nope", &ng),
            Err(TargetError::UnknownNodegroup(_))
        ));
        assert!(matches!(
            nodegroup_comp("missing_inner", &ng),
            Err(TargetError::UnknownNodegroup(_))
        ));
        assert!(matches!(
            nodegroup_comp("empty", &ng),
            Err(TargetError::BadNodegroup { .. })
        ));
        assert!(matches!(
            nodegroup_comp("bad", &ng),
            Err(TargetError::BadNodegroup { .. })
        ));
    }

    fn parse_err(tgt: &str) -> String {
        match Compound::parse(&Value::from(tgt), &Side::Minion, false) {
            Err(TargetError::Compound { reason, .. }) => reason,
            other => panic!("{tgt:?}: expected a compound error, got {other:?}"),
        }
    }

    #[test]
    fn syntax_errors_are_reported() {
        assert!(parse_err("").contains("empty"));
        assert!(parse_err("   ").contains("empty"));
        assert!(parse_err("and m1").contains("'and'"));
        assert!(parse_err("or m1").contains("'or'"));
        assert!(parse_err("m1 and").contains("end"));
        assert!(parse_err("m1 or").contains("end"));
        assert!(parse_err("m1 not").contains("end"));
        assert!(parse_err("not").contains("after 'not'"));
        assert!(parse_err("not not m1").contains("'not' directly after 'not'"));
        assert!(parse_err("m1 m2").contains("without"));
        assert!(parse_err("( m1").contains("missing ')'"));
        assert!(parse_err("m1 )").contains("unexpected ')'"));
        assert!(parse_err("( )").contains("')'"));
        assert!(parse_err("( and m1 )").contains("'and'"));
        assert!(parse_err("m1 ( m2 )").contains("without"));
        assert!(parse_err("m1 and or m2").contains("'or'"));
        assert!(parse_err("((m1)").contains("missing ')'"));
        let deep = format!("{}m1{}", "( ".repeat(100), " )".repeat(100));
        assert!(parse_err(&deep).contains("too deeply"));
    }

    #[test]
    fn engine_errors() {
        let p = |t: &str| Compound::parse(&Value::from(t), &Side::Minion, false);
        assert!(matches!(
            p("R@%foo"),
            Err(TargetError::UnsupportedEngine('R'))
        ));
        assert!(matches!(
            p("m1 or N@grp"),
            Err(TargetError::NodegroupOnMinion)
        ));
        assert!(matches!(
            p("E@web[ and m1"),
            Err(TargetError::BadRegex { .. })
        ));
        assert!(matches!(
            p("P@os:deb[ian"),
            Err(TargetError::BadRegex { .. })
        ));
        assert!(matches!(p("S@10.0.0.1/8"), Err(TargetError::BadCidr(_))));
        assert!(matches!(
            Compound::parse(&Value::from(3), &Side::Minion, false),
            Err(TargetError::BadTarget { .. })
        ));
        assert!(matches!(
            Compound::parse(&Value::Array(vec![Value::from(1)]), &Side::Minion, false),
            Err(TargetError::BadTarget { .. })
        ));
        // A regex that only compiles with the delimiter inside the value is fine.
        assert!(p("P@key:a(b:c)").is_ok());
    }

    #[test]
    fn master_side_expands_nodegroups_in_place() {
        let ng = groups(&[("grp", Value::from("m1 m2")), ("ex", Value::from("a or b"))]);
        let side = Side::Master { nodegroups: &ng };
        let c = Compound::parse(&Value::from("N@grp and not m2"), &side, false).unwrap();
        assert_eq!(c.leaves.len(), 2);
        assert!(matches!(&c.leaves[0].leaf, Leaf::List(s) if s == "m1,m2"));
        assert!(c.leaves[1].after_not);
        // Glued parentheses around N@ wrap the expansion.
        let c = Compound::parse(&Value::from("(N@ex) and c"), &side, false).unwrap();
        assert_eq!(c.leaves.len(), 3);
        let on_id =
            |id: &str| c.eval(&mut |leaf| matches!(&leaf.leaf, Leaf::Glob(g) if g.is_match(id)));
        assert!(!on_id("a"), "(a or b) and c");
        // Unwrapped, Salt splices the words as they are: "a or b and c".
        let c = Compound::parse(&Value::from("N@ex and c"), &side, false).unwrap();
        assert!(c.eval(&mut |leaf| matches!(&leaf.leaf, Leaf::Glob(g) if g.is_match("a"))));
        assert!(matches!(
            Compound::parse(&Value::from("N@none"), &side, false),
            Err(TargetError::UnknownNodegroup(_))
        ));
    }
}

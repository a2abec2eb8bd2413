//! Python's `fnmatch.fnmatch` on POSIX (no case folding): `*`, `?`, `[seq]`, `[!seq]`.
//!
//! Python turns the pattern into a regular expression (`fnmatch.translate`); the bracket
//! rules below follow that translation, including its quirks: a `[` without a closing `]`
//! is literal, a leading `]` (after an optional `!`) belongs to the set, backslash is an
//! ordinary character, ranges whose ends are reversed are dropped, `[!]...]` negates.

/// One pattern element; every element but `Star` consumes exactly one character.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    Star,
    Any,
    Literal(char),
    Set(CharSet),
}

#[derive(Debug, Clone, PartialEq)]
struct CharSet {
    negated: bool,
    /// Inclusive ranges; a single character `c` is `(c, c)`.
    ranges: Vec<(char, char)>,
    /// A range came out reversed: Python's `re` refuses the pattern, so nothing matches.
    invalid: bool,
}

impl CharSet {
    fn contains(&self, c: char) -> bool {
        if self.invalid {
            return false;
        }
        let inside = self.ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi);
        inside != self.negated
    }
}

/// A compiled glob pattern, to match many names against one pattern.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Glob {
    tokens: Vec<Token>,
}

impl Glob {
    pub(crate) fn new(pattern: &str) -> Self {
        Glob {
            tokens: tokenize(pattern),
        }
    }

    pub(crate) fn is_match(&self, name: &str) -> bool {
        let name: Vec<char> = name.chars().collect();
        let toks = &self.tokens;
        // Classic single-backtrack-point wildcard matching: on mismatch, let the last `*`
        // swallow one more character. Correct because every other token is one character.
        let (mut t, mut n) = (0usize, 0usize);
        let mut star: Option<(usize, usize)> = None;
        while n < name.len() {
            match toks.get(t) {
                Some(Token::Star) => {
                    star = Some((t, n));
                    t += 1;
                    continue;
                }
                Some(tok) if single_matches(tok, name[n]) => {
                    t += 1;
                    n += 1;
                    continue;
                }
                _ => {}
            }
            match star {
                Some((st, sn)) => {
                    t = st + 1;
                    n = sn + 1;
                    star = Some((st, sn + 1));
                }
                None => return false,
            }
        }
        toks[t..].iter().all(|tok| *tok == Token::Star)
    }
}

fn single_matches(tok: &Token, c: char) -> bool {
    match tok {
        Token::Star => false,
        Token::Any => true,
        Token::Literal(l) => *l == c,
        Token::Set(set) => set.contains(c),
    }
}

/// Python `fnmatch.fnmatch(name, pattern)` on Linux (case-sensitive). Note the argument
/// order: pattern first.
pub fn fnmatch(pattern: &str, name: &str) -> bool {
    Glob::new(pattern).is_match(name)
}

fn tokenize(pattern: &str) -> Vec<Token> {
    let pat: Vec<char> = pattern.chars().collect();
    let n = pat.len();
    let mut out = Vec::new();
    let mut i = 0;
    while i < n {
        let c = pat[i];
        i += 1;
        match c {
            '*' => {
                if out.last() != Some(&Token::Star) {
                    out.push(Token::Star);
                }
            }
            '?' => out.push(Token::Any),
            '[' => {
                let mut j = i;
                if j < n && pat[j] == '!' {
                    j += 1;
                }
                if j < n && pat[j] == ']' {
                    j += 1;
                }
                while j < n && pat[j] != ']' {
                    j += 1;
                }
                if j >= n {
                    out.push(Token::Literal('['));
                } else {
                    out.push(bracket(&pat[i..j]));
                    i = j + 1;
                }
            }
            other => out.push(Token::Literal(other)),
        }
    }
    out
}

/// Builds the set for the text between `[` and `]`, as `fnmatch.translate` plus `re` would.
fn bracket(content: &[char]) -> Token {
    let negated = content.first() == Some(&'!');
    let body = if negated { &content[1..] } else { content };
    if body.is_empty() {
        // "[]" cannot reach here (the "]" would be part of the set); "[!]" means "any char".
        return if negated {
            Token::Any
        } else {
            Token::Set(CharSet {
                negated: false,
                ranges: Vec::new(),
                invalid: false,
            })
        };
    }
    // Split into chunks at the hyphens that act as range separators. The first character is
    // never a separator, and after a separator the search resumes two characters later.
    let mut chunks: Vec<Vec<char>> = Vec::new();
    if body.contains(&'-') {
        let mut start = 0usize;
        let mut k = 1usize;
        loop {
            let found = (k..body.len()).find(|&p| body[p] == '-');
            match found {
                Some(p) => {
                    chunks.push(body[start..p].to_vec());
                    start = p + 1;
                    k = p + 3;
                }
                None => break,
            }
        }
        let last = body[start.min(body.len())..].to_vec();
        if last.is_empty() {
            if let Some(prev) = chunks.last_mut() {
                prev.push('-');
            }
        } else {
            chunks.push(last);
        }
        // Drop ranges whose ends are reversed (`z-a`), merging the neighbours.
        let mut k = chunks.len().saturating_sub(1);
        while k > 0 {
            let prev_last = chunks[k - 1].last().copied();
            let next_first = chunks[k].first().copied();
            if let (Some(a), Some(b)) = (prev_last, next_first) {
                if a > b {
                    let mut merged = chunks[k - 1][..chunks[k - 1].len() - 1].to_vec();
                    merged.extend_from_slice(&chunks[k][1..]);
                    chunks[k - 1] = merged;
                    chunks.remove(k);
                }
            }
            k -= 1;
        }
    } else {
        chunks.push(body.to_vec());
    }
    let total: usize = chunks.iter().map(Vec::len).sum();
    if total == 0 && chunks.len() <= 1 {
        // Every range was dropped: an empty set never matches, a negated one matches all.
        return if negated {
            Token::Any
        } else {
            Token::Set(CharSet {
                negated: false,
                ranges: Vec::new(),
                invalid: false,
            })
        };
    }
    // Chunk k-1's last character and chunk k's first character form a range; all other
    // characters are literal members.
    let mut ranges = Vec::new();
    let mut invalid = false;
    let mut pending: Option<char> = None; // the low end of a range waiting for its high end
    for (idx, chunk) in chunks.iter().enumerate() {
        let mut chars: &[char] = chunk;
        if let Some(lo) = pending.take() {
            match chars.split_first() {
                Some((&hi, rest)) => {
                    if hi < lo {
                        invalid = true;
                    }
                    ranges.push((lo, hi));
                    chars = rest;
                }
                None => {
                    // "lo-" followed by an empty chunk: `re` reads a literal '-'.
                    ranges.push((lo, lo));
                    ranges.push(('-', '-'));
                }
            }
        }
        let is_last = idx + 1 == chunks.len();
        let keep_for_range = !is_last && !chars.is_empty();
        let literal_count = if keep_for_range {
            chars.len() - 1
        } else {
            chars.len()
        };
        for &c in &chars[..literal_count] {
            ranges.push((c, c));
        }
        if keep_for_range {
            pending = chars.last().copied();
        } else if !is_last {
            // An empty chunk between two separators: `re` sees "--", a literal hyphen.
            ranges.push(('-', '-'));
        }
    }
    if let Some(lo) = pending {
        ranges.push((lo, lo));
    }
    Token::Set(CharSet {
        negated,
        ranges,
        invalid,
    })
}

#[cfg(test)]
mod tests {
    use super::fnmatch;

    #[test]
    fn star_and_question_mark() {
        assert!(fnmatch("*", "web1"));
        assert!(fnmatch("*", ""));
        assert!(fnmatch("web*", "web1"));
        assert!(fnmatch("web*", "web"));
        assert!(!fnmatch("web*", "db1"));
        assert!(fnmatch("*b*", "web1"));
        assert!(fnmatch("w?b1", "web1"));
        assert!(!fnmatch("w?b1", "wb1"));
        assert!(fnmatch("*.example.*", "m1.example.com"));
        assert!(fnmatch("a*b*c", "aXXbYYbc"));
        assert!(!fnmatch("a*b*c", "aXXbYYb"));
        assert!(fnmatch("**x", "x"));
        assert!(fnmatch("*", "line\nbreak"));
    }

    #[test]
    fn literal_and_case_sensitive() {
        assert!(fnmatch("m1", "m1"));
        assert!(!fnmatch("m1", "M1"));
        assert!(!fnmatch("m1", "m10"));
        assert!(!fnmatch("", "m"));
        assert!(fnmatch("", ""));
        assert!(
            fnmatch("a\\b", "a\\b"),
            "backslash is an ordinary character"
        );
        assert!(fnmatch("a.b", "a.b"));
        assert!(!fnmatch("a.b", "axb"));
        assert!(fnmatch("ü*", "über"));
    }

    #[test]
    fn bracket_sets() {
        assert!(fnmatch("m[12]", "m1"));
        assert!(fnmatch("m[12]", "m2"));
        assert!(!fnmatch("m[12]", "m3"));
        assert!(fnmatch("m[!12]", "m3"));
        assert!(!fnmatch("m[!12]", "m1"));
        assert!(fnmatch("m[0-9]", "m7"));
        assert!(!fnmatch("m[0-9]", "mx"));
        assert!(fnmatch("[a-cx-z]", "y"));
        assert!(!fnmatch("[a-cx-z]", "d"));
        assert!(fnmatch("[]]", "]"));
        assert!(fnmatch("[!]]", "a"));
        assert!(!fnmatch("[!]]", "]"));
        assert!(fnmatch("[]a]", "a"));
        assert!(fnmatch("[-a]", "-"));
        assert!(fnmatch("[a-]", "-"));
        assert!(fnmatch("[a-]", "a"));
        assert!(!fnmatch("[a-]", "b"));
        // '[!]' has no closing bracket of its own: the whole thing is literal text.
        assert!(fnmatch("[!]", "[!]"));
        assert!(!fnmatch("[!]", "!"));
    }

    #[test]
    fn unclosed_bracket_is_literal() {
        assert!(fnmatch("m[1", "m[1"));
        assert!(!fnmatch("m[1", "m1"));
        assert!(fnmatch("[", "["));
    }

    #[test]
    fn reversed_ranges_are_dropped_like_python() {
        // Python 3.11: translate('[z-a]') == '(?s:(?!))\\Z' -> never matches.
        assert!(!fnmatch("[z-a]", "z"));
        assert!(!fnmatch("[z-a]", "-"));
        // '[!z-a]' becomes '.' -> any single character.
        assert!(fnmatch("[!z-a]", "q"));
        // '[az-b]': chunks "az","b" -> 'z' > 'b' dropped -> set {a}.
        assert!(fnmatch("[az-b]", "a"));
        assert!(!fnmatch("[az-b]", "z"));
        assert!(!fnmatch("[az-b]", "b"));
    }

    #[test]
    fn hyphen_runs() {
        // '[a-b-c]': range a-b, then literal '-' and 'c'.
        for c in ["a", "b", "-", "c"] {
            assert!(fnmatch("[a-b-c]", c), "{c}");
        }
        assert!(!fnmatch("[a-b-c]", "d"));
        // '[--0]': range '-'..'0' (includes '.' and '/').
        assert!(fnmatch("[--0]", "."));
        assert!(fnmatch("[--0]", "0"));
        assert!(!fnmatch("[--0]", "1"));
    }

    /// Expected hits computed with CPython 3.11 `fnmatch.fnmatch` over the name list.
    #[test]
    fn bracket_table_matches_cpython() {
        let names = [
            "a", "b", "c", "z", "-", "!", "]", "^", "[", "\\", "y", "ab", "",
        ];
        let table: &[(&str, &[&str])] = &[
            ("[!-a]", &["b", "c", "z", "!", "]", "^", "[", "\\", "y"]),
            ("[!\\^!b]", &["a", "c", "z", "-", "]", "[", "y"]),
            ("[!a]", &["b", "c", "z", "-", "!", "]", "^", "[", "\\", "y"]),
            ("[-\\!-\\]", &["-", "!", "[", "\\"]),
            ("[-]", &["-"]),
            ("[-][b-]", &[]),
            ("[-]]", &[]),
            ("[-a\\]", &["a", "-", "\\"]),
            ("[-c]", &["c", "-"]),
            ("[-cb]", &["b", "c", "-"]),
            ("[-z]-]", &[]),
            ("[-z]zz]", &[]),
            ("[[!a]", &["a", "!", "["]),
            ("[[[]", &["["]),
            ("[[\\\\]", &["[", "\\"]),
            ("[[\\]", &["[", "\\"]),
            ("[[]", &["["]),
            ("[[^^]", &["^", "["]),
            ("[[b[]", &["b", "["]),
            ("[\\-]", &["-", "\\"]),
            ("[\\\\b]", &["b", "\\"]),
            ("[\\]", &["\\"]),
            ("[\\^-]", &["-", "^", "\\"]),
            ("[\\^^]", &["^", "\\"]),
            ("[\\a]", &["a", "\\"]),
            ("[\\b]]", &[]),
            ("[\\c\\a[]", &["a", "c", "[", "\\"]),
            ("[\\c]z]", &[]),
            ("[\\cb]", &["b", "c", "\\"]),
            ("[\\z[c!]", &["c", "z", "!", "[", "\\"]),
            ("[\\zc[]", &["c", "z", "[", "\\"]),
            ("[]", &[]),
            ("[]!]", &["!", "]"]),
            ("[][^]", &["]", "^", "["]),
            ("[]]", &["]"]),
            ("[]]\\a]", &[]),
            ("[]]]]", &[]),
            ("[]c^]", &["c", "]", "^"]),
            ("[]za]", &["a", "z", "]"]),
            ("[^-z]", &["a", "b", "c", "z", "^", "y"]),
            ("[^]", &["^"]),
            ("[^^z!]]", &[]),
            ("[^c\\^]", &["c", "^", "\\"]),
            ("[a-\\b]", &["b"]),
            ("[a\\]^]", &[]),
            ("[a]", &["a"]),
            ("[a^!^]", &["a", "!", "^"]),
            ("[a^[ac]", &["a", "c", "^", "["]),
            ("[a^\\]", &["a", "^", "\\"]),
            ("[ab-]^]", &[]),
            ("[ab]", &["a", "b"]),
            ("[ab^]", &["a", "b", "^"]),
            ("[azb]", &["a", "b", "z"]),
            ("[b]", &["b"]),
            ("[b]b-]", &[]),
            ("[b^b-]", &["b", "-", "^"]),
            ("[b^b[!]", &["b", "!", "^", "["]),
            ("[baa]", &["a", "b"]),
            ("[baa^^]", &["a", "b", "^"]),
            ("[bbbb]", &["b"]),
            ("[bcz]", &["b", "c", "z"]),
            ("[c!!b^]", &["b", "c", "!", "^"]),
            ("[c]", &["c"]),
            ("[c]^za]", &[]),
            ("[c]cc]", &[]),
            ("[c^]", &["c", "^"]),
            ("[cb]", &["b", "c"]),
            ("[cbcz]", &["b", "c", "z"]),
            ("[z-!b]", &["b"]),
            ("[z[]", &["z", "["]),
            ("[z[z-]", &["z", "-", "["]),
            ("[z\\!]", &["z", "!", "\\"]),
            ("[z\\]", &["z", "\\"]),
            ("[z]", &["z"]),
            ("[za\\!!]", &["a", "z", "!", "\\"]),
            ("[za]]", &[]),
            ("[zc]", &["c", "z"]),
            ("[zc]]]", &[]),
            ("[zz]", &["z"]),
            ("[zz^-c]", &["a", "b", "c", "z", "^"]),
            ("[a--]", &[]),
            ("[a---]", &["-"]),
            ("[x-a-c]", &["-", "c"]),
            ("[c-a-z]", &["-", "z"]),
        ];
        for (pattern, hits) in table {
            for name in names {
                assert_eq!(
                    fnmatch(pattern, name),
                    hits.contains(&name),
                    "pattern {pattern:?} name {name:?}"
                );
            }
        }
    }
}

#[cfg(test)]
mod python_oracle {
    /// Each case as Python 3.11's `fnmatch.fnmatchcase(name, pattern)` answers it.
    const CASES: &[(&str, &str, bool)] = &[
        ("[z-a]", "m", false),
        ("[!z-a]", "m", true),
        ("[az-b]", "a", true),
        ("[az-b]", "b", false),
        ("[az-b]", "m", false),
        ("web[3-1]", "web2", false),
        ("web[1-3]", "web2", true),
        ("[a-c-e]", "d", false),
        ("[a-c-e]", "-", true),
        ("[]-a]", "b", false),
        ("[b-a]*", "x", false),
        ("x[z-a-c]y", "x-y", true),
        ("x[z-a-c]y", "xby", false),
        ("[!]", "!", false),
        ("[!]a]", "b", true),
        ("*.[ch]", "f.c", true),
        ("a\\*b", "a\\xb", true),
    ];

    #[test]
    fn reversed_ranges_and_brackets_as_python() {
        for &(pat, name, want) in CASES {
            assert_eq!(
                super::fnmatch(pat, name),
                want,
                "fnmatch({pat:?}, {name:?})"
            );
        }
    }
}

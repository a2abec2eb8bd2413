//! Salt's Jinja dialect rewritten into plain MiniJinja before compiling, keeping line numbers:
//! `{% import_yaml 'x' as y %}` (and `import_json`, `import_text`) becomes a `set` through a
//! loader function, `{% load_yaml as y %}…{% endload %}` a `set` block and a filter, every
//! `{…}`/`[…]` literal is wrapped so it builds a mutable Python `dict`/`list`, and a string
//! literal's `%` operator (`"%s:%d" % (host, port)`) becomes a call of Python's formatting.

/// The function a rewritten `import_*` tag calls: `(kind, path)`.
pub(crate) const IMPORT_FN: &str = "__brine_import";
/// The function wrapping literals.
pub(crate) const MUT_FN: &str = "__brine_mut";
/// The function a string literal's `%` operator becomes: `(format, args)`.
pub(crate) const PERCENT_FN: &str = "__brine_percent";

const KEYWORDS: &[&str] = &[
    "in", "and", "or", "not", "if", "else", "elif", "for", "set", "do", "is", "with", "import",
    "include", "as", "from", "call", "return", "print", "filter", "macro",
];

/// Rewrite one template's source.
pub(crate) fn rewrite(source: &str) -> String {
    let bytes: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len() + 64);
    let mut i = 0;
    let mut pending_load: Vec<(String, String)> = Vec::new();
    while i < bytes.len() {
        let c = bytes[i];
        let next = bytes.get(i + 1).copied();
        if c == '{' && next == Some('#') {
            let end = find(&bytes, i + 2, "#}").map_or(bytes.len(), |e| e + 2);
            out.extend(&bytes[i..end]);
            i = end;
        } else if c == '{' && (next == Some('%') || next == Some('{')) {
            let block = next == Some('%');
            let mut j = i + 2;
            let mut open = String::from(if block { "{%" } else { "{{" });
            if matches!(bytes.get(j), Some('-' | '+')) {
                open.push(bytes[j]);
                j += 1;
            }
            if block {
                let body_end = tag_end(&bytes, j);
                let body: String = bytes[j..body_end.0].iter().collect();
                let trimmed = body.trim();
                let word = trimmed.split_whitespace().next().unwrap_or("");
                if word == "raw" {
                    let end = find(&bytes, body_end.1, "endraw")
                        .and_then(|e| find(&bytes, e, "%}"))
                        .map_or(bytes.len(), |e| e + 2);
                    out.extend(&bytes[i..end]);
                    i = end;
                    continue;
                }
                let newlines = "\n".repeat(body.matches('\n').count());
                let close: String = bytes[body_end.0..body_end.1].iter().collect();
                if let Some(rewritten) = rewrite_import(trimmed) {
                    out.push_str(&open);
                    out.push(' ');
                    out.push_str(&expression(&rewritten));
                    out.push_str(&newlines);
                    out.push(' ');
                    out.push_str(&close);
                    i = body_end.1;
                    continue;
                }
                if let Some((kind, var)) = load_block(trimmed) {
                    out.push_str(&format!("{open} set {var}{newlines} {close}"));
                    pending_load.push((kind, var));
                    i = body_end.1;
                    continue;
                }
                if word == "endload" {
                    if let Some((kind, var)) = pending_load.pop() {
                        out.push_str(&format!(
                            "{open} endset {close}{{% set {var} = {var}|load_{kind} %}}{newlines}"
                        ));
                        i = body_end.1;
                        continue;
                    }
                }
                out.push_str(&open);
                out.push_str(&expression(&body));
                out.push_str(&close);
                i = body_end.1;
            } else {
                let end = tag_end(&bytes, j);
                let body: String = bytes[j..end.0].iter().collect();
                out.push_str(&open);
                out.push_str(&expression(&body));
                out.extend(&bytes[end.0..end.1]);
                i = end.1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn find(chars: &[char], from: usize, needle: &str) -> Option<usize> {
    let needle: Vec<char> = needle.chars().collect();
    (from..chars.len()).find(|&k| chars[k..].starts_with(&needle))
}

/// Where a tag's body ends and where its closing marker (`-%}`, `}}`…) ends, skipping strings
/// and brackets.
fn tag_end(chars: &[char], from: usize) -> (usize, usize) {
    let mut depth = 0usize;
    let mut k = from;
    while k < chars.len() {
        let c = chars[k];
        match c {
            '\'' | '"' => {
                k += 1;
                while k < chars.len() && chars[k] != c {
                    if chars[k] == '\\' {
                        k += 1;
                    }
                    k += 1;
                }
            }
            '(' | '[' | '{' => depth += 1,
            ')' | ']' => depth = depth.saturating_sub(1),
            '}' if depth > 0 => depth -= 1,
            '-' | '+'
                if depth == 0
                    && matches!(chars.get(k + 1), Some('%' | '}'))
                    && chars.get(k + 2) == Some(&'}') =>
            {
                return (k, k + 3);
            }
            '%' | '}' if depth == 0 && chars.get(k + 1) == Some(&'}') => return (k, k + 2),
            _ => {}
        }
        k += 1;
    }
    (chars.len(), chars.len())
}

fn rewrite_import(body: &str) -> Option<String> {
    let rest = body.strip_prefix("import_")?;
    let (kind, rest) = rest.split_once(char::is_whitespace)?;
    if !matches!(kind, "yaml" | "json" | "text") {
        return None;
    }
    let (source, var) = rest.rsplit_once(" as ")?;
    let var = var.trim();
    if var.is_empty() || !var.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return None;
    }
    Some(format!(
        "set {var} = {IMPORT_FN}('{kind}', {})",
        source.trim()
    ))
}

fn load_block(body: &str) -> Option<(String, String)> {
    let rest = body.strip_prefix("load_")?;
    let (kind, rest) = rest.split_once(char::is_whitespace)?;
    if !matches!(kind, "yaml" | "json" | "text") {
        return None;
    }
    let var = rest.trim().strip_prefix("as")?.trim();
    if var.is_empty() || !var.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return None;
    }
    Some((kind.to_string(), var.to_string()))
}

/// Wrap the `{…}` and `[…]` literals of an expression (a tag body).
fn expression(body: &str) -> String {
    #[derive(PartialEq)]
    enum Last {
        Nothing,
        Operand,
        Keyword,
        Operator,
    }
    let chars: Vec<char> = body.chars().collect();
    let mut out = String::with_capacity(body.len() + 16);
    let mut stack: Vec<bool> = Vec::new();
    let mut last = Last::Nothing;
    let mut k = 0;
    while k < chars.len() {
        let c = chars[k];
        if c == '\'' || c == '"' {
            let start = k;
            k += 1;
            while k < chars.len() && chars[k] != c {
                if chars[k] == '\\' {
                    k += 1;
                }
                k += 1;
            }
            k = (k + 1).min(chars.len());
            let literal: String = chars[start..k].iter().collect();
            let op = skip_ws(&chars, k);
            let operand = if chars.get(op) == Some(&'%') {
                Some((op + 1, operand_end(&chars, op + 1)))
            } else {
                None
            };
            match operand {
                Some((from, end)) if end > from => {
                    let operand: String = chars[from..end].iter().collect();
                    out.push_str(&format!(
                        "{PERCENT_FN}({literal}, {})",
                        expression(operand.trim())
                    ));
                    k = end;
                }
                _ => out.push_str(&literal),
            }
            last = Last::Operand;
            continue;
        }
        if c.is_alphanumeric() || c == '_' {
            let start = k;
            while k < chars.len()
                && (chars[k].is_alphanumeric()
                    || chars[k] == '_'
                    || (chars[k] == '.' && chars[start].is_ascii_digit()))
            {
                k += 1;
            }
            let word: String = chars[start..k].iter().collect();
            last = if KEYWORDS.contains(&word.as_str()) {
                Last::Keyword
            } else {
                Last::Operand
            };
            out.push_str(&word);
            continue;
        }
        match c {
            '{' => {
                out.push_str(MUT_FN);
                out.push_str("({");
                stack.push(true);
                last = Last::Operator;
            }
            '[' => {
                let literal = last != Last::Operand;
                if literal {
                    out.push_str(MUT_FN);
                    out.push('(');
                }
                out.push('[');
                stack.push(literal);
                last = Last::Operator;
            }
            '(' => {
                out.push('(');
                stack.push(false);
                last = Last::Operator;
            }
            '}' | ']' | ')' => {
                out.push(c);
                if stack.pop() == Some(true) {
                    out.push(')');
                }
                last = Last::Operand;
            }
            c if c.is_whitespace() => out.push(c),
            c => {
                out.push(c);
                last = Last::Operator;
            }
        }
        k += 1;
    }
    out
}

fn skip_ws(chars: &[char], mut i: usize) -> usize {
    while chars.get(i).is_some_and(|c| c.is_whitespace()) {
        i += 1;
    }
    i
}

/// The end of a string literal starting at `i` (a quote).
fn string_end(chars: &[char], mut i: usize) -> usize {
    let quote = chars[i];
    i += 1;
    while i < chars.len() && chars[i] != quote {
        if chars[i] == '\\' {
            i += 1;
        }
        i += 1;
    }
    (i + 1).min(chars.len())
}

/// The end of the bracketed group opening at `i`.
fn group_end(chars: &[char], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < chars.len() {
        match chars[i] {
            '\'' | '"' => {
                i = string_end(chars, i);
                continue;
            }
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

fn word_end(chars: &[char], mut i: usize) -> usize {
    while chars
        .get(i)
        .is_some_and(|c| c.is_alphanumeric() || *c == '_' || *c == '.')
    {
        i += 1;
    }
    i
}

/// The end of the right operand of `%` starting at `from`: what Python binds tighter than
/// `%` (a unary minus, an atom with its attributes, subscripts and calls) and Jinja's filters.
/// `from` itself when there is none.
fn operand_end(chars: &[char], from: usize) -> usize {
    let mut i = skip_ws(chars, from);
    if chars.get(i) == Some(&'-') {
        i = skip_ws(chars, i + 1);
    }
    let start = i;
    i = match chars.get(i) {
        Some('(' | '[' | '{') => group_end(chars, i),
        Some('\'' | '"') => string_end(chars, i),
        Some(c) if c.is_alphanumeric() || *c == '_' => word_end(chars, i),
        _ => return from,
    };
    if i == start {
        return from;
    }
    loop {
        match chars.get(i) {
            Some('(' | '[') => i = group_end(chars, i),
            _ => {
                let bar = skip_ws(chars, i);
                if chars.get(bar) == Some(&'|') && chars.get(bar + 1) != Some(&'|') {
                    let name = skip_ws(chars, bar + 1);
                    let end = word_end(chars, name);
                    if end == name {
                        return i;
                    }
                    i = end;
                    if chars.get(i) == Some(&'(') {
                        i = group_end(chars, i);
                    }
                } else {
                    return i;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_wrapped_subscripts_are_not() {
        let got =
            rewrite("{% set d = {'a': [1, x[0]]} %}{{ d['a'] }}{% for i in [1] %}{% endfor %}");
        assert_eq!(
            got,
            "{% set d = __brine_mut({'a': __brine_mut([1, x[0]])}) %}{{ d['a'] }}{% for i in __brine_mut([1]) %}{% endfor %}"
        );
    }

    #[test]
    fn percent_of_a_string_literal_becomes_a_call() {
        assert_eq!(
            rewrite("{{ 'a' ~ \"%s:%d\" % (h.name, p|int) ~ 'b' }}{{ '%s' % x.y[0]|upper }}"),
            "{{ 'a' ~ __brine_percent(\"%s:%d\", (h.name, p|int)) ~ 'b' }}{{ __brine_percent('%s', x.y[0]|upper) }}"
        );
        assert_eq!(
            rewrite("{% set s = '%(a)s' % {'a': 1} %}{{ n % 2 }}"),
            "{% set s = __brine_percent('%(a)s', __brine_mut({'a': 1})) %}{{ n % 2 }}"
        );
    }

    #[test]
    fn import_tags_become_sets() {
        let got = rewrite(
            "{%- import_yaml \"a/b.yaml\" as cfg -%}\n{% load_json as j %}[1]{% endload %}",
        );
        assert_eq!(
            got,
            "{%- set cfg = __brine_import('yaml', \"a/b.yaml\") -%}\n{% set j %}[1]{% endset %}{% set j = j|load_json %}"
        );
    }
}

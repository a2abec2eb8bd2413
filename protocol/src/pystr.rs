//! Python's whitespace as `str` methods see it (`isspace`, `split()`, `strip()`): Unicode
//! whitespace and the separators U+001C..U+001F, which Rust's `char::is_whitespace` leaves
//! out.

/// Python's `str.isspace()` for one character.
pub fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// Python's `str.split()`: the words between runs of whitespace.
pub fn split(s: &str) -> Vec<&str> {
    s.split(is_space).filter(|w| !w.is_empty()).collect()
}

/// Python's `str.strip()`.
pub fn strip(s: &str) -> &str {
    s.trim_matches(is_space)
}

/// Python's `str.lstrip()`.
pub fn strip_start(s: &str) -> &str {
    s.trim_start_matches(is_space)
}

/// Python's `str.rstrip()`.
pub fn strip_end(s: &str) -> &str {
    s.trim_end_matches(is_space)
}

/// The lines of a text as Python reads a file opened with `newline=""` (Salt's `fopen`):
/// each ends after `\n`, `\r\n` or `\r`, its ending kept.
pub fn fopen_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let end = match rest.find(['\n', '\r']) {
            Some(i) if rest[i..].starts_with("\r\n") => i + 2,
            Some(i) => i + 1,
            None => rest.len(),
        };
        lines.push(&rest[..end]);
        rest = &rest[end..];
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separators_are_whitespace_as_in_python() {
        assert_eq!(split(" a\x1cb\u{3000}c  "), ["a", "b", "c"]);
        assert_eq!(strip("\x1f x \u{85}"), "x");
        assert_eq!(strip_start("\t x "), "x ");
        assert_eq!(strip_end("\t x \x1e"), "\t x");
        assert!(!is_space('\u{200b}'));
    }

    #[test]
    fn file_lines_keep_their_endings() {
        assert_eq!(
            fopen_lines("a\r\nb\rc\n\nd"),
            ["a\r\n", "b\r", "c\n", "\n", "d"]
        );
        assert!(fopen_lines("").is_empty());
    }
}

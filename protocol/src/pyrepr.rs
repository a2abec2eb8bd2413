//! Python's `repr()` of floats, strings and bytes, as Salt's output shows them (outputters,
//! argument strings, error messages). One implementation for every crate.

use std::fmt::Write as _;

/// Python's `repr(float)`: the shortest digits that round-trip, positional notation when the
/// decimal exponent is in `-4..16`, otherwise `d.ddde±XX`; integral values keep a `.0`.
pub fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.into();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    // `{:e}` gives the shortest round-trip digits as `-d.ddde<exp>`.
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let sign = if mantissa.starts_with('-') { "-" } else { "" };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if (-4..16).contains(&exp) {
        // Position of the decimal point within `digits`.
        let point = exp + 1;
        if point <= 0 {
            let zeros = "0".repeat(point.unsigned_abs() as usize);
            format!("{sign}0.{zeros}{digits}")
        } else {
            let point = point.unsigned_abs() as usize;
            if digits.len() <= point {
                format!("{sign}{digits}{}.0", "0".repeat(point - digits.len()))
            } else {
                format!("{sign}{}.{}", &digits[..point], &digits[point..])
            }
        }
    } else {
        let (first, rest) = digits.split_at(1);
        let fraction = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let exp_sign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{first}{fraction}e{exp_sign}{:02}", exp.abs())
    }
}

/// Python's `str.isprintable()` for one character: false for controls, format characters,
/// separators other than the ASCII space, surrogates, private use and noncharacters.
pub fn is_printable(c: char) -> bool {
    let u = c as u32;
    if u < 0x20 || u == 0x7f {
        return false;
    }
    if u < 0x7f {
        return true;
    }
    !matches!(u,
        0x80..=0xa0 | 0xad | 0x600..=0x605 | 0x61c | 0x6dd | 0x70f | 0x1680 | 0x180e
        | 0x2000..=0x200f | 0x2028..=0x202f | 0x205f..=0x2064 | 0x2066..=0x206f | 0x3000
        | 0xd800..=0xf8ff | 0xfeff | 0xfff9..=0xfffb | 0xfffe | 0xffff
        | 0xf0000..=0x10ffff)
}

/// Append Python's `repr(str)` of `s`: single quotes unless `s` holds a single quote and no
/// double quote; non-printable characters as `\xNN`, `\uNNNN` or `\UNNNNNNNN`.
pub fn write_str_repr(out: &mut String, s: &str) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if is_printable(c) => out.push(c),
            c => {
                let u = c as u32;
                let _ = if u < 0x100 {
                    write!(out, "\\x{u:02x}")
                } else if u < 0x10000 {
                    write!(out, "\\u{u:04x}")
                } else {
                    write!(out, "\\U{u:08x}")
                };
            }
        }
    }
    out.push(quote);
}

/// Python's `repr(str)` of `s`.
pub fn str_repr(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    write_str_repr(&mut out, s);
    out
}

/// Append Python's `repr(bytes)` of `b` (`b'...'`).
pub fn write_bytes_repr(out: &mut String, b: &[u8]) {
    let quote = if b.contains(&b'\'') && !b.contains(&b'"') {
        b'"'
    } else {
        b'\''
    };
    out.push('b');
    out.push(quote as char);
    for &c in b {
        match c {
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c as char);
            }
            0x20..=0x7e => out.push(c as char),
            c => {
                let _ = write!(out, "\\x{c:02x}");
            }
        }
    }
    out.push(quote as char);
}

/// Python's `shlex.quote`: the text as one shell word.
pub fn shlex_quote(s: &str) -> String {
    if s.is_empty() {
        return "''".into();
    }
    let safe = s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || "@%+=:,./-".contains(c));
    if safe {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\"'\"'"))
    }
}

/// Python `shlex.split(s)` (POSIX mode, no comments). Errors carry Python's message.
pub fn shlex_split(s: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(n) => cur.push(n),
                    None => return Err("No escaped character".into()),
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(n) => cur.push(n),
                        None => return Err("No closing quotation".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.peek() {
                            Some(&n) if n == '"' || n == '\\' => {
                                cur.push(n);
                                chars.next();
                            }
                            Some(_) => cur.push('\\'),
                            None => return Err("No closing quotation".into()),
                        },
                        Some(n) => cur.push(n),
                        None => return Err("No closing quotation".into()),
                    }
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

/// `str(OSError)` as Python words it: `[Errno 2] No such file or directory: '/x'` (without
/// the path when there is none); the error's own text when it carries no errno.
pub fn os_error(e: &std::io::Error, path: Option<&str>) -> String {
    let Some(code) = e.raw_os_error() else {
        return e.to_string();
    };
    // The standard library words it with the C library's `strerror`, as Python does.
    let text = e.to_string();
    let desc = text
        .strip_suffix(&format!(" (os error {code})"))
        .unwrap_or(&text);
    match path {
        Some(p) => format!("[Errno {code}] {desc}: {}", str_repr(p)),
        None => format!("[Errno {code}] {desc}"),
    }
}

/// Python's class for an `OSError` with this errno (`FileNotFoundError`...).
pub fn os_error_class(e: &std::io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::ENOENT) => "FileNotFoundError",
        Some(libc::EEXIST) => "FileExistsError",
        Some(libc::EACCES | libc::EPERM) => "PermissionError",
        Some(libc::EISDIR) => "IsADirectoryError",
        Some(libc::ENOTDIR) => "NotADirectoryError",
        _ => "OSError",
    }
}

/// An `OSError` nothing caught, as the last line of Python's traceback words it:
/// `FileNotFoundError: [Errno 2] No such file or directory: '/x'`.
pub fn os_exception(e: &std::io::Error, path: Option<&str>) -> String {
    format!("{}: {}", os_error_class(e), os_error(e, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expected values are CPython 3.11's `repr()`.
    #[test]
    fn floats_as_python_writes_them() {
        for (f, py) in [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (-2.5, "-2.5"),
            (12345.678, "12345.678"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1e22, "1e+22"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (-1.5e-7, "-1.5e-07"),
            (0.00012, "0.00012"),
            (100.0, "100.0"),
            (-0.0, "-0.0"),
            (0.0, "0.0"),
            (f64::NAN, "nan"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
        ] {
            assert_eq!(float_repr(f), py, "{f:e}");
        }
    }

    #[test]
    fn strings_and_bytes_as_python_writes_them() {
        for (s, py) in [
            ("abc", "'abc'"),
            ("a'b", "\"a'b\""),
            ("a'b\"c", "'a\\'b\"c'"),
            ("tab\there\nnl\\", "'tab\\there\\nnl\\\\'"),
            ("\u{7f}\u{1}", "'\\x7f\\x01'"),
            ("\u{80}é", "'\\x80é'"),
            ("zero\u{200b}width", "'zero\\u200bwidth'"),
            ("\u{f0000}", "'\\U000f0000'"),
            ("日本", "'日本'"),
            ("", "''"),
        ] {
            assert_eq!(str_repr(s), py, "{s:?}");
        }
        let mut out = String::new();
        write_bytes_repr(&mut out, b"a'\x00\xff\"");
        assert_eq!(out, "b'a\\'\\x00\\xff\"'");
        out.clear();
        write_bytes_repr(&mut out, b"it's");
        assert_eq!(out, "b\"it's\"");
    }

    #[test]
    fn os_errors_as_python_words_them() {
        let e = std::io::Error::from_raw_os_error(2);
        assert_eq!(
            os_error(&e, Some("/x'y")),
            "[Errno 2] No such file or directory: \"/x'y\""
        );
        let e = std::io::Error::from_raw_os_error(21);
        assert_eq!(os_error(&e, None), "[Errno 21] Is a directory");
        let e = std::io::Error::other("plain");
        assert_eq!(os_error(&e, Some("/x")), "plain");
    }
}

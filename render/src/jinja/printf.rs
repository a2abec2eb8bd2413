//! Python's string formatting: `fmt % args` (and Jinja's `|format`, which is the same), and the
//! format-spec mini-language of `str.format` (`{:>8}`, `{:.2f}`, `{:05d}`, `{:x}`).

use minijinja::value::{Value, ValueKind};

use super::objects::{map_entries, seq_items};
use super::pyfmt;

/// One conversion: flags, width, precision and the conversion letter.
#[derive(Debug, Default, Clone)]
struct Spec {
    left: bool,
    zero: bool,
    plus: bool,
    space: bool,
    alt: bool,
    /// `str.format`'s fill and alignment (`<`, `>`, `^`, `=`); `None` for `%`.
    align: Option<(char, char)>,
    width: usize,
    precision: Option<usize>,
    conv: char,
}

/// Width and precision are bounded so a template cannot ask for gigabytes of padding.
const MAX_WIDTH: usize = 1 << 16;

/// Python's `fmt % args`: `args` is a tuple (positional), a mapping (for `%(key)s`) or one
/// value. Errors carry Python's wording.
pub(crate) fn percent(fmt: &str, args: &Value) -> Result<String, String> {
    let positional: Vec<Value> = if args.is_tuple() {
        seq_items(args).unwrap_or_default()
    } else {
        vec![args.clone()]
    };
    let mapping = (args.kind() == ValueKind::Map).then_some(args);
    let mut next = 0usize;
    let mut take = |what: &str| -> Result<Value, String> {
        let v = positional
            .get(next)
            .cloned()
            .ok_or_else(|| format!("not enough arguments for format {what}"))?;
        next += 1;
        Ok(v)
    };
    let chars: Vec<char> = fmt.chars().collect();
    let mut out = String::with_capacity(fmt.len() + 16);
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '%' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        let mut keyed = None;
        if chars.get(i) == Some(&'(') {
            let mut depth = 1;
            let from = i + 1;
            i += 1;
            while i < chars.len() && depth > 0 {
                match chars[i] {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ => {}
                }
                i += 1;
            }
            if depth > 0 {
                return Err("incomplete format key".into());
            }
            let key: String = chars[from..i - 1].iter().collect();
            let map = mapping.ok_or("format requires a mapping")?;
            let value = map_entries(map)
                .unwrap_or_default()
                .into_iter()
                .find(|(k, _)| k.as_str() == Some(key.as_str()))
                .map(|(_, v)| v)
                .ok_or_else(|| format!("KeyError: {}", pyfmt::repr_str(&key)))?;
            keyed = Some(value);
        }
        let mut spec = Spec::default();
        while let Some(&c) = chars.get(i) {
            match c {
                '-' => spec.left = true,
                '0' => spec.zero = true,
                '+' => spec.plus = true,
                ' ' => spec.space = true,
                '#' => spec.alt = true,
                _ => break,
            }
            i += 1;
        }
        if chars.get(i) == Some(&'*') {
            i += 1;
            let w = take("string")?;
            let w = w.as_i64().ok_or("* wants int")?;
            spec.left |= w < 0;
            spec.width = bounded(w.unsigned_abs())?;
        } else {
            spec.width = digits(&chars, &mut i)?.unwrap_or(0);
        }
        if chars.get(i) == Some(&'.') {
            i += 1;
            if chars.get(i) == Some(&'*') {
                i += 1;
                let p = take("string")?;
                spec.precision = Some(bounded(
                    p.as_i64().ok_or("* wants int")?.max(0).unsigned_abs(),
                )?);
            } else {
                spec.precision = Some(digits(&chars, &mut i)?.unwrap_or(0));
            }
        }
        while matches!(chars.get(i), Some('h' | 'l' | 'L')) {
            i += 1;
        }
        let Some(&conv) = chars.get(i) else {
            return Err("incomplete format".into());
        };
        i += 1;
        if conv == '%' {
            out.push('%');
            continue;
        }
        spec.conv = conv;
        let value = match keyed {
            Some(v) => v,
            None => take("string")?,
        };
        out.push_str(&convert(&value, &spec).map_err(|e| {
            if e.is_empty() {
                format!(
                    "unsupported format character {} (0x{:x}) at index {start}",
                    pyfmt::repr_str(&conv.to_string()),
                    conv as u32
                )
            } else {
                e
            }
        })?);
    }
    if mapping.is_none() && next < positional.len() {
        return Err("not all arguments converted during string formatting".into());
    }
    Ok(out)
}

/// `format(value, spec)` as `str.format` applies a field's spec.
pub(crate) fn format_spec(value: &Value, spec_text: &str) -> Result<String, String> {
    let chars: Vec<char> = spec_text.chars().collect();
    let mut i = 0;
    let mut spec = Spec::default();
    let is_align = |c: Option<&char>| matches!(c, Some('<' | '>' | '^' | '='));
    if chars.len() >= 2 && is_align(chars.get(1)) {
        spec.align = Some((chars[0], chars[1]));
        i = 2;
    } else if is_align(chars.first()) {
        spec.align = Some((' ', chars[0]));
        i = 1;
    }
    if let Some(&c @ ('+' | ' ' | '-')) = chars.get(i) {
        spec.plus = c == '+';
        spec.space = c == ' ';
        i += 1;
    }
    if chars.get(i) == Some(&'#') {
        spec.alt = true;
        i += 1;
    }
    if chars.get(i) == Some(&'0') {
        spec.zero = true;
        i += 1;
    }
    spec.width = digits(&chars, &mut i)?.unwrap_or(0);
    if chars.get(i) == Some(&'.') {
        i += 1;
        spec.precision = Some(digits(&chars, &mut i)?.ok_or("Format specifier missing precision")?);
    }
    spec.conv = match chars.get(i) {
        Some(&c) if i + 1 == chars.len() => c,
        None if value.kind() == ValueKind::Number && !value.is_integer() => 'r',
        None if value.kind() == ValueKind::Number || value.kind() == ValueKind::Bool => 'd',
        None => 's',
        Some(_) => return Err(format!("Invalid format specifier '{spec_text}'")),
    };
    if spec.conv == 'n' {
        spec.conv = 'g';
    }
    if spec.align.is_none() && spec.zero {
        spec.align = Some(('0', '='));
    }
    if spec.align.is_none() {
        let text = matches!(spec.conv, 's' | 'r');
        spec.align = Some((' ', if text { '<' } else { '>' }));
    }
    if spec.conv == 'd' && value.kind() == ValueKind::Bool {
        return Ok(pad(&i64::from(value.is_true()).to_string(), "", &spec));
    }
    convert(value, &spec).map_err(|e| {
        if e.is_empty() {
            format!("Unknown format code '{}'", spec.conv)
        } else {
            e
        }
    })
}

/// A width or precision given as an argument (`*`), within [`MAX_WIDTH`].
fn bounded(n: u64) -> Result<usize, String> {
    usize::try_from(n)
        .ok()
        .filter(|n| *n <= MAX_WIDTH)
        .ok_or_else(|| "width too big".to_string())
}

fn digits(chars: &[char], i: &mut usize) -> Result<Option<usize>, String> {
    let from = *i;
    while chars.get(*i).is_some_and(char::is_ascii_digit) {
        *i += 1;
    }
    if from == *i {
        return Ok(None);
    }
    let n: usize = chars[from..*i]
        .iter()
        .collect::<String>()
        .parse()
        .map_err(|_| "width too big".to_string())?;
    if n > MAX_WIDTH {
        return Err("width too big".into());
    }
    Ok(Some(n))
}

fn type_name(v: &Value) -> &'static str {
    match v.kind() {
        ValueKind::String => "str",
        ValueKind::Map => "dict",
        ValueKind::Seq if v.is_tuple() => "tuple",
        ValueKind::Seq => "list",
        ValueKind::None | ValueKind::Undefined => "NoneType",
        ValueKind::Bool => "bool",
        ValueKind::Number if v.is_integer() => "int",
        ValueKind::Number => "float",
        _ => "object",
    }
}

/// One value through one conversion. An empty error means "unknown conversion".
fn convert(v: &Value, spec: &Spec) -> Result<String, String> {
    let conv = spec.conv;
    match conv {
        's' | 'r' | 'a' => {
            let mut text = if conv == 's' {
                pyfmt::str(v)
            } else {
                pyfmt::repr(v)
            };
            if let Some(p) = spec.precision {
                text = text.chars().take(p).collect();
            }
            Ok(pad(&text, "", spec))
        }
        'c' => {
            let c = match v.kind() {
                ValueKind::String if v.as_str().is_some_and(|s| s.chars().count() == 1) => {
                    v.as_str().unwrap_or_default().to_string()
                }
                ValueKind::Number if v.is_integer() => v
                    .as_i64()
                    .and_then(|n| u32::try_from(n).ok())
                    .and_then(char::from_u32)
                    .ok_or("%c arg not in range(0x110000)")?
                    .to_string(),
                _ => return Err("%c requires an int or a unicode character".into()),
            };
            Ok(pad(&c, "", spec))
        }
        'd' | 'i' | 'u' | 'x' | 'X' | 'o' | 'b' => {
            let n: i128 = match v.kind() {
                ValueKind::Bool => i128::from(v.is_true()),
                ValueKind::Number if v.is_integer() => {
                    i128::try_from(v.clone()).map_err(|e| e.to_string())?
                }
                ValueKind::Number if matches!(conv, 'd' | 'i' | 'u') => {
                    let f = f64::try_from(v.clone()).map_err(|e| e.to_string())?;
                    if !f.is_finite() {
                        return Err("cannot convert float infinity or NaN to integer".into());
                    }
                    f.trunc() as i128
                }
                _ if matches!(conv, 'd' | 'i' | 'u') => {
                    return Err(format!(
                        "%{conv} format: a real number is required, not {}",
                        type_name(v)
                    ))
                }
                _ => {
                    return Err(format!(
                        "%{conv} format: an integer is required, not {}",
                        type_name(v)
                    ))
                }
            };
            let magnitude = n.unsigned_abs();
            let mut body = match conv {
                'x' => format!("{magnitude:x}"),
                'X' => format!("{magnitude:X}"),
                'o' => format!("{magnitude:o}"),
                'b' => format!("{magnitude:b}"),
                _ => magnitude.to_string(),
            };
            if spec.align.is_none() {
                if let Some(p) = spec.precision {
                    if body.len() < p {
                        body = format!("{}{body}", "0".repeat(p - body.len()));
                    }
                }
            }
            let prefix = match (spec.alt, conv) {
                (true, 'x') => "0x",
                (true, 'X') => "0X",
                (true, 'o') => "0o",
                (true, 'b') => "0b",
                _ => "",
            };
            Ok(pad(&body, &sign(n < 0, spec, prefix), spec))
        }
        'e' | 'E' | 'f' | 'F' | 'g' | 'G' | '%' => {
            let f = match v.kind() {
                ValueKind::Bool => f64::from(u8::from(v.is_true())),
                ValueKind::Number => f64::try_from(v.clone()).map_err(|e| e.to_string())?,
                _ => return Err(format!("must be real number, not {}", type_name(v))),
            };
            let precision = spec.precision.unwrap_or(6);
            let negative = f.is_sign_negative() && f != 0.0 || (f == 0.0 && f.is_sign_negative());
            let a = f.abs();
            let body = if a.is_nan() {
                "nan".to_string()
            } else if a.is_infinite() {
                "inf".to_string()
            } else {
                match conv {
                    'f' | 'F' => fixed(a, precision, spec.alt),
                    '%' => format!("{}%", fixed(a * 100.0, precision, spec.alt)),
                    'e' | 'E' => exponent(a, precision, spec.alt),
                    _ => general(a, precision, spec.alt),
                }
            };
            let body = if conv.is_ascii_uppercase() {
                body.to_uppercase()
            } else {
                body
            };
            Ok(pad(&body, &sign(negative, spec, ""), spec))
        }
        _ => Err(String::new()),
    }
}

fn sign(negative: bool, spec: &Spec, prefix: &str) -> String {
    let s = if negative {
        "-"
    } else if spec.plus {
        "+"
    } else if spec.space {
        " "
    } else {
        ""
    };
    format!("{s}{prefix}")
}

/// Pad `body` (after `sign`) to the spec's width.
fn pad(body: &str, sign: &str, spec: &Spec) -> String {
    let len = body.chars().count() + sign.chars().count();
    let fill_len = spec.width.saturating_sub(len);
    if fill_len == 0 {
        return format!("{sign}{body}");
    }
    let numeric = !matches!(spec.conv, 's' | 'r' | 'a' | 'c');
    match spec.align {
        None if spec.left => format!("{sign}{body}{}", " ".repeat(fill_len)),
        None if spec.zero && numeric => format!("{sign}{}{body}", "0".repeat(fill_len)),
        None => format!("{}{sign}{body}", " ".repeat(fill_len)),
        Some((fill, align)) => {
            let f = |n: usize| fill.to_string().repeat(n);
            match align {
                '<' => format!("{sign}{body}{}", f(fill_len)),
                '^' => format!(
                    "{}{sign}{body}{}",
                    f(fill_len / 2),
                    f(fill_len - fill_len / 2)
                ),
                '=' => format!("{sign}{}{body}", f(fill_len)),
                _ => format!("{}{sign}{body}", f(fill_len)),
            }
        }
    }
}

fn fixed(a: f64, precision: usize, alt: bool) -> String {
    let text = format!("{a:.precision$}");
    if alt && precision == 0 {
        format!("{text}.")
    } else {
        text
    }
}

/// `%e`: a mantissa and an exponent of at least two digits.
fn exponent(a: f64, precision: usize, alt: bool) -> String {
    let text = format!("{a:.precision$e}");
    let (mantissa, exp) = text.split_once('e').unwrap_or((&text, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let dot = if alt && precision == 0 { "." } else { "" };
    format!(
        "{mantissa}{dot}e{}{:02}",
        if exp < 0 { '-' } else { '+' },
        exp.abs()
    )
}

/// `%g`: fixed or exponent notation by the exponent, trailing zeros removed.
fn general(a: f64, precision: usize, alt: bool) -> String {
    let p = precision.max(1);
    if a == 0.0 {
        return if alt {
            format!("{:.*}", p - 1, 0.0)
        } else {
            "0".into()
        };
    }
    let sci = format!("{a:.*e}", p - 1);
    let exp: i32 = sci
        .split_once('e')
        .and_then(|(_, e)| e.parse().ok())
        .unwrap_or(0);
    let text = if exp < -4 || exp >= p as i32 {
        exponent(a, p - 1, alt)
    } else {
        format!("{a:.*}", (p as i32 - 1 - exp).max(0) as usize)
    };
    if alt {
        return text;
    }
    match text.split_once('e') {
        Some((m, e)) => format!("{}e{e}", strip_zeros(m)),
        None => strip_zeros(&text),
    }
}

fn strip_zeros(text: &str) -> String {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use minijinja::value::Value;

    fn tuple(items: Vec<Value>) -> Value {
        Value::from(minijinja::value::Tuple::from(items))
    }

    #[test]
    fn percent_follows_python() {
        let cases: Vec<(&str, Value, &str)> = vec![
            (
                "%s-%s",
                tuple(vec![Value::from("a"), Value::from(1)]),
                "a-1",
            ),
            (
                "%05.1f|%x|%r",
                tuple(vec![
                    Value::from(3.04159),
                    Value::from(255),
                    Value::from("q"),
                ]),
                "003.0|ff|'q'",
            ),
            ("%-6s|", Value::from("ab"), "ab    |"),
            ("%3d%%", Value::from(7), "  7%"),
            (
                "%i:%o:%X:%e",
                tuple(vec![
                    Value::from(4),
                    Value::from(8),
                    Value::from(255),
                    Value::from(12345.678),
                ]),
                "4:10:FF:1.234568e+04",
            ),
            (
                "%g %g %g %g",
                tuple(vec![
                    Value::from(0.0001),
                    Value::from(123456789.0),
                    Value::from(2.5),
                    Value::from(100.0),
                ]),
                "0.0001 1.23457e+08 2.5 100",
            ),
            (
                "%+d %+.2f % d",
                tuple(vec![Value::from(3), Value::from(-1.005), Value::from(4)]),
                "+3 -1.00  4",
            ),
            (
                "%#x %#o %.3d",
                tuple(vec![Value::from(255), Value::from(8), Value::from(5)]),
                "0xff 0o10 005",
            ),
            ("%s", Value::from(()), "None"),
            ("%d", Value::from(2.9), "2"),
            ("%c%c", tuple(vec![Value::from(65), Value::from("b")]), "Ab"),
        ];
        for (fmt, args, want) in cases {
            assert_eq!(percent(fmt, &args).as_deref(), Ok(want), "{fmt}");
        }
    }

    #[test]
    fn percent_errors_as_python() {
        assert_eq!(
            percent("%s %s", &Value::from("a")),
            Err("not enough arguments for format string".into())
        );
        assert_eq!(
            percent("%s", &tuple(vec![Value::from(1), Value::from(2)])),
            Err("not all arguments converted during string formatting".into())
        );
        assert_eq!(
            percent("%d", &Value::from("x")),
            Err("%d format: a real number is required, not str".into())
        );
        assert!(percent("%q", &Value::from(1))
            .unwrap_err()
            .starts_with("unsupported format character 'q'"));
        assert_eq!(
            percent("%999999999s", &Value::from(1)),
            Err("width too big".into())
        );
    }

    #[test]
    fn format_specs_follow_python() {
        let cases: Vec<(Value, &str, &str)> = vec![
            (Value::from(3.04159), ".2f", "3.04"),
            (Value::from(42), "05d", "00042"),
            (Value::from(-42), "06d", "-00042"),
            (Value::from("ab"), ">5", "   ab"),
            (Value::from("ab"), "*^6", "**ab**"),
            (Value::from(255), "#x", "0xff"),
            (Value::from(7), "", "7"),
            (Value::from(7), "<4", "7   "),
            (Value::from(0.5), ".1%", "50.0%"),
            (Value::from("x"), "", "x"),
        ];
        for (v, spec, want) in cases {
            assert_eq!(format_spec(&v, spec).as_deref(), Ok(want), "{spec}");
        }
    }
}

//! A date-table field given as a string (`os.time{ year = "2024", ... }`), read as
//! gopher-lua's `getIntField` reads it: leading spaces dropped, then leading zeros unless
//! a `0x` prefix follows (so `"08"` is 8, not an octal error), then Go's integer syntax
//! (`strconv.ParseInt` with base 0: a sign, `0x`, `0o`, `0b` or `0` prefixes, `_` between
//! digits), or else a decimal float, truncated toward zero.

/// The field's value, or `None` when the string is no number (the field's default
/// applies, as in gopher-lua).
pub(crate) fn string_field(text: &str) -> Option<i64> {
    let mut text = text.trim_start_matches(' ');
    if text.starts_with('0') && !text.starts_with("0x") && !text.starts_with("0X") {
        text = text.trim_start_matches('0');
        if text.is_empty() {
            return Some(0);
        }
    }
    let text = text.trim_matches([' ', '\t', '\n']);
    // gopher-lua's numbers are float64: the integer goes through one first.
    go_parse_int(text)
        .map(|n| n as f64 as i64)
        .or_else(|| text.parse::<f64>().ok().map(|f| f as i64))
}

/// Go's `strconv.ParseInt(text, 0, 64)`.
fn go_parse_int(text: &str) -> Option<i64> {
    let (negative, body) = match text.as_bytes().first()? {
        b'+' => (false, &text[1..]),
        b'-' => (true, &text[1..]),
        _ => (false, text),
    };
    let prefix = body.get(..2).map(str::to_ascii_lowercase);
    let (radix, digits) = match prefix.as_deref() {
        Some("0x") => (16, &body[2..]),
        Some("0o") => (8, &body[2..]),
        Some("0b") => (2, &body[2..]),
        _ if body.len() > 1 && body.starts_with('0') => (8, &body[1..]),
        _ => (10, body),
    };
    if !underscores_ok(body) {
        return None;
    }
    let digits: String = digits.chars().filter(|&c| c != '_').collect();
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = i128::from(u64::from_str_radix(&digits, radix).ok()?);
    i64::try_from(if negative { -magnitude } else { magnitude }).ok()
}

/// Go's `underscoreOK`: each `_` stands between digits (a base prefix counts as one).
fn underscores_ok(body: &str) -> bool {
    let bytes = body.as_bytes();
    let lower = |i: usize| bytes[i].to_ascii_lowercase();
    let mut start = 0;
    let mut hex = false;
    // What came last: b'^' the start, b'0' a digit or prefix, b'_' an underscore, b'!'
    // anything else.
    let mut saw = b'^';
    if bytes.len() >= 2 && bytes[0] == b'0' && matches!(lower(1), b'b' | b'o' | b'x') {
        start = 2;
        saw = b'0';
        hex = lower(1) == b'x';
    }
    for i in start..bytes.len() {
        let c = lower(i);
        if c.is_ascii_digit() || (hex && (b'a'..=b'f').contains(&c)) {
            saw = b'0';
        } else if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
        } else if saw == b'_' {
            return false;
        } else {
            saw = b'!';
        }
    }
    saw != b'_'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_read_as_gopher_lua_reads_date_fields() {
        for (text, value) in [
            ("2024", Some(2024)),
            ("  08", Some(8)),
            ("000", Some(0)),
            ("0x1F", Some(31)),
            ("-010", Some(-8)),
            ("1_000", Some(1000)),
            ("+0b101", Some(5)),
            ("12.9", Some(12)),
            ("-1.5", Some(-1)),
            ("1e3", Some(1000)),
            ("1__0", None),
            ("_1", None),
            ("twelve", None),
            ("", None),
        ] {
            assert_eq!(string_field(text), value, "{text:?}");
        }
    }
}

//! Go-style duration strings as Kubernetes users write them: `500ms`, `30s`, `10m`,
//! `1h30m`. Only the units a health check needs (ms, s, m, h).

use std::time::Duration;

/// Parses a duration such as `10m` or `1h30m`. The error says what was expected.
pub fn parse(s: &str) -> Result<Duration, String> {
    let bad = || format!("{s:?} is not a duration; write e.g. 30s, 10m or 1h30m");
    if s.is_empty() {
        return Err(bad());
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        if num_len == 0 {
            return Err(bad());
        }
        let value: f64 = rest[..num_len].parse().map_err(|_| bad())?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        total += value * scale;
    }
    Ok(Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_compound_durations() {
        assert_eq!(parse("10m").unwrap(), Duration::from_secs(600));
        assert_eq!(parse("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse("1.5s").unwrap(), Duration::from_millis(1500));
    }

    #[test]
    fn rejects_garbage() {
        for s in ["", "10", "m", "10x", "1h-3m"] {
            assert!(parse(s).is_err(), "{s}");
        }
    }
}

//! The hub's `Retry-After` (RFC 9110, section 10.2.3) on a 503 or 429: how long the
//! agent waits at least before its next attempt, instead of its own shorter backoff.
//!
//! The value is delay-seconds (`Retry-After: 2`) or an HTTP-date (IMF-fixdate, or the
//! obsolete RFC 850 and asctime forms a recipient must accept), read against the agent's
//! clock. A wait is capped at [`MAX_RETRY_AFTER`], so a misconfigured proxy cannot
//! silence an agent for hours; a date already past asks for no wait; a value that is
//! neither is ignored (the agent's own backoff applies).

use std::time::{Duration, SystemTime};

/// The longest wait a `Retry-After` can ask for: five minutes.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);

/// The wait `value` asks for at `now`, capped at [`MAX_RETRY_AFTER`]; `None` when it is
/// neither delay-seconds nor an HTTP-date.
pub fn parse(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    let wait = if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // Digits only: a number too large for u64 is still a (very long) wait.
        Duration::from_secs(value.parse().unwrap_or(u64::MAX))
    } else {
        let at = httpdate::parse_http_date(value).ok()?;
        at.duration_since(now).unwrap_or(Duration::ZERO)
    };
    Some(wait.min(MAX_RETRY_AFTER))
}

/// Whether an answer with `status` may carry a `Retry-After` the agent honours: 503
/// (unavailable) and 429 (too many requests).
pub fn honoured_for(status: u16) -> bool {
    status == 503 || status == 429
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(unix: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(unix)
    }

    #[test]
    fn delay_seconds_are_read_and_capped_at_five_minutes() {
        let now = at(1_700_000_000);
        assert_eq!(parse("2", now), Some(Duration::from_secs(2)));
        assert_eq!(parse(" 120 ", now), Some(Duration::from_secs(120)));
        assert_eq!(parse("0", now), Some(Duration::ZERO));
        assert_eq!(parse("86400", now), Some(MAX_RETRY_AFTER));
        assert_eq!(parse("99999999999999999999999", now), Some(MAX_RETRY_AFTER));
    }

    #[test]
    fn an_http_date_in_any_of_its_three_forms_is_a_wait_until_then() {
        // Sun, 06 Nov 1994 08:49:37 GMT is 784111777.
        let now = at(784_111_777 - 30);
        for value in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            assert_eq!(parse(value, now), Some(Duration::from_secs(30)), "{value}");
        }
        assert_eq!(
            parse("Sun, 06 Nov 1994 08:49:37 GMT", at(784_111_777 + 5)),
            Some(Duration::ZERO),
            "a date already past asks for no wait"
        );
        assert_eq!(
            parse("Sun, 06 Nov 1994 08:49:37 GMT", at(0)),
            Some(MAX_RETRY_AFTER)
        );
    }

    #[test]
    fn anything_else_is_ignored() {
        let now = at(1_700_000_000);
        for value in ["", "-5", "1.5", "soon", "2 seconds", "Sun, 06 Nov 1994"] {
            assert_eq!(parse(value, now), None, "{value:?}");
        }
    }

    #[test]
    fn only_503_and_429_are_honoured() {
        assert!(honoured_for(503) && honoured_for(429));
        assert!(!honoured_for(500) && !honoured_for(502) && !honoured_for(401));
    }
}

//! [`ConnectionLimits`]: what any one client can hold on the hub's listener (connections,
//! time to send its headers and body, idle time, HTTP/2 streams and resets) and how many
//! authentication failures one source address may cause, as `serve` flags with their
//! defaults.
//!
//! The defaults are sized for the chart's 512 Mi: an open connection costs about 37 KiB,
//! so the cap of 10,000 keeps a flood of connections within about 370 Mi. Each agent
//! holds one kept-alive connection to the replica that serves it (the leader), so a fleet
//! of 100,000 directly connected agents raises `--max-connections` to about 110,000 with
//! about 4 Gi of memory (docs/install.md, "Limits on clients").
//!
//! Only failures count against `--failure-limit`, so its default (600 a minute per address,
//! 10 a second) answers a flood of forged reports or guessed admin tokens with 429 yet
//! leaves room for about a hundred agents behind one NAT address each failing every
//! heartbeat (e.g. started before their MemberCluster lists their key).

use std::time::Duration;

use crate::limiter::Limit;

/// Bounds on every client of the listener.
#[derive(Clone, Debug, PartialEq, Eq, clap::Args)]
pub struct ConnectionLimits {
    /// Most connections open at once; a connection beyond it is closed as soon as it is
    /// accepted (and logged at most every 10 s), so agents already connected keep
    /// reporting. About 37 KiB of memory each.
    #[arg(
        long,
        env = "FLEETPULSE_MAX_CONNECTIONS",
        default_value_t = 10_000,
        value_parser = count
    )]
    pub max_connections: usize,
    /// Seconds a client has to complete the TLS handshake.
    #[arg(
        long,
        env = "FLEETPULSE_TLS_HANDSHAKE_TIMEOUT_SECONDS",
        default_value = "10",
        value_parser = seconds
    )]
    pub tls_handshake_timeout_seconds: Duration,
    /// Seconds a client has to send a request's headers; the connection is closed
    /// otherwise. For HTTP/1.1 this is also how long a kept-alive connection may wait for
    /// its next request (agents over HTTPS speak HTTP/2, bounded by
    /// --idle-timeout-seconds instead).
    #[arg(
        long,
        env = "FLEETPULSE_HEADER_READ_TIMEOUT_SECONDS",
        default_value = "15",
        value_parser = seconds
    )]
    pub header_read_timeout_seconds: Duration,
    /// Seconds a client has to send a request's body once its headers arrived; the
    /// request is then refused and the connection closed.
    #[arg(
        long,
        env = "FLEETPULSE_BODY_READ_TIMEOUT_SECONDS",
        default_value = "15",
        value_parser = seconds
    )]
    pub body_read_timeout_seconds: Duration,
    /// Seconds a connection may carry no bytes either way before it is closed. Longer than
    /// the agents' heartbeat interval, so they keep their connection.
    #[arg(
        long,
        env = "FLEETPULSE_IDLE_TIMEOUT_SECONDS",
        default_value = "120",
        value_parser = seconds
    )]
    pub idle_timeout_seconds: Duration,
    /// Most concurrent HTTP/2 streams per connection (an agent uses one at a time).
    #[arg(
        long,
        env = "FLEETPULSE_HTTP2_MAX_CONCURRENT_STREAMS",
        default_value_t = 32,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub http2_max_concurrent_streams: u32,
    /// Most HTTP/2 streams a client may open and reset before the hub accepts them; more
    /// closes the connection (the "rapid reset" attack).
    #[arg(
        long,
        env = "FLEETPULSE_HTTP2_MAX_PENDING_RESETS",
        default_value_t = 20,
        value_parser = count
    )]
    pub http2_max_pending_resets: usize,
    /// Authentication failures one source address may cause per window
    /// (--failure-limit-window-seconds): bad signatures, malformed JWS, unknown, revoked or
    /// retired keys, and admin requests answered 401. Past it, until the window ends, its
    /// admin requests are answered 429, and so are its heartbeats and config pulls that
    /// fail (those that authenticate are still served). Successes and refusals of normal
    /// running (replays, clock skew) never count. 0: no limit.
    #[arg(long, env = "FLEETPULSE_FAILURE_LIMIT", default_value_t = 600)]
    pub failure_limit: u32,
    /// The window of --failure-limit, from a source's first counted failure.
    #[arg(
        long,
        env = "FLEETPULSE_FAILURE_LIMIT_WINDOW_SECONDS",
        default_value = "60",
        value_parser = seconds
    )]
    pub failure_limit_window_seconds: Duration,
}

impl ConnectionLimits {
    /// The per-source limit on authentication failures; `None` when turned off.
    pub fn failure_limit(&self) -> Option<Limit> {
        (self.failure_limit > 0).then_some(Limit {
            allowed: self.failure_limit,
            window: self.failure_limit_window_seconds,
        })
    }
}

impl Default for ConnectionLimits {
    /// The flags' defaults.
    fn default() -> Self {
        Self {
            max_connections: 10_000,
            tls_handshake_timeout_seconds: Duration::from_secs(10),
            header_read_timeout_seconds: Duration::from_secs(15),
            body_read_timeout_seconds: Duration::from_secs(15),
            idle_timeout_seconds: Duration::from_secs(120),
            http2_max_concurrent_streams: 32,
            http2_max_pending_resets: 20,
            failure_limit: 600,
            failure_limit_window_seconds: Duration::from_secs(60),
        }
    }
}

/// A count of at least 1.
fn count(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!(
            "{s:?} is not a whole number of at least 1, e.g. 100"
        )),
    }
}

/// A whole number of seconds, at least 1 (fractions, e.g. `0.5`, for tests).
fn seconds(s: &str) -> Result<Duration, String> {
    match s.parse::<f64>() {
        Ok(x) if x >= 0.1 && x.is_finite() => Ok(Duration::from_secs_f64(x)),
        _ => Err(format!(
            "{s:?} is not a number of seconds (at least 0.1), e.g. 10"
        )),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        limits: ConnectionLimits,
    }

    #[test]
    fn the_flags_defaults_are_the_documented_defaults() {
        let parsed = Flags::try_parse_from(["serve"]).unwrap();
        assert_eq!(parsed.limits, ConnectionLimits::default());
    }

    #[test]
    fn a_timeout_of_zero_is_refused_with_an_example() {
        let error = Flags::try_parse_from(["serve", "--idle-timeout-seconds", "0"])
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("at least 0.1"), "{error}");
    }

    #[test]
    fn a_failure_limit_of_zero_turns_the_limit_off() {
        let parsed = Flags::try_parse_from(["serve", "--failure-limit", "0"]).unwrap();
        assert_eq!(parsed.limits.failure_limit(), None);
        let parsed = Flags::try_parse_from([
            "serve",
            "--failure-limit",
            "5",
            "--failure-limit-window-seconds",
            "2.5",
        ])
        .unwrap();
        let limit = parsed.limits.failure_limit().unwrap();
        assert_eq!(
            (limit.allowed, limit.window),
            (5, Duration::from_millis(2500))
        );
    }
}

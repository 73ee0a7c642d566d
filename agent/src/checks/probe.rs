//! HTTP and TCP probes, run from inside the managed cluster the way the kubelet runs its
//! `httpGet` and `tcpSocket` probes.
//!
//! - [`target`]: the probe spec turned into what to call (pure), and [`ProbeSpecError`]
//!   for a spec that names no target, or two.
//! - [`http`]: [`run_http_with`] and [`HttpProber`] (build once, run every period).
//! - [`headers`]: request headers with their values resolved, from Secrets of the checks
//!   namespace through a short-lived cache ([`SecretSource`]).
//! - [`tcp`]: the TCP probe, [`run_tcp`].
//! - [`tls`]: the rustls client configuration of an HTTPS probe (`caBundle`, system roots,
//!   or `insecureSkipVerify`).
//!
//! Every run yields a [`RunOutcome`](super::RunOutcome); nothing here returns an error to
//! the caller: a bad spec is a failing outcome whose message names the field to fix.

pub mod headers;
pub mod http;
pub mod target;
pub mod tcp;
pub mod tls;

#[cfg(test)]
mod http_tests;
#[cfg(test)]
mod target_tests;
#[cfg(test)]
mod tls_tests;

use std::error::Error as StdError;
use std::time::Duration;

pub use headers::SecretSource;
pub use http::{HttpProber, run_http, run_http_with};
pub use target::ProbeSpecError;
pub use tcp::run_tcp;

/// A timeout as people write it: `5s`, `1.5s`, `250ms`.
pub(crate) fn format_timeout(timeout: Duration) -> String {
    let millis = timeout.as_millis();
    if millis.is_multiple_of(1000) {
        format!("{}s", millis / 1000)
    } else if millis >= 1000 {
        format!("{}s", timeout.as_secs_f64())
    } else {
        format!("{millis}ms")
    }
}

/// A transport error in a few words: `connection refused`, `TLS handshake failed: ...`, or
/// the innermost causes of the chain (the outer ones only repeat the URL).
pub(crate) fn describe_error(error: &(dyn StdError + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(words) = error.downcast_ref::<std::io::Error>().and_then(describe_io) {
            return words;
        }
        if let Some(tls) = error.downcast_ref::<rustls::Error>() {
            return format!("TLS handshake failed: {tls}");
        }
        let text = error.to_string();
        if !parts.iter().any(|part| part.contains(&text)) {
            parts.push(text);
        }
        current = error.source();
    }
    // The outermost reqwest error only says "error sending request for url (...)".
    if parts.len() > 1 {
        parts.remove(0);
    }
    parts.join(": ")
}

/// The few I/O errors that deserve plain words; `None` for the rest.
fn describe_io(io: &std::io::Error) -> Option<String> {
    use std::io::ErrorKind;
    // tokio-rustls reports handshake failures as I/O errors wrapping the rustls error,
    // which the connector wraps in another I/O error (whose `source()` skips both).
    if let Some(inner) = io.get_ref() {
        if let Some(tls) = inner.downcast_ref::<rustls::Error>() {
            return Some(format!("TLS handshake failed: {tls}"));
        }
        if let Some(words) = inner.downcast_ref::<std::io::Error>().and_then(describe_io) {
            return Some(words);
        }
    }
    let words = match io.kind() {
        ErrorKind::ConnectionRefused => "connection refused",
        ErrorKind::ConnectionReset => "connection reset by peer",
        ErrorKind::ConnectionAborted => "connection aborted",
        ErrorKind::TimedOut => "connection timed out",
        ErrorKind::HostUnreachable => "host unreachable",
        ErrorKind::NetworkUnreachable => "network unreachable",
        ErrorKind::UnexpectedEof => "connection closed by peer",
        _ => return None,
    };
    Some(words.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_read_as_people_write_them() {
        assert_eq!(format_timeout(Duration::from_secs(5)), "5s");
        assert_eq!(format_timeout(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_timeout(Duration::from_millis(250)), "250ms");
    }

    #[test]
    fn refused_connection_is_described_in_plain_words() {
        let io = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(describe_error(&io), "connection refused");
    }
}

//! Size limits, shared so that agents never build what the hub would refuse.

/// Largest heartbeat or config-request body the hub reads, in bytes.
pub const MAX_BODY_BYTES: usize = 256 * 1024;
/// Most check results in one report.
pub const MAX_CHECKS: usize = 512;
/// Longest check message, in bytes; agents truncate longer ones (at a char boundary).
pub const MAX_MESSAGE_BYTES: usize = 2048;
/// Longest allowed JWS protected header, in bytes (before base64url).
pub const MAX_HEADER_BYTES: usize = 1024;

/// Truncates `s` to at most `max` bytes at a char boundary, marking the cut with `…`.
pub fn truncate_message(s: &mut String, max: usize) {
    if s.len() <= max {
        return;
    }
    let mut cut = max.saturating_sub('…'.len_utf8());
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    s.truncate(cut);
    s.push('…');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_respects_char_boundaries_and_limit() {
        let mut s = "é".repeat(100);
        truncate_message(&mut s, 11);
        assert!(s.len() <= 11);
        assert!(s.ends_with('…'));
        let mut short = String::from("ok");
        truncate_message(&mut short, 11);
        assert_eq!(short, "ok");
    }
}

//! Size limits, shared so that agents never build what the hub would refuse.
//!
//! They add up: a report with every field at its limit, [`MAX_CHECKS`] checks with names
//! of [`MAX_CHECK_NAME_BYTES`], and messages using the whole [`MAX_REPORT_MESSAGE_BYTES`]
//! in their worst-case JSON escaping, signed, still fits in [`MAX_BODY_BYTES`] (a test in
//! the agent builds exactly that report). Messages are counted as they appear in the JSON
//! payload ([`json_escaped_len`]), so escaping cannot push a legal report over the body
//! limit.

/// Largest heartbeat or config-request body the hub reads, in bytes.
pub const MAX_BODY_BYTES: usize = 256 * 1024;
/// Most check results in one report.
pub const MAX_CHECKS: usize = 512;
/// Longest check name, in bytes (a DNS label, as the CRD schema says).
pub const MAX_CHECK_NAME_BYTES: usize = 63;
/// Longest check message, in bytes; agents truncate longer ones (at a char boundary).
pub const MAX_MESSAGE_BYTES: usize = 2048;
/// All check messages of one report together, counted JSON-escaped. Agents share it out,
/// failing checks first, so that a report with many long messages still fits.
pub const MAX_REPORT_MESSAGE_BYTES: usize = 48 * 1024;
/// Longest `aud`, cluster namespace or name, `clusterUid` and `agentVersion`, in bytes.
pub const MAX_IDENTITY_BYTES: usize = 253;
/// Longest allowed JWS protected header, in bytes (before base64url).
pub const MAX_HEADER_BYTES: usize = 1024;

/// The length of `s` once written as a JSON string's contents: `"` and `\` take two
/// bytes, control characters two (`\n`, `\t`, ...) or six (`\u001f`). Counted by bytes (every
/// byte of a multi-byte character is written as it is), which the compiler vectorizes:
/// the hub runs this over every check message of every heartbeat.
pub fn json_escaped_len(s: &str) -> usize {
    // Most strings escape nothing: one pass without branches (which the compiler
    // vectorizes) tells, and only a string that escapes something is counted byte by byte.
    let escapes = s.bytes().fold(false, |any, b| {
        any | (b < 0x20) | (b == b'"') | (b == b'\\')
    });
    if escapes {
        s.bytes().map(escaped_byte_len).sum()
    } else {
        s.len()
    }
}

fn escaped_byte_len(b: u8) -> usize {
    match b {
        b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
        0..=0x1f => 6,
        _ => 1,
    }
}

/// Truncates `s` so that it takes at most `max` bytes JSON-escaped, at a char boundary,
/// marking a cut with `…`.
pub fn truncate_escaped(s: &mut String, max: usize) {
    if json_escaped_len(s) <= max {
        return;
    }
    let room = max.saturating_sub('…'.len_utf8());
    let mut used = 0;
    let mut cut = 0;
    for (i, c) in s.char_indices() {
        let len = if c.is_ascii() {
            escaped_byte_len(c as u8)
        } else {
            c.len_utf8()
        };
        if used + len > room {
            break;
        }
        used += len;
        cut = i + c.len_utf8();
    }
    s.truncate(cut);
    if max >= '…'.len_utf8() {
        s.push('…');
    }
}

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

    #[test]
    fn escaped_length_is_what_serde_json_writes() {
        for s in [
            "plain",
            "quo\"te",
            "back\\slash",
            "new\nline",
            "\u{1}\u{1f}",
            "é…€",
        ] {
            let written = serde_json::to_string(s).unwrap();
            assert_eq!(json_escaped_len(s), written.len() - 2, "{s:?}");
        }
    }

    #[test]
    fn escaped_truncation_stays_within_the_escaped_budget() {
        for (input, max) in [
            ("\u{1}".repeat(100), 40),
            ("\"é".repeat(50), 31),
            ("ok".into(), 2),
        ] {
            let mut s = input.clone();
            truncate_escaped(&mut s, max);
            assert!(json_escaped_len(&s) <= max, "{input:?} -> {s:?}");
            if input != s {
                assert!(s.ends_with('…'));
            }
        }
    }
}

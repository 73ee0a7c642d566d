//! Digests that tell a repeat from a change without reading what was kept.
//!
//! A heartbeat usually says what the last one said: the same condition messages, the
//! same check results. Comparing the new strings with the kept ones reads every kept
//! string, and at fleet scale each is a cache miss (a cluster's state is touched once an
//! interval). A digest of what was last kept, held beside it, is compared instead: equal
//! digests skip the comparison and the copy; a different one takes the full path, which
//! compares and copies as before.
//!
//! The digest is 64 bits of foldhash's quality hasher with a seed drawn once per process,
//! so what agents send cannot be chosen to collide with what was kept. If two different
//! values did collide (about 2^-64 for a given pair), the change would not be shown until
//! the next one: a message or a check's numbers, never a condition's status, which is
//! compared as it is.

use std::fmt::{self, Display, Write};
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::LazyLock;

static SEED: LazyLock<foldhash::quality::RandomState> = LazyLock::new(Default::default);

/// A digest of `value`.
pub fn of(value: impl Hash) -> u64 {
    SEED.hash_one(value)
}

/// A hasher giving digests comparable with every other digest of this process made the
/// same way (the same pieces written in the same order).
pub fn hasher() -> impl Hasher {
    SEED.build_hasher()
}

/// A digest of `reason` and `message` as [`Display`] writes it, without building the
/// message (a condition's message is often formatted from a number). The same text
/// digests alike however `Display` splits its writing.
pub fn of_said(reason: &str, message: impl Display) -> u64 {
    let mut writer = HashWriter {
        hasher: SEED.build_hasher(),
        buf: [0; CHUNK],
        len: 0,
    };
    writer.hasher.write(reason.as_bytes());
    writer.hasher.write_u8(0xff);
    // Writing to a hasher cannot fail, nor can the messages' `Display` (strings and
    // `format_args!`).
    let _ = write!(writer, "{message}");
    writer.finish()
}

/// Bytes hashed at a time: the text is cut at fixed offsets, not where `Display` wrote.
const CHUNK: usize = 64;

struct HashWriter<H> {
    hasher: H,
    buf: [u8; CHUNK],
    len: usize,
}

impl<H: Hasher> HashWriter<H> {
    fn finish(mut self) -> u64 {
        self.hasher.write(&self.buf[..self.len]);
        self.hasher.finish()
    }
}

impl<H: Hasher> Write for HashWriter<H> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut rest = s.as_bytes();
        while !rest.is_empty() {
            let take = rest.len().min(CHUNK - self.len);
            self.buf[self.len..self.len + take].copy_from_slice(&rest[..take]);
            self.len += take;
            rest = &rest[take..];
            if self.len == CHUNK {
                self.hasher.write(&self.buf);
                self.len = 0;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_digests_alike_however_it_is_written() {
        let formatted = of_said("HeartbeatReceived", format_args!("every {}s", 10));
        assert_eq!(formatted, of_said("HeartbeatReceived", "every 10s"));
        assert_ne!(formatted, of_said("HeartbeatReceived", "every 1s"));
        assert_ne!(formatted, of_said("HeartbeatMissed", "every 10s"));
    }

    #[test]
    fn the_split_between_reason_and_message_counts() {
        assert_ne!(of_said("ab", "c"), of_said("a", "bc"));
    }

    #[test]
    fn a_long_message_digests_alike_written_in_pieces() {
        let long = "x".repeat(200);
        let (a, b, c) = (&long[..7], &long[7..130], &long[130..]);
        assert_eq!(of_said("R", format_args!("{a}{b}{c}")), of_said("R", &long));
        assert_ne!(of_said("R", &long), of_said("R", &long[1..]));
    }
}

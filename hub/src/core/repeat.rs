//! A signed report that repeats the last accepted one but for its position and times.
//!
//! An agent's reports follow one another with the same text except `seq`, `iat` and `exp`
//! while nothing about its cluster changes: the same identity, the same check results, the
//! same summary. Parsing that text again costs more than the rest of the hub's own work on
//! a heartbeat. A [`Shape`] is taken of a report's text once it was parsed: the lengths of
//! the text between the three numbers, and a digest of that text. A next text of the same
//! shape (the same bytes around the three numbers, each number plain digits) says what the
//! kept report says with those three numbers in its place, so it is read without a parse.
//!
//! Why that is exact: the text around the numbers is byte for byte the one that parsed, and
//! a JSON number token in a value position replaced by another number token leaves every
//! other token where it was, so the parse would give the same fields, each number read as
//! the digits now say (a number that would not fit its field is not read here, and the parse
//! refuses it as before). The digest is [`crate::core::digest`]'s, seeded once a process, so
//! an agent cannot choose a text to collide with what was kept; and a collision would only
//! have the hub read a report the same agent had signed before with other numbers.

use std::hash::Hasher;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::digest;

/// Where a report's `seq`, `iat` and `exp` sit in its signed text, and a digest of the rest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    /// The lengths of the text before the first number, between them, and after the last.
    pieces: [u32; 4],
    /// The field of each number, in the order of the text.
    order: [Field; 3],
    /// The digest of the four pieces.
    digest: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Seq,
    Iat,
    Exp,
}

/// The position and times a text of a known shape says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Numbers {
    /// `seq`.
    pub seq: u64,
    /// `iat`.
    pub iat: i64,
    /// `exp`.
    pub exp: i64,
}

/// The three numbers' tokens as the text has them (every other field skipped).
#[derive(Deserialize)]
struct Tokens<'a> {
    #[serde(borrow)]
    seq: &'a RawValue,
    #[serde(borrow)]
    iat: &'a RawValue,
    #[serde(borrow)]
    exp: &'a RawValue,
}

impl Shape {
    /// The shape of `text`, a report that parsed; `None` when one of the three numbers is
    /// not plain digits (a negative time, say), so that no next text can be read by it.
    pub fn of(text: &[u8]) -> Option<Self> {
        let tokens: Tokens<'_> = serde_json::from_slice(text).ok()?;
        let base = text.as_ptr() as usize;
        let mut cuts = [
            (Field::Seq, tokens.seq),
            (Field::Iat, tokens.iat),
            (Field::Exp, tokens.exp),
        ]
        .map(|(field, raw)| {
            let token = raw.get();
            (token.as_ptr() as usize - base, token.len(), field)
        });
        cuts.sort_unstable_by_key(|&(at, _, _)| at);
        let mut pieces = [0u32; 4];
        let mut end = 0;
        for (i, &(at, len, _)) in cuts.iter().enumerate() {
            let (_, digits) = plain_digits(&text[at..])?;
            if digits != len {
                return None;
            }
            pieces[i] = u32::try_from(at - end).ok()?;
            end = at + len;
        }
        pieces[3] = u32::try_from(text.len() - end).ok()?;
        let mut shape = Self {
            pieces,
            order: cuts.map(|(_, _, field)| field),
            digest: 0,
        };
        let (digest, _) = shape.scan(text)?;
        shape.digest = digest;
        Some(shape)
    }

    /// What `text` says of the three numbers, if it has this shape: the same text around
    /// them, each plain digits that fit its field.
    pub fn read(&self, text: &[u8]) -> Option<Numbers> {
        let (digest, values) = self.scan(text)?;
        if digest != self.digest {
            return None;
        }
        let mut numbers = Numbers {
            seq: 0,
            iat: 0,
            exp: 0,
        };
        for (field, value) in self.order.into_iter().zip(values) {
            match field {
                Field::Seq => numbers.seq = value,
                Field::Iat => numbers.iat = i64::try_from(value).ok()?,
                Field::Exp => numbers.exp = i64::try_from(value).ok()?,
            }
        }
        Some(numbers)
    }

    /// The digest of `text`'s pieces cut at this shape's lengths, and the numbers between.
    fn scan(&self, text: &[u8]) -> Option<(u64, [u64; 3])> {
        let mut hasher = digest::hasher();
        let mut values = [0u64; 3];
        let mut at = 0;
        for (i, value) in values.iter_mut().enumerate() {
            let piece = text.get(at..at + self.pieces[i] as usize)?;
            hasher.write(piece);
            at += piece.len();
            let (read, len) = plain_digits(&text[at..])?;
            *value = read;
            at += len;
        }
        let last = &text[at..];
        if last.len() != self.pieces[3] as usize {
            return None;
        }
        hasher.write(last);
        Some((hasher.finish(), values))
    }
}

/// The JSON integer without sign, fraction or exponent at the start of `text` (`0`, or
/// digits not starting with `0`) and its length; `None` when there is none or it exceeds
/// `u64`. What follows it is the caller's to check.
fn plain_digits(text: &[u8]) -> Option<(u64, usize)> {
    match text.first()? {
        b'0' => return Some((0, 1)),
        b'1'..=b'9' => {}
        _ => return None,
    }
    let mut value: u64 = 0;
    let mut len = 0;
    for &b in text.iter().take_while(|b| b.is_ascii_digit()) {
        value = value.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
        len += 1;
    }
    Some((value, len))
}

#[cfg(test)]
mod tests;

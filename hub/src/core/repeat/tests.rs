use fleetpulse_common::protocol::report::{ClusterId, HeartbeatReport};
use proptest::prelude::*;

use super::*;
use crate::testing;

fn report(seq: u64, iat: i64, exp: i64) -> HeartbeatReport {
    let mut report = testing::report(&ClusterId::new("fleet", "edge-1"))
        .seq(seq)
        .build();
    (report.iat, report.exp) = (iat, exp);
    report
}

fn text(report: &HeartbeatReport) -> Vec<u8> {
    serde_json::to_vec(report).unwrap()
}

/// The report `kept` with `numbers` in place of its own, as the fast path builds it.
fn with(kept: &HeartbeatReport, numbers: Numbers) -> HeartbeatReport {
    HeartbeatReport {
        seq: numbers.seq,
        iat: numbers.iat,
        exp: numbers.exp,
        ..kept.clone()
    }
}

#[test]
fn a_text_with_other_numbers_reads_as_those_numbers() {
    let kept = report(9, 1_000, 1_060);
    let shape = Shape::of(&text(&kept)).unwrap();
    for (seq, iat, exp) in [(10, 99_999, 0), (0, 1, 2), (u64::MAX, i64::MAX, 7)] {
        let next = text(&report(seq, iat, exp));
        let numbers = shape.read(&next).unwrap();
        assert_eq!(numbers, Numbers { seq, iat, exp });
        let parsed: HeartbeatReport = serde_json::from_slice(&next).unwrap();
        assert_eq!(with(&kept, numbers), parsed);
    }
}

#[test]
fn a_text_that_changed_anywhere_else_is_not_read() {
    let kept = report(9, 1_000, 1_060);
    let shape = Shape::of(&text(&kept)).unwrap();
    let next = String::from_utf8(text(&report(10, 1_001, 1_061))).unwrap();
    let changed = [
        next.replace("fleetpulse", "fleetpulsf"),
        next.replace(",\"iat\"", ", \"iat\""),
        next.replace("\"seq\":10", "\"seq\":010"),
        next.replace("\"seq\":10", "\"seq\":1.0"),
        next.replace("\"seq\":10", "\"seq\":1e1"),
        next.replace("\"iat\":1001", "\"iat\":-1001"),
        next.replace("\"seq\":10", "\"seq\":18446744073709551616"),
        next.replace("\"iat\":1001", "\"iat\":9223372036854775808"),
        next.replace("\"seq\":10", "\"seq\":\"10\""),
        format!("{next} "),
        next[..next.len() - 1].to_owned(),
    ];
    for text in changed {
        assert_ne!(text, next, "the edit applies");
        assert_eq!(shape.read(text.as_bytes()), None, "{text}");
    }
    assert!(shape.read(next.as_bytes()).is_some());
}

#[test]
fn a_report_with_a_number_that_is_not_plain_digits_has_no_shape() {
    assert_eq!(Shape::of(&text(&report(9, -5, 1_060))), None);
    let fraction = String::from_utf8(text(&report(9, 1_000, 1_060)))
        .unwrap()
        .replace("\"exp\":1060", "\"exp\":1060.0");
    assert_eq!(Shape::of(fraction.as_bytes()), None);
    assert_eq!(Shape::of(b"{\"seq\":1}"), None, "no times");
}

proptest! {
    /// Whatever an edit does to a next text, the shape reads it only as what parsing it
    /// gives: the kept report with the numbers read.
    #[test]
    fn a_text_is_read_only_as_its_parse(
        seq in any::<u64>(),
        iat in 0..i64::MAX,
        exp in 0..i64::MAX,
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0..3u8), 0..3),
    ) {
        let kept = report(9, 1_000, 1_060);
        let shape = Shape::of(&text(&kept)).unwrap();
        let mut next = text(&report(seq, iat, exp));
        prop_assert_eq!(shape.read(&next), Some(Numbers { seq, iat, exp }));
        for (at, byte, kind) in edits {
            let at = at.index(next.len());
            match kind {
                0 => next[at] = byte,
                1 => next.insert(at, byte),
                _ => { next.remove(at); }
            }
        }
        if let Some(numbers) = shape.read(&next) {
            let parsed: HeartbeatReport = serde_json::from_slice(&next)
                .map_err(|e| TestCaseError::fail(format!("read but does not parse: {e}")))?;
            prop_assert_eq!(with(&kept, numbers), parsed);
        }
    }
}

//! Property tests of the wire protocol's security invariants: a signed report cannot be
//! altered without failing verification, the replay rules refuse every position at or
//! below the last accepted one, and the freshness window is enforced on `iat`/`exp`.

use ed25519_dalek::SigningKey;
use proptest::prelude::*;
use proptest::sample::Index;

use fleetpulse_common::api::{CheckKind, CheckPhase};
use fleetpulse_common::protocol::errors::RejectCode;
use fleetpulse_common::protocol::replay::{self, Freshness, Position};
use fleetpulse_common::protocol::report::{
    CheckResult, ClusterId, HeartbeatReport, SCHEMA_VERSION, Summary,
};
use fleetpulse_common::protocol::{TYP_HEARTBEAT, jws};

const AUDIENCE: &str = "hub-under-test";
/// Some fixed "hub clock" for the replay properties (2023-11-14).
const NOW: i64 = 1_700_000_000;

// ---------------------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------------------

fn signing_key() -> impl Strategy<Value = SigningKey> {
    any::<[u8; 32]>().prop_map(|seed| SigningKey::from_bytes(&seed))
}

fn dns_label() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9-]{0,14}"
}

fn cluster_id() -> impl Strategy<Value = ClusterId> {
    (dns_label(), dns_label()).prop_map(|(ns, name)| ClusterId::new(ns, name))
}

fn check_result() -> impl Strategy<Value = CheckResult> {
    let kind = prop_oneof![
        Just(CheckKind::Lua),
        Just(CheckKind::Pod),
        Just(CheckKind::Http),
        Just(CheckKind::Tcp),
        Just(CheckKind::ReadyNodes),
        Just(CheckKind::ReadyPods),
        Just(CheckKind::ApiServer),
    ];
    let phase = prop_oneof![Just(CheckPhase::Readiness), Just(CheckPhase::Liveness)];
    (
        dns_label(),
        kind,
        phase,
        any::<bool>(),
        ".{0,40}",
        any::<u32>(),
        // Quarter percents: exactly representable, so the JSON round trip is exact.
        proptest::option::of((0u32..=400).prop_map(|q| f64::from(q) / 4.0)),
    )
        .prop_map(
            |(name, kind, phase, passing, message, consecutive_failures, rate)| CheckResult {
                name,
                kind,
                phase,
                passing,
                message,
                since: None,
                consecutive_failures,
                success_rate_percent: rate,
            },
        )
}

/// A valid report about `cluster` for [`AUDIENCE`], issued at [`NOW`].
fn report_about(cluster: ClusterId) -> impl Strategy<Value = HeartbeatReport> {
    (
        "[a-z0-9-]{0,36}",
        "[0-9a-z.+-]{1,16}",
        any::<u64>(),
        any::<u64>(),
        1u32..3600,
        any::<u64>(),
        proptest::collection::vec(check_result(), 0..4),
    )
        .prop_map(
            move |(uid, version, incarnation, seq, interval, generation, checks)| HeartbeatReport {
                schema_version: SCHEMA_VERSION,
                aud: AUDIENCE.into(),
                cluster: cluster.clone(),
                cluster_uid: uid,
                agent_version: version,
                incarnation,
                seq,
                iat: NOW,
                exp: NOW + 60,
                interval_seconds: interval,
                config_generation: generation,
                summary: Summary::of(&checks),
                checks,
            },
        )
}

fn report() -> impl Strategy<Value = HeartbeatReport> {
    cluster_id().prop_flat_map(report_about)
}

/// A counter value biased towards small numbers, so that positions often share an
/// incarnation or are equal.
fn counter() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..4, any::<u64>()]
}

fn position() -> impl Strategy<Value = Position> {
    (counter(), counter()).prop_map(|(incarnation, seq)| Position { incarnation, seq })
}

fn at(report: &HeartbeatReport, pos: Position) -> HeartbeatReport {
    HeartbeatReport {
        incarnation: pos.incarnation,
        seq: pos.seq,
        ..report.clone()
    }
}

fn freshness() -> impl Strategy<Value = Freshness> {
    (0i64..=600, 1i64..=3600).prop_map(|(skew, lifetime)| Freshness {
        max_clock_skew_secs: skew,
        max_lifetime_secs: lifetime,
    })
}

// ---------------------------------------------------------------------------------------
// Tampering
// ---------------------------------------------------------------------------------------

/// Which part of a compact JWS a mutation aims at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    Header,
    Payload,
    Signature,
    Anywhere,
}

#[derive(Clone, Debug)]
enum Edit {
    FlipBit { bit: u8 },
    Replace(char),
    Insert(char),
    Delete,
}

#[derive(Clone, Debug)]
struct Mutation {
    part: Part,
    at: Index,
    edit: Edit,
}

/// A character likely to survive decoding (the base64url alphabet and the separators),
/// or any character at all.
fn interesting_char() -> impl Strategy<Value = char> {
    prop_oneof![
        3 => proptest::char::ranges(vec!['A'..='Z', 'a'..='z', '0'..='9'].into()),
        1 => proptest::sample::select(vec!['-', '_', '.', '=', '+', '/', ' ', '\n']),
        1 => any::<char>(),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let part = prop_oneof![
        Just(Part::Header),
        Just(Part::Payload),
        Just(Part::Signature),
        Just(Part::Anywhere),
    ];
    let edit = prop_oneof![
        (0u8..8).prop_map(|bit| Edit::FlipBit { bit }),
        interesting_char().prop_map(Edit::Replace),
        interesting_char().prop_map(Edit::Insert),
        Just(Edit::Delete),
    ];
    (part, any::<Index>(), edit).prop_map(|(part, at, edit)| Mutation { part, at, edit })
}

/// Applies `m` to `compact`; returns the mutated bytes and the part actually hit (the
/// separators count as `Anywhere`).
fn apply(compact: &str, m: &Mutation) -> (Vec<u8>, Part) {
    let bytes = compact.as_bytes();
    let d1 = compact.find('.').expect("a JWS has a first dot");
    let d2 = compact.rfind('.').expect("a JWS has a second dot");
    // Insertion may also go right after the part's last byte; other edits need a byte.
    let extra = usize::from(matches!(m.edit, Edit::Insert(_)));
    let range = match m.part {
        Part::Header => 0..d1 + extra,
        Part::Payload => d1 + 1..d2 + extra,
        Part::Signature => d2 + 1..bytes.len() + extra,
        Part::Anywhere => 0..bytes.len() + extra,
    };
    let i = range.start + m.at.index(range.len());
    let hit = if i < d1 || (i == d1 && extra == 1 && m.part == Part::Header) {
        Part::Header
    } else if (d1 < i && i < d2) || (i == d2 && extra == 1 && m.part == Part::Payload) {
        Part::Payload
    } else if i > d2 {
        Part::Signature
    } else {
        Part::Anywhere
    };
    let mut out = bytes.to_vec();
    let mut buf = [0u8; 4];
    match &m.edit {
        Edit::FlipBit { bit } => out[i] ^= 1 << bit,
        Edit::Replace(c) => {
            out.splice(i..=i, c.encode_utf8(&mut buf).bytes());
        }
        Edit::Insert(c) => {
            out.splice(i..i, c.encode_utf8(&mut buf).bytes());
        }
        Edit::Delete => {
            out.remove(i);
        }
    }
    (out, hit)
}

/// What the hub would get out of a token: the verified payload, or why it was refused.
fn verify(token: &[u8], key: &SigningKey) -> Result<Vec<u8>, String> {
    let compact = std::str::from_utf8(token).map_err(|e| format!("not UTF-8: {e}"))?;
    let parsed = jws::parse(compact, TYP_HEARTBEAT).map_err(|e| e.to_string())?;
    parsed
        .verify(&key.verifying_key())
        .map_err(|e| e.to_string())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn signed_report_verifies_to_its_exact_bytes(key in signing_key(), report in report()) {
        let json = serde_json::to_vec(&report).unwrap();
        let token = jws::sign(&key, TYP_HEARTBEAT, &json);
        let payload = verify(token.as_bytes(), &key).expect("an untouched token verifies");
        prop_assert_eq!(&payload, &json);
        let back: HeartbeatReport = serde_json::from_slice(&payload).unwrap();
        prop_assert_eq!(back, report);
    }

    #[test]
    fn any_change_to_a_signed_report_fails_verification(
        key in signing_key(),
        report in report(),
        m in mutation(),
    ) {
        let json = serde_json::to_vec(&report).unwrap();
        let token = jws::sign(&key, TYP_HEARTBEAT, &json);
        let (mutated, hit) = apply(&token, &m);
        prop_assume!(mutated != token.as_bytes(), "the edit was a no-op on the string");
        let outcome = verify(&mutated, &key);
        if let Ok(payload) = &outcome {
            prop_assert_eq!(
                payload, &json,
                "a mutated token ({:?} in {:?}) verified to a DIFFERENT payload", m.edit, hit
            );
            prop_assert!(
                !matches!(hit, Part::Payload | Part::Signature),
                "a mutation ({:?}) in the {:?} verified", m.edit, hit
            );
        }
        // Ed25519 signs the encoded header and payload, so no edit of the string verifies.
        prop_assert!(
            outcome.is_err(),
            "mutated token ({:?} at {:?}) verified: {}",
            m.edit, hit, String::from_utf8_lossy(&mutated)
        );
    }

    #[test]
    fn report_signed_by_another_key_fails_verification(
        key in signing_key(),
        other in signing_key(),
        report in report(),
    ) {
        prop_assume!(key.to_bytes() != other.to_bytes());
        let token = jws::sign(&other, TYP_HEARTBEAT, &serde_json::to_vec(&report).unwrap());
        prop_assert!(verify(token.as_bytes(), &key).is_err());
    }

    // -----------------------------------------------------------------------------------
    // Replay
    // -----------------------------------------------------------------------------------

    #[test]
    fn replayed_or_older_position_is_rejected_with_the_last_accepted(
        report in report(),
        a in position(),
        b in position(),
    ) {
        let (older, last) = if a <= b { (a, b) } else { (b, a) };
        let cluster = report.cluster.clone();
        let err = replay::admit(
            &at(&report, older), AUDIENCE, &cluster, Some(last), NOW, Freshness::default(),
        )
        .expect_err("a position at or below the last accepted one is refused");
        let expected = if older == last { RejectCode::Replayed } else { RejectCode::StaleSequence };
        prop_assert_eq!(err.code, expected);
        prop_assert_eq!(err.last_accepted, Some(last));
    }

    #[test]
    fn newer_position_is_admitted_as_itself(
        report in report(),
        a in position(),
        b in position(),
    ) {
        prop_assume!(a != b);
        let (last, newer) = if a < b { (a, b) } else { (b, a) };
        let cluster = report.cluster.clone();
        let admitted = replay::admit(
            &at(&report, newer), AUDIENCE, &cluster, Some(last), NOW, Freshness::default(),
        );
        prop_assert_eq!(admitted, Ok(newer));
    }

    #[test]
    fn first_report_of_a_key_is_admitted_at_any_position(report in report(), pos in position()) {
        let cluster = report.cluster.clone();
        let admitted =
            replay::admit(&at(&report, pos), AUDIENCE, &cluster, None, NOW, Freshness::default());
        prop_assert_eq!(admitted, Ok(pos));
    }

    #[test]
    fn report_for_another_audience_is_rejected_whatever_its_position(
        report in report(),
        aud in "[a-z-]{1,20}",
        last in proptest::option::of(position()),
    ) {
        prop_assume!(aud != AUDIENCE);
        let cluster = report.cluster.clone();
        let report = HeartbeatReport { aud, ..report };
        let err = replay::admit(&report, AUDIENCE, &cluster, last, NOW, Freshness::default())
            .unwrap_err();
        prop_assert_eq!(err.code, RejectCode::WrongAudience);
        prop_assert_eq!(err.last_accepted, None);
    }

    // -----------------------------------------------------------------------------------
    // Freshness
    // -----------------------------------------------------------------------------------

    #[test]
    fn report_issued_beyond_the_clock_skew_is_expired(
        report in report(),
        f in freshness(),
        now in 0i64..4_000_000_000,
        ahead in 1i64..1_000_000,
        lifetime_frac in 0.0f64..=1.0,
    ) {
        let lifetime = 1 + ((f.max_lifetime_secs - 1) as f64 * lifetime_frac) as i64;
        let iat = now + f.max_clock_skew_secs + ahead;
        let report = HeartbeatReport { iat, exp: iat + lifetime, ..report };
        let cluster = report.cluster.clone();
        let err = replay::admit(&report, AUDIENCE, &cluster, None, now, f).unwrap_err();
        prop_assert_eq!(err.code, RejectCode::ReportExpired);
    }

    #[test]
    fn report_expired_beyond_the_clock_skew_is_expired(
        report in report(),
        f in freshness(),
        now in 0i64..4_000_000_000,
        behind in 1i64..1_000_000,
        lifetime_frac in 0.0f64..=1.0,
    ) {
        let lifetime = 1 + ((f.max_lifetime_secs - 1) as f64 * lifetime_frac) as i64;
        let exp = now - f.max_clock_skew_secs - behind;
        let report = HeartbeatReport { iat: exp - lifetime, exp, ..report };
        let cluster = report.cluster.clone();
        let err = replay::admit(&report, AUDIENCE, &cluster, None, now, f).unwrap_err();
        prop_assert_eq!(err.code, RejectCode::ReportExpired);
    }

    #[test]
    fn report_within_the_window_is_fresh(
        report in report(),
        f in freshness(),
        now in 0i64..4_000_000_000,
        offset_frac in -1.0f64..=1.0,
        lifetime_frac in 0.0f64..=1.0,
    ) {
        let offset = (f.max_clock_skew_secs as f64 * offset_frac) as i64;
        let lifetime = 1 + ((f.max_lifetime_secs - 1) as f64 * lifetime_frac) as i64;
        let iat = now + offset;
        let report = HeartbeatReport { iat, exp: iat + lifetime, ..report };
        let cluster = report.cluster.clone();
        let pos = Position { incarnation: report.incarnation, seq: report.seq };
        prop_assert_eq!(replay::admit(&report, AUDIENCE, &cluster, None, now, f), Ok(pos));
    }

    #[test]
    fn report_with_empty_or_overlong_lifetime_is_expired(
        report in report(),
        f in freshness(),
        lifetime in prop_oneof![-1_000_000i64..=0, 0i64..1_000_000],
    ) {
        let lifetime = if lifetime > 0 { f.max_lifetime_secs + lifetime } else { lifetime };
        let report = HeartbeatReport { iat: NOW, exp: NOW + lifetime, ..report };
        let cluster = report.cluster.clone();
        let err = replay::admit(&report, AUDIENCE, &cluster, None, NOW, f).unwrap_err();
        prop_assert_eq!(err.code, RejectCode::ReportExpired);
    }

    /// `iat`/`exp` are signed by the agent but otherwise arbitrary: extreme values must be
    /// judged (not overflow) and a window that does not contain `now` is never fresh.
    #[test]
    fn freshness_is_judged_without_overflow_for_any_iat_and_exp(
        iat in any::<i64>(),
        exp in any::<i64>(),
        now in 0i64..4_000_000_000,
    ) {
        let f = Freshness::default();
        let result = replay::check_fresh(iat, exp, now, f);
        let fresh = i128::from(exp) > i128::from(iat)
            && i128::from(exp) - i128::from(iat) <= i128::from(f.max_lifetime_secs)
            && i128::from(iat) <= i128::from(now) + i128::from(f.max_clock_skew_secs)
            && i128::from(exp) >= i128::from(now) - i128::from(f.max_clock_skew_secs);
        prop_assert_eq!(result.is_ok(), fresh, "iat {} exp {} now {}", iat, exp, now);
        if let Err(r) = result {
            prop_assert_eq!(r.code, RejectCode::ReportExpired);
        }
    }
}

/// Regression: `exp - iat` used to wrap in release builds, so a report claiming to be valid
/// for all of time passed the window (and panicked the hub in debug builds).
#[test]
fn report_valid_for_all_of_time_is_expired_not_fresh() {
    for (iat, exp) in [(i64::MIN, i64::MAX), (i64::MIN, NOW), (NOW, i64::MAX)] {
        let err = replay::check_fresh(iat, exp, NOW, Freshness::default()).unwrap_err();
        assert_eq!(err.code, RejectCode::ReportExpired, "iat {iat} exp {exp}");
    }
    let err = replay::check_fresh(i64::MAX, i64::MIN, NOW, Freshness::default()).unwrap_err();
    assert_eq!(err.code, RejectCode::ReportExpired);
}

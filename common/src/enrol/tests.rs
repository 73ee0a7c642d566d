//! Property tests of the enrolment rules: a rejected rotation or registration never
//! changes the key set; a rotation without a valid proof of possession, replayed, or signed
//! by a retired or revoked key is always rejected; tokens are single-use, expire and are
//! bound to their scope.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::SigningKey;
use proptest::prelude::*;

use super::keyset::{KeySet, KeyState, Verdict};
use super::message::{Context, Registration, RegistrationRequest, Rotation, RotationRequest};
use super::pin::CaPin;
use super::token::{Approval, BootstrapToken, TokenRecord, TokenScope};
use crate::protocol::errors::RejectCode;
use crate::protocol::keys::{self, KeyId};
use crate::protocol::replay::Freshness;
use crate::protocol::report::ClusterId;

const AUD: &str = "fleetpulse";
const OVERLAP: i64 = 600;

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

fn cluster() -> ClusterId {
    ClusterId::new("fleet", "edge-1")
}

fn cx(now: i64) -> Context<'static> {
    Context {
        audience: AUD,
        now_unix: now,
        freshness: Freshness::default(),
    }
}

fn rotation(current: &SigningKey, new: &SigningKey, now: i64, nonce: u8) -> Rotation {
    Rotation {
        aud: AUD.into(),
        cluster: cluster(),
        current_key_id: KeyId::of(&current.verifying_key()).0,
        new_public_key: keys::public_key_string(&new.verifying_key()),
        iat: now,
        exp: now + 300,
        nonce: URL_SAFE_NO_PAD.encode([nonce; 16]),
    }
}

fn enrolled(first: &SigningKey) -> KeySet {
    let mut set = KeySet::new(cluster());
    set.register(&first.verifying_key(), "abcdef", false, 0)
        .unwrap();
    set
}

/// One step of a random history.
#[derive(Clone, Debug)]
enum Op {
    /// A well-formed rotation by `signer` to a fresh key.
    Rotate { signer: u8, new: u8 },
    /// A rotation whose proof is signed by `forger` instead of the new key.
    ForgedProof { signer: u8, new: u8, forger: u8 },
    /// A rotation whose proof signs a different payload.
    MismatchedProof { signer: u8, new: u8 },
    /// The `n`th request sent so far, again: refused if it was applied; one that was
    /// refused (its signer not yet enrolled, say) is judged afresh, as a new request.
    Replay(usize),
    /// Revoke the key of seed `seed`.
    Revoke(u8),
    /// Let time pass.
    Wait(i64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1u8..12, 1u8..12).prop_map(|(signer, new)| Op::Rotate { signer, new }),
        (1u8..12, 1u8..12, 1u8..12).prop_map(|(signer, new, forger)| Op::ForgedProof {
            signer,
            new,
            forger
        }),
        (1u8..12, 1u8..12).prop_map(|(signer, new)| Op::MismatchedProof { signer, new }),
        (0usize..8).prop_map(Op::Replay),
        (1u8..12).prop_map(Op::Revoke),
        (1i64..1200).prop_map(Op::Wait),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn a_rotation_changes_the_key_set_only_when_signed_by_an_accepted_key_with_a_valid_proof(
        ops in prop::collection::vec(op(), 1..24)
    ) {
        let mut set = enrolled(&key(1));
        let mut now = 1_000i64;
        // Each request sent, whether its proof is valid, and whether it was applied.
        let mut sent: Vec<(RotationRequest, bool, bool)> = Vec::new();
        let mut nonce = 0u8;
        for op in ops {
            let before = set.clone();
            let (request, expect_valid) = match op {
                Op::Wait(secs) => {
                    now += secs;
                    set.expire(now, 120);
                    continue;
                }
                Op::Revoke(seed) => {
                    let kid = KeyId::of(&key(seed).verifying_key()).0;
                    set.revoke(&kid, now);
                    prop_assert_eq!(set.verdict(&kid, now).is_some(), before.get(&kid).is_some());
                    if before.get(&kid).is_some() {
                        prop_assert_eq!(set.verdict(&kid, now), Some(Verdict::Revoked));
                    }
                    continue;
                }
                Op::Replay(n) => match sent.get(n) {
                    Some((r, valid, applied)) => (r.clone(), *valid && !*applied),
                    None => continue,
                },
                Op::Rotate { signer, new } => {
                    nonce = nonce.wrapping_add(1);
                    let r = rotation(&key(signer), &key(new), now, nonce);
                    (RotationRequest::sign(&key(signer), &key(new), &r), true)
                }
                Op::ForgedProof { signer, new, forger } => {
                    nonce = nonce.wrapping_add(1);
                    let r = rotation(&key(signer), &key(new), now, nonce);
                    let mut req = RotationRequest::sign(&key(signer), &key(new), &r);
                    req.proof = RotationRequest::sign(&key(signer), &key(forger), &r).proof;
                    (req, forger == new)
                }
                Op::MismatchedProof { signer, new } => {
                    nonce = nonce.wrapping_add(1);
                    let r = rotation(&key(signer), &key(new), now, nonce);
                    let mut other = r.clone();
                    other.iat -= 1;
                    let mut req = RotationRequest::sign(&key(signer), &key(new), &r);
                    req.proof = RotationRequest::sign(&key(signer), &key(new), &other).proof;
                    (req, false)
                }
            };
            let signer_id = request.signer().unwrap();
            let signer_accepted = matches!(set.verdict(&signer_id, now), Some(Verdict::Accept(_)));
            let signer_active = set.get(&signer_id).map(|k| k.state) == Some(KeyState::Active);
            // A well-formed rotation by the active key to a key the set does not know.
            let must_succeed = match op {
                Op::Rotate { new, .. } => {
                    signer_active && set.get(&KeyId::of(&key(new).verifying_key()).0).is_none()
                }
                _ => false,
            };
            let result = set.rotate(&request, cx(now), OVERLAP);
            let applied = matches!(&result, Ok(rotated) if rotated.changed);
            sent.push((request, expect_valid, applied));
            match result {
                Ok(rotated) if rotated.changed => {
                    prop_assert!(expect_valid && signer_active, "{op:?}");
                    prop_assert_eq!(set.active().map(|k| k.key_id.clone()), Some(rotated.key_id));
                    prop_assert!(matches!(
                        set.verdict(&signer_id, now),
                        Some(Verdict::Accept(_))
                    ));
                }
                Ok(_) => {
                    prop_assert!(expect_valid && signer_accepted, "{op:?}");
                    prop_assert_eq!(&set, &before);
                }
                Err(rejection) => {
                    prop_assert_eq!(&set, &before);
                    prop_assert!(!must_succeed, "{:?} refused: {:?}", op, rejection);
                }
            }
            let active = set.keys.iter().filter(|k| k.state == KeyState::Active).count();
            prop_assert!(active <= 1);
            for k in &before.keys {
                if k.state == KeyState::Revoked {
                    prop_assert_eq!(set.get(&k.key_id).map(|k| k.state), Some(KeyState::Revoked));
                }
            }
        }
    }

    #[test]
    fn a_token_admits_only_its_secret_its_scope_and_only_before_it_expires(
        name in "[a-z]{1,8}",
        pattern_prefix in "[a-z]{0,3}",
        ttl in 1i64..10_000,
        at in 0i64..20_000,
        wrong_secret in "[a-z0-9]{16}",
    ) {
        let token = BootstrapToken::generate();
        let scope = TokenScope::Pattern {
            namespace: "fleet".into(),
            name_pattern: format!("{pattern_prefix}*"),
        };
        let record = TokenRecord::new(&token, scope, Approval::Auto, 0, ttl);
        let target = ClusterId::new("fleet", name.clone());
        let result = record.admit(&token.secret, &target, at);
        let expected = if at >= ttl {
            Err(RejectCode::TokenExpired)
        } else if !name.starts_with(&pattern_prefix) {
            Err(RejectCode::TokenNotForCluster)
        } else {
            Ok(())
        };
        prop_assert_eq!(result.map_err(|r| r.code), expected);
        if wrong_secret != token.secret {
            prop_assert_eq!(
                record.admit(&wrong_secret, &target, at).unwrap_err().code,
                RejectCode::InvalidToken
            );
        }
        let other_namespace = ClusterId::new("other", name);
        prop_assert!(record.admit(&token.secret, &other_namespace, 0).is_err());
        let mut used = record.clone();
        used.used = Some((0, target.clone()));
        prop_assert_eq!(
            used.admit(&token.secret, &target, 0).unwrap_err().code,
            RejectCode::TokenUsed
        );
    }
}

#[test]
fn a_token_round_trips_and_its_record_holds_only_the_hash_of_the_secret() {
    let token = BootstrapToken::generate();
    let text = token.to_string();
    assert_eq!(BootstrapToken::parse(&text).unwrap(), token);
    let record = TokenRecord::new(
        &token,
        TokenScope::Cluster { cluster: cluster() },
        Approval::Manual,
        0,
        3600,
    );
    let stored = serde_json::to_string(&record).unwrap();
    assert!(!stored.contains(&token.secret), "{stored}");
    assert!(record.secret_matches(&token.secret));
    assert!(!format!("{token:?}").contains(&token.secret));
    for bad in [
        "abcdef",
        "abcdef.0123456789abcde",
        "ABCDEF.0123456789abcdef",
        "abcdef:0123456789abcdef",
    ] {
        assert!(BootstrapToken::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn a_registration_verifies_only_with_the_key_it_carries() {
    let k = key(3);
    let registration = Registration {
        aud: AUD.into(),
        cluster: cluster(),
        cluster_uid: String::new(),
        public_key: keys::public_key_string(&k.verifying_key()),
        token_id: "abcdef".into(),
        token_secret: "0123456789abcdef".into(),
        iat: 1_000,
        exp: 1_300,
        nonce: super::message::nonce(),
    };
    let request = RegistrationRequest::sign(&k, &registration);
    let (got, _) = request.verify(cx(1_000)).unwrap();
    assert_eq!(got, registration);

    let mut swapped = request.clone();
    swapped.public_key = keys::public_key_string(&key(4).verifying_key());
    assert_eq!(
        swapped.verify(cx(1_000)).unwrap_err().code,
        RejectCode::BadProofOfPossession
    );
    let forged = RegistrationRequest {
        public_key: request.public_key.clone(),
        registration: RegistrationRequest::sign(&key(4), &registration).registration,
    };
    assert_eq!(
        forged.verify(cx(1_000)).unwrap_err().code,
        RejectCode::BadProofOfPossession
    );
    assert_eq!(
        request.verify(cx(5_000)).unwrap_err().code,
        RejectCode::ReportExpired
    );
}

#[test]
fn a_rotation_overlaps_then_retires_the_old_key_and_answers_the_operators_request() {
    let mut set = enrolled(&key(1));
    set.rotation_requested = true;
    let r = rotation(&key(1), &key(2), 1_000, 1);
    let request = RotationRequest::sign(&key(1), &key(2), &r);
    let rotated = set.rotate(&request, cx(1_000), OVERLAP).unwrap();
    assert!(rotated.changed);
    assert!(!set.rotation_requested, "the request is answered");
    let old = KeyId::of(&key(1).verifying_key()).0;
    assert!(matches!(
        set.verdict(&old, 1_000 + OVERLAP - 1),
        Some(Verdict::Accept(_))
    ));
    assert_eq!(set.verdict(&old, 1_000 + OVERLAP), Some(Verdict::Retired));
    // The same rotation again is a replay.
    let again = set.rotate(&request, cx(1_001), OVERLAP).unwrap_err();
    assert_eq!(again.code, RejectCode::Replayed);
    // A retry with a new nonce after a lost answer is answered as before, unchanged.
    let retry = RotationRequest::sign(&key(1), &key(2), &rotation(&key(1), &key(2), 1_002, 2));
    let before = set.clone();
    assert!(!set.rotate(&retry, cx(1_002), OVERLAP).unwrap().changed);
    assert_eq!(set, before);
}

#[test]
fn a_verdict_takes_the_key_its_caller_parsed_and_asks_only_for_a_key_that_may_sign() {
    let mut set = enrolled(&key(1));
    let kid = KeyId::of(&key(1).verifying_key()).0;
    let cached = keys::StrongKey::of(&key(9));
    let verdict = set.verdict_with(&kid, 0, |k| {
        assert_eq!(k.key_id, kid);
        Some(cached)
    });
    assert_eq!(
        verdict,
        Some(Verdict::Accept(cached)),
        "the caller's key, not a fresh parse"
    );
    assert_eq!(set.verdict_with(&kid, 0, |_| None), Some(Verdict::Revoked));
    set.keys[0].state = KeyState::Retired;
    let asked = |_: &_| panic!("a retired key's public key is not needed");
    assert_eq!(set.verdict_with(&kid, 0, asked), Some(Verdict::Retired));
}

#[test]
fn pins_parse_and_print_as_sha256_hex() {
    let pin = CaPin::of_spki(b"spki");
    let text = pin.to_string();
    assert!(text.starts_with("sha256:") && text.len() == 71, "{text}");
    assert_eq!(text.parse::<CaPin>().unwrap(), pin);
    for bad in [
        "",
        "sha256:",
        "sha1:00",
        &format!("sha256:{}", "g".repeat(64)),
    ] {
        assert!(bad.parse::<CaPin>().is_err(), "{bad}");
    }
}

#[test]
fn a_published_test_vector_key_cannot_be_registered() {
    let mut set = KeySet::new(cluster());
    let published = keys::parse_public_key(keys::PUBLISHED_KEYS[0]).unwrap();
    let refused = set.register(&published, "abcdef", false, 0).unwrap_err();
    assert_eq!(refused.code, RejectCode::KeyInUse);
    assert!(refused.message.contains("RFC 8037"), "{}", refused.message);
    assert!(set.keys.is_empty());
}

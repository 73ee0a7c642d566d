//! Property tests of the key binding: a key listed on one MemberCluster never
//! authenticates reports for another, whatever the clusters are called, and a report
//! about another cluster than the one it was sent for is refused before it touches state.

use std::time::Instant;

use ed25519_dalek::SigningKey;
use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;

use fleetpulse_common::api::MemberCluster;
use fleetpulse_common::protocol::errors::ErrorBody;
use fleetpulse_common::protocol::errors::RejectCode;
use fleetpulse_common::protocol::keys::{self, KeyId};
use fleetpulse_common::protocol::replay::{self, Freshness};
use fleetpulse_common::protocol::report::{ClusterId, HeartbeatReport};
use fleetpulse_hub::admission::steps;
use fleetpulse_hub::fleet::Admitted;
use fleetpulse_hub::fleet::{Fleet, Objects, Settings, shared};
use fleetpulse_hub::testing;

const AUDIENCE: &str = "hub-under-test";

fn fleet() -> Fleet {
    let settings = Settings {
        audience: AUDIENCE.into(),
        ..Settings::default()
    };
    testing::fleet_in_memory(settings)
}

/// A MemberCluster listing `keys` as `(key, revoked)`.
fn member_cluster(id: &ClusterId, keys: &[(&SigningKey, bool)]) -> MemberCluster {
    let builder = testing::cluster(&id.to_string());
    keys.iter()
        .fold(builder, |b, (key, revoked)| b.listed_key(key, *revoked))
        .build()
}

fn load(fleet: &Fleet, clusters: Vec<MemberCluster>) -> Vec<String> {
    let objects = Objects {
        member_clusters: shared(clusters),
        ..Default::default()
    };
    fleet.reload(objects, Instant::now(), Timestamp::now())
}

/// The admission pipeline's key step against the fleet's current registry.
fn lookup(
    fleet: &Fleet,
    cluster: &ClusterId,
    kid: &str,
) -> Result<
    (
        std::sync::Arc<fleetpulse_hub::fleet::ClusterEntry>,
        fleetpulse_common::protocol::keys::StrongKey,
    ),
    ErrorBody,
> {
    steps::key(&fleet.registry(), fleet.enrolled_keys(), cluster, kid).map_err(|refusal| refusal.0)
}

fn kid(key: &SigningKey) -> String {
    KeyId::of(&key.verifying_key()).0
}

fn report(cluster: &ClusterId, seq: u64) -> HeartbeatReport {
    testing::report(cluster).seq(seq).audience(AUDIENCE).build()
}

fn signing_key() -> impl Strategy<Value = SigningKey> {
    any::<[u8; 32]>().prop_map(|seed| SigningKey::from_bytes(&seed))
}

fn dns_label() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9-]{0,14}"
}

/// Two different cluster ids; often in the same namespace, sometimes with the same name.
fn two_clusters() -> impl Strategy<Value = (ClusterId, ClusterId)> {
    (dns_label(), dns_label(), dns_label(), any::<bool>()).prop_filter_map(
        "the two clusters must differ",
        |(ns, a, b, same_ns)| {
            let ida = ClusterId::new(ns.clone(), a.clone());
            let idb = if same_ns {
                ClusterId::new(ns, b)
            } else {
                ClusterId::new(format!("{ns}-other"), a)
            };
            (ida != idb).then_some((ida, idb))
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn key_bound_to_one_cluster_never_authenticates_for_another(
        (a, b) in two_clusters(),
        key_a in signing_key(),
        key_b in signing_key(),
        a_revoked in any::<bool>(),
    ) {
        prop_assume!(key_a.to_bytes() != key_b.to_bytes());
        let fleet = fleet();
        let problems = load(&fleet, vec![
            member_cluster(&a, &[(&key_a, a_revoked)]),
            member_cluster(&b, &[(&key_b, false)]),
        ]);
        prop_assert!(problems.is_empty(), "{:?}", problems);

        let err = lookup(&fleet, &b, &kid(&key_a)).unwrap_err();
        prop_assert_eq!(err.code, RejectCode::KeyNotForCluster);
        let err = lookup(&fleet, &a, &kid(&key_b)).unwrap_err();
        prop_assert_eq!(err.code, RejectCode::KeyNotForCluster);

        let (entry, key) = lookup(&fleet, &b, &kid(&key_b)).expect("B's own key works for B");
        prop_assert_eq!(&entry.id, &b);
        prop_assert_eq!(*key, key_b.verifying_key());
        match lookup(&fleet, &a, &kid(&key_a)) {
            Ok((entry, key)) => {
                prop_assert!(!a_revoked);
                prop_assert_eq!(&entry.id, &a);
                prop_assert_eq!(*key, key_a.verifying_key());
            }
            Err(err) => {
                prop_assert!(a_revoked);
                prop_assert_eq!(err.code, RejectCode::KeyRevoked);
            }
        }
    }

    #[test]
    fn key_listed_by_two_clusters_authenticates_for_only_the_first(
        (a, b) in two_clusters(),
        key in signing_key(),
    ) {
        let fleet = fleet();
        let problems = load(&fleet, vec![
            member_cluster(&b, &[(&key, false)]),
            member_cluster(&a, &[(&key, false)]),
        ]);
        prop_assert_eq!(problems.len(), 1, "the conflict is reported: {:?}", problems);
        let (owner, other) = if a < b { (&a, &b) } else { (&b, &a) };
        prop_assert!(lookup(&fleet, owner, &kid(&key)).is_ok());
        let err = lookup(&fleet, other, &kid(&key)).unwrap_err();
        prop_assert_eq!(err.code, RejectCode::KeyNotForCluster);
    }

    #[test]
    fn report_about_another_cluster_than_the_url_is_refused_without_state_change(
        (a, b) in two_clusters(),
        key_a in signing_key(),
        seq in 1u64..1_000_000,
    ) {
        let now = Timestamp::now().as_second();
        let about_b = report(&b, seq);
        let err = replay::admit(&about_b, AUDIENCE, &a, None, now, Freshness::default())
            .unwrap_err();
        prop_assert_eq!(err.code, RejectCode::ClusterMismatch);

        let fleet = fleet();
        load(&fleet, vec![member_cluster(&a, &[(&key_a, false)])]);
        // The hub's pipeline applies the same rule before the state update, which it
        // therefore never reaches: no seq is consumed.
        let err = replay::check_addressee(&about_b, AUDIENCE, &a).unwrap_err();
        prop_assert_eq!(err.code, RejectCode::ClusterMismatch);
        let (entry, _) = lookup(&fleet, &a, &kid(&key_a)).unwrap();
        prop_assert!(entry.state.lock().core.positions.is_empty(), "no seq consumed");
        prop_assert_eq!(fleet.status_writes(), 0);

        // The same seq, about the right cluster, is still accepted.
        let admitted = Admitted {
            entry,
            kid: kid(&key_a),
            claims: report(&a, seq).into_shared(),
            signed_checks: None,
            shape: None,
        };
        let answer = fleet
            .accept(&admitted, Instant::now(), Timestamp::now())
            .expect("a report about the URL's cluster is accepted");
        prop_assert_eq!(answer.accepted_seq, seq);
    }
}

/// When the owning MemberCluster goes away, its key goes with it: it does not become
/// usable for the clusters that remain.
#[test]
fn removing_the_owner_does_not_move_its_key_to_another_cluster() {
    let (a, b) = (ClusterId::new("fleet", "a"), ClusterId::new("fleet", "b"));
    let (key_a, key_b) = (keys::generate(), keys::generate());
    let fleet = fleet();
    load(
        &fleet,
        vec![
            member_cluster(&a, &[(&key_a, false)]),
            member_cluster(&b, &[(&key_b, false)]),
        ],
    );
    assert!(lookup(&fleet, &a, &kid(&key_a)).is_ok());
    load(&fleet, vec![member_cluster(&b, &[(&key_b, false)])]);
    let err = lookup(&fleet, &b, &kid(&key_a)).unwrap_err();
    assert_eq!(err.code, RejectCode::UnknownKey);
    let err = lookup(&fleet, &a, &kid(&key_a)).unwrap_err();
    assert_eq!(err.code, RejectCode::UnknownCluster);
}

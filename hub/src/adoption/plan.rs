//! Pure: which MemberCluster an adopted object becomes, and what the adoption loop writes
//! and says about each. No I/O.

use std::collections::{BTreeMap, HashMap};

use fleetpulse_common::api::condition::Status;
use fleetpulse_common::api::{MemberCluster, MirrorRef};
use fleetpulse_common::protocol::report::ClusterId;
use kube::api::DynamicObject;
use serde_json::{Value, json};

use crate::mirrors::MirrorKind;

/// The annotation on a MemberCluster the hub created for an adopted object: the object
/// (`kind apiVersion namespace/name`).
pub const ADOPTED_FROM: &str = "fleetpulse.io/adopted-from";
/// The annotation listing the label keys the hub copied (comma-separated), so a label
/// removed from the object is noticed and removed here too.
pub const ADOPTED_LABELS: &str = "fleetpulse.io/adopted-labels";
/// The label an Argo CD cluster Secret carries.
pub const ARGOCD_SECRET_TYPE: &str = "argocd.argoproj.io/secret-type";

/// What one adopted object asks for.
#[derive(Clone, Debug, PartialEq)]
pub struct Adopted {
    /// The MemberCluster.
    pub id: ClusterId,
    /// `kind apiVersion namespace/name` of the object.
    pub source: String,
    /// The object's labels, less those fleetpulse itself writes on mirrors.
    pub labels: BTreeMap<String, String>,
    /// The object, as the MemberCluster's mirror.
    pub mirror: MirrorRef,
}

/// Whether fleetpulse writes this label on mirror objects (health and set membership):
/// copying it back would feed the hub's own verdicts into the selectors that use them.
fn written_by_fleetpulse(key: &str) -> bool {
    key.split_once('/')
        .is_some_and(|(prefix, _)| prefix == "fleetpulse.io" || prefix.ends_with(".fleetpulse.io"))
}

/// The MemberCluster `object` of `kind` becomes: the same namespace and name (an Argo CD
/// cluster Secret: the Secret's namespace and name); a cluster-scoped object's name in
/// `namespace`.
pub fn adopted(kind: MirrorKind, object: &DynamicObject, namespace: &str) -> Option<Adopted> {
    let name = object.metadata.name.clone()?;
    let ns = match object.metadata.namespace.clone() {
        Some(ns) if kind.namespaced() => ns,
        _ => namespace.to_owned(),
    };
    let labels = (object.metadata.labels.clone().unwrap_or_default())
        .into_iter()
        .filter(|(k, _)| !written_by_fleetpulse(k))
        .collect();
    let mut mirror = MirrorRef::new(kind.api_version(), kind.kind(), &name);
    if kind.namespaced() {
        mirror.namespace = Some(ns.clone());
    }
    let source = mirror.describe(&ns);
    Some(Adopted {
        id: ClusterId::new(&ns, &name),
        source,
        labels,
        mirror,
    })
}

impl Adopted {
    /// Whether `existing` already carries everything this adoption writes.
    pub fn satisfied_by(&self, existing: &MemberCluster) -> bool {
        let labels = existing.metadata.labels.clone().unwrap_or_default();
        let annotations = existing.metadata.annotations.clone().unwrap_or_default();
        annotations.get(ADOPTED_FROM) == Some(&self.source)
            && annotations.get(ADOPTED_LABELS) == Some(&self.label_keys())
            && self.labels.iter().all(|(k, v)| labels.get(k) == Some(v))
            && existing.spec.mirrors.contains(&self.mirror)
    }

    /// The copied label keys, as [`ADOPTED_LABELS`] lists them.
    fn label_keys(&self) -> String {
        let keys: Vec<&str> = self.labels.keys().map(String::as_str).collect();
        keys.join(",")
    }

    /// The server-side apply body: the labels, the annotation and the mirror (the hub's
    /// field manager owns only these; users add checks and keys with their own).
    pub fn apply_body(&self) -> Value {
        json!({
            "apiVersion": "fleetpulse.io/v1alpha1",
            "kind": "MemberCluster",
            "metadata": {
                "name": self.id.name,
                "namespace": self.id.namespace,
                "labels": self.labels,
                "annotations": {ADOPTED_FROM: self.source, ADOPTED_LABELS: self.label_keys()},
            },
            "spec": {"mirrors": [self.mirror]},
        })
    }
}

/// What to do about one MemberCluster.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Create it, or bring its labels and mirror up to date.
    Apply(Adopted),
    /// Set its `Adopted` condition.
    Condition(ClusterId, Status, &'static str, String),
}

/// The actions for `wanted` (every adopted object of the kinds whose watch has listed)
/// against the MemberClusters that exist. A MemberCluster someone else created is left
/// alone; one whose object is gone is marked (`Adopted=False`, `SourceDeleted`), never
/// deleted. `listed` says which kinds' watches have listed: a cluster adopted from a kind
/// not yet listed is not judged.
pub fn actions(
    wanted: &[Adopted],
    existing: &HashMap<ClusterId, &MemberCluster>,
    listed: &dyn Fn(&str) -> bool,
) -> Vec<Action> {
    let mut out = Vec::new();
    let mut wanted_ids = HashMap::new();
    for a in wanted {
        wanted_ids.insert(a.id.clone(), a);
        match existing.get(&a.id) {
            None => out.push(Action::Apply(a.clone())),
            Some(mc) if adopted_from(mc).is_none() => {}
            Some(mc) if !a.satisfied_by(mc) => out.push(Action::Apply(a.clone())),
            Some(_) => out.push(Action::Condition(
                a.id.clone(),
                Status::True,
                "Adopted",
                format!("adopted from {}; its labels are copied here", a.source),
            )),
        }
    }
    for (id, mc) in existing {
        let Some(source) = adopted_from(mc) else {
            continue;
        };
        if wanted_ids.contains_key(id) || !listed(source) {
            continue;
        }
        out.push(Action::Condition(
            id.clone(),
            Status::False,
            "SourceDeleted",
            format!(
                "{source} is gone (or no longer matches --adopt-selector); this MemberCluster \
                 is kept: delete it if the cluster left the fleet"
            ),
        ));
    }
    out
}

/// The object a MemberCluster was adopted from, if the hub created it.
pub fn adopted_from(mc: &MemberCluster) -> Option<&str> {
    mc.metadata
        .annotations
        .as_ref()?
        .get(ADOPTED_FROM)
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    fn sveltos(ns: &str, name: &str, labels: &[(&str, &str)]) -> DynamicObject {
        let labels: BTreeMap<_, _> = labels.iter().map(|(k, v)| (*k, *v)).collect();
        serde_json::from_value(json!({
            "apiVersion": "lib.projectsveltos.io/v1beta1", "kind": "SveltosCluster",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
        }))
        .unwrap()
    }

    /// SveltosCluster fleet/edge-1, without labels, adopted.
    fn edge_1() -> Adopted {
        adopted(
            MirrorKind::SveltosCluster,
            &sveltos("fleet", "edge-1", &[]),
            "x",
        )
        .unwrap()
    }

    fn all_listed(_: &str) -> bool {
        true
    }

    #[test]
    fn an_object_becomes_a_member_cluster_of_its_name_with_its_labels_but_not_fleetpulse_ones() {
        let object = sveltos(
            "fleet",
            "edge-1",
            &[
                ("env", "prod"),
                ("health.fleetpulse.io/healthy", "false"),
                ("clusterset.fleetpulse.io/primary", "true"),
            ],
        );
        let a = adopted(MirrorKind::SveltosCluster, &object, "ignored").unwrap();
        assert_eq!(a.id, ClusterId::new("fleet", "edge-1"));
        assert_eq!(a.labels, BTreeMap::from([("env".into(), "prod".into())]));
        assert_eq!(a.mirror.namespace.as_deref(), Some("fleet"));
        assert_eq!(
            a.source,
            "SveltosCluster lib.projectsveltos.io/v1beta1 fleet/edge-1"
        );
        let body = a.apply_body();
        assert_eq!(body["metadata"]["annotations"][ADOPTED_FROM], a.source);
        assert_eq!(body["spec"]["mirrors"][0]["kind"], "SveltosCluster");
    }

    #[test]
    fn a_cluster_scoped_object_lands_in_the_adoption_namespace() {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
            "metadata": {"name": "spoke-1"},
        }))
        .unwrap();
        let a = adopted(MirrorKind::OcmManagedCluster, &object, "fleet-ocm").unwrap();
        assert_eq!(a.id, ClusterId::new("fleet-ocm", "spoke-1"));
        assert_eq!(a.mirror.namespace, None);
    }

    #[test]
    fn missing_or_outdated_clusters_are_applied_and_current_ones_marked_adopted() {
        let wanted: Vec<Adopted> = [("edge-1", "prod"), ("edge-2", "prod")]
            .iter()
            .map(|(n, env)| {
                adopted(
                    MirrorKind::SveltosCluster,
                    &sveltos("fleet", n, &[("env", env)]),
                    "x",
                )
                .unwrap()
            })
            .collect();
        let mut current = testing::cluster("fleet/edge-1").build();
        current.metadata.labels = Some(wanted[0].labels.clone());
        current.metadata.annotations = Some(BTreeMap::from([
            (ADOPTED_FROM.into(), wanted[0].source.clone()),
            (ADOPTED_LABELS.into(), "env".into()),
        ]));
        current.spec.mirrors = vec![wanted[0].mirror.clone()];
        let existing = HashMap::from([(wanted[0].id.clone(), &current)]);
        let actions = actions(&wanted, &existing, &all_listed);
        assert_eq!(actions.len(), 2, "{actions:?}");
        assert!(
            matches!(&actions[0], Action::Condition(id, Status::True, "Adopted", _) if *id == wanted[0].id)
        );
        assert_eq!(actions[1], Action::Apply(wanted[1].clone()));

        let mut relabelled = current.clone();
        relabelled.metadata.labels = Some(BTreeMap::from([("env".into(), "test".into())]));
        let existing = HashMap::from([(wanted[0].id.clone(), &relabelled)]);
        let actions = super::actions(&wanted[..1], &existing, &all_listed);
        assert_eq!(actions, vec![Action::Apply(wanted[0].clone())]);

        // A label removed from the object: the MemberCluster still has it, so apply again
        // (server-side apply drops what the hub no longer sends).
        let mut fewer = wanted[0].clone();
        fewer.labels.clear();
        let existing = HashMap::from([(wanted[0].id.clone(), &current)]);
        let actions = super::actions(std::slice::from_ref(&fewer), &existing, &all_listed);
        assert_eq!(actions, vec![Action::Apply(fewer.clone())]);
        assert_eq!(
            fewer.apply_body()["metadata"]["annotations"][ADOPTED_LABELS],
            ""
        );
    }

    #[test]
    fn a_member_cluster_someone_else_made_is_left_alone() {
        let a = edge_1();
        let theirs = testing::cluster("fleet/edge-1").build();
        let existing = HashMap::from([(a.id.clone(), &theirs)]);
        assert_eq!(actions(&[a], &existing, &all_listed), vec![]);
        let existing = HashMap::from([(ClusterId::new("fleet", "edge-1"), &theirs)]);
        assert_eq!(actions(&[], &existing, &all_listed), vec![]);
    }

    #[test]
    fn a_vanished_object_marks_its_cluster_but_only_once_its_kind_has_listed() {
        let a = edge_1();
        let mut ours = testing::cluster("fleet/edge-1").build();
        ours.metadata.annotations = Some(BTreeMap::from([(ADOPTED_FROM.into(), a.source.clone())]));
        let existing = HashMap::from([(a.id.clone(), &ours)]);
        let actions = actions(&[], &existing, &all_listed);
        assert!(
            matches!(&actions[..], [Action::Condition(id, Status::False, "SourceDeleted", m)]
                if *id == a.id && m.contains("kept")),
            "{actions:?}"
        );
        let not_listed = |_: &str| false;
        assert_eq!(super::actions(&[], &existing, &not_listed), vec![]);
    }
}

//! Reading what the hub did, from the management cluster's simulator: MemberCluster
//! conditions, the ClusterSet's selection, Events, and the ledger of the hub's writes; and
//! from the hub itself: its accepted-heartbeat counter, to measure quiet periods in
//! heartbeats rather than in seconds.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::api::Api;

use fleetpulse_common::api::condition::{self, HEALTHY, REACHABLE, Status};
use fleetpulse_common::api::{ClusterSet, MemberCluster};

use super::{CLUSTER_SET, KubeFleet, NAMESPACE};
use crate::wait;

/// Management API writes by (resource or `resource/subresource`, verb).
pub type Writes = BTreeMap<(String, String), u64>;

/// Each member's verdicts as written (see [`KubeFleet::verdicts`]), by name.
pub type Verdicts = BTreeMap<String, String>;

/// The members whose verdicts differ between `before` and `after`, with both readings.
pub fn changed(before: &Verdicts, after: &Verdicts) -> Vec<String> {
    (before.iter())
        .filter(|(name, seen)| after.get(*name) != Some(seen))
        .map(|(name, seen)| format!("{name}: {seen} -> {:?}", after.get(name)))
        .collect()
}

impl KubeFleet {
    /// MemberCluster `name` as stored on the management cluster.
    pub async fn member_cluster(&self, name: &str) -> Option<MemberCluster> {
        Api::<MemberCluster>::namespaced(self.mgmt.client(), NAMESPACE)
            .get(name)
            .await
            .ok()
    }

    /// Condition `type_` of MemberCluster `name` on the management cluster.
    pub async fn condition(&self, name: &str, type_: &str) -> Status {
        self.member_cluster(name)
            .await
            .and_then(|mc| mc.status)
            .and_then(|s| condition::find(&s.conditions, type_).map(|c| Status::parse(&c.status)))
            .unwrap_or(Status::Unknown)
    }

    /// Waits until condition `type_` of member `i` is `status`; returns how long it took.
    pub async fn wait_condition(
        &self,
        i: usize,
        type_: &str,
        status: Status,
        timeout: Duration,
    ) -> anyhow::Result<Duration> {
        let name = &self.members[i].name;
        let what = format!("{name} {type_}={}", status.as_str());
        let probe =
            move || async move { (self.condition(name, type_).await == status).then_some(()) };
        Ok(wait::until_some(&what, timeout, probe).await?.1)
    }

    /// Waits until every member has condition `type_` at `status`.
    pub async fn wait_all(
        &self,
        type_: &str,
        status: Status,
        timeout: Duration,
    ) -> anyhow::Result<()> {
        let what = format!("every member {type_}={}", status.as_str());
        let probe = move || async move {
            for m in &self.members {
                if self.condition(&m.name, type_).await != status {
                    return None;
                }
            }
            Some(())
        };
        wait::until_some(&what, timeout, probe).await?;
        Ok(())
    }

    /// The ClusterSet as stored on the management cluster.
    pub async fn cluster_set(&self) -> Option<ClusterSet> {
        Api::<ClusterSet>::all(self.mgmt.client())
            .get(CLUSTER_SET)
            .await
            .ok()
    }

    /// Every member's `Reachable` and `Healthy` status and last transition time, and the
    /// ClusterSet's selection and last failover time: what a hub hand-over must leave as
    /// it found them.
    pub async fn verdicts(&self) -> (Verdicts, String) {
        let mut out = BTreeMap::new();
        for m in &self.members {
            let status = (self.member_cluster(&m.name).await).and_then(|mc| mc.status);
            let conditions = status.map(|s| s.conditions).unwrap_or_default();
            let mut seen = String::new();
            for type_ in [REACHABLE, HEALTHY] {
                if let Some(c) = condition::find(&conditions, type_) {
                    seen += &format!("{type_}={} since {:?}; ", c.status, c.last_transition_time);
                }
            }
            out.insert(m.name.clone(), seen);
        }
        let set = self.cluster_set().await.and_then(|cs| cs.status);
        let set = set.map(|s| format!("{:?} {:?}", s.selected_cluster_refs, s.last_failover_time));
        (out, set.unwrap_or_default())
    }

    /// Names of the clusters the ClusterSet's status selects.
    pub async fn selected(&self) -> Vec<String> {
        self.cluster_set()
            .await
            .and_then(|cs| cs.status)
            .map(|s| {
                s.selected_cluster_refs
                    .into_iter()
                    .map(|r| r.name)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Waits until the ClusterSet selects exactly one cluster for which `accept` holds;
    /// returns its name and how long it took.
    pub async fn wait_selected(
        &self,
        what: &str,
        timeout: Duration,
        accept: impl Fn(&str) -> bool,
    ) -> anyhow::Result<(String, Duration)> {
        let accept = &accept;
        let probe = move || async move {
            let selected = self.selected().await;
            (selected.len() == 1 && accept(&selected[0])).then(|| selected[0].clone())
        };
        wait::until_some(what, timeout, probe).await
    }

    /// Condition `type_` of the ClusterSet.
    pub async fn set_condition(&self, type_: &str) -> Status {
        self.cluster_set()
            .await
            .and_then(|cs| cs.status)
            .and_then(|s| condition::find(&s.conditions, type_).map(|c| Status::parse(&c.status)))
            .unwrap_or(Status::Unknown)
    }

    /// Writes to the management API since the fleet was prepared: the hub's, as the test
    /// writes nothing there after [`KubeFleet::prepare`]; but for the hub state's
    /// ConfigMaps, written once per flush whatever happens ([`KubeFleet::hub_state_writes`]).
    pub fn hub_writes(&self) -> Writes {
        let mut writes = self.all_hub_writes();
        writes.retain(|(resource, _), _| resource != "configmaps");
        writes
    }

    /// Writes of the hub state (ConfigMaps of accepted positions and last-heard times).
    pub fn hub_state_writes(&self) -> u64 {
        let writes = self.all_hub_writes();
        let state = writes
            .iter()
            .filter(|((resource, _), _)| resource == "configmaps");
        state.map(|(_, n)| n).sum()
    }

    fn all_hub_writes(&self) -> Writes {
        let mut writes = self.mgmt.sim.writes();
        for (key, before) in &self.baseline {
            if let Some(n) = writes.get_mut(key) {
                *n -= before;
            }
        }
        writes.retain(|_, n| *n > 0);
        writes
    }

    /// Total of [`KubeFleet::hub_writes`].
    pub fn hub_write_total(&self) -> u64 {
        self.hub_writes().values().sum()
    }

    /// Hub writes of one (resource, verb), e.g. `("memberclusters", "patch")`: membership
    /// label moves.
    pub fn hub_write_count(&self, resource: &str, verb: &str) -> u64 {
        let key = (resource.to_owned(), verb.to_owned());
        self.hub_writes().get(&key).copied().unwrap_or(0)
    }

    /// A sample of the hub's Prometheus metrics, e.g.
    /// `fleetpulse_hub_heartbeats_total{result="accepted"}`.
    pub async fn hub_metric(&self, sample: &str) -> Option<f64> {
        let url = format!("{}/metrics", self.admin_url().await.ok()?);
        let text = self.http.get(url).send().await.ok()?.text().await.ok()?;
        text.lines().find_map(|line| {
            let (name, value) = line.rsplit_once(' ')?;
            (name == sample).then(|| value.parse().ok())?
        })
    }

    /// Heartbeats the running hub process accepted.
    pub async fn accepted_heartbeats(&self) -> Option<u64> {
        let sample = r#"fleetpulse_hub_heartbeats_total{result="accepted"}"#;
        self.hub_metric(sample).await.map(|v| v as u64)
    }

    /// Waits until the hub accepted `count` more heartbeats (a time span measured in the
    /// fleet's own rhythm, not in seconds).
    pub async fn wait_heartbeats(&self, count: u64, timeout: Duration) -> anyhow::Result<()> {
        let start = self.accepted_heartbeats().await.unwrap_or(0);
        let what = format!("{count} more accepted heartbeats");
        let probe = move || async move {
            let now = self.accepted_heartbeats().await?;
            (now >= start + count).then_some(())
        };
        wait::until_some(&what, timeout, probe).await?;
        Ok(())
    }

    /// Fails unless the hub writes nothing to the management API while it accepts `count`
    /// more heartbeats: status is written on transitions, not per heartbeat.
    pub async fn assert_no_writes_for(&self, count: u64, timeout: Duration) -> anyhow::Result<()> {
        let before = self.hub_writes();
        self.wait_heartbeats(count, timeout).await?;
        let after = self.hub_writes();
        anyhow::ensure!(
            after == before,
            "the hub wrote while no cluster changed: before {before:?}, after {after:?}"
        );
        Ok(())
    }

    /// Events (`events.k8s.io/v1`) in `namespace` of the management cluster.
    pub async fn events(&self, namespace: &str) -> Vec<Event> {
        Api::<Event>::namespaced(self.mgmt.client(), namespace)
            .list(&Default::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default()
    }

    /// Waits for an Event in `namespace` regarding the object of `kind` named `name` for
    /// which `accept` holds (e.g. a reason); returns it.
    pub async fn wait_event(
        &self,
        namespace: &str,
        kind: &str,
        name: &str,
        timeout: Duration,
        accept: impl Fn(&Event) -> bool,
    ) -> anyhow::Result<Event> {
        let what = format!("an Event in {namespace} regarding {kind} {name}");
        let accept = &accept;
        let probe = move || async move {
            self.events(namespace).await.into_iter().find(|e| {
                let regarding = e.regarding.as_ref();
                regarding.is_some_and(|r| {
                    r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name)
                }) && accept(e)
            })
        };
        match wait::until_some(&what, timeout, probe).await {
            Ok((event, _)) => Ok(event),
            Err(e) => {
                let seen = summary(&self.events(namespace).await);
                Err(anyhow::anyhow!("{e}; Events there: {seen:?}"))
            }
        }
    }
}

/// `(regarding kind/name, reason, note)` of each Event, for failure messages.
fn summary(events: &[Event]) -> Vec<(String, String, String)> {
    events
        .iter()
        .map(|e| {
            let r = e.regarding.clone().unwrap_or_default();
            (
                format!(
                    "{}/{}",
                    r.kind.unwrap_or_default(),
                    r.name.unwrap_or_default()
                ),
                e.reason.clone().unwrap_or_default(),
                e.note.clone().unwrap_or_default(),
            )
        })
        .collect()
}

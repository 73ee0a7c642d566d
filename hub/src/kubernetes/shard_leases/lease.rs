//! The shard Leases as this replica last read them, when it saw each one change (the
//! expiry clock of client-go's leader election: a Lease is expired once it was seen
//! unchanged for its whole duration), and the Lease each kind of write makes.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use tokio::time::Instant;

use crate::shards::balance::Seen;
use crate::shards::{
    BRAKE_ANNOTATION, LEASE_LABEL, ShardSettings, URL_ANNOTATION, lease_name, shard_of_lease,
};

/// One shard's Lease as last read or written, and when its record last changed.
struct Entry {
    lease: Lease,
    record: (Option<String>, Option<MicroTime>),
    changed: Instant,
}

/// Every shard's Lease, as this replica knows it.
pub(super) struct Observed {
    entries: Vec<Option<Entry>>,
}

fn record(lease: &Lease) -> (Option<String>, Option<MicroTime>) {
    let spec = lease.spec.as_ref();
    (
        spec.and_then(|s| s.holder_identity.clone()),
        spec.and_then(|s| s.renew_time.clone()),
    )
}

impl Observed {
    pub(super) fn new(shards: u32) -> Self {
        Observed {
            entries: (0..shards).map(|_| None).collect(),
        }
    }

    /// Takes a fresh list of the shard Leases read at `now`, and returns what the
    /// balancer sees of each shard.
    pub(super) fn update(&mut self, listed: Vec<Lease>, now: Instant) -> Vec<Option<Seen>> {
        let mut fresh: BTreeMap<u32, Lease> = BTreeMap::new();
        for lease in listed {
            let name = lease.metadata.name.clone().unwrap_or_default();
            match shard_of_lease(&name) {
                Some(k) if (k as usize) < self.entries.len() => {
                    fresh.insert(k, lease);
                }
                _ => tracing::warn!(lease = %name, shards = self.entries.len(),
                    "a shard Lease beyond this replica's shard count: every replica must run with the same --shards"),
            }
        }
        for (k, entry) in self.entries.iter_mut().enumerate() {
            *entry = fresh.remove(&(k as u32)).map(|lease| match entry.take() {
                Some(old) if old.record == record(&lease) => Entry { lease, ..old },
                _ => Entry {
                    record: record(&lease),
                    lease,
                    changed: now,
                },
            });
        }
        (self.entries.iter())
            .map(|entry| {
                let entry = entry.as_ref()?;
                let spec = entry.lease.spec.clone().unwrap_or_default();
                let duration = spec.lease_duration_seconds.unwrap_or(15).max(1) as u64;
                Some(Seen {
                    holder: spec.holder_identity,
                    preferred: spec.preferred_holder,
                    live: now.duration_since(entry.changed) < Duration::from_secs(duration),
                })
            })
            .collect()
    }

    /// Shard `k`'s Lease as last read or written.
    pub(super) fn lease(&self, k: u32) -> Option<&Lease> {
        Some(&self.entries.get(k as usize)?.as_ref()?.lease)
    }

    /// Shard `k`'s holder, the URL it serves agents on, and whether its partition brake
    /// is frozen, if its Lease is held.
    pub(super) fn holder(&self, k: u32) -> Option<(String, Option<String>, bool)> {
        let lease = self.lease(k)?;
        let holder = lease.spec.as_ref()?.holder_identity.clone()?;
        let annotation = |name| (lease.metadata.annotations.as_ref())?.get(name).cloned();
        let frozen = annotation(BRAKE_ANNOTATION).as_deref() == Some(FROZEN);
        Some((holder, annotation(URL_ANNOTATION), frozen))
    }

    /// The Lease this replica just wrote for shard `k`.
    pub(super) fn wrote(&mut self, k: u32, lease: Lease) {
        if let Some(slot) = self.entries.get_mut(k as usize) {
            *slot = Some(Entry {
                record: record(&lease),
                lease,
                changed: Instant::now(),
            });
        }
    }
}

/// The [`BRAKE_ANNOTATION`] value of a holder whose partition brake is frozen.
const FROZEN: &str = "frozen";

/// A write of one shard Lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Write {
    /// Renew a Lease this replica holds (clearing any request on it).
    Renew,
    /// Take a free Lease, or one reserved for this replica.
    Take,
    /// Give a Lease up (reserved for whoever asked for it).
    Release,
    /// Ask the holder for its Lease.
    Request,
}

impl Write {
    /// The Lease to write over `current` (the one last read, carrying its
    /// `resourceVersion`, or `None` to create it); a renewal or take says whether this
    /// replica's partition brake is `frozen`.
    pub(super) fn apply(
        self,
        current: Option<&Lease>,
        k: u32,
        settings: &ShardSettings,
        frozen: bool,
    ) -> Lease {
        let mut lease = current.cloned().unwrap_or_else(|| Lease {
            metadata: ObjectMeta {
                name: Some(lease_name(k)),
                namespace: Some(settings.namespace.clone()),
                labels: Some(BTreeMap::from([(LEASE_LABEL.into(), "true".into())])),
                ..Default::default()
            },
            spec: None,
        });
        let me = settings.identity.clone();
        let now = Some(MicroTime(Timestamp::now()));
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let annotations = lease.metadata.annotations.get_or_insert_with(BTreeMap::new);
        match self {
            Write::Renew | Write::Take => {
                if self == Write::Take || spec.holder_identity.as_ref() != Some(&me) {
                    spec.acquire_time = now.clone();
                    spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
                }
                spec.holder_identity = Some(me);
                spec.preferred_holder = None;
                spec.renew_time = now;
                spec.lease_duration_seconds = Some(settings.duration.as_secs().max(3) as i32);
                match &settings.url {
                    Some(url) => annotations.insert(URL_ANNOTATION.into(), url.clone()),
                    None => annotations.remove(URL_ANNOTATION),
                };
                match frozen {
                    true => annotations.insert(BRAKE_ANNOTATION.into(), FROZEN.into()),
                    false => annotations.remove(BRAKE_ANNOTATION),
                };
            }
            Write::Release => {
                spec.holder_identity = None;
                spec.acquire_time = None;
                spec.renew_time = now;
                spec.preferred_holder = spec.preferred_holder.take().filter(|p| *p != me);
                annotations.remove(URL_ANNOTATION);
                annotations.remove(BRAKE_ANNOTATION);
            }
            Write::Request => spec.preferred_holder = Some(me),
        }
        lease
    }
}

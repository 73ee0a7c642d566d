//! The shard balancer, pure: given the shard Leases as this replica sees them, which
//! shards it renews, takes, releases, and which one it asks another replica for.
//!
//! The rules, in the order they apply each round:
//! - The live replicas are this one and every holder or preferred holder of a live Lease
//!   (one renewed within its duration, as this replica observed). With `R` of them and
//!   `S` shards, each should hold `floor = S / R` or `ceil = ⌈S / R⌉`.
//! - A Lease this replica holds whose `preferredHolder` names another replica was asked
//!   for: it gives it up (releasing it, reserved for the asker) while it holds more than
//!   `floor`; otherwise it renews it, which clears the request.
//! - Holding more than `ceil`, it releases one more shard (its highest) per round.
//! - It takes the Leases reserved for it, and free ones (never created, released without
//!   a reservation, or not renewed within their duration) up to `floor`, and up to `ceil`
//!   only with what the others below their `floor` leave over, starting at an offset of
//!   its own so replicas starting together collide less.
//! - Holding fewer than `floor` with nothing free, it asks the fullest replica above
//!   `floor` for one shard (sets itself as `preferredHolder` on one Lease), one request at
//!   a time: a new replica gets its share a shard a round, never a thundering handover.
//!
//! At balance (everyone at `floor` or `ceil`) nothing moves, so no shard flaps.

use std::collections::{BTreeMap, BTreeSet};

/// One shard Lease as this replica sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    /// Its `holderIdentity` (`None` once released).
    pub holder: Option<String>,
    /// Its `preferredHolder`: the replica that asked for it, or that it was released to.
    pub preferred: Option<String>,
    /// Renewed (or released) within its duration, as this replica observed it changing.
    pub live: bool,
}

impl Seen {
    /// A live Lease held by `holder`.
    pub fn held(holder: &str) -> Self {
        Seen {
            holder: Some(holder.into()),
            preferred: None,
            live: true,
        }
    }

    /// The same Lease, asked for by (or released to) `replica`.
    pub fn preferring(mut self, replica: &str) -> Self {
        self.preferred = Some(replica.into());
        self
    }

    /// The same Lease, not renewed within its duration.
    pub fn expired(mut self) -> Self {
        self.live = false;
        self
    }

    /// Whom a live Lease is held by.
    fn live_holder(&self) -> Option<&str> {
        self.holder.as_deref().filter(|_| self.live)
    }

    /// Whom a live released Lease is reserved for.
    fn reserved_for(&self) -> Option<&str> {
        match (&self.holder, &self.preferred, self.live) {
            (None, Some(p), true) => Some(p),
            _ => None,
        }
    }
}

/// What this replica does with the shard Leases this round.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Held and kept: renewed (clearing any request on them).
    pub renew: Vec<u32>,
    /// Given up: this replica stops acting on them first, then releases them.
    pub release: Vec<u32>,
    /// Free or reserved for this replica: taken.
    pub take: Vec<u32>,
    /// Asked of another replica (this replica written as `preferredHolder`).
    pub request: Option<u32>,
}

/// The plan of replica `me`, given every shard's Lease (`None`: not created yet), indexed
/// by shard.
pub fn plan(me: &str, leases: &[Option<Seen>]) -> Plan {
    let shards = leases.len();
    let mut live: BTreeSet<&str> = BTreeSet::from([me]);
    // What each live replica holds, less what it was asked for, plus its reservations.
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    let mut asked_of_me = Vec::new();
    let mut mine = Vec::new();
    let mut pending_request = false;
    for (k, seen) in leases.iter().enumerate() {
        let Some(seen) = seen else { continue };
        let k = k as u32;
        if seen.holder.as_deref() == Some(me) {
            mine.push(k);
            match seen.preferred.as_deref() {
                Some(other) if other != me => asked_of_me.push(k),
                _ => {}
            }
        }
        if let Some(h) = seen.live_holder() {
            live.insert(h);
            let asked = seen.preferred.as_deref().is_some_and(|p| p != h);
            if !asked {
                *count.entry(h).or_default() += 1;
            }
            if h != me && seen.preferred.as_deref() == Some(me) {
                pending_request = true;
            }
        }
        if let Some(p) = seen.preferred.as_deref().filter(|_| seen.live) {
            live.insert(p);
        }
        if let Some(p) = seen.reserved_for() {
            *count.entry(p).or_default() += 1;
        }
    }
    let replicas = live.len();
    let floor = shards / replicas;
    let ceil = shards.div_ceil(replicas);
    let mut plan = Plan::default();

    // Requests honoured while this replica holds more than `floor`.
    let mut held = mine.len();
    let asked: BTreeSet<u32> = asked_of_me.iter().copied().collect();
    for &k in &asked_of_me {
        if held > floor {
            plan.release.push(k);
            held -= 1;
        }
    }
    plan.renew = (mine.iter().copied())
        .filter(|k| !plan.release.contains(k))
        .collect();
    // Surplus over `ceil`: one shard a round, the highest not already asked for.
    if plan.renew.len() > ceil {
        let surplus = (plan.renew.iter().rev().copied()).find(|k| !asked.contains(k));
        if let Some(k) = surplus.or(plan.renew.last().copied()) {
            plan.renew.retain(|&r| r != k);
            plan.release.push(k);
        }
    }

    let mut holding = plan.renew.len();
    for (k, seen) in leases.iter().enumerate() {
        if let Some(seen) = seen
            && seen.reserved_for() == Some(me)
        {
            plan.take.push(k as u32);
            holding += 1;
        }
    }
    let free: Vec<usize> = (0..shards)
        .map(|i| (offset(me, shards) + i) % shards)
        .filter(|&k| match &leases[k] {
            None => true,
            Some(seen) => {
                seen.holder.as_deref() != Some(me)
                    && (!seen.live || (seen.holder.is_none() && seen.preferred.is_none()))
            }
        })
        .collect();
    // Up to `floor` freely; beyond it only what the others below their floor leave over.
    let others_short: usize = (live.iter())
        .filter(|r| **r != me)
        .map(|r| floor.saturating_sub(count.get(r).copied().unwrap_or(0)))
        .sum();
    let to_floor = floor.saturating_sub(holding).min(free.len());
    let spare = free.len() - to_floor;
    let limit = (holding + to_floor + spare.saturating_sub(others_short)).min(ceil);
    let mut free_left = false;
    for k in free {
        if holding < limit {
            plan.take.push(k as u32);
            holding += 1;
        } else {
            free_left = true;
        }
    }
    plan.take.sort_unstable();

    if holding < floor && !free_left && !pending_request {
        let donor = (count.iter())
            .filter(|(r, n)| **r != me && **n > floor)
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
            .map(|(r, _)| *r);
        plan.request = donor.and_then(|donor| {
            (leases.iter().enumerate()).find_map(|(k, seen)| {
                let seen = seen.as_ref()?;
                (seen.live_holder() == Some(donor) && seen.preferred.is_none()).then_some(k as u32)
            })
        });
    }
    plan
}

/// Where replica `me` starts looking for free shards: FNV-1a of its identity, so replicas
/// starting together take different shards first.
fn offset(me: &str, shards: usize) -> usize {
    let hash = (me.bytes()).fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    (hash % shards.max(1) as u64) as usize
}

#[cfg(test)]
#[path = "balance_tests.rs"]
mod tests;

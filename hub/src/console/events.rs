//! `GET /v1/console/events`: the console's live stream, as server-sent events
//! (`text/event-stream`). Every [`TICK`] the stream looks at the fleet and sends what
//! changed since it last looked, so a verdict change reaches the page within a tick:
//!
//! - `fleet`: `{full, rows, removed}`; the first is the whole fleet (`full: true`), each
//!   later one only the rows that changed (a row whose only change is `lastHeard` moving
//!   within [`HEARD_STEP`] is not sent again) and the ids of clusters gone;
//! - `sets`, `hub`, `policies`: the sets ([`crate::fleet::overview::SetView`]), the hub's
//!   own state (`GET /v1/hub`) and the HealthPolicies (`GET /v1/healthpolicies`), whole,
//!   first and whenever they change;
//! - `tick`: `{now}`, the hub's clock in milliseconds since the epoch, last in every
//!   batch: a page that has heard no tick for a few ticks knows the hub stopped answering.
//!
//! Each stream keeps only fingerprints of what it sent, and ends when the hub stops. A
//! browser's `EventSource` cannot send a bearer header, so the page reads the stream with
//! `fetch`; any client that sends the header can read it.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::header::CACHE_CONTROL;
use axum::response::IntoResponse;
use axum::response::sse::{Event, Sse};
use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use crate::fleet::Fleet;
use crate::fleet::overview::{FleetRow, Millis};

use super::ConsoleState;

/// How often a stream looks at the fleet.
pub const TICK: Duration = Duration::from_millis(500);
/// How far `lastHeard` may move before a row is sent again for that alone.
pub const HEARD_STEP: Millis = 5_000;

/// The `fleet` event.
#[derive(Serialize)]
struct FleetEvent<'a> {
    full: bool,
    rows: Vec<&'a FleetRow>,
    removed: Vec<String>,
}

/// What one stream sent last.
pub(super) struct Feed {
    fleet: Arc<Fleet>,
    rows: HashMap<String, u64>,
    first: bool,
    sets: String,
    hub: String,
    policies: String,
}

impl Feed {
    /// A stream's view of `fleet`, before its first batch.
    pub(super) fn new(fleet: Arc<Fleet>) -> Self {
        Self {
            fleet,
            rows: HashMap::new(),
            first: true,
            sets: String::new(),
            hub: String::new(),
            policies: String::new(),
        }
    }

    /// The events telling what changed since the last call (everything on the first),
    /// each as its name and its JSON data.
    pub(super) fn batch(&mut self) -> Vec<(&'static str, String)> {
        let mut events = Vec::new();
        let rows = self.fleet.fleet_rows();
        let mut seen = HashMap::with_capacity(rows.len());
        let mut changed = Vec::new();
        for row in &rows {
            let print = row.fingerprint(HEARD_STEP);
            if self.rows.get(&row.id) != Some(&print) {
                changed.push(row);
            }
            seen.insert(row.id.clone(), print);
        }
        let removed: Vec<String> = (self.rows.keys())
            .filter(|id| !seen.contains_key(*id))
            .cloned()
            .collect();
        self.rows = seen;
        if self.first || !changed.is_empty() || !removed.is_empty() {
            let event = FleetEvent {
                full: self.first,
                rows: changed,
                removed,
            };
            events.push(json("fleet", &event));
        }
        self.first = false;
        let sets = self.fleet.set_views();
        push_changed(&mut events, "sets", &sets, &mut self.sets);
        let hub = self.fleet.hub_status();
        push_changed(&mut events, "hub", &hub, &mut self.hub);
        let policies = self.fleet.health_policies();
        push_changed(&mut events, "policies", &policies, &mut self.policies);
        let now = Timestamp::now().as_millisecond();
        events.push(json("tick", &serde_json::json!({ "now": now })));
        events
    }
}

/// Adds event `name` when `value` reads differently from `last` (which it then becomes).
fn push_changed(
    events: &mut Vec<(&'static str, String)>,
    name: &'static str,
    value: &impl Serialize,
    last: &mut String,
) {
    let text = serde_json::to_string(value).unwrap_or_default();
    if text != *last {
        events.push((name, text.clone()));
        *last = text;
    }
}

fn json(name: &'static str, value: &impl Serialize) -> (&'static str, String) {
    (name, serde_json::to_string(value).unwrap_or_default())
}

/// `GET /v1/console/events`.
pub async fn stream(State(s): State<ConsoleState>) -> impl IntoResponse {
    let feed = Feed::new(s.fleet);
    let mut ticks = tokio::time::interval(TICK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let batches = futures::stream::unfold((feed, ticks), |(mut feed, mut ticks)| async move {
        ticks.tick().await;
        // Off the runtime's workers: a fleet of 10,000 clusters takes milliseconds.
        let (feed, events) = tokio::task::spawn_blocking(move || {
            let events = feed.batch();
            (feed, events)
        })
        .await
        .ok()?;
        let events = (events.into_iter())
            .map(|(name, data)| Ok::<_, Infallible>(Event::default().event(name).data(data)));
        Some((futures::stream::iter(events), (feed, ticks)))
    });
    let events = batches.flatten().take_until(s.stop.cancelled_owned());
    ([(CACHE_CONTROL, "no-store")], Sse::new(events))
}

//! Heap allocations per heartbeat (`allocs_per_hb` on the last line): a second hub, the
//! same `serve` as the binary's (HTTPS, HTTP/2, embedded mode), runs in this process on
//! one thread of its own (a current-thread runtime, as a hub with one CPU has one runtime
//! worker), while a small fleet sends it heartbeats the way the measured run does. The
//! binary's allocator counts each thread's allocations ([`CountAllocations`]); only that
//! thread's are counted, so the client's are not. What the hub does on other threads
//! (SQLite writes through its store thread, `spawn_blocking`) is not counted either: none
//! of it runs per heartbeat.

use std::time::{Duration, SystemTime};

use clap::Parser;
use tokio::sync::watch;

use fleetpulse_agent::report::{incarnation_at, unix_seconds};
use fleetpulse_common::protocol::keys;

use super::client::{self, Transport};
use super::hub::HubUnderTest;
use super::{drive, reports};
use crate::fleet;
use crate::pki::Pki;

/// Runs `f` and returns how many heap allocations the calling thread made meanwhile.
pub type CountAllocations = fn(&mut dyn FnMut()) -> u64;

/// Most clusters of the counting fleet, each reporting once a second.
pub const MAX_CLUSTERS: usize = 1000;
/// Rounds counted, after two warm-up rounds.
const ROUNDS: usize = 3;

/// What the counting run found.
#[derive(Clone, Copy, Debug)]
pub struct Allocations {
    /// Allocations on the hub's runtime thread per accepted heartbeat of the counted rounds.
    pub per_heartbeat: f64,
    /// Heartbeats counted.
    pub heartbeats: u64,
}

/// Counts the allocations a hub makes per heartbeat (see the module docs) with a fleet of
/// `clusters` reporting once a second; `transport` and `connections` as in the measured run.
pub async fn per_heartbeat(
    count: CountAllocations,
    clusters: usize,
    transport: Transport,
    connections: usize,
    audience: &str,
) -> anyhow::Result<Allocations> {
    let work = tempfile::tempdir()?;
    let manifests = work.path().join("manifests");
    let clusters = fleet::write_clusters(&manifests, clusters, 1, 4)?;
    let pki = Pki::generate(work.path())?;
    let cli = fleetpulse_hub::cli::Cli::try_parse_from([
        "fleetpulse-hub".as_ref(),
        "serve".as_ref(),
        "--manifests".as_ref(),
        manifests.as_os_str(),
        "--data".as_ref(),
        work.path().join("data").as_os_str(),
        "--listen=127.0.0.1:0".as_ref(),
        "--admin-listen=127.0.0.1:0".as_ref(),
        "--tls-cert".as_ref(),
        pki.server_cert.as_os_str(),
        "--tls-key".as_ref(),
        pki.server_key.as_os_str(),
        format!("--audience={audience}").as_ref(),
    ])?;
    let fleetpulse_hub::cli::Command::Serve(serve) = cli.command else {
        anyhow::bail!("the counting hub's command line is not `serve`");
    };
    let options = serve.options();
    // Phase 0: start and warm-up; 1: the counted rounds; 2: stop.
    let (phase_tx, phase_rx) = watch::channel(0usize);
    let (addrs_tx, addrs_rx) = tokio::sync::oneshot::channel();
    let thread = std::thread::Builder::new()
        .name("counted-hub".into())
        .spawn(move || counted_hub(count, options, phase_rx, addrs_tx))?;
    let (addr, admin) = addrs_rx
        .await
        .map_err(|_| anyhow::anyhow!("the counting hub did not start"))??;
    let mut hub = HubUnderTest::external(
        format!("https://localhost:{}", addr.port()).parse()?,
        format!("https://localhost:{}", admin.port()).parse()?,
        &pki.ca_cert,
        None,
    )?;
    let setup = client::client(&hub.ca_pem, Transport::Http2)?;
    let public_keys = clusters
        .iter()
        .map(|c| keys::public_key_string(&c.key.verifying_key()))
        .collect();
    hub.wait_ready(&setup, &public_keys, Duration::from_secs(120))
        .await?;
    let now = SystemTime::now();
    let plan = reports::ReportPlan {
        audience: audience.to_owned(),
        interval_secs: 1,
        rounds: 2 + ROUNDS,
        checks: 4,
        start_unix: unix_seconds(now),
        incarnation: incarnation_at(now),
    };
    let agents = tokio::task::block_in_place(|| reports::presign(&clusters, &plan));
    let clients = client::clients(&hub.ca_pem, transport, connections)?;
    let schedule = drive::Schedule {
        interval: Duration::from_secs(1),
        warmup_rounds: 2,
        rounds: plan.rounds,
        max_in_flight: 1024,
        floor: false,
        offset: 0,
    };
    // The driver probes when the counted rounds start and after their last answer.
    let probe = || -> Option<super::hub::ProcSample> {
        phase_tx.send_modify(|p| *p += 1);
        None
    };
    let (urls, healthz) = (drive::urls(&agents, &hub.url)?, hub.url.join("/healthz")?);
    let driven = drive::drive(&agents, &clients, &urls, &healthz, schedule, &probe).await;
    phase_tx.send_replace(2);
    let totals = tokio::task::block_in_place(|| thread.join())
        .map_err(|_| anyhow::anyhow!("the counting hub panicked"))??;
    let driven = driven?;
    let refused = driven.warmup.rejected_total() + driven.timed.rejected_total();
    let failed = driven.warmup.failed + driven.timed.failed;
    anyhow::ensure!(
        refused + failed == 0,
        "the counting hub refused {refused} heartbeats and {failed} got no answer: {:?}",
        [&driven.warmup.samples, &driven.timed.samples]
    );
    let heartbeats = driven.timed.accepted;
    Ok(Allocations {
        per_heartbeat: totals[1] as f64 / heartbeats.max(1) as f64,
        heartbeats,
    })
}

type Addrs = (std::net::SocketAddr, std::net::SocketAddr);

/// The counting hub's thread: starts the hub, sends back its addresses, and serves until
/// phase 2, counting each phase's allocations apart. Returns the counts by phase.
fn counted_hub(
    count: CountAllocations,
    options: fleetpulse_hub::server::HubOptions,
    mut phase: watch::Receiver<usize>,
    addrs: tokio::sync::oneshot::Sender<anyhow::Result<Addrs>>,
) -> anyhow::Result<[u64; 3]> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let hub = match runtime.block_on(fleetpulse_hub::server::Hub::start(options)) {
        Ok(hub) => hub,
        Err(e) => {
            let _ = addrs.send(Err(anyhow::anyhow!("the counting hub did not start: {e}")));
            return Err(e.into());
        }
    };
    let _ = addrs.send(Ok((hub.addr, hub.admin_addr)));
    let mut stop = phase.clone();
    let serving = hub.run_until(async move {
        let _ = stop.wait_for(|p| *p >= 2).await;
    });
    let mut serving = Box::pin(serving);
    let mut totals = [0u64; 3];
    loop {
        let now = (*phase.borrow_and_update()).min(2);
        let mut ended = None;
        totals[now] += count(&mut || {
            ended = runtime.block_on(async {
                tokio::select! {
                    result = &mut serving => Some(result),
                    _ = phase.changed() => None,
                }
            });
        });
        if let Some(result) = ended {
            result?;
            return Ok(totals);
        }
    }
}

//! The console in a real browser: headless Chromium driven over WebDriver against an
//! embedded hub. A fleet like the demo's (three simulated clusters with real agents, a
//! HealthPolicy, a ClusterSet wanting one) behind an admin token: the login page refuses a
//! wrong token and takes the right one; a node of the selected cluster goes NotReady and
//! the sets page shows the failover (measured from the moment the hub's read API shows it);
//! every page shows what the hub knows; the page marks itself stale once the hub stops.
//! Then a fleet of 10,000 clusters: its fleet page must be drawn within 2 s of browser time
//! (from navigation start), with only the rows in view in the DOM.
//!
//! Screenshots of each page are taken on the way, into a temporary directory, or into
//! `$FLEETPULSE_SCREENSHOTS` (relative to the workspace) when set: `FLEETPULSE_SCREENSHOTS=
//! docs/console cargo test -p fleetpulse-tests --test console` refreshes the docs' pictures.
//! Skips, saying so, where Chromium or ChromeDriver is not installed
//! (`bash scripts/install-browser.sh` installs them).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fantoccini::Locator;

use fleetpulse_agent::checks::resources::{KubeReader, Reader};
use fleetpulse_common::api::condition::{HEALTHY, Status};
use fleetpulse_hub::fleet::Fleet;
use fleetpulse_kubesim::KubeSim;
use fleetpulse_tests::browser::{self, Browser};
use fleetpulse_tests::scenario::Scenario;
use fleetpulse_tests::{admin_api, fleet, wait};

const TOKEN: &str = "console-test-token-5f1c2a9e";
/// A second policy whose check has the first's name: refused for every cluster
/// (`CheckNameClash`), what the HealthPolicies page must show.
const CLASHING_POLICY: &str = "apiVersion: fleetpulse.io/v1alpha1
kind: HealthPolicy
metadata: {name: nodes-again, namespace: fleet}
spec:
  clusterSelector: {}
  livenessChecks:
    - name: all-nodes-ready
      readyNodes: {minPercent: 50}
";
const SET: &str = "ClusterSet primary";

fn selected(fleet: &Fleet) -> Option<String> {
    let sets = fleet.cluster_sets();
    let status = sets.first()?.status.as_ref()?;
    let first = status.selected_cluster_refs.first()?;
    Some(format!("fleet/{}", first.name))
}

/// Where screenshots go: `$FLEETPULSE_SCREENSHOTS` (relative to the workspace), else `tmp`.
fn screenshots(tmp: &Path) -> PathBuf {
    match std::env::var_os("FLEETPULSE_SCREENSHOTS") {
        Some(dir) => Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(dir),
        None => tmp.to_owned(),
    }
}

async fn shoot(b: &Browser, dir: &Path, name: &str) -> anyhow::Result<()> {
    let path = dir.join(format!("{name}.png"));
    b.screenshot(&path).await?;
    let png = std::fs::read(&path)?;
    anyhow::ensure!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{name}.png is not a screenshot of a page ({} bytes)",
        png.len()
    );
    Ok(())
}

/// A JavaScript string literal of `text`.
fn js(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

async fn type_into(b: &Browser, css: &str, text: &str) -> anyhow::Result<()> {
    let field = b.client().find(Locator::Css(css)).await?;
    field.clear().await?;
    field.send_keys(text).await?;
    Ok(())
}

/// The login page, a wrong token, then the right one. Returns `refused` when the page and
/// the read API both refused the wrong token.
async fn sign_in(b: &Browser, s: &Scenario, shots: &Path) -> anyhow::Result<&'static str> {
    b.goto(&format!("{}console/", s.admin_url)).await?;
    let login = "return !document.getElementById('login').hidden";
    b.wait_js("the login page", Duration::from_secs(20), login)
        .await?;
    shoot(b, shots, "login").await?;
    type_into(b, "#token", "not-the-token").await?;
    b.client()
        .find(Locator::Css("#login-submit"))
        .await?
        .click()
        .await?;
    let error = "const e = document.getElementById('login-error'); \
                 return !e.hidden && e.textContent.startsWith('refused') \
                 && !document.getElementById('login').hidden";
    b.wait_js("the wrong token refused", Duration::from_secs(10), error)
        .await?;
    let url = format!("{}v1/console/clusters/fleet/edge-1", s.admin_url);
    let (status, _) = admin_api::get(&s.pki.ca_cert, &url, Some("not-the-token")).await?;
    anyhow::ensure!(
        status == 401,
        "the API answered a wrong token with {status}"
    );
    type_into(b, "#token", TOKEN).await?;
    b.client()
        .find(Locator::Css("#login-submit"))
        .await?
        .click()
        .await?;
    let rows = "return document.querySelectorAll('.grid-row').length === 3";
    b.wait_js(
        "the fleet page after signing in",
        Duration::from_secs(20),
        rows,
    )
    .await?;
    Ok("refused")
}

/// Fails the selected cluster and returns how long after the read API showed the
/// failover the sets page showed it, in milliseconds.
async fn failover_shown_ms(
    b: &Browser,
    sims: &[KubeSim],
    s: &Scenario,
    first: &str,
) -> anyhow::Result<u128> {
    b.goto(&format!("{}console/#/sets", s.admin_url)).await?;
    let selected_js = format!(
        "const c = document.querySelector('[data-set=\"{SET}\"] [data-role=selected]'); \
         return c && c.textContent === {};",
        js(first)
    );
    b.wait_js("the sets page", Duration::from_secs(10), &selected_js)
        .await?;
    let victim = (s.clusters.iter())
        .position(|c| format!("{}", c.id) == first)
        .expect("a known cluster");
    let fleet = s.hub().fleet.clone();
    sims[victim].set_node_ready("node-2", false);
    let api = async {
        wait::until(
            "the read API to show the failover",
            Duration::from_secs(60),
            || selected(&fleet).is_some_and(|c| c != first),
        )
        .await
        .map(|_| Instant::now())
    };
    let shown_js = format!(
        "const set = document.querySelector('[data-set=\"{SET}\"]'); \
         const c = set && set.querySelector('[data-role=selected]'); \
         return !!c && c.textContent !== 'none' && c.textContent !== {first} \
           && set.querySelectorAll('svg path.drop').length >= 1;",
        first = js(first)
    );
    let page = async {
        b.wait_js(
            "the sets page to show the failover",
            Duration::from_secs(60),
            &shown_js,
        )
        .await
        .map(|_| Instant::now())
    };
    let (api, page) = tokio::join!(api, page);
    Ok(page?.saturating_duration_since(api?).as_millis())
}

/// Each page shows what the hub knows; returns how many pages were checked.
async fn every_page(b: &Browser, s: &Scenario, victim: &str, shots: &Path) -> anyhow::Result<u32> {
    let base = format!("{}console/", s.admin_url);
    let pages: [(&str, String, String); 5] = [
        ("sets", "#/sets".into(), format!(
            "return document.querySelectorAll('[data-set=\"{SET}\"] table[data-role=moves] tr').length >= 3")),
        ("fleet", "#/fleet".into(), format!(
            "const r = document.querySelector('.grid-row[data-id={v}]'); \
             return !!r && r.textContent.includes('all-nodes-ready: 2 of 3 nodes Ready')", v = js(victim))),
        ("cluster", format!("#/cluster/{victim}"), "const t = document.getElementById('cluster-checks'); \
             return !!t && t.textContent.includes('all-nodes-ready') \
             && document.querySelectorAll('#check-history rect.failing').length >= 1 \
             && document.getElementById('cluster-sets').textContent.includes('ClusterSet primary (matches)')".into()),
        ("brake", "#/brake".into(),
            "const b = document.getElementById('brake'); return !!b && b.dataset.state === 'Released'".into()),
        ("policies", "#/policies".into(),
            "const p = document.querySelector('tr[data-policy=\"fleet/nodes-again\"]'); \
             return !!p && p.textContent.includes('CheckNameClash')".into()),
    ];
    let mut checked = 0;
    for (name, route, shows) in pages {
        b.goto(&format!("{base}{route}")).await?;
        b.wait_js(&format!("the {name} page"), Duration::from_secs(10), &shows)
            .await?;
        let live = "return document.getElementById('live').textContent === 'live'";
        b.wait_js("the live mark", Duration::from_secs(10), live)
            .await?;
        shoot(b, shots, name).await?;
        checked += 1;
    }
    Ok(checked)
}

/// A fleet of 10,000 clusters: how long its fleet page took to draw, in browser time.
async fn ten_thousand(b: &Browser, shots: &Path) -> anyhow::Result<f64> {
    let s = Scenario::start(10_000, 10, 30).await?;
    b.goto(&format!("{}console/", s.admin_url)).await?;
    let drawn = "return window.fleetpulseConsole.fleetRows === 10000";
    b.wait_js(
        "10,000 clusters on the fleet page",
        Duration::from_secs(60),
        drawn,
    )
    .await?;
    let ms = b
        .eval("return window.fleetpulseConsole.fleetRenderedAt", vec![])
        .await?;
    let ms = ms
        .as_f64()
        .ok_or_else(|| anyhow::anyhow!("no render time: {ms}"))?;
    let in_dom = b
        .eval(
            "return document.querySelectorAll('.grid-row').length",
            vec![],
        )
        .await?;
    let in_dom = in_dom.as_u64().unwrap_or(u64::MAX);
    anyhow::ensure!(
        in_dom < 100,
        "{in_dom} rows in the DOM: the table is not virtualised"
    );
    let bottom = "const g = document.getElementById('fleet-grid'); g.scrollTop = g.scrollHeight; \
                  return !!document.querySelector('.grid-row[data-id=\"fleet/edge-10000\"]')";
    b.wait_js(
        "the last cluster after scrolling",
        Duration::from_secs(10),
        bottom,
    )
    .await?;
    shoot(b, shots, "fleet-10000").await?;
    type_into(b, "#fleet-search", "edge-4242").await?;
    let one = "const r = document.querySelectorAll('.grid-row'); \
               return r.length === 1 && r[0].dataset.id === 'fleet/edge-4242'";
    b.wait_js("search to find one cluster", Duration::from_secs(10), one)
        .await?;
    s.shutdown().await?;
    Ok(ms)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_console_shows_a_failover_within_two_seconds_refuses_a_wrong_token_and_draws_10000_clusters()
-> anyhow::Result<()> {
    if let Some(reason) = browser::unavailable() {
        eprintln!("skipping: {reason}");
        return Ok(());
    }
    let mut s = Scenario::start(3, 1, 4).await?;
    s.stop_hub().await;
    s.require_admin_token(TOKEN)?;
    s.start_hub().await?;
    s.write_manifest("policy.yaml", fleet::ALL_NODES_READY_POLICY)?;
    s.write_manifest("clashing.yaml", CLASHING_POLICY)?;
    s.write_manifest("primary.yaml", fleet::PRIMARY_CLUSTER_SET)?;
    let sims: Vec<KubeSim> = (0..3)
        .map(|_| KubeSim::builder().nodes(3).build())
        .collect();
    for (i, sim) in sims.iter().enumerate() {
        s.start_agent_with_engine(i, Reader::Kube(KubeReader::new(sim.client())))?;
    }
    let fleet = s.hub().fleet.clone();
    wait::until(
        "every cluster Healthy and one selected",
        Duration::from_secs(60),
        || (0..3).all(|i| s.condition(i, HEALTHY) == Status::True) && selected(&fleet).is_some(),
    )
    .await?;
    let first = selected(&fleet).expect("selected");
    let tmp = tempfile::tempdir()?;
    let shots = screenshots(tmp.path());
    let b = Browser::start().await?;

    let wrong_token = sign_in(&b, &s, &shots).await?;
    let shown_ms = failover_shown_ms(&b, &sims, &s, &first).await?;
    let pages = every_page(&b, &s, &first, &shots).await?;
    s.stop_hub().await;
    let stale = "return document.body.classList.contains('stale') \
                 && !document.getElementById('stale').hidden";
    b.wait_js(
        "the stale mark once the hub stopped",
        Duration::from_secs(15),
        stale,
    )
    .await?;
    shoot(&b, &shots, "stale").await?;
    s.shutdown().await?;

    let fleet_page_ms = ten_thousand(&b, &shots).await?;
    b.close().await?;
    println!(
        "console: pages={pages} failover_shown_ms={shown_ms} clusters=10000 \
         fleet_page_ms={fleet_page_ms:.0} wrong_token={wrong_token}"
    );
    assert!(
        shown_ms <= 2000,
        "the failover showed {shown_ms} ms after the API had it"
    );
    assert!(
        fleet_page_ms < 2000.0,
        "10,000 clusters took {fleet_page_ms:.0} ms to draw"
    );
    Ok(())
}

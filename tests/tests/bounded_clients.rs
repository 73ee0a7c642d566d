//! What one client can hold on the real `fleetpulse-hub serve`, on loopback: a connection
//! that sends its headers or body too slowly is cut off, connections beyond the cap are
//! closed at once while a connected agent keeps reporting, and a hub out of file
//! descriptors backs off instead of spinning, with a log that stays small; and the agent
//! endpoints, served in front of the router, answer as the router would.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fleetpulse_agent::AgentOptions;
use fleetpulse_common::api::MemberCluster;
use fleetpulse_common::api::condition::{self, REACHABLE, Status};
use fleetpulse_tests::embedded_hub::EmbeddedHub;
use fleetpulse_tests::fleet::{condition_of, write_clusters};
use fleetpulse_tests::pki::Pki;
use fleetpulse_tests::process::{self, Running};
use fleetpulse_tests::wait::blocking_until;

const DEADLINE: Duration = Duration::from_secs(30);

/// `serve` over plain HTTP on a free loopback port, with `extra` flags.
fn plain_hub(dir: &Path, extra: &[&str]) -> anyhow::Result<(Running, SocketAddr)> {
    let (manifests, data) = (dir.join("manifests"), dir.join("data"));
    std::fs::create_dir_all(&manifests)?;
    let (manifests, data) = (manifests.display().to_string(), data.display().to_string());
    let mut args = vec!["serve", "--manifests", &manifests, "--data", &data];
    args.extend(["--listen", "127.0.0.1:0", "--insecure-http"]);
    args.extend(["--admin-listen", "127.0.0.1:0"]);
    args.extend_from_slice(extra);
    let mut hub = Running::spawn_logged("fleetpulse-hub", "hub", &args)?;
    let mut addr = None;
    blocking_until("the hub to serve", DEADLINE, || {
        addr = hub.logged_addr("hub serving");
        addr.is_some() || hub.exited().is_some()
    })?;
    let addr = addr.ok_or_else(|| anyhow::anyhow!("the hub exited (its log is above)"))?;
    Ok((hub, addr))
}

/// How long until the hub closes `stream` (reads end or fail), up to `limit`; `None` if it
/// was still open then. Whatever the hub answers before closing is read and dropped.
fn closed_within(stream: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    let mut buf = [0u8; 4096];
    while start.elapsed() < limit {
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        match stream.read(&mut buf) {
            Ok(0) => return Some(start.elapsed()),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return Some(start.elapsed()),
        }
    }
    None
}

#[test]
fn a_client_sending_its_headers_or_body_too_slowly_is_cut_off() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let flags = [
        "--header-read-timeout-seconds",
        "1",
        "--body-read-timeout-seconds",
        "1",
    ];
    let (_hub, addr) = plain_hub(dir.path(), &flags)?;

    let mut slow_headers = TcpStream::connect(addr)?;
    slow_headers.write_all(b"GET /healthz HTTP/1.1\r\nHost: hub\r\n")?;
    let cut = closed_within(&mut slow_headers, Duration::from_secs(15));
    assert!(
        cut.is_some(),
        "a connection still sending its headers after 15 s is open"
    );

    let mut slow_body = TcpStream::connect(addr)?;
    slow_body.write_all(
        b"POST /v1/clusters/fleet/edge/heartbeat HTTP/1.1\r\nHost: hub\r\n\
          Content-Type: application/jose\r\nContent-Length: 1000\r\n\r\nabc",
    )?;
    let cut = closed_within(&mut slow_body, Duration::from_secs(15));
    assert!(
        cut.is_some(),
        "a request whose body never completes holds its connection"
    );

    // A prompt client is served as before.
    let mut prompt = TcpStream::connect(addr)?;
    prompt.write_all(b"GET /healthz HTTP/1.1\r\nHost: hub\r\nConnection: close\r\n\r\n")?;
    let mut answer = String::new();
    prompt.read_to_string(&mut answer)?;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    Ok(())
}

/// `request` sent alone on a new connection to `addr` (it must ask to close), and the
/// whole answer.
fn exchange(addr: SocketAddr, request: &str) -> anyhow::Result<String> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(DEADLINE))?;
    stream.write_all(request.as_bytes())?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    Ok(answer)
}

/// The agents' listener serves the agent endpoints in front of its router; the answers
/// are the router's: the wrong method is 405 naming the right ones, another action under
/// a cluster 404, a heartbeat that is not a JWS refused `malformed_jws`, and the probes
/// and other paths still reach the router.
#[test]
fn the_agent_endpoints_answer_through_the_listener_as_through_the_router() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let (_hub, addr) = plain_hub(dir.path(), &[])?;
    let get = |path: &str| {
        exchange(
            addr,
            &format!("GET {path} HTTP/1.1\r\nHost: hub\r\nConnection: close\r\n\r\n"),
        )
    };

    let answer = get("/v1/clusters/fleet/edge-1/heartbeat")?;
    assert!(answer.starts_with("HTTP/1.1 405"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("\r\nallow: post\r\n"),
        "{answer}"
    );
    let answer = exchange(
        addr,
        "DELETE /v1/clusters/fleet/edge-1/config HTTP/1.1\r\nHost: hub\r\nConnection: close\r\n\r\n",
    )?;
    assert!(answer.starts_with("HTTP/1.1 405"), "{answer}");
    assert!(
        answer
            .to_ascii_lowercase()
            .contains("\r\nallow: get,head\r\n"),
        "{answer}"
    );
    for path in [
        "/v1/clusters/fleet/edge-1/status",
        "/v1/clusters/fleet//heartbeat",
        "/v1/nothing",
    ] {
        let answer = get(path)?;
        assert!(answer.starts_with("HTTP/1.1 404"), "{path}: {answer}");
    }
    let answer = exchange(
        addr,
        "POST /v1/clusters/fleet/edge-1/heartbeat HTTP/1.1\r\nHost: hub\r\nConnection: close\r\n\
         Content-Type: application/jose\r\nContent-Length: 9\r\n\r\nnot-a-jws",
    )?;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("malformed_jws"), "{answer}");
    for probe in ["/healthz", "/readyz"] {
        let answer = get(probe)?;
        assert!(answer.starts_with("HTTP/1.1 200"), "{probe}: {answer}");
    }
    Ok(())
}

/// When cluster `edge-1` last became (un)reachable, and whether it is reachable now.
fn reachable_since(clusters: &[MemberCluster]) -> Option<(Status, String)> {
    let mc = clusters
        .iter()
        .find(|mc| mc.metadata.name.as_deref() == Some("edge-1"))?;
    let c = condition::find(&mc.status.as_ref()?.conditions, REACHABLE)?;
    Some((
        Status::parse(&c.status),
        c.last_transition_time.0.to_string(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_are_closed_at_once_while_a_connected_agent_keeps_reporting()
-> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let pki = Pki::generate(dir.path())?;
    let manifests = dir.path().join("manifests");
    let clusters = write_clusters(&manifests, 1, 1, 4)?;
    let flags = ["--max-connections", "4"];
    let hub = EmbeddedHub::spawn(&manifests, &dir.path().join("data"), &pki, &flags)?;
    let url = hub.server.parse()?;
    let mut options = AgentOptions::new(url, clusters[0].id.clone(), clusters[0].key.clone());
    options.hub_ca_pem = Some(std::fs::read(&pki.ca_cert)?);
    options.interval = Duration::from_secs(1);
    let _agent = fleetpulse_agent::spawn(options)?;
    let id = clusters[0].id.clone();
    let mut before = None;
    tokio::task::block_in_place(|| {
        blocking_until("edge-1 Reachable", DEADLINE, || {
            before = hub.clusters().and_then(|c| {
                (condition_of(&c, &id, REACHABLE) == Status::True).then(|| reachable_since(&c))?
            });
            before.is_some()
        })
    })?;

    // Twelve connections that never speak: three fit beside the agent's, nine do not.
    let addr: SocketAddr =
        format!("127.0.0.1:{}", hub.server.rsplit(':').next().unwrap()).parse()?;
    let flood = Instant::now();
    let mut idle: Vec<TcpStream> = (0..12)
        .map(|_| TcpStream::connect(addr))
        .collect::<Result<_, _>>()?;
    let closed = tokio::task::block_in_place(|| {
        idle.iter_mut()
            .map(|s| closed_within(s, Duration::from_millis(400)))
            .filter(Option::is_some)
            .count()
    });
    assert!(
        (9..12).contains(&closed),
        "{closed} of 12 closed at once with room for 3 at most"
    );
    assert!(
        hub.process.log_line("connection limit reached").is_some(),
        "the hub says why"
    );
    // Hold the slots for longer than the grace period (4 s): the agent, already
    // connected, goes on reporting through it.
    tokio::task::block_in_place(|| {
        blocking_until("the flood to last past the grace period", DEADLINE, || {
            flood.elapsed() > Duration::from_secs(6)
        })
    })?;
    drop(idle);
    let after = tokio::task::block_in_place(|| {
        let mut after = None;
        blocking_until("the read API to answer again", DEADLINE, || {
            after = hub.clusters().and_then(|c| reachable_since(&c));
            after.is_some()
        })
        .map(|_| after)
    })?;
    assert_eq!(after, before, "edge-1 stayed Reachable through the flood");
    Ok(())
}

/// The hub under `prlimit --nofile=LIMIT`, its stderr in `log`; killed on drop.
struct Limited(Child);

impl Drop for Limited {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn out_of_file_descriptors_the_hub_backs_off_and_its_log_stays_small() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let (manifests, data) = (dir.path().join("manifests"), dir.path().join("data"));
    std::fs::create_dir_all(&manifests)?;
    let log = dir.path().join("hub.log");
    let hub = process::binary("fleetpulse-hub")?;
    let child = Command::new("prlimit")
        .arg("--nofile=64:64")
        .arg("--")
        .arg(&hub)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--insecure-http",
            "--manifests",
        ])
        .arg(&manifests)
        .arg("--data")
        .arg(&data)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()?;
    let _hub = Limited(child);
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
    let mut addr = None;
    blocking_until("the hub to serve", DEADLINE, || {
        addr = read_log()
            .lines()
            .find(|l| l.contains("hub serving"))
            .and_then(process::addr_field);
        addr.is_some()
    })?;
    let addr = addr.unwrap();

    // More connections than the hub has descriptors left; they wait in the backlog.
    let held: Vec<TcpStream> = (0..120)
        .map(|_| TcpStream::connect(addr))
        .collect::<Result<_, _>>()?;
    blocking_until("the hub to run out of descriptors", DEADLINE, || {
        read_log().contains("cannot accept connections")
    })?;
    let start = std::fs::metadata(&log)?.len();
    let window = Instant::now();
    // The measurement window: how much the hub logs in 3 s while out of descriptors.
    blocking_until("the measurement window", DEADLINE, || {
        window.elapsed() >= Duration::from_secs(3)
    })?;
    let grown = std::fs::metadata(&log)?.len() - start;
    println!("fd_exhaustion log_bytes_in_3s={grown}");
    assert!(
        grown < 16 * 1024,
        "the log grew {grown} bytes in 3 s while out of descriptors"
    );

    drop(held);
    let served = blocking_until("the hub to serve again", DEADLINE, || {
        let Ok(mut s) = TcpStream::connect(addr) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        let mut answer = String::new();
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: hub\r\nConnection: close\r\n\r\n")
            .is_ok()
            && s.read_to_string(&mut answer).is_ok()
            && answer.starts_with("HTTP/1.1 200")
    });
    assert!(
        served.is_ok(),
        "the hub recovers once descriptors are free: {}",
        read_log()
    );
    Ok(())
}

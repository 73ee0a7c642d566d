//! A real browser for the tests: Debian's Chromium, headless, driven over WebDriver
//! through its ChromeDriver (started here on a free loopback port, spoken to in plain
//! HTTP, stopped with the [`Browser`]) with the `fantoccini` client. Each [`Browser`] has a
//! fresh profile in a temporary directory and accepts the hub's throwaway test
//! certificates. `bash scripts/install-browser.sh` installs both programs; [`unavailable`]
//! says when one is missing, so a test can skip and say why.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use fantoccini::{Client, ClientBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

/// How long ChromeDriver may take to listen and Chromium to open a session.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Chromium's flags: headless, and none of its background traffic (on a host without
/// internet its update, sync and field-trial connections would be refused, many at a time).
const FLAGS: [&str; 11] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,900",
    "--hide-scrollbars",
];

/// Where `program` is: on `PATH`, else in `/usr/bin`.
fn find(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin")])
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// Why no browser can run here, if none can: Chromium or ChromeDriver is not installed.
pub fn unavailable() -> Option<String> {
    let missing: Vec<&str> = ["chromium", "chromedriver"]
        .into_iter()
        .filter(|p| find(p).is_none())
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "{} not installed (bash scripts/install-browser.sh installs Debian's chromium and \
             chromium-driver)",
            missing.join(" and ")
        )
    })
}

/// A headless Chromium session and the ChromeDriver serving it.
pub struct Browser {
    client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts ChromeDriver, waits until it answers, and opens a session.
    pub async fn start() -> anyhow::Result<Browser> {
        let chromium = find("chromium").context("chromium is not installed")?;
        let chromedriver = find("chromedriver").context("chromedriver is not installed")?;
        let profile = tempfile::tempdir()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut driver = Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("cannot start {}", chromedriver.display()))?;
        let url = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        // ChromeDriver takes a moment to listen: try until it does, with a deadline.
        let client = loop {
            match new_session(&url, &chromium, profile.path()).await {
                Ok(client) => break client,
                Err(e) if started.elapsed() > START_TIMEOUT => {
                    stop(&mut driver);
                    return Err(e).context(format!(
                        "no WebDriver session from {} within {START_TIMEOUT:?}",
                        chromedriver.display()
                    ));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        };
        Ok(Browser {
            client,
            driver,
            _profile: profile,
        })
    }

    /// The WebDriver client, for what the helpers here do not cover.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Navigates to `url` and waits for its load.
    pub async fn goto(&self, url: &str) -> anyhow::Result<()> {
        (self.client.goto(url).await).with_context(|| format!("cannot open {url}"))
    }

    /// Runs `script` (a function body: it `return`s its result) with `args` in the page.
    pub async fn eval(&self, script: &str, args: Vec<Value>) -> anyhow::Result<Value> {
        (self.client.execute(script, args).await)
            .with_context(|| format!("the page could not run: {script}"))
    }

    /// Runs `script` every 25 ms until it returns a truthy value, for at most `timeout`;
    /// returns how long that took. A script that fails (the page is between two documents,
    /// say) counts as not yet. On timeout the error says it was waiting for `what`, how the
    /// script last failed, and what the page showed.
    pub async fn wait_js(
        &self,
        what: &str,
        timeout: Duration,
        script: &str,
    ) -> anyhow::Result<Duration> {
        let started = Instant::now();
        loop {
            let failed = match self.eval(script, vec![]).await {
                Ok(value) if truthy(&value) => return Ok(started.elapsed()),
                Ok(_) => None,
                Err(e) => Some(e),
            };
            if started.elapsed() > timeout {
                let body = "return document.body ? document.body.innerText : ''";
                let shown = match self.eval(body, vec![]).await {
                    Ok(Value::String(text)) => text.chars().take(2000).collect(),
                    Ok(other) => other.to_string(),
                    Err(e) => format!("(unreadable: {e})"),
                };
                let failed = failed.map(|e| format!("; the script last failed: {e:#}"));
                anyhow::bail!(
                    "timed out after {timeout:?} waiting for {what}{}; the page shows: {shown}",
                    failed.unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Saves a PNG of the window to `path`.
    pub async fn screenshot(&self, path: &Path) -> anyhow::Result<()> {
        let png = self.client.screenshot().await.context("no screenshot")?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, png).with_context(|| format!("cannot write {}", path.display()))
    }

    /// Ends the session and stops ChromeDriver.
    pub async fn close(mut self) -> anyhow::Result<()> {
        let closed = self.client.clone().close().await;
        stop(&mut self.driver);
        closed.context("the browser session did not end cleanly")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        stop(&mut self.driver);
    }
}

/// Stops ChromeDriver and whatever it started: a session not closed (a test that failed
/// half way) would leave Chromium running past the test.
fn stop(driver: &mut Child) {
    let mut doomed = descendants(driver.id());
    doomed.reverse();
    for pid in doomed {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    let _ = driver.kill();
    let _ = driver.wait();
}

/// The processes descending from `root`, parents before children, read off `/proc`.
fn descendants(root: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // `pid (comm) state ppid ...`; comm may hold spaces, so read after its `)`.
            let ppid = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            Some((pid, ppid))
        })
        .collect();
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(pid, _)| *pid),
        );
        i += 1;
    }
    found.remove(0);
    found
}

/// JavaScript's truthiness of a value WebDriver returned.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|n| n != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// A session on the ChromeDriver at `url`, running `chromium` with its profile in `profile`.
async fn new_session(url: &str, chromium: &Path, profile: &Path) -> anyhow::Result<Client> {
    let mut args: Vec<String> = FLAGS.iter().map(|f| (*f).to_owned()).collect();
    args.push(format!("--user-data-dir={}", profile.display()));
    let capabilities = json!({
        "acceptInsecureCerts": true,
        "goog:chromeOptions": { "binary": chromium, "args": args },
    });
    let Value::Object(capabilities) = capabilities else {
        unreachable!("a JSON object")
    };
    let client = ClientBuilder::new(HttpConnector::new())
        .capabilities(capabilities)
        .connect(url)
        .await?;
    Ok(client)
}

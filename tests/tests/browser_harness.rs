//! The browser harness itself (`fleetpulse_tests::browser`), against a one-page site: a
//! click through WebDriver runs the page's script, `eval` reads what it wrote, `wait_js`
//! waits for it and times out naming what it waited for, and a screenshot is a PNG. Skips,
//! saying why, where Chromium or ChromeDriver is missing.

use std::time::{Duration, Instant};

use fantoccini::Locator;
use fleetpulse_tests::browser::{self, Browser};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The page: a button whose click handler sets the title from the number it carries.
const PAGE: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>before</title></head>
<body>
<button id="go" data-n="20">go</button>
<script>
document.getElementById('go').addEventListener('click', (e) => {
  const n = Number(e.target.dataset.n);
  document.title = 'clicked ' + (n * 2 + 2);
});
</script>
</body></html>"#;

/// Serves [`PAGE`] to every request on a loopback port, over plain HTTP/1.1; returns its URL.
async fn serve_page() -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/", listener.local_addr()?);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                // One request per connection; its head is all there is (GETs only).
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{PAGE}",
                    PAGE.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    Ok(url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_click_runs_the_pages_script_and_the_screenshot_is_a_png() -> anyhow::Result<()> {
    if let Some(reason) = browser::unavailable() {
        eprintln!("skipping: {reason}");
        return Ok(());
    }
    let url = serve_page().await?;
    let started = Instant::now();
    let b = Browser::start().await?;
    eprintln!("Browser::start took {:?}", started.elapsed());

    b.goto(&url).await?;
    assert_eq!(
        b.eval("return document.title", vec![]).await?,
        json!("before")
    );
    // Arguments reach the script, and what it returns comes back as JSON.
    let sum = b
        .eval(
            "return arguments[0] + arguments[1].length",
            vec![json!(40), json!([1, 2])],
        )
        .await?;
    assert_eq!(sum, json!(42));

    b.client().find(Locator::Css("#go")).await?.click().await?;
    b.wait_js(
        "the click handler to set the title",
        Duration::from_secs(10),
        "return document.title.startsWith('clicked')",
    )
    .await?;
    assert_eq!(
        b.eval("return document.title", vec![]).await?,
        json!("clicked 42")
    );

    // A condition that never holds times out, naming what it waited for.
    let never = b
        .wait_js(
            "a title that never comes",
            Duration::from_millis(200),
            "return document.title === 'never'",
        )
        .await;
    let message = format!(
        "{:#}",
        never
            .err()
            .ok_or_else(|| anyhow::anyhow!("wait_js did not time out"))?
    );
    assert!(message.contains("a title that never comes"), "{message}");

    let dir = tempfile::tempdir()?;
    let shot = dir.path().join("shots").join("page.png");
    b.screenshot(&shot).await?;
    let png = std::fs::read(&shot)?;
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "not a PNG: {:?}",
        &png[..png.len().min(8)]
    );

    b.close().await?;
    Ok(())
}

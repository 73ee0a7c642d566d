#!/usr/bin/env bash
# Installs what the console's browser test (tests/tests/console.rs, through
# tests/src/browser.rs) needs, from Debian's apt archive: Chromium, run headless, and
# ChromeDriver, the WebDriver server the test drives it through (packages chromium and
# chromium-driver, built from one source, so their versions match).
#
# Idempotent: with both present (on PATH or in /usr/bin) it prints their versions and does
# nothing. Needs root (or sudo) and apt-get; on any other system install Chromium and a
# matching ChromeDriver with its package manager. A failure here is not fatal for CI: the
# console test then skips and says why.
set -euo pipefail

# Where a program is: on PATH, else in /usr/bin; nothing when it is in neither.
locate() {
  command -v "$1" 2>/dev/null || { [ -x "/usr/bin/$1" ] && echo "/usr/bin/$1"; } || true
}

# "Chromium 1.2.3 ..., ChromeDriver 1.2.3 (...)". Debian's chromium wrapper script writes
# shell noise to stderr on --version; only stdout counts.
versions() {
  local chromium chromedriver
  chromium="$("$1" --version 2>/dev/null | head -n1)" || true
  chromedriver="$("$2" --version 2>/dev/null | awk 'NR == 1 {print $1, $2}')" || true
  echo "${chromium:-chromium (version unknown)} at $1, ${chromedriver:-chromedriver (version unknown)} at $2"
}

chromium="$(locate chromium)"
chromedriver="$(locate chromedriver)"
if [ -n "$chromium" ] && [ -n "$chromedriver" ]; then
  echo "$(versions "$chromium" "$chromedriver"): already installed"
  exit 0
fi
command -v apt-get >/dev/null 2>&1 || {
  echo "install-browser: no apt-get here; install chromium and chromedriver with this system's package manager" >&2
  exit 1
}
as_root=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || {
    echo "install-browser: installing chromium and chromium-driver needs root (or sudo)" >&2
    exit 1
  }
  as_root=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
# Recommended packages stay in: among them are the fonts pages and screenshots are drawn in.
"${as_root[@]}" apt-get update -qq || {
  echo "install-browser: apt-get update failed (no network to the Debian archive?)" >&2
  exit 1
}
"${as_root[@]}" apt-get install -y -qq chromium chromium-driver >/dev/null || {
  echo "install-browser: apt-get install chromium chromium-driver failed" >&2
  exit 1
}
chromium="$(locate chromium)"
chromedriver="$(locate chromedriver)"
if [ -z "$chromium" ] || [ -z "$chromedriver" ]; then
  echo "install-browser: chromium and chromium-driver installed, yet chromium or chromedriver is not on PATH nor in /usr/bin" >&2
  exit 1
fi
echo "$(versions "$chromium" "$chromedriver"): installed from apt"

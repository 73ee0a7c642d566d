#!/usr/bin/env bash
# Installs what the console's browser test (tests/tests/console.rs) needs, from Debian's apt
# archive: Chromium, run headless, and ChromeDriver, the WebDriver server the test drives
# it through (packages chromium and chromium-driver, one version together).
#
# Idempotent: with both present it does nothing. Needs root (or sudo) and apt-get; on any
# other system install Chromium and a matching ChromeDriver with its package manager. A
# failure here is not fatal for CI: the console test then skips and says why.
set -euo pipefail

if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  echo "$(chromedriver --version | awk '{print $1, $2}'): already installed, with $(command -v chromium)"
  exit 0
fi
command -v apt-get >/dev/null 2>&1 || {
  echo "install-browser: no apt-get here; install chromium and chromedriver with this system's package manager" >&2
  exit 1
}
as_root=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || {
    echo "install-browser: installing chromium needs root (or sudo)" >&2
    exit 1
  }
  as_root=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq chromium chromium-driver >/dev/null
echo "$(chromedriver --version | awk '{print $1, $2}'): installed from apt, with $(command -v chromium)"

#!/usr/bin/env bash
# Installs what scripts/build-images.sh needs, from Debian's apt archive: buildah (builds
# the COPY-only images FROM scratch and writes OCI archives; no container daemon), plus
# dpkg-deb and apt-get download, which every Debian system has.
#
# Idempotent: with buildah present it does nothing. Needs root (or sudo) and apt-get; on
# any other system install buildah with its package manager instead. A failure here is
# not fatal for CI: the image test then skips and says why.
set -euo pipefail

if command -v buildah >/dev/null 2>&1; then
  echo "buildah $(buildah --version | awk '{print $3}'): already installed"
  exit 0
fi
command -v apt-get >/dev/null 2>&1 || {
  echo "install-image-tools: no apt-get here; install buildah with this system's package manager" >&2
  exit 1
}
as_root=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || {
    echo "install-image-tools: installing buildah needs root (or sudo)" >&2
    exit 1
  }
  as_root=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends buildah >/dev/null
echo "buildah $(buildah --version | awk '{print $3}'): installed from apt"

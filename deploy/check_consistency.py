#!/usr/bin/env python3
"""Consistency checks of the operations files against the code, which no off-the-shelf
validator covers.

- docs/running.md documents every configuration key, and docs/metrics.md explains every alert.
- Every omrd configuration the files carry (config/omrd.toml, config/omrd-container.toml, the
  ConfigMap's omrd.toml) uses only keys of `Config` (crates/omr-server/src/config.rs, the
  fields of its `declare_config!`), and every OMR_* variable that docker-compose.yml or a
  Deployment sets names one of them (omrd ignores other OMR_* variables silently, so a misspelt
  one would do nothing).
- Every metric and label that the Grafana dashboard (deploy/grafana/omrd-dashboard.json) and
  the alert rules (config/prometheus/alerts.yml) query exists in
  crates/omr-server/src/metrics.rs (names are read from the source, prefixed with the
  registry's namespace; histograms also have _bucket, _sum and _count).
- The dashboard: unique panel ids, panels inside the 24-column grid and not overlapping, every
  query on the `datasource` variable, whose default is the uid provisioned for docker compose.
- The OpenTelemetry collector config: every component a pipeline names is defined.
- Files that docker-compose.yml mounts exist.
- With --promql-rules FILE: writes the dashboard's queries as a Prometheus rule file (Grafana
  variables replaced by constants) so that `promtool check rules FILE` checks their syntax.

Needs PyYAML. Exits non-zero with one line per problem.
"""

import argparse
import json
import re
import sys
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
METRICS_RS = ROOT / "crates/omr-server/src/metrics.rs"
CONFIG_RS = ROOT / "crates/omr-server/src/config.rs"
CONFIG_FILES = [ROOT / "config/omrd.toml", ROOT / "config/omrd-container.toml"]
CONFIGMAP = ROOT / "deploy/configmap.yaml"
DEPLOYMENTS = [ROOT / "deploy/api-deployment.yaml", ROOT / "deploy/worker-deployment.yaml"]
DASHBOARD = ROOT / "deploy/grafana/omrd-dashboard.json"
ALERTS = ROOT / "config/prometheus/alerts.yml"
DATASOURCES = ROOT / "config/grafana/provisioning/datasources/prometheus.yml"
COLLECTOR = ROOT / "deploy/otel-collector.yaml"
COMPOSE = ROOT / "docker-compose.yml"
# The configuration table and the alerts runbook.
CONFIG_DOC = "docs/running.md"
ALERTS_DOC = "docs/metrics.md"

# Labels Prometheus attaches to every omrd series (target labels from the scrape configs).
TARGET_LABELS = {"job", "instance", "role"}
# Series that are not omrd's but may be queried.
FOREIGN_METRICS = {"up": set()}

problems = []


def problem(msg):
    problems.append(msg)


def metrics_from_source():
    """{full metric name: set of label names} as metrics.rs defines them."""
    # metrics.rs and its submodules (metrics/detection.rs).
    src = METRICS_RS.read_text() + "".join(
        f.read_text() for f in sorted(METRICS_RS.with_suffix("").glob("*.rs"))
    )
    m = re.search(r'Registry::new_custom\(Some\("([a-z_]+)"', src)
    prefix = m.group(1) + "_" if m else ""
    defined = {}
    # Opts::new / HistogramOpts::new / IntCounter::new / IntGauge::new / Histogram::new ("name", ...
    for m in re.finditer(
        r'\b(Opts|HistogramOpts|IntCounter|IntGauge|Histogram|Counter|Gauge)::new\(\s*"([a-z0-9_]+)"'
        r'|\b(g)\(\s*"([a-z0-9_]+)"',
        src,
    ):
        # `g("name", …)` is metrics/detection.rs's IntGauge shorthand.
        kind, name = (m.group(1), m.group(2)) if m.group(1) else ("IntGauge", m.group(4))
        # The label list, if any, follows the options: `&["a", "b"]` before the next `.expect`.
        tail = src[m.end(): src.find(".expect", m.end())]
        labels = set(re.findall(r'"([a-z_]+)"', tail.split("&[", 1)[1])) if "&[" in tail else set()
        full = prefix + name
        if kind == "HistogramOpts" or kind == "Histogram":
            for suffix in ("_bucket", "_sum", "_count"):
                defined[full + suffix] = labels | ({"le"} if suffix == "_bucket" else set())
        else:
            defined[full] = labels
    if not defined:
        problem(f"{METRICS_RS}: no metric definitions found (has the file changed shape?)")
    return defined


def check_expr(where, expr, defined):
    """Metric names and matcher/grouping labels of one PromQL expression."""
    used_metrics = set()
    for name in re.findall(r"\b([a-z_][a-z0-9_]*)\s*(?=\{|\[|\)|$|\s)", expr):
        if name.startswith("omr_"):
            used_metrics.add(name)
            if name not in defined:
                problem(f"{where}: metric {name} is not defined in metrics.rs")
    for name, body in re.findall(r"\b([a-z_][a-z0-9_]*)\{([^}]*)\}", expr):
        allowed = defined.get(name, FOREIGN_METRICS.get(name))
        if allowed is None:
            continue
        for label in re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)", body):
            if label not in allowed | TARGET_LABELS:
                problem(f"{where}: {name} has no label {label!r} (labels: {sorted(allowed)})")
    known = set(TARGET_LABELS)
    for name in used_metrics:
        known |= defined.get(name, set())
    for group in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr):
        for label in [g.strip() for g in group.split(",") if g.strip()]:
            if label not in known:
                problem(f"{where}: grouping label {label!r} is on none of {sorted(used_metrics)}")
    # Label references in legends/annotations are checked by the callers.
    return used_metrics


def walk_panels(panels):
    for p in panels:
        yield p
        yield from walk_panels(p.get("panels", []))


def check_dashboard(defined, datasource_uid):
    try:
        dash = json.loads(DASHBOARD.read_text())
    except (OSError, json.JSONDecodeError) as e:
        problem(f"{DASHBOARD}: {e}")
        return []
    for key in ("uid", "title", "schemaVersion", "panels", "templating"):
        if key not in dash:
            problem(f"{DASHBOARD}: no {key!r}")
    variables = {v["name"]: v for v in dash.get("templating", {}).get("list", [])}
    ds_var = variables.get("datasource")
    if not ds_var or ds_var.get("type") != "datasource" or ds_var.get("query") != "prometheus":
        problem(f"{DASHBOARD}: needs a `datasource` variable of type datasource (prometheus)")
    elif datasource_uid and ds_var.get("current", {}).get("value") != datasource_uid:
        problem(f"{DASHBOARD}: datasource default {ds_var.get('current')} is not the provisioned uid {datasource_uid!r}")
    ids, cells, exprs = set(), {}, []
    for p in walk_panels(dash.get("panels", [])):
        pid = p.get("id")
        where = f"{DASHBOARD.name} panel {pid} {p.get('title')!r}"
        if pid in ids:
            problem(f"{where}: duplicate panel id")
        ids.add(pid)
        g = p.get("gridPos", {})
        x, y, w, h = g.get("x", 0), g.get("y", 0), g.get("w", 0), g.get("h", 0)
        if w <= 0 or h <= 0 or x < 0 or x + w > 24:
            problem(f"{where}: gridPos {g} outside the 24-column grid")
        for cx in range(x, x + w):
            for cy in range(y, y + h):
                if (cx, cy) in cells:
                    problem(f"{where}: overlaps panel {cells[(cx, cy)]}")
                    break
                cells[(cx, cy)] = pid
            else:
                continue
            break
        if p.get("type") == "row":
            continue
        if p.get("datasource", {}).get("uid") != "${datasource}":
            problem(f"{where}: panel data source is not ${{datasource}}")
        if not p.get("targets"):
            problem(f"{where}: no queries")
        for t in p.get("targets", []):
            if t.get("datasource", {}).get("uid") != "${datasource}":
                problem(f"{where} {t.get('refId')}: query data source is not ${{datasource}}")
            expr = t.get("expr", "")
            if not expr:
                problem(f"{where} {t.get('refId')}: empty expr")
                continue
            used = check_expr(f"{where} {t.get('refId')}", expr, defined)
            known = set(TARGET_LABELS)
            for name in used:
                known |= defined.get(name, set())
            for label in re.findall(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}", t.get("legendFormat", "")):
                if label not in known:
                    problem(f"{where} {t.get('refId')}: legend uses {label!r}, not a label of {sorted(used)}")
            exprs.append((f"{p.get('title')} {t.get('refId')}", expr))
    for name, v in variables.items():
        q = v.get("query")
        if isinstance(q, dict):
            check_expr(f"{DASHBOARD.name} variable {name}", q.get("query", ""), defined)
    return exprs


def check_alerts(defined):
    try:
        doc = yaml.safe_load(ALERTS.read_text())
    except (OSError, yaml.YAMLError) as e:
        problem(f"{ALERTS}: {e}")
        return
    names = set()
    for group in doc.get("groups", []):
        for rule in group.get("rules", []):
            name = rule.get("alert") or rule.get("record")
            if name in names:
                problem(f"{ALERTS.name}: duplicate rule {name}")
            names.add(name)
            check_expr(f"{ALERTS.name} {name}", rule.get("expr", ""), defined)
            if "alert" in rule:
                for key in ("summary", "description", "runbook"):
                    if key not in rule.get("annotations", {}):
                        problem(f"{ALERTS.name} {name}: no {key} annotation")
                if rule.get("labels", {}).get("severity") not in ("critical", "warning", "info"):
                    problem(f"{ALERTS.name} {name}: severity must be critical, warning or info")
    runbook = (ROOT / ALERTS_DOC).read_text() if (ROOT / ALERTS_DOC).exists() else ""
    if not runbook:
        problem(f"{ALERTS_DOC} is missing: it explains the alerts")
    for name in sorted(n for n in names if n):
        if f"### `{name}`" not in runbook:
            problem(f"{ALERTS_DOC} does not explain alert {name} (expected a section ### `{name}`)")


def provisioned_datasource_uid():
    try:
        doc = yaml.safe_load(DATASOURCES.read_text())
    except (OSError, yaml.YAMLError) as e:
        problem(f"{DATASOURCES}: {e}")
        return None
    sources = [d for d in doc.get("datasources", []) if d.get("type") == "prometheus"]
    if len(sources) != 1:
        problem(f"{DATASOURCES}: expected one prometheus data source")
        return None
    return sources[0].get("uid")


def check_collector():
    try:
        doc = yaml.safe_load(COLLECTOR.read_text())
    except (OSError, yaml.YAMLError) as e:
        problem(f"{COLLECTOR}: {e}")
        return
    service = doc.get("service", {})
    for ext in service.get("extensions", []):
        if ext not in (doc.get("extensions") or {}):
            problem(f"{COLLECTOR.name}: extension {ext} is not defined")
    pipelines = service.get("pipelines", {})
    if not pipelines:
        problem(f"{COLLECTOR.name}: no pipelines")
    for pname, p in pipelines.items():
        for kind in ("receivers", "processors", "exporters"):
            for comp in p.get(kind, []):
                if comp not in (doc.get(kind) or {}):
                    problem(f"{COLLECTOR.name}: pipeline {pname} names undefined {kind[:-1]} {comp}")
        if not p.get("receivers") or not p.get("exporters"):
            problem(f"{COLLECTOR.name}: pipeline {pname} needs receivers and exporters")
    grpc = doc.get("receivers", {}).get("otlp", {}).get("protocols", {}).get("grpc", {})
    if not str(grpc.get("endpoint", "")).endswith(":4317"):
        problem(f"{COLLECTOR.name}: omrd exports OTLP/gRPC; the otlp receiver must listen on :4317")


def check_compose_mounts():
    try:
        doc = yaml.safe_load(COMPOSE.read_text())
    except (OSError, yaml.YAMLError) as e:
        problem(f"{COMPOSE}: {e}")
        return
    for sname, svc in doc.get("services", {}).items():
        for vol in svc.get("volumes", []):
            src = vol.split(":", 1)[0] if isinstance(vol, str) else vol.get("source", "")
            if src.startswith("./") and not (ROOT / src).exists():
                problem(f"{COMPOSE.name}: service {sname} mounts {src}, which does not exist")
        env = svc.get("environment", {})
        endpoint = env.get("OTEL_EXPORTER_OTLP_ENDPOINT") if isinstance(env, dict) else None
        if endpoint and not endpoint.endswith(":4317"):
            problem(f"{COMPOSE.name}: {sname} sends OTLP to {endpoint}; omrd's exporter speaks gRPC (:4317)")


def config_keys():
    """The fields of `Config` (its `declare_config! { … }` in config.rs, from which KEYS is
    generated) and the allowed values of `role`, `log_format` and `registration`."""
    src = CONFIG_RS.read_text()
    m = re.search(r"^declare_config! \{\n(.*?)^\}", src, re.S | re.M)
    keys = set(re.findall(r"^\s*pub ([a-z_0-9]+):", m.group(1), re.M)) if m else set()
    if not keys:
        problem(f"{CONFIG_RS}: no `declare_config! {{ … }}` with `pub field: Type = default` found")
        return set(), {}
    enums = {}
    for field, enum in (("role", "Role"), ("log_format", "LogFormat"), ("registration", "Registration")):
        e = re.search(r"pub enum " + enum + r" \{(.*?)\}", src, re.S)
        if e:
            enums[field] = {v.lower() for v in re.findall(r"([A-Z][a-z]+),", e.group(1))}
    return keys, enums


def check_toml(where, text, keys, enums):
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        problem(f"{where}: {e}")
        return
    for k, v in doc.items():
        if k not in keys:
            problem(f"{where}: {k!r} is not an omrd configuration key (omrd would refuse the file)")
        elif k in enums and v not in enums[k]:
            problem(f"{where}: {k} = {v!r}, expected one of {sorted(enums[k])}")


def check_env(where, env, keys, enums):
    for name, value in env.items():
        if not name.startswith("OMR_"):
            continue
        key = name[4:].lower()
        if key not in keys:
            problem(f"{where}: {name} names no configuration key; omrd would ignore it")
        elif key in enums and str(value) not in enums[key]:
            problem(f"{where}: {name}={value!r}, expected one of {sorted(enums[key])}")


def check_config():
    keys, enums = config_keys()
    if not keys:
        return
    for f in CONFIG_FILES:
        check_toml(f.relative_to(ROOT), f.read_text(), keys, enums)
    runbook = ROOT / CONFIG_DOC
    if not runbook.exists():
        problem(f"{CONFIG_DOC} is missing: it documents the configuration keys")
    else:
        documented = set(re.findall(r"^\| `([a-z_]+)` \|", runbook.read_text(), re.M))
        for k in sorted(keys - documented):
            problem(f"{CONFIG_DOC}: configuration key {k} is missing from the table")
        for k in sorted(d for d in documented if d not in keys and not d.startswith("omr_")):
            problem(f"{CONFIG_DOC}: the table documents {k}, which config.rs does not have")
    try:
        cm = yaml.safe_load(CONFIGMAP.read_text())
        check_toml(f"{CONFIGMAP.relative_to(ROOT)} omrd.toml", cm["data"]["omrd.toml"], keys, enums)
    except (OSError, yaml.YAMLError, KeyError, TypeError) as e:
        problem(f"{CONFIGMAP}: {e!r}")
    compose = yaml.safe_load(COMPOSE.read_text())
    for sname, svc in compose.get("services", {}).items():
        env = svc.get("environment", {})
        if isinstance(env, list):
            env = dict(e.split("=", 1) for e in env if "=" in e)
        check_env(f"{COMPOSE.name} service {sname}", env, keys, enums)
    for f in DEPLOYMENTS:
        doc = yaml.safe_load(f.read_text())
        for c in doc["spec"]["template"]["spec"]["containers"]:
            env = {e["name"]: e.get("value", "<from secret>") for e in c.get("env", [])}
            check_env(f"{f.relative_to(ROOT)} container {c['name']}", env, keys, enums)
            if "OMR_ROLE" not in env:
                problem(f"{f.relative_to(ROOT)}: container {c['name']} sets no OMR_ROLE")


def write_promql_rules(path, exprs):
    """The dashboard queries as recording rules, for `promtool check rules`."""
    rules = []
    for i, (where, expr) in enumerate(exprs):
        e = (expr.replace("$__rate_interval", "5m").replace("$__interval", "1m")
             .replace('"$instance"', '".*"').replace("$instance", ".*"))
        rules.append({"record": f"dashboard:query_{i}", "expr": e, "labels": {"panel": where}})
    Path(path).write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, sort_keys=False))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--promql-rules", metavar="FILE", help="write the dashboard queries as a rule file")
    args = ap.parse_args()
    defined = metrics_from_source()
    uid = provisioned_datasource_uid()
    exprs = check_dashboard(defined, uid)
    check_alerts(defined)
    check_collector()
    check_compose_mounts()
    check_config()
    if args.promql_rules:
        write_promql_rules(args.promql_rules, exprs)
    for p in problems:
        print(f"FAIL {p}")
    base = set()
    for n in defined:
        stem = re.sub(r"_(bucket|sum|count)$", "", n)
        base.add(stem if stem + "_bucket" in defined else n)
    print(f"checked {len(exprs)} dashboard queries and the alert rules against {len(base)} metric names "
          f"from metrics.rs, and the omrd configuration against config.rs: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

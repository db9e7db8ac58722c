#!/usr/bin/python3
# check-promql.py - the PromQL of deploy/monitoring (rules and Grafana dashboard) checked
# against what the agent really exposes.
#   check-promql.py rules-file RULES DASHBOARD
#       prints a Prometheus rules file with every expression (dashboard variables replaced),
#       for `promtool check rules` to validate their syntax;
#   check-promql.py names RULES DASHBOARD METRICS
#       checks every volagent_* name is a metric in METRICS (a scrape of /metrics) and every
#       label in by/without/matchers of a volagent_* metric is one its series carry; prints
#       each failure and exits 1, or lists the metrics with no series to check labels on.
import json
import re
import sys

import yaml

GRAFANA_VARS = {"$__rate_interval": "5m", "$__interval": "1m", "$instance": ".*"}
# Labels Prometheus adds itself or that a histogram's buckets carry.
TARGET_LABELS = {"instance", "job", "le"}


def expressions(rules_path, dash_path):
    rules = yaml.safe_load(open(rules_path))
    for g in rules["groups"]:
        for r in g["rules"]:
            yield r.get("alert") or r.get("record"), r["expr"]
    dash = json.load(open(dash_path))
    for p in dash["panels"]:
        for t in p.get("targets", []):
            e = t["expr"]
            for k, v in GRAFANA_VARS.items():
                e = e.replace(k, v)
            yield "panel %r %s" % (p["title"], t["refId"]), e
    for v in dash["templating"]["list"]:
        m = re.fullmatch(r"label_values\((\w+), *(\w+)\)", v.get("query", ""))
        if m:
            yield "variable %s" % v["name"], "%s{%s!=\"\"}" % m.groups()


def scraped(metrics_path):
    """Metric name -> type, metric name -> label names on its series, metrics with series."""
    types, labels, series = {}, {}, set()
    for line in open(metrics_path):
        m = re.match(r"# TYPE (\S+) (\S+)", line)
        if m:
            types[m[1]] = m[2]
            labels.setdefault(m[1], set())
            continue
        m = re.match(r"([a-zA-Z_:][\w:]*)(?:\{(.*)\})? ", line)
        if m:
            base = re.sub(r"_(bucket|sum|count)$", "", m[1]) if m[1] not in types else m[1]
            labels.setdefault(base, set()).update(re.findall(r"(\w+)=\"", m[2] or ""))
            series.add(base)
    return types, labels, series


def check_names(rules_path, dash_path, metrics_path):
    types, labels, series = scraped(metrics_path)
    bad, unchecked = [], set()
    for where, e in expressions(rules_path, dash_path):
        for name, sel in re.findall(r"(volagent_\w+)(\{[^}]*\})?", e):
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            if name not in types and not (base in types and types[base] == "histogram"):
                bad.append("%s: %s is not exposed by the agent" % (where, name))
                continue
            used = set(re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", sel))
            for grp in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", e):
                used |= {x.strip() for x in grp.split(",") if x.strip()}
            if base not in series:
                unchecked.add(base)
                continue
            for lab in sorted(used - TARGET_LABELS - labels[base]):
                bad.append("%s: label %s is not on %s" % (where, lab, base))
    for b in bad:
        print("FAIL:", b)
    if unchecked:
        print("labels unchecked (no series in this scrape):", " ".join(sorted(unchecked)))
    return 1 if bad else 0


def rules_file(rules_path, dash_path):
    rules = [{"record": "volagent:check:%d" % i, "expr": e}
             for i, (_, e) in enumerate(expressions(rules_path, dash_path))]
    yaml.safe_dump({"groups": [{"name": "promql-check", "rules": rules}]}, sys.stdout)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["rules-file"] and len(sys.argv) == 4:
        sys.exit(rules_file(*sys.argv[2:]))
    if sys.argv[1:2] == ["names"] and len(sys.argv) == 5:
        sys.exit(check_names(*sys.argv[2:]))
    sys.exit("usage: check-promql.py rules-file RULES DASHBOARD | names RULES DASHBOARD METRICS")

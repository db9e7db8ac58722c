#!/usr/bin/python3
# gen-prometheusrule.py - writes prometheusrule.yaml, the Prometheus Operator's PrometheusRule
# whose spec is volagent.rules.yml (the source) unchanged, and the Helm chart's copy of the
# rules (deploy/helm/volagent/files/volagent.rules.yml, which its PrometheusRule template reads).
# Run after editing the rules; tests/monitoring/test-rules.sh fails when they differ.
#   gen-prometheusrule.py     writes both files
#   gen-prometheusrule.py -   prints the PrometheusRule only
import os
import sys

import yaml

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "volagent.rules.yml")) as f:
    spec = yaml.safe_load(f)
rule = {
    "apiVersion": "monitoring.coreos.com/v1",
    "kind": "PrometheusRule",
    "metadata": {
        "name": "volagent",
        "namespace": "volagent",
        "labels": {"app.kubernetes.io/name": "volagent", "app.kubernetes.io/part-of": "volagent"},
    },
    "spec": spec,
}
to_stdout = sys.argv[1:] == ["-"]
out = sys.stdout if to_stdout else open(os.path.join(here, "prometheusrule.yaml"), "w")
out.write("# Generated from volagent.rules.yml by gen-prometheusrule.py: do not edit.\n")
yaml.safe_dump(rule, out, sort_keys=False, width=1000)
if not to_stdout:
    chart_copy = os.path.join(here, "..", "helm", "volagent", "files", "volagent.rules.yml")
    with open(os.path.join(here, "volagent.rules.yml"), "rb") as src, open(chart_copy, "wb") as dst:
        dst.write(src.read())

#!/usr/bin/python3
"""compare-renderings.py - holds what `helm template` rendered against what `kubectl kustomize`
rendered for the same settings: the same objects (by kind, namespace and name), each equal
field by field, once Helm's own labels are taken off the chart's objects.

    compare-renderings.py HELM.yaml KUSTOMIZE.yaml [--namespace-by-release]

Helm's labels (app.kubernetes.io/instance, app.kubernetes.io/managed-by, helm.sh/chart) are
dropped from each object's metadata.labels only: the pod template's labels must be the same as
deploy/base's, or a DaemonSet installed with kubectl could not be taken over by the chart.
--namespace-by-release: the kustomize side's Namespace object is not expected from the chart
(Helm installs into the release's namespace: `helm install -n volagent --create-namespace`).

Exit 0 and "same: ..." lines, or 1 and one "DIFF: ..." line per difference (the object and the
path of the field).
"""
import argparse
import sys

import yaml

HELM_LABELS = ("app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "helm.sh/chart")


def load(path):
    objs = {}
    with open(path) as f:
        for obj in yaml.safe_load_all(f):
            if not obj:
                continue
            meta = obj.get("metadata", {})
            key = (obj["kind"], meta.get("namespace", ""), meta["name"])
            if key in objs:
                sys.exit("%s: %s/%s/%s rendered twice" % (path, *key))
            objs[key] = obj
    return objs


def strip_helm_labels(obj):
    labels = obj.get("metadata", {}).get("labels")
    if labels:
        for k in HELM_LABELS:
            labels.pop(k, None)
    return obj


def diff(a, b, path, out):
    """Appends to out one line per difference between a (helm) and b (kustomize)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            p = "%s.%s" % (path, k)
            if k not in a:
                out.append("%s: only in kustomize's (%r)" % (p, b[k]))
            elif k not in b:
                out.append("%s: only in helm's (%r)" % (p, a[k]))
            else:
                diff(a[k], b[k], p, out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append("%s: %d items in helm's, %d in kustomize's" % (path, len(a), len(b)))
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, "%s[%d]" % (path, i), out)
    elif a != b or type(a) is not type(b):
        out.append("%s: helm %r, kustomize %r" % (path, a, b))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("helm")
    ap.add_argument("kustomize")
    ap.add_argument("--namespace-by-release", action="store_true")
    args = ap.parse_args()
    helm = {k: strip_helm_labels(v) for k, v in load(args.helm).items()}
    kust = load(args.kustomize)
    problems = []
    for key in sorted(set(helm) | set(kust)):
        name = "%s %s" % (key[0], "/".join(p for p in key[1:] if p))
        if key not in helm:
            if key[0] == "Namespace" and args.namespace_by_release:
                print("same: %s is the release's namespace (helm -n %s)" % (name, key[2]))
                continue
            problems.append("%s: rendered by kustomize only" % name)
        elif key not in kust:
            problems.append("%s: rendered by helm only" % name)
        else:
            out = []
            diff(helm[key], kust[key], "", out)
            problems += ["%s: %s" % (name, line.lstrip(".")) for line in out]
            if not out:
                print("same: %s" % name)
    for p in problems:
        print("DIFF: %s" % p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

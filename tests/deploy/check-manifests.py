#!/usr/bin/python3
"""check-manifests.py - checks what `kubectl kustomize deploy/...` rendered, object by object,
against the Kubernetes API types, then against what the DaemonSet must hold.

    check-manifests.py RENDERED.yaml --unit systemd/volagent.service
        [--kubelet-dir DIR] [--strategy OnDelete|RollingUpdate] [--podmonitor]

Types: every object is read into its model class of Debian's python3-kubernetes (V1DaemonSet,
V1CSIDriver, ...) strictly: a key the model does not have, a value of the wrong type (a
string where an int belongs, a map where a list belongs) or a required field left out fails,
naming the object and the path.  The models are the API of Kubernetes 1.22 (python3-kubernetes
22.6); fields added since are listed in NEWER_FIELDS with their type and version.  The
PodMonitor (monitoring.coreos.com/v1, a CRD the models lack) is checked by its metadata and
label selector models and by PodMonitor's endpoint fields listed below.

Content: each object carries app.kubernetes.io/name; namespaced objects live in the rendered
Namespace, cluster-scoped ones name none; and the pod spec holds what README's "Kubernetes
(CSI)" promises (see check_daemonset).  Exit 0 and "ok: ..." lines, or 1 and "FAIL: ..." lines.
"""
import argparse
import configparser
import re
import sys

import kubernetes.client as k8s
import yaml

# Fields newer than the models: (model class, JSON key) -> (type, Kubernetes version).
NEWER_FIELDS = {
    ("V1CSIDriverSpec", "seLinuxMount"): ("bool", "1.25"),
}
CLUSTER_SCOPED = {"Namespace", "CSIDriver", "StorageClass", "ClusterRole", "ClusterRoleBinding"}
# prometheus-operator's PodMetricsEndpoint fields (monitoring.coreos.com/v1) used or usable
# here, with their types; the operator's CRD validates the rest on apply.
PODMONITOR_ENDPOINT = {"port": "str", "path": "str", "interval": "str", "scrapeTimeout": "str",
                       "scheme": "str", "honorLabels": "bool", "params": "dict(str, list[str])"}

errors = []


def fail(msg):
    errors.append(msg)


def check_value(value, typ, path):
    """value against an openapi type string; returns what the model takes, or None."""
    if typ == "object":  # IntOrString, RawExtension: any JSON value
        return value
    if typ in ("str", "datetime", "date"):
        if not isinstance(value, str):
            fail("%s: %r is not a string" % (path, value))
        return value
    if typ == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            fail("%s: %r is not an integer" % (path, value))
        return value
    if typ == "float":
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            fail("%s: %r is not a number" % (path, value))
        return value
    if typ == "bool":
        if not isinstance(value, bool):
            fail("%s: %r is not a boolean" % (path, value))
        return value
    m = re.fullmatch(r"list\[(.*)\]", typ)
    if m:
        if not isinstance(value, list):
            fail("%s: %r is not a list" % (path, value))
            return None
        return [check_value(v, m.group(1), "%s[%d]" % (path, i)) for i, v in enumerate(value)]
    m = re.fullmatch(r"dict\(str, (.*)\)", typ)
    if m:
        if not isinstance(value, dict):
            fail("%s: %r is not a map" % (path, value))
            return None
        return {k: check_value(v, m.group(1), "%s.%s" % (path, k)) for k, v in value.items()}
    return check_model(value, typ, path)


def check_model(value, cls_name, path):
    cls = getattr(k8s, cls_name, None)
    if cls is None:
        fail("%s: no model %s in python3-kubernetes" % (path, cls_name))
        return None
    if not isinstance(value, dict):
        fail("%s: %r is not an object (%s)" % (path, value, cls_name))
        return None
    by_json = {j: attr for attr, j in cls.attribute_map.items()}
    kwargs = {}
    for key, v in value.items():
        if key in by_json:
            attr = by_json[key]
            kwargs[attr] = check_value(v, cls.openapi_types[attr], "%s.%s" % (path, key))
        elif (cls_name, key) in NEWER_FIELDS:
            check_value(v, NEWER_FIELDS[(cls_name, key)][0], "%s.%s" % (path, key))
        else:
            fail("%s: unknown field %r (%s has %s)" % (path, key, cls_name,
                                                        ", ".join(sorted(by_json))))
    try:  # the model's own checks: required fields, enums
        return cls(**kwargs)
    except (ValueError, TypeError) as e:
        fail("%s: %s: %s" % (path, cls_name, e))
        return None


def model_name(obj):
    version = obj.get("apiVersion", "").split("/")[-1]
    return version[:1].upper() + version[1:] + obj.get("kind", "")


def check_podmonitor(obj, path):
    check_model(obj.get("metadata", {}), "V1ObjectMeta", path + ".metadata")
    spec = obj.get("spec", {})
    for key in spec:
        if key not in ("selector", "podMetricsEndpoints", "namespaceSelector", "jobLabel",
                       "podTargetLabels", "sampleLimit"):
            fail("%s.spec: unknown field %r" % (path, key))
    check_model(spec.get("selector", {}), "V1LabelSelector", path + ".spec.selector")
    eps = spec.get("podMetricsEndpoints")
    if not isinstance(eps, list) or not eps:
        fail("%s.spec.podMetricsEndpoints: a non-empty list is required" % path)
        return
    for i, ep in enumerate(eps):
        p = "%s.spec.podMetricsEndpoints[%d]" % (path, i)
        if not isinstance(ep, dict):
            fail("%s: not an object" % p)
            continue
        for key, v in ep.items():
            if key not in PODMONITOR_ENDPOINT:
                fail("%s: unknown field %r" % (p, key))
            else:
                check_value(v, PODMONITOR_ENDPOINT[key], "%s.%s" % (p, key))


def unit_stop_timeout(unit):
    """TimeoutStopSec of the unit, in seconds (it is written as '60s')."""
    cp = configparser.ConfigParser(strict=False, interpolation=None)
    cp.optionxform = str
    with open(unit) as f:
        cp.read_string(f.read())
    v = cp.get("Service", "TimeoutStopSec")
    m = re.fullmatch(r"(\d+)s?", v.strip())
    if not m:
        sys.exit("check-manifests.py: %s: TimeoutStopSec=%s is not in seconds" % (unit, v))
    return int(m.group(1))


def arg_value(args, flag):
    for a in args:
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def check_daemonset(ds, objs, opts):
    name = "DaemonSet/%s" % ds["metadata"]["name"]
    spec = ds["spec"]
    pod = spec["template"]["spec"]

    def need(cond, what):
        if not cond:
            fail("%s: %s" % (name, what))

    labels = spec["template"]["metadata"].get("labels", {})
    sel = spec["selector"].get("matchLabels", {})
    need(sel and all(labels.get(k) == v for k, v in sel.items()),
         "the selector %s does not match the pod labels %s" % (sel, labels))
    need(all(k.startswith("app.kubernetes.io/") for k in sel),
         "selector labels other than app.kubernetes.io/*: %s" % sel)
    need(spec.get("updateStrategy", {}).get("type") == opts.strategy,
         "updateStrategy %s, expected %s" % (spec.get("updateStrategy"), opts.strategy))
    need(pod.get("hostNetwork") is True, "no hostNetwork")
    need(pod.get("dnsPolicy") == "ClusterFirstWithHostNet",
         "dnsPolicy %r: cluster names do not resolve with host networking" % pod.get("dnsPolicy"))
    sa = pod.get("serviceAccountName")
    sas = [o for o in objs if o["kind"] == "ServiceAccount" and o["metadata"]["name"] == sa]
    need(len(sas) == 1, "serviceAccountName %r is not rendered alongside" % sa)
    need(pod.get("automountServiceAccountToken") is False, "the pod mounts an API token")
    need(all(s.get("automountServiceAccountToken") is False for s in sas),
         "the ServiceAccount mounts an API token")
    need(pod.get("nodeSelector", {}).get("kubernetes.io/os") == "linux",
         "no nodeSelector kubernetes.io/os: linux")
    stop = unit_stop_timeout(opts.unit)
    need(pod.get("terminationGracePeriodSeconds") == stop,
         "terminationGracePeriodSeconds %r, the unit's TimeoutStopSec is %ds" %
         (pod.get("terminationGracePeriodSeconds"), stop))
    if opts.provisioning:
        check_provisioner(pod, need)
    else:
        need(len(pod["containers"]) == 1, "not one container")
    c = pod["containers"][0]
    args = c.get("args", [])
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    res = c.get("resources", {})
    need(res.get("requests", {}).get("cpu") and res.get("requests", {}).get("memory"),
         "no cpu and memory requests")
    need("memory" not in res.get("limits", {}), "a memory limit: helpers share the cgroup")
    probe = c.get("readinessProbe", {}).get("exec", {}).get("command", [])
    need(probe[:2] == ["volagent", "probe"], "no readiness probe `volagent probe`")

    # The kubelet dir: one value everywhere.
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
    need(env.get("KUBELET_DIR") == opts.kubelet_dir,
         "KUBELET_DIR %r, expected %s" % (env.get("KUBELET_DIR"), opts.kubelet_dir))
    need(arg_value(args, "--kubelet-root-dir") == "$(KUBELET_DIR)",
         "--kubelet-root-dir is not $(KUBELET_DIR)")
    kd = mounts.get(opts.kubelet_dir)
    need(kd is not None and kd.get("mountPropagation") == "Bidirectional",
         "%s is not mounted Bidirectional" % opts.kubelet_dir)
    if kd:
        hp = volumes.get(kd["name"], {}).get("hostPath", {}).get("path")
        need(hp == opts.kubelet_dir, "the kubelet dir's host path is %r" % hp)
    need(env.get("CSI_ENDPOINT", "").startswith("unix://$(KUBELET_DIR)/"),
         "CSI_ENDPOINT is not below $(KUBELET_DIR)")
    for host in ("/etc/selinux", "/run/mount"):
        m = mounts.get(host)
        hp = volumes.get(m["name"], {}).get("hostPath", {}).get("path") if m else None
        need(hp == host, "%s is not the host's" % host)

    # Keys on the memory-backed volume.
    sd = arg_value(args, "--secret-dir")
    m = mounts.get(sd) if sd else None
    ed = volumes.get(m["name"], {}).get("emptyDir") if m else None
    need(ed is not None and ed.get("medium") == "Memory",
         "--secret-dir %r is not an emptyDir with medium Memory" % sd)

    # Metrics on the named port, explicitly on the network.
    addr = arg_value(args, "--metrics-address") or ""
    port = addr.rsplit(":", 1)[-1]
    ports = {p.get("name"): p for p in c.get("ports", [])}
    need("metrics" in ports and str(ports["metrics"].get("containerPort")) == port,
         "--metrics-address %r does not match the containerPort named metrics" % addr)
    need("--metrics-network" in args, "--metrics-address without --metrics-network")
    for pm in (o for o in objs if o["kind"] == "PodMonitor"):
        sel = pm["spec"]["selector"].get("matchLabels", {})
        need(all(labels.get(k) == v for k, v in sel.items()),
             "PodMonitor's selector %s does not match the pod" % sel)
        need(all(ep.get("port") in ports for ep in pm["spec"]["podMetricsEndpoints"]),
             "a PodMonitor endpoint names a port the container does not have")


def check_provisioner(pod, need):
    """deploy/overlays/provisioning: the agent first with --controller, external-provisioner
    second in node-deployment mode, the ServiceAccount token in the sidecar alone."""
    names = [c["name"] for c in pod["containers"]]
    need(names == ["volagent", "csi-provisioner"], "containers %s, expected volagent, csi-provisioner" % names)
    if len(names) != 2:
        return
    agent, side = pod["containers"]
    need("--controller" in agent.get("args", []), "the agent runs without --controller")
    need("--node-deployment=true" in side.get("args", []), "the provisioner is not in node-deployment mode")
    need(pod.get("automountServiceAccountToken") is False, "the pod mounts a token into every container")
    token_dir = "/var/run/secrets/kubernetes.io/serviceaccount"
    need(not any(m["mountPath"] == token_dir for m in agent.get("volumeMounts", [])),
         "the agent's container holds a token")
    need(any(m["mountPath"] == token_dir for m in side.get("volumeMounts", [])),
         "the provisioner has no token")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rendered")
    ap.add_argument("--unit", required=True)
    ap.add_argument("--kubelet-dir", default="/var/lib/kubelet")
    ap.add_argument("--strategy", default="OnDelete")
    ap.add_argument("--podmonitor", action="store_true")
    ap.add_argument("--provisioning", action="store_true")
    opts = ap.parse_args()

    with open(opts.rendered) as f:
        objs = [o for o in yaml.safe_load_all(f) if o]
    namespaces = {o["metadata"]["name"] for o in objs if o.get("kind") == "Namespace"}
    for i, o in enumerate(objs):
        kind = o.get("kind", "?")
        path = "%s/%s" % (kind, o.get("metadata", {}).get("name", "#%d" % i))
        if o.get("apiVersion") == "monitoring.coreos.com/v1" and kind == "PodMonitor":
            check_podmonitor(o, path)
        else:
            check_model(o, model_name(o), path)
        meta = o.get("metadata", {})
        if meta.get("labels", {}).get("app.kubernetes.io/name") != "volagent":
            fail("%s: no label app.kubernetes.io/name: volagent" % path)
        if kind in CLUSTER_SCOPED:
            if "namespace" in meta:
                fail("%s: cluster-scoped, but names namespace %s" % (path, meta["namespace"]))
        elif meta.get("namespace") not in namespaces:
            fail("%s: namespace %r is not rendered alongside" % (path, meta.get("namespace")))
    kinds = sorted(o.get("kind") for o in objs)
    want = sorted(["Namespace", "ServiceAccount", "CSIDriver", "DaemonSet"] +
                  (["PodMonitor"] if opts.podmonitor else []) +
                  (["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "StorageClass"]
                   if opts.provisioning else []))
    if kinds != want:
        fail("rendered kinds %s, expected %s" % (kinds, want))
    for ds in (o for o in objs if o.get("kind") == "DaemonSet"):
        if not errors:  # the content checks assume well-typed objects
            check_daemonset(ds, objs, opts)
    for e in errors:
        print("FAIL: %s: %s" % (opts.rendered, e))
    if errors:
        return 1
    print("ok: %s: %d objects (%s) match their API types and the DaemonSet's promises" %
          (opts.rendered, len(objs), ", ".join(kinds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

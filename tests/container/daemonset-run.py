#!/usr/bin/python3
"""daemonset-run.py - turns the DaemonSet that `kubectl kustomize deploy/base` renders into what
`podman run` needs to start the agent the way kubelet would, so the image test runs the
manifest itself, not a copy of it.

    daemonset-run.py --manifest RENDERED.yaml --host-root DIR --node-name NAME
                     [--metrics-port PORT]

Prints JSON: {"image": ..., "run_args": [...podman run options...], "command": [...container
args...], "probe": [...liveness exec command...], "readiness": [...readiness exec command...],
"stop_timeout": terminationGracePeriodSeconds, "metrics_port": the containerPort named
metrics, "kubelet_dir": ..., "csi_socket": ..., "registration_socket": ...}.

Host directories the agent keeps data in (the kubelet dir, its state, local volumes) are
placed under --host-root, at the same path inside the container as outside (as the manifest
has them), so the test's host never touches the machine's real /var/lib/kubelet.  System
paths (/dev, /sys, /run/udev, /lib/modules, /etc/selinux) are the machine's own, and skipped
when absent, as /run/udev is on hosts without udev and /etc/selinux on hosts without
SELinux.  /run/mount (libmount's utab) comes from under --host-root to the same path in
the container, so the test never writes the machine's utab.  An emptyDir is a tmpfs (medium Memory) or a fresh directory under --host-root.
kubelet's $(VAR) references are expanded in env values (earlier variables) and in args.
--metrics-port replaces the port of --metrics-address and of the metrics containerPort, so
that two test runs on one machine do not collide.  Fields kubelet honours that podman has
no use for here (dnsPolicy, serviceAccountName, nodeSelector, resources, labels) are read
by tests/deploy/check-manifests.py, not here.
"""
import argparse
import json
import os
import re
import sys

import yaml

SYSTEM_PATHS = ("/dev", "/sys", "/run/udev", "/lib/modules", "/etc/selinux")
PRIVATE_SYSTEM_PATHS = ("/run/mount",)  # from under --host-root, at the same path
PROPAGATION = {"Bidirectional": "rshared", "HostToContainer": "rslave", "None": "rprivate"}


def fail(msg):
    print("daemonset-run.py: " + msg, file=sys.stderr)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--host-root", required=True)
    ap.add_argument("--node-name", required=True)
    ap.add_argument("--metrics-port", type=int)
    args = ap.parse_args()

    with open(args.manifest) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    ds = [d for d in docs if d.get("kind") == "DaemonSet"]
    if len(ds) != 1:
        fail("%s: expected one DaemonSet, found %d" % (args.manifest, len(ds)))
    pod = ds[0]["spec"]["template"]["spec"]
    containers = pod["containers"]
    if len(containers) != 1:
        fail("expected one container, found %d" % len(containers))
    c = containers[0]
    volumes = {v["name"]: v for v in pod.get("volumes", [])}

    rebased = []  # (manifest path, test path) for the host data directories

    def rebase(path):
        for old, new in rebased:
            if path == old or path.startswith(old + "/"):
                return new + path[len(old):]
        return path

    run = []
    if pod.get("hostNetwork"):
        run.append("--network=host")
    if c.get("securityContext", {}).get("privileged"):
        run.append("--privileged")
    mounts = []
    for m in c.get("volumeMounts", []):
        v = volumes.get(m["name"])
        if v is not None and "emptyDir" in v:
            if v["emptyDir"].get("medium") == "Memory":
                run.append("--mount=type=tmpfs,destination=%s,tmpfs-mode=0700" % m["mountPath"])
            else:
                new = os.path.join(args.host_root, "emptydir", m["name"])
                os.makedirs(new, exist_ok=True)
                run.append("--volume=%s:%s" % (new, m["mountPath"]))
            continue
        if v is None or "hostPath" not in v:
            fail("volumeMount %s: no hostPath or emptyDir volume of that name" % m["name"])
        host = v["hostPath"]["path"]
        if host in PRIVATE_SYSTEM_PATHS:
            new = os.path.join(args.host_root, host.lstrip("/"))
            os.makedirs(new, exist_ok=True)
            mounts.append((new, m))
            continue
        if host in SYSTEM_PATHS:
            if not os.path.exists(host):
                continue
        else:
            if host != m["mountPath"]:
                fail("volume %s: host path %s is mounted at %s; the agent reports host paths, "
                     "so they must be equal" % (m["name"], host, m["mountPath"]))
            new = os.path.join(args.host_root, host.lstrip("/"))
            rebased.append((host, new))
            os.makedirs(new, exist_ok=True)
            host = new
        mounts.append((host, m))
    for host, m in mounts:
        opts = [PROPAGATION[m.get("mountPropagation", "None")]]
        if m.get("readOnly"):
            opts.append("ro")
        run.append("--volume=%s:%s:%s" % (host, rebase(m["mountPath"]), ",".join(opts)))

    def refs(s, known):  # kubelet's $(VAR) expansion; unknown references stay as written
        return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda mo: known.get(mo.group(1), mo.group(0)),
                      s)

    env = {}
    for e in c.get("env", []):
        if "value" in e:
            val = refs(e["value"], env)
            if val.startswith("unix://"):
                env[e["name"]] = "unix://" + rebase(val[len("unix://"):])
            else:
                env[e["name"]] = rebase(val)
        elif e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName":
            env[e["name"]] = args.node_name
        else:
            fail("env %s: unsupported source" % e["name"])
    for k, val in env.items():
        run.append("--env=%s=%s" % (k, val))

    def expand(arg):  # kubelet's $(VAR) expansion in args, then the rebase of paths
        arg = refs(arg, env)
        key, eq, val = arg.partition("=")
        return key + eq + rebase(val) if eq else rebase(arg)

    command = [expand(a) for a in c.get("command", []) + c.get("args", [])]
    metrics_port = None
    for p in c.get("ports", []):
        if p.get("name") == "metrics":
            metrics_port = args.metrics_port or p["containerPort"]
    if args.metrics_port:
        command = [re.sub(r":\d+$", ":%d" % args.metrics_port, a)
                   if a.startswith("--metrics-address=") else a for a in command]
    kubelet = None
    for a in command:
        if a.startswith("--kubelet-root-dir="):
            kubelet = a.split("=", 1)[1]
    if kubelet is None:
        fail("args: no --kubelet-root-dir")
    endpoint = env.get("CSI_ENDPOINT", "unix://%s/plugins/csi.volagent.io/csi.sock" % kubelet)
    print(json.dumps({
        "image": c["image"],
        "run_args": run,
        "command": command,
        "probe": c["livenessProbe"]["exec"]["command"],
        "readiness": c["readinessProbe"]["exec"]["command"],
        "stop_timeout": pod.get("terminationGracePeriodSeconds", 30),
        "metrics_port": metrics_port,
        "kubelet_dir": kubelet,
        "csi_socket": endpoint[len("unix://"):],
        "registration_socket": kubelet + "/plugins_registry/csi.volagent.io-reg.sock",
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())

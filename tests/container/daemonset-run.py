#!/usr/bin/python3
"""daemonset-run.py - turns deploy/daemonset.yaml into what `podman run` needs to start the
agent the way kubelet would, so the image test runs the manifest itself, not a copy of it.

    daemonset-run.py --manifest deploy/daemonset.yaml --host-root DIR --node-name NAME

Prints JSON: {"image": ..., "run_args": [...podman run options...], "command": [...container
args...], "probe": [...liveness exec command...], "kubelet_dir": ..., "csi_socket": ...,
"registration_socket": ...}.

Host directories the agent keeps data in (the kubelet dir, its state, local volumes) are
placed under --host-root, at the same path inside the container as outside (as the manifest
has them), so the test's host never touches the machine's real /var/lib/kubelet.  System
paths (/dev, /sys, /run/udev, /lib/modules, /etc/selinux) are the machine's own, and skipped
when absent, as /run/udev is on hosts without udev and /etc/selinux on hosts without SELinux.
"""
import argparse
import json
import os
import re
import sys

import yaml

SYSTEM_PATHS = ("/dev", "/sys", "/run/udev", "/lib/modules", "/etc/selinux")
PROPAGATION = {"Bidirectional": "rshared", "HostToContainer": "rslave", "None": "rprivate"}


def fail(msg):
    print("daemonset-run.py: " + msg, file=sys.stderr)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--host-root", required=True)
    ap.add_argument("--node-name", required=True)
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
        if v is None or "hostPath" not in v:
            fail("volumeMount %s: no hostPath volume of that name" % m["name"])
        host = v["hostPath"]["path"]
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

    env = {}
    for e in c.get("env", []):
        if "value" in e:
            val = e["value"]
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
        arg = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda mo: env.get(mo.group(1), mo.group(0)),
                     arg)
        key, eq, val = arg.partition("=")
        return key + eq + rebase(val) if eq else rebase(arg)

    command = [expand(a) for a in c.get("command", []) + c.get("args", [])]
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
        "kubelet_dir": kubelet,
        "csi_socket": endpoint[len("unix://"):],
        "registration_socket": kubelet + "/plugins_registry/csi.volagent.io-reg.sock",
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())

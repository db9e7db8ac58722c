#!/usr/bin/python3
"""lifecycle.py - one volume's whole life on a node, driven by kubelet.py as kubelet drives it:
registration, stage, publish into two pods, stats, a kubelet restart that reissues stage and
publish from what it finds on disk (both OK, the mount table unchanged), teardown of one pod
(the stage stays while the other pod refers to it; a late replay of the gone pod's publish is
refused and creates nothing), teardown of the other, unstage, and nothing left.  Optionally a
second PV whose stage must fail with a final code, after which kubelet's dir is gone.

    lifecycle.py --root KUBELET_ROOT --pv JSON [--bad-pv JSON] [--stub-dir DIR]
                 [--node-name NAME] [--label NAME] [--node-label KEY=VALUE ...]

A PV is {"name", "handle", "volumeMode" (Filesystem|Block), "accessModes", "fsType",
"mountOptions", "volumeAttributes", "nodeStageSecret", "readOnly"}: what kubelet reads from the
API server.  Prints PASS:/FAIL: lines and "N passed, N failed"; exits 1 when anything failed.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kubelet as kl  # noqa: E402

passed = failed = 0
label = ""


def check(name, ok, why=""):
    global passed, failed
    if ok:
        passed += 1
        print("PASS: %s%s" % (label, name), flush=True)
    else:
        failed += 1
        print("FAIL: %s%s%s" % (label, name, " (%s)" % why if why else ""), flush=True)
    return ok


def attempt(name, fn):
    """Runs fn; a CallError or OSError is a failure of name.  Returns fn's result or None."""
    try:
        r = fn()
        check(name, True)
        return r if r is not None else True
    except (kl.CallError, kl.RegistrationError, OSError) as e:
        check(name, False, str(e))
        return None


def snapshot(root):
    """Every mount below root: target -> (mount id, source, maj:min, fsroot)."""
    return {m["target"]: (m["id"], m["source"], m["maj:min"], m["fsroot"])
            for m in kl.mounts() if m["target"].startswith(root + "/")}


def owned_key(key):
    """Whether a topology key is outside the domains kubelet and Kubernetes own."""
    domain = key.split("/")[0] if "/" in key else ""
    return bool(domain) and not any(domain == d or domain.endswith("." + d)
                                    for d in ("kubernetes.io", "k8s.io"))


def write_and_read(pv, k, pods):
    """Writes through the first pod's view and reads it through the second's."""
    data = ("kubelet-driver %s\n" % pv["name"]).encode()
    if pv.get("volumeMode") == "Block":
        a, b = k.pod_device_link(pv, pods[0]["uid"]), k.dev_path(pv, pods[1]["uid"])
        fd = os.open(a, os.O_WRONLY)
        try:
            os.pwrite(fd, data.ljust(512, b"\0"), 4096)
            os.fsync(fd)
        finally:
            os.close(fd)
        fd = os.open(b, os.O_RDONLY)
        try:
            got = os.pread(fd, len(data), 4096)
        finally:
            os.close(fd)
        return got == data
    a, b = k.target_path(pv, pods[0]["uid"]), k.target_path(pv, pods[1]["uid"])
    with open(os.path.join(a, "kubelet-driver"), "wb") as f:
        f.write(data)
    with open(os.path.join(b, "kubelet-driver"), "rb") as f:
        return f.read() == data


def set_up_pod(k, pv, pod):
    if pv.get("volumeMode") == "Block":
        return k.map_pod_device(pv, pod)
    return k.set_up(pv, pod)


def stage(k, pv, label=None):
    if pv.get("volumeMode") == "Block":
        return k.set_up_device(pv)
    return k.mount_device(pv, label)


def selinux_on():
    """Whether this kernel runs SELinux (selinuxfs is there)."""
    return os.path.exists("/sys/fs/selinux/enforce")


def selinux_checks(k, pv, pods, args):
    """With seLinuxMount: the label on the filesystem's own mount and its files (where the
    kernel runs SELinux), in `volagent status`, and a pod with another label refused."""
    label = args.selinux_label
    stg = k.staging_path(pv)
    m = kl.mount_at(stg) or kl.mount_at(k.target_path(pv, pods[0]["uid"]))
    if selinux_on():
        check("SELinux: the filesystem's mount carries context=%s (%s)" %
              (label, m and m["options"]), m is not None and label in m["options"])
        f = os.path.join(k.target_path(pv, pods[1]["uid"]), "kubelet-driver")
        try:
            got = os.getxattr(f, "security.selinux").rstrip(b"\0").decode()
        except OSError as e:
            got = str(e)
        check("SELinux: a file written by pod-a has the label through pod-b (%s)" % got,
              got == label)
        ls = subprocess.run(["ls", "-Z", f], capture_output=True, text=True)
        print("  ls -Z: %s" % (ls.stdout.strip() or ls.stderr.strip()), flush=True)
    else:
        print("NOTE: %sthis kernel runs without SELinux (no /sys/fs/selinux): libmount drops "
              "context= options before mount(2) (mount(8) does the same; mount(2) itself "
              "refuses them with EINVAL), so the label cannot show in the mount table or on "
              "files here; the VM test (tests/vm/test-selinux.sh) shows it" % args_label(),
              flush=True)
        check("SELinux off: the stage mount is made without the label (%s)" %
              (m and m["options"]), m is not None and "context=" not in m["options"])
    if args.status_cmd:
        out = subprocess.run(json.loads(args.status_cmd), capture_output=True, text=True)
        check("`volagent status` shows the label whole: context=\"%s\"" % label,
              ('context=\\"%s\\"' % label) in out.stdout or
              ('context="%s"' % label) in out.stdout, out.stdout[-300:] + out.stderr[-300:])
    other = {"name": "pod-c", "uid": "uid-c-" + pv["name"], "selinux": args.other_selinux_label}
    try:
        k.set_up(pv, other)
        code, msg = "OK", ""
    except kl.CallError as e:
        code, msg = e.code, e.details
    check("SELinux: a pod with another label is refused with a final code naming both "
          "labels (%s: %s)" % (code, msg),
          code == "FAILED_PRECONDITION" and label in msg and args.other_selinux_label in msg)
    check("SELinux: ... and kubelet removed that pod's dir",
          not os.path.exists(os.path.dirname(k.target_path(pv, other["uid"]))))


def args_label():
    return label


def run(args):
    global label
    pv = json.loads(args.pv)
    block = pv.get("volumeMode") == "Block"
    label = "[%s] " % (args.label or pv["name"])
    stubs = args.stub_dir or tempfile.mkdtemp(prefix="kubelet-stubs-")
    labels = dict(x.split("=", 1) for x in args.node_label)
    k = kl.Kubelet(args.root, stubs, args.node_name, labels)
    pods = [{"name": "pod-a", "uid": "uid-a-" + pv["name"]},
            {"name": "pod-b", "uid": "uid-b-" + pv["name"]}]
    if args.selinux_label and not block:
        for p in pods:
            p["selinux"] = args.selinux_label

    info = attempt("registration through plugins_registry (GetInfo, NodeGetInfo, "
                   "NotifyRegistrationStatus)", k.register)
    if not info:
        return
    keys = list(k.node_info.get("accessible_topology", {}).get("segments", {}))
    check("NodeGetInfo's topology keys are the driver's own, none kubelet owns (%s)" % keys,
          keys and all(owned_key(x) for x in keys))
    caps = k.node_caps()
    print("  %saccess mode %s is sent as %s (node capabilities %s)" %
          (label, pv.get("accessModes", ["ReadWriteOnce"])[0], k.access_mode(pv, caps),
           sorted(caps)), flush=True)

    stg = k.staging_path(pv)
    if not attempt("stage at kubelet's path %s" % os.path.relpath(stg, args.root),
                   lambda: stage(k, pv, args.selinux_label)):
        return
    for p in pods:
        if not attempt("publish into %s" % p["name"], lambda p=p: set_up_pod(k, pv, p)):
            return
    table = kl.mounts()
    for p in pods:
        if block:
            dev = k.dev_path(pv, p["uid"])
            check("%s: kubelet's bind at volumeDevices/%s/dev/%s holds the device" %
                  (p["name"], pv["name"], p["uid"]), kl.mount_at(dev, table) is not None)
            check("%s: kubelet's lock, a loop device on that bind, is attached (%s)" %
                  (p["name"], k.loop_of(dev)), k.loop_of(dev) is not None)
        else:
            tgt = k.target_path(pv, p["uid"])
            m = kl.mount_at(tgt, table)
            check("%s: the target is a mount" % p["name"], m is not None)
            s = kl.mount_at(stg, table)
            if s is not None and m is not None:
                check("%s: the target binds the staging mount (one filesystem mount)" %
                      p["name"], (m["maj:min"], m["fsroot"]) == (s["maj:min"], s["fsroot"]))
    try:
        check("what pod-a writes, pod-b reads", write_and_read(pv, k, pods))
    except OSError as e:
        check("what pod-a writes, pod-b reads", False, str(e))
    if args.selinux_label and not block:
        selinux_checks(k, pv, pods, args)
    for p in pods:
        where = "kubelet's dev path" if block else "the target"
        try:
            st = k.stats(pv, p["uid"])
            check("%s: NodeGetVolumeStats at %s answers OK with a total (%s)" %
                  (p["name"], where, st and st.get("usage")),
                  st is None or any(int(u.get("total", 0)) > 0 for u in st.get("usage", [])))
        except kl.CallError as e:
            check("%s: NodeGetVolumeStats at %s answers OK" % (p["name"], where), False,
                  str(e))

    # --- kubelet restarts: it knows only what is on disk --------------------------------
    before = snapshot(args.root)
    k2 = kl.Kubelet(args.root, stubs, args.node_name, labels)
    attempt("after a restart: registered again", k2.register)
    found = k2.reconstruct()
    want = sorted((pv["name"], pv["handle"], p["uid"], pv.get("volumeMode", "Filesystem"))
                  for p in pods)
    check("after a restart: vol_data.json and the pod dirs name both pods' volume",
          sorted(found) == want, "found %s" % found)
    staged = set()
    for name, handle, uid, mode in found:
        # The API server's PV for the name found on disk.
        if name != pv["name"] or handle != pv["handle"]:
            continue
        pod = next(p for p in pods if p["uid"] == uid)
        if name not in staged:
            staged.add(name)
            attempt("after a restart: NodeStageVolume reissued answers OK",
                    lambda: stage(k2, pv, args.selinux_label))
        attempt("after a restart: NodePublishVolume reissued for %s answers OK" % pod["name"],
                lambda pod=pod: set_up_pod(k2, pv, pod))
    after = snapshot(args.root)
    check("after a restart: the mount table below the root is unchanged (same mount ids)",
          before == after, "before %s after %s" % (before, after))
    k = k2

    # --- pod-a goes --------------------------------------------------------------------
    a, b = pods
    if block:
        attempt("pod-a: kubelet's lock, link and bind removed, NodeUnpublishVolume",
                lambda: k.unmap_pod_device(pv, a["uid"]))
        check("pod-a: the published file, the bind and the lock are gone",
              not os.path.lexists(k.target_path(pv, a["uid"]))
              and not os.path.lexists(k.dev_path(pv, a["uid"]))
              and k.loop_of(k.dev_path(pv, a["uid"])) is None)
    else:
        attempt("pod-a: NodeUnpublishVolume, then kubelet removes the dir and vol_data.json",
                lambda: k.tear_down(pv, a["uid"]))
        check("pod-a: the target's parent is gone",
              not os.path.exists(os.path.dirname(k.target_path(pv, a["uid"]))))
        if kl.mount_at(stg) is not None:
            check("pod-b still refers to the staging mount, so kubelet does not unstage",
                  bool(k.device_mount_refs(stg)))
        replay_missing_parent(k, pv, a, args.root)
    try:
        check("pod-b still reads the volume", read_back(pv, k, b))
    except OSError as e:
        check("pod-b still reads the volume", False, str(e))

    # --- pod-b goes, then the stage ---------------------------------------------------
    if block:
        attempt("pod-b: unmapped and unpublished", lambda: k.unmap_pod_device(pv, b["uid"]))
        attempt("NodeUnstageVolume, kubelet's block dirs removed",
                lambda: k.tear_down_device(pv))
        replay_missing_parent(k, pv, a, args.root)
    else:
        attempt("pod-b: unpublished", lambda: k.tear_down(pv, b["uid"]))
        check("no other mount refers to the staging path", not k.device_mount_refs(stg))
        attempt("NodeUnstageVolume, then kubelet removes globalmount and vol_data.json",
                lambda: k.unmount_device(pv))
        check("the staging dir's parent is gone", not os.path.exists(os.path.dirname(stg)))
    left = snapshot(args.root)
    check("nothing is mounted below kubelet's root", not left, str(left))
    check("no pod dir of this volume is left",
          not any(os.path.exists(os.path.join(args.root, "pods", p["uid"], sub, "kubernetes.io~csi",
                                              pv["name"]))
                  for p in pods for sub in ("volumes", "volumeDevices")))
    if args.bad_pv:
        bad_stage(k, json.loads(args.bad_pv), args.root)


def read_back(pv, k, pod):
    data = ("kubelet-driver %s\n" % pv["name"]).encode()
    if pv.get("volumeMode") == "Block":
        fd = os.open(k.dev_path(pv, pod["uid"]), os.O_RDONLY)
        try:
            return os.pread(fd, len(data), 4096) == data
        finally:
            os.close(fd)
    with open(os.path.join(k.target_path(pv, pod["uid"]), "kubelet-driver"), "rb") as f:
        return f.read() == data


def replay_missing_parent(k, pv, pod, root):
    """A NodePublishVolume that arrives after kubelet removed the pod's dir (a retry of a call
    that timed out): refused with a final code, nothing created."""
    req = k.publish_request(pv, pod, k.node_caps())
    parent = os.path.dirname(req["target_path"])
    try:
        k.call("NodePublishVolume", req)
        code = "OK"
    except kl.CallError as e:
        code = e.code
    check("a late NodePublishVolume whose target's parent is gone is refused with a final "
          "code (%s)" % code, code != "OK" and code not in kl.NON_FINAL)
    check("... and creates nothing (%s absent)" % os.path.relpath(parent, root),
          not os.path.exists(parent) and kl.mount_at(req["target_path"]) is None)
    if code == "OK":  # undo what the old code made, so the rest of the run is not confused
        try:
            k.call("NodeUnpublishVolume", {"volume_id": pv["handle"],
                                           "target_path": req["target_path"]})
        except kl.CallError:
            pass
        kl.remove_mount_dir(req["target_path"])


def bad_stage(k, pv, root):
    """A stage that fails with a final code: kubelet removes globalmount (removeMountDir)."""
    stg = k.staging_path(pv)
    try:
        stage(k, pv)
        code = "OK"
    except kl.CallError as e:
        code = e.code
    check("%s: NodeStageVolume fails with a final code (%s)" % (pv["name"], code),
          code != "OK" and code not in kl.NON_FINAL)
    check("%s: after the final error kubelet's staging dir and vol_data.json are gone, "
          "nothing mounted" % pv["name"],
          not os.path.exists(os.path.dirname(stg)) and not snapshot(root))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--pv", required=True)
    ap.add_argument("--bad-pv")
    ap.add_argument("--stub-dir")
    ap.add_argument("--node-name", default="node-a")
    ap.add_argument("--label")
    ap.add_argument("--node-label", action="append", default=[])
    ap.add_argument("--selinux-label", help="as with seLinuxMount: the pods' SELinux label")
    ap.add_argument("--other-selinux-label", default="system_u:object_r:container_file_t:s0:c5,c6")
    ap.add_argument("--status-cmd", help="a JSON argv printing `volagent status`")
    args = ap.parse_args()
    args.root = os.path.realpath(args.root)
    run(args)
    print("%d passed, %d failed" % (passed, failed), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

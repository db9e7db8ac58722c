#!/usr/bin/python3
"""kubelet.py - a test driver that plays kubelet's volume manager against a CSI node plugin,
call by call and path by path as kubelet's own source does it.  Written for volagent's tests
from reading kubernetes/kubernetes (pkg/kubelet/pluginmanager, pkg/volume/csi csi_plugin.go,
csi_client.go, csi_attacher.go, csi_mounter.go, csi_block.go, csi_util.go, pkg/volume/util
MapBlockVolume / UnmapBlockVolume and volumepathhandler); nothing of it is copied.

What it does as kubelet does:
  - registration: finds the plugin's socket in <root>/plugins_registry (names starting with
    "." ignored), GetInfo, checks the type and a 1.x version, dials the endpoint it reports,
    NodeGetInfo (a node id is required; each topology segment becomes a label of the Node and a
    key the Node already has with another value fails the registration), then
    NotifyRegistrationStatus;
  - a new gRPC connection for every call; NodeGetCapabilities before each decision that
    depends on it (stage or not, stats, access-mode mapping);
  - kubelet's paths, the directories it makes and the vol_data.json files it writes;
  - isFinalError: CANCELLED, DEADLINE_EXCEEDED, UNAVAILABLE, RESOURCE_EXHAUSTED and ABORTED
    are retried (backing off from 500 ms); any other error is final and kubelet removes the
    dir it made for the call (removeMountDir);
  - raw block: its bind of the published file under volumeDevices/<pv>/dev/<pod uid>, the
    loop device on that bind as a lock (losetup -f, found again through sysfs backing_file),
    the link in the pod's volumeDevices dir, and stats asked at the dev path;
  - teardown in kubelet's order; UnmountDevice only when no other mount refers to the
    staging mount (GetDeviceMountRefs);
  - a restart: a new Kubelet finds what is on disk (vol_data.json, pod dirs) and reissues
    stage and publish.

The PV objects the API server would hold are plain dicts (see lifecycle.py).
"""
import ctypes
import errno
import glob
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "csi"))
import csi_client  # noqa: E402  (the stub generation is shared with the CSI client)

import grpc  # noqa: E402
from google.protobuf import json_format  # noqa: E402

# csi_client.go isFinalError: these codes mean "outcome unknown, call again".
NON_FINAL = {"CANCELLED", "DEADLINE_EXCEEDED", "UNAVAILABLE", "RESOURCE_EXHAUSTED", "ABORTED"}
CSI_PLUGIN = "kubernetes.io/csi"
MS_BIND = 4096
MNT_DETACH = 2

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_void_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]


class CallError(Exception):
    """A CSI call answered with an error code."""

    def __init__(self, method, code, details):
        super().__init__("%s: %s %s" % (method, code, details))
        self.method = method
        self.code = code
        self.details = details
        self.final = code not in NON_FINAL


class RegistrationError(Exception):
    pass


def mounts():
    """The mount table of this process's namespace, as findmnt (libmount) reads it: a list of
    dicts with id, target, source, fstype, options, fsroot, maj:min."""
    out = subprocess.run(["findmnt", "--json", "--list", "--task", str(os.getpid()), "-o",
                          "ID,TARGET,SOURCE,FSTYPE,OPTIONS,FSROOT,MAJ:MIN"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["filesystems"]


def mount_at(path, table=None):
    """The topmost mount whose target is path, or None."""
    found = None
    for m in table if table is not None else mounts():
        if m["target"] == path:
            found = m
    return found


def bind_mount(source, target):
    if _libc.mount(source.encode(), target.encode(), None, MS_BIND, None) != 0:
        e = ctypes.get_errno()
        raise OSError(e, "bind %s on %s: %s" % (source, target, os.strerror(e)))


def unmount(target):
    if _libc.umount2(target.encode(), 0) != 0:
        e = ctypes.get_errno()
        if e not in (errno.EINVAL, errno.ENOENT):
            raise OSError(e, "umount %s: %s" % (target, os.strerror(e)))


def save_volume_data(directory, data):
    """csi_util.go saveVolumeData: <dir>/vol_data.json."""
    with open(os.path.join(directory, "vol_data.json"), "w") as f:
        json.dump(data, f)


def load_volume_data(directory):
    with open(os.path.join(directory, "vol_data.json")) as f:
        return json.load(f)


def remove_mount_dir(mount_path):
    """csi_util.go removeMountDir: the dir (when it is not a mount point), then vol_data.json
    and the now empty parent."""
    if mount_at(mount_path) is not None:
        return False
    if os.path.isdir(mount_path):
        os.rmdir(mount_path)
    elif os.path.lexists(mount_path):
        os.remove(mount_path)
    parent = os.path.dirname(mount_path)
    try:
        os.remove(os.path.join(parent, "vol_data.json"))
    except FileNotFoundError:
        pass
    try:
        os.rmdir(parent)
    except OSError:
        pass
    return True


class Kubelet:
    """One kubelet's volume manager on root (its --root-dir).  node_labels stands for the
    Node object's labels (kubelet's own, e.g. kubernetes.io/hostname)."""

    def __init__(self, root, stub_dir, node_name, node_labels=None, timeout=30.0,
                 retry_for=60.0, log=None):
        self.root = root
        self.node_name = node_name
        self.node_labels = dict(node_labels or {})
        self.timeout = timeout
        self.retry_for = retry_for
        self.log = log or (lambda msg: print("  kubelet: " + msg, flush=True))
        services = csi_client.load_stubs(stub_dir)
        self.pb = services["Node"][0]
        self.stubs = {"Node": services["Node"][1], "Identity": services["Identity"][1]}
        self.reg_pb, self.reg_stub = services["Registration"][0], services["Registration"][1]
        self.driver = None
        self.endpoint = None
        self.node_info = None
        self.retries = 0
        self.calls = []  # (method, code) of every call made

    # --- registration (pluginmanager, csi_plugin.go RegisterPlugin, nodeinfomanager) -------
    def register(self, wait_s=10.0):
        reg_dir = os.path.join(self.root, "plugins_registry")
        deadline = time.monotonic() + wait_s
        socks = []
        while time.monotonic() < deadline:
            socks = sorted(p for p in glob.glob(os.path.join(reg_dir, "*"))
                           if not os.path.basename(p).startswith(".")
                           and os.path.exists(p) and _is_socket(p))
            if socks:
                break
            time.sleep(0.1)
        if not socks:
            raise RegistrationError("no plugin socket in %s" % reg_dir)
        sock = socks[0]
        ch = grpc.insecure_channel("unix:" + sock)
        try:
            grpc.channel_ready_future(ch).result(timeout=10)
            stub = self.reg_stub(ch)
            info = stub.GetInfo(self.reg_pb.InfoRequest(), timeout=1)
            if info.type != "CSIPlugin":
                raise RegistrationError("plugin type %r is not CSIPlugin" % info.type)
            if not any(v.split(".")[0] in ("1", "v1") for v in info.supported_versions):
                raise RegistrationError("no 1.x version in %s" % list(info.supported_versions))
            err = ""
            try:
                self.driver, self.endpoint = info.name, info.endpoint
                self.node_info = self.call("NodeGetInfo", {})
                if not self.node_info.get("node_id"):
                    err = "NodeGetInfo: empty node id"
                for key, val in self.node_info.get("accessible_topology", {}).get(
                        "segments", {}).items():
                    if key in self.node_labels and self.node_labels[key] != val:
                        err = ("detected topology value collision: driver reported %s:%s "
                               "but existing label is %s:%s" %
                               (key, val, key, self.node_labels[key]))
                        break
            except CallError as e:
                err = str(e)
            stub.NotifyRegistrationStatus(
                self.reg_pb.RegistrationStatus(plugin_registered=not err, error=err), timeout=5)
            if err:
                self.driver = self.endpoint = None
                raise RegistrationError(err)
            for key, val in self.node_info.get("accessible_topology", {}).get(
                    "segments", {}).items():
                self.node_labels[key] = val
            return info
        finally:
            ch.close()

    # --- every call: a new connection (csi_client.go) -------------------------------------
    def call(self, method, request, timeout=None):
        if not self.endpoint:
            raise RegistrationError("driver not registered")
        service = "Identity" if method in ("GetPluginInfo", "GetPluginCapabilities",
                                           "Probe") else "Node"
        desc = self.pb.DESCRIPTOR.services_by_name[service]
        req = json_format.ParseDict(request, getattr(
            self.pb, desc.methods_by_name[method].input_type.name)())
        ch = grpc.insecure_channel("unix:" + self.endpoint)
        try:
            stub = self.stubs[service](ch)
            resp = getattr(stub, method)(req, timeout=timeout or self.timeout)
            self.calls.append((method, "OK"))
            return json_format.MessageToDict(resp, preserving_proto_field_name=True)
        except grpc.RpcError as e:
            self.calls.append((method, e.code().name))
            raise CallError(method, e.code().name, e.details() or "") from None
        finally:
            ch.close()

    def call_until_final(self, method, request):
        """A state-changing call as kubelet's operation executor repeats it: a non-final error
        is called again (backing off from 500 ms, doubling), a final one raised."""
        delay, deadline = 0.5, time.monotonic() + self.retry_for
        while True:
            try:
                return self.call(method, request)
            except CallError as e:
                if e.final or time.monotonic() + delay > deadline:
                    raise
                self.retries += 1
                self.log("%s answered %s (not final): again in %.1fs" % (method, e.code, delay))
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    def retry_busy(self, fn):
        """Runs fn again while it fails with EBUSY, as kubelet's operation executor repeats a
        failed unmap (backing off from 500 ms): a detached loop device lets go of its backing
        file only once its last opener (udev's probe) has closed it."""
        delay, deadline = 0.5, time.monotonic() + self.retry_for
        while True:
            try:
                return fn()
            except OSError as e:
                if e.errno != errno.EBUSY or time.monotonic() + delay > deadline:
                    raise
                self.retries += 1
                self.log("%s: again in %.1fs" % (e.strerror, delay))
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    def node_caps(self):
        caps = self.call("NodeGetCapabilities", {}).get("capabilities", [])
        return {c["rpc"]["type"] for c in caps if "rpc" in c}

    @staticmethod
    def access_mode(pv, caps):
        """csi_client.go asCSIAccessModeV1 with the plugin's SINGLE_NODE_MULTI_WRITER."""
        multi = "SINGLE_NODE_MULTI_WRITER" in caps
        mode = pv.get("accessModes", ["ReadWriteOnce"])[0]
        return {
            "ReadWriteOnce": "SINGLE_NODE_MULTI_WRITER" if multi else "SINGLE_NODE_WRITER",
            "ReadWriteOncePod": "SINGLE_NODE_SINGLE_WRITER" if multi else "SINGLE_NODE_WRITER",
            "ReadOnlyMany": "MULTI_NODE_READER_ONLY",
            "ReadWriteMany": "MULTI_NODE_MULTI_WRITER",
        }[mode]

    def capability(self, pv, caps, block, selinux_label=None):
        """The VolumeCapability; with the CSIDriver's seLinuxMount and a pod label, kubelet
        adds context="<label>" to the mount options (util.AddSELinuxMountOption)."""
        cap = {"access_mode": {"mode": self.access_mode(pv, caps)}}
        if block:
            cap["block"] = {}
        else:
            flags = list(pv.get("mountOptions", []))
            if selinux_label:
                flags.append('context="%s"' % selinux_label)
            cap["mount"] = {"fs_type": pv.get("fsType", ""), "mount_flags": flags}
        return cap

    # --- paths ----------------------------------------------------------------------------
    def csi_dir(self, *parts):
        return os.path.join(self.root, "plugins", CSI_PLUGIN, *parts)

    def staging_path(self, pv):
        if pv.get("volumeMode") == "Block":
            return self.csi_dir("volumeDevices", "staging", pv["name"])
        digest = hashlib.sha256(pv["handle"].encode()).hexdigest()
        return self.csi_dir(self.driver, digest, "globalmount")

    def target_path(self, pv, uid):
        if pv.get("volumeMode") == "Block":
            return self.csi_dir("volumeDevices", "publish", pv["name"], uid)
        return os.path.join(self.root, "pods", uid, "volumes", "kubernetes.io~csi", pv["name"],
                            "mount")

    def dev_path(self, pv, uid):
        """Kubelet's own bind of a raw block volume's published file (global map path)."""
        return self.csi_dir("volumeDevices", pv["name"], "dev", uid)

    def pod_device_link(self, pv, uid):
        return os.path.join(self.root, "pods", uid, "volumeDevices", "kubernetes.io~csi",
                            pv["name"])

    # --- Filesystem volumes: MountDevice / SetUp / TearDown / UnmountDevice ----------------
    def mount_device(self, pv, selinux_label=None):
        """csi_attacher.go MountDevice: globalmount made, vol_data.json beside it, then
        NodeStageVolume when the plugin stages; after a final error the dir is removed."""
        path = self.staging_path(pv)
        os.makedirs(path, mode=0o750, exist_ok=True)
        save_volume_data(os.path.dirname(path), {"volumeHandle": pv["handle"],
                                                 "driverName": self.driver})
        caps = self.node_caps()
        if "STAGE_UNSTAGE_VOLUME" not in caps:
            return None
        try:
            self.call_until_final("NodeStageVolume",
                                  self.stage_request(pv, path, caps, False, selinux_label))
        except CallError as e:
            if e.final:
                remove_mount_dir(path)
            raise
        return path

    def stage_request(self, pv, path, caps, block, selinux_label=None):
        """NodeStageVolume as kubelet sends it: no pod info; the stage secrets."""
        req = {"volume_id": pv["handle"], "staging_target_path": path,
               "volume_capability": self.capability(pv, caps, block, selinux_label),
               "volume_context": dict(pv.get("volumeAttributes", {}))}
        if pv.get("nodeStageSecret"):
            req["secrets"] = dict(pv["nodeStageSecret"])
        return req

    def pod_info(self, pod):
        return {"csi.storage.k8s.io/pod.name": pod["name"],
                "csi.storage.k8s.io/pod.namespace": pod.get("namespace", "default"),
                "csi.storage.k8s.io/pod.uid": pod["uid"],
                "csi.storage.k8s.io/serviceAccount.name": "default",
                "csi.storage.k8s.io/ephemeral": "false"}

    def set_up(self, pv, pod, pod_info_on_mount=True):
        """csi_mounter.go SetUpAt: the target's parent made with vol_data.json in it, then
        NodePublishVolume (pod info in volume_context only here; pod["selinux"], when set, is
        the pod's SELinux label); a final error removes the target dir, vol_data.json and the
        parent."""
        target = self.target_path(pv, pod["uid"])
        parent = os.path.dirname(target)
        os.makedirs(parent, mode=0o750, exist_ok=True)
        save_volume_data(parent, {"specVolID": pv["name"], "volumeHandle": pv["handle"],
                                  "driverName": self.driver, "nodeName": self.node_name,
                                  "attachmentID": "", "volumeLifecycleMode": "Persistent"})
        caps = self.node_caps()
        return self._publish(pv, pod, caps, pod_info_on_mount, cleanup=True)

    def _publish(self, pv, pod, caps, pod_info_on_mount, cleanup):
        req = self.publish_request(pv, pod, caps, pod_info_on_mount)
        target = req["target_path"]
        try:
            self.call_until_final("NodePublishVolume", req)
        except CallError as e:
            if e.final and cleanup:
                remove_mount_dir(target)
            raise
        return target

    def publish_request(self, pv, pod, caps, pod_info_on_mount=True):
        """NodePublishVolume as kubelet sends it for pod: the PV's attributes plus, with
        podInfoOnMount, the pod's (only here, never at stage)."""
        block = pv.get("volumeMode") == "Block"
        ctx = dict(pv.get("volumeAttributes", {}))
        if pod_info_on_mount:
            ctx.update(self.pod_info(pod))
        req = {"volume_id": pv["handle"], "target_path": self.target_path(pv, pod["uid"]),
               "volume_capability": self.capability(pv, caps, block, pod.get("selinux")),
               "readonly": bool(pv.get("readOnly")), "volume_context": ctx}
        if "STAGE_UNSTAGE_VOLUME" in caps:
            req["staging_target_path"] = self.staging_path(pv)
        return req

    def tear_down(self, pv, uid):
        """csi_mounter.go TearDownAt: NodeUnpublishVolume, then the target dir, vol_data.json
        and the parent go."""
        target = self.target_path(pv, uid)
        self.call_until_final("NodeUnpublishVolume", {"volume_id": pv["handle"],
                                                      "target_path": target})
        if not remove_mount_dir(target):
            raise OSError(errno.EBUSY, "%s is still mounted after NodeUnpublishVolume" % target)

    def device_mount_refs(self, path):
        """mount_linux.go GetMountRefs: the other mount points of the mount at path (same
        device and root)."""
        table = mounts()
        m = mount_at(path, table)
        if m is None:
            return []
        return [o["target"] for o in table if o["target"] != path
                and o["maj:min"] == m["maj:min"] and o["fsroot"] == m["fsroot"]]

    def unmount_device(self, pv):
        """operation_generator UnmountDevice (only when no other mount refers to the staging
        mount), csi_attacher.go UnmountDevice: the handle read back from vol_data.json,
        NodeUnstageVolume, the dir removed."""
        path = self.staging_path(pv)
        refs = self.device_mount_refs(path)
        if refs:
            raise OSError(errno.EBUSY, "device still in use by %s" % refs)
        data = load_volume_data(os.path.dirname(path))
        if "STAGE_UNSTAGE_VOLUME" in self.node_caps():
            self.call_until_final("NodeUnstageVolume", {"volume_id": data["volumeHandle"],
                                                        "staging_target_path": path})
        if not remove_mount_dir(path):
            raise OSError(errno.EBUSY, "%s is still mounted after NodeUnstageVolume" % path)

    # --- raw block: SetUpDevice / MapPodDevice / MapBlockVolume and back -------------------
    def set_up_device(self, pv):
        """csi_plugin.go NewBlockVolumeMapper writes volumeDevices/<pv>/data/vol_data.json;
        csi_block.go SetUpDevice: the staging dir made, NodeStageVolume."""
        data_dir = self.csi_dir("volumeDevices", pv["name"], "data")
        os.makedirs(data_dir, mode=0o750, exist_ok=True)
        save_volume_data(data_dir, {"specVolID": pv["name"], "volumeHandle": pv["handle"],
                                    "driverName": self.driver, "nodeName": self.node_name,
                                    "attachmentID": ""})
        caps = self.node_caps()
        if "STAGE_UNSTAGE_VOLUME" not in caps:
            return None
        path = self.staging_path(pv)
        os.makedirs(path, mode=0o750, exist_ok=True)
        try:
            self.call_until_final("NodeStageVolume", self.stage_request(pv, path, caps, True))
        except CallError as e:
            if e.final:
                self.cleanup_orphan_device_files(pv)
            raise
        return path

    def map_pod_device(self, pv, pod, pod_info_on_mount=True):
        """csi_block.go MapPodDevice (publish dir made, NodePublishVolume), then
        util.MapBlockVolume: kubelet's bind of the published file at dev/<pod uid>, the link in
        the pod's volumeDevices dir, and the loop device on the bind that holds it open."""
        target = self.target_path(pv, pod["uid"])
        os.makedirs(os.path.dirname(target), mode=0o750, exist_ok=True)
        caps = self.node_caps()
        self._publish(pv, pod, caps, pod_info_on_mount, cleanup=False)
        dev = self.dev_path(pv, pod["uid"])
        os.makedirs(os.path.dirname(dev), mode=0o750, exist_ok=True)
        if mount_at(dev) is None:
            if not os.path.exists(dev):
                open(dev, "w").close()
            bind_mount(target, dev)
        link = self.pod_device_link(pv, pod["uid"])
        os.makedirs(os.path.dirname(link), mode=0o750, exist_ok=True)
        if not os.path.islink(link):
            os.symlink(target, link)
        self.attach_file_device(dev)
        return dev

    @staticmethod
    def loop_of(path):
        """volumepathhandler getLoopDeviceFromSysfs: the loop device whose backing file is
        path, or None."""
        real = os.path.realpath(path)
        for d in sorted(glob.glob("/sys/block/loop*")):
            try:
                with open(os.path.join(d, "loop", "backing_file")) as f:
                    backing = f.read().strip()
            except OSError:
                continue
            if backing.endswith("(deleted)"):
                backing = backing[:-len("(deleted)")].strip()
            if backing in (path, real):
                return "/dev/" + os.path.basename(d)
        return None

    def attach_file_device(self, path):
        """volumepathhandler AttachFileDevice: losetup -f <path> unless one exists."""
        dev = self.loop_of(path)
        if dev:
            return dev
        subprocess.run(["losetup", "-f", path], check=True, capture_output=True)
        dev = self.loop_of(path)
        if not dev:
            raise OSError(errno.ENODEV, "losetup -f %s made no loop device" % path)
        return dev

    def unmap_pod_device(self, pv, uid):
        """util.UnmapBlockVolume (the lock's loop device detached, the pod's link removed,
        kubelet's bind unmounted and removed), then csi_block.go UnmapPodDevice:
        NodeUnpublishVolume of the published file."""
        dev = self.dev_path(pv, uid)
        loop = self.loop_of(dev)
        if loop:
            subprocess.run(["losetup", "-d", loop], check=True, capture_output=True)
        link = self.pod_device_link(pv, uid)
        if os.path.islink(link):
            os.remove(link)
        if mount_at(dev) is not None:
            self.retry_busy(lambda: unmount(dev))
        if os.path.exists(dev):
            os.remove(dev)
        self.call_until_final("NodeUnpublishVolume", {"volume_id": pv["handle"],
                                                      "target_path": self.target_path(pv, uid)})

    def tear_down_device(self, pv):
        """csi_block.go TearDownDevice: NodeUnstageVolume when the staging dir exists, the dir
        removed, then cleanupOrphanDeviceFiles."""
        path = self.staging_path(pv)
        if os.path.exists(path) and "STAGE_UNSTAGE_VOLUME" in self.node_caps():
            self.call_until_final("NodeUnstageVolume", {"volume_id": pv["handle"],
                                                        "staging_target_path": path})
            shutil.rmtree(path)
        self.cleanup_orphan_device_files(pv)

    def cleanup_orphan_device_files(self, pv):
        for p in (self.csi_dir("volumeDevices", "publish", pv["name"]),
                  self.csi_dir("volumeDevices", "staging", pv["name"])):
            try:
                os.rmdir(p)
            except FileNotFoundError:
                pass
        vol_dir = self.csi_dir("volumeDevices", pv["name"])
        if os.path.isdir(vol_dir):
            for m in mounts():
                if m["target"].startswith(vol_dir + "/"):
                    raise OSError(errno.EBUSY, "%s is still mounted" % m["target"])
            shutil.rmtree(vol_dir)

    # --- stats (csi_plugin.go, metrics_csi.go) --------------------------------------------
    def stats(self, pv, uid):
        """NodeGetVolumeStats as kubelet asks it: at the target dir, or for raw block at its
        own dev path; None when the plugin does not advertise GET_VOLUME_STATS."""
        if "GET_VOLUME_STATS" not in self.node_caps():
            return None
        block = pv.get("volumeMode") == "Block"
        req = {"volume_id": pv["handle"],
               "volume_path": self.dev_path(pv, uid) if block else self.target_path(pv, uid)}
        if "STAGE_UNSTAGE_VOLUME" in self.node_caps():
            req["staging_target_path"] = self.staging_path(pv)
        return self.call("NodeGetVolumeStats", req)

    # --- a restart: reconstruction from disk (volumemanager/reconstruct) -------------------
    def reconstruct(self):
        """What a restarted kubelet finds on disk: a list of (pv name, volume handle, pod uid,
        mode) from the pods' vol_data.json (Filesystem) and the volumeDevices links with
        volumeDevices/<pv>/data/vol_data.json (Block)."""
        found = []
        for vd in sorted(glob.glob(os.path.join(self.root, "pods", "*", "volumes",
                                                "kubernetes.io~csi", "*", "vol_data.json"))):
            data = load_volume_data(os.path.dirname(vd))
            uid = vd.split(os.sep)[-5]
            found.append((data["specVolID"], data["volumeHandle"], uid, "Filesystem"))
        for link in sorted(glob.glob(os.path.join(self.root, "pods", "*", "volumeDevices",
                                                  "kubernetes.io~csi", "*"))):
            name = os.path.basename(link)
            data = load_volume_data(self.csi_dir("volumeDevices", name, "data"))
            found.append((name, data["volumeHandle"], link.split(os.sep)[-4], "Block"))
        return found


def _is_socket(path):
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False

"""pcnode.py - the node of the power-cut tests (tests/vm/test-power-cut.sh,
tests/vm/test-write-order.sh), in the VM: its disks, the agent, kubelet (tests/kubelet/kubelet.py),
the volumes (CSI through kubelet, pod spec files), the ledger of what the test's kubelet and
operator knew, and the checks made after a boot.  guest-power-cut.py and guest-write-order.py
drive it.
"""
import json
import os
import random
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "kubelet"))
import kubelet  # noqa: E402

AGENT = os.environ.get("VOLAGENT_BIN", "volagent")
SCALE = float(os.environ.get("TEST_TIME_SCALE", "1") or 1)
STATE = "/pc/state"
QUOTA = "/pc/quota"
STATE_DIR = STATE + "/volagent"
ROOT_DIR = STATE + "/lib"
PODS_DIR = STATE + "/pods.d"
KUBELET_ROOT = STATE + "/kubelet"
SECRET = "power-cut-passphrase"

# The volumes: CSI ones by disk serial; spec-file ones by pod.
CSI_VOLUMES = {"plain": {"serial": "pc-plain", "encrypted": False},
               "crypt": {"serial": "pc-crypt", "encrypted": True}}
SPEC_VOLUMES = {"blockpod": {"serial": "pc-spec", "fsType": "xfs"},
                "sizedpod": {"dir": QUOTA + "/dirs/sized", "size": "32Mi"}}

_failed = 0
counts = {"checks": 0, "canaries": 0, "double_formats": 0, "lost_records": 0,
          "adopted": 0, "released": 0, "journal_from_previous_copy": 0,
          "kubelet_files_torn": 0}


def say(msg):
    print(msg, flush=True)


def failed():
    return _failed


def check(ok, name, why=""):
    global _failed
    counts["checks"] += 1
    if ok:
        say("PASS: " + name)
    else:
        _failed += 1
        say("FAIL: %s%s" % (name, " (%s)" % why if why else ""))
    return ok


def run(*argv, check_rc=True):
    r = subprocess.run(argv, capture_output=True, text=True)
    if check_rc and r.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(argv), r.returncode, r.stderr.strip()))
    return r.stdout.strip()


def wait_for(cond, seconds, step=0.1):
    deadline = time.monotonic() + seconds * SCALE
    while True:
        if cond():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(step)


def disk(serial):
    for name in sorted(os.listdir("/sys/block")):
        try:
            with open("/sys/block/%s/serial" % name) as f:
                if f.read().strip() == serial:
                    return "/dev/" + name
        except OSError:
            pass
    raise SystemExit("no disk with serial %s" % serial)


def signature(dev, offset=None, size=None):
    """The filesystem or LUKS UUID libblkid probes on dev (or on its size bytes at offset), ""
    when blank."""
    region = ["-O", str(offset), "-S", str(size)] if offset is not None else []
    return run("blkid", "-p", *region, "-s", "UUID", "-o", "value", dev, check_rc=False)


def mount_source(path):
    return run("findmnt", "-n", "-o", "SOURCE", "--mountpoint", path, check_rc=False)


def mounted_anywhere(dev):
    return bool(run("findmnt", "-rn", "-o", "TARGET", "-S", dev, check_rc=False))


def new_volume():
    """A volume the ledger knows nothing of: never set up, wanted down."""
    return {"want": "down", "gen": 0, "pod": None, "uuid": None, "canaries": []}


class Ledger:
    """JSON lines on the host's disk: each written and fsynced before the step it announces
    goes on (an intent) or after it is done (an outcome)."""

    def __init__(self, path):
        self.path = path
        self.events = []
        if os.path.exists(path):
            with open(path) as f:
                for line in f:
                    line = line.strip()
                    if line:
                        try:
                            self.events.append(json.loads(line))
                        except ValueError:
                            pass  # a line the cut tore: it was never acted on
        self.f = open(path, "a")

    def add(self, **ev):
        self.events.append(ev)
        self.f.write(json.dumps(ev, sort_keys=True) + "\n")
        self.f.flush()
        os.fsync(self.f.fileno())

    def volumes(self, names=()):
        """name -> {want: up/down, gen, pod, uuid (after the gen's first set-up), canaries
        [(path, text)]} folded from the events, for their volumes and each of names."""
        vols = {name: new_volume() for name in names}
        for ev in self.events:
            v = vols.setdefault(ev.get("vol"), new_volume())
            kind = ev["ev"]
            if kind == "want":
                v["want"], v["pod"] = ev["state"], ev.get("pod")
                if ev.get("gen", v["gen"]) != v["gen"]:
                    v.update(gen=ev["gen"], uuid=None, canaries=[])
            elif kind == "uuid" and v["uuid"] is None:
                v["uuid"] = ev["uuid"]
            elif kind == "canary":
                v["canaries"].append((ev["file"], ev["text"]))
        vols.pop(None, None)
        return vols


class Node:
    """args: ledger, boot, seed, stub_dir.  disks: serial -> device (default: the VM's
    virtio disks by serial); csi, spec: the volumes used (default: CSI_VOLUMES and
    SPEC_VOLUMES; a list of their names, or a dict of volumes shaped like theirs)."""

    def __init__(self, args, disks=None, csi=None, spec=None):
        self.args = args
        self.ledger = Ledger(args.ledger)
        self.agent = None
        self.kubelet = None
        self.csi_volumes = (csi if isinstance(csi, dict)
                            else {k: CSI_VOLUMES[k] for k in (csi or CSI_VOLUMES)})
        self.spec_volumes = (spec if isinstance(spec, dict)
                             else {k: SPEC_VOLUMES[k] for k in (spec or SPEC_VOLUMES)})
        self.disks = disks or {s: disk(s) for s in ("pc-state", "pc-plain", "pc-crypt",
                                                    "pc-spec", "pc-quota")}

    # --- the node's own set-up (an operator's fstab) ---------------------------------------
    def mount_disks(self):
        for serial, where, mkfs, opts in (
                ("pc-state", STATE, ["mkfs.ext4", "-q", "-F"], "defaults"),
                ("pc-quota", QUOTA, ["mkfs.ext4", "-q", "-F", "-O", "project,quota"],
                 "prjquota")):
            dev = self.disks.get(serial)
            if dev is None:
                continue
            if not signature(dev):
                run(*mkfs, dev)
                run("sync")
            os.makedirs(where, exist_ok=True)
            run("mount", "-o", opts, dev, where)
        for d in (STATE_DIR, ROOT_DIR, PODS_DIR, KUBELET_ROOT):
            os.makedirs(d, exist_ok=True)
        if "pc-quota" in self.disks:
            os.makedirs(SPEC_VOLUMES["sizedpod"]["dir"], exist_ok=True)

    def journal_before_start(self):
        """The journal's device entries as the disk holds them, before the agent reads it."""
        path = STATE_DIR + "/journal.json"
        for p in (path, path + ".prev"):
            try:
                with open(p) as f:
                    doc = json.load(f)
            except FileNotFoundError:
                continue
            except ValueError as e:
                say("  journal %s does not parse: %s" % (p, e))
                counts["journal_from_previous_copy"] += 1
                continue
            return doc.get("devices", [])
        return []

    def start_agent(self):
        log = open(os.path.join(os.path.dirname(self.args.ledger),
                                "agent.boot%d.log" % self.args.boot), "a")
        self.agent = subprocess.Popen(
            [AGENT, "run", "--state-dir", STATE_DIR, "--root-dir", ROOT_DIR, "--pods-dir",
             PODS_DIR, "--csi-endpoint", "unix:///run/volagent-pc.sock", "--kubelet-root-dir",
             KUBELET_ROOT, "--node-id", "pc-node", "--secret-dir", "/run/volagent",
             "--metrics-address", "off"], stdout=log, stderr=log)
        return wait_for(lambda: self.status().get("ready"), 60, 0.2)

    def status(self):
        try:
            return json.loads(run(AGENT, "status", "--json", "--state-dir", STATE_DIR))
        except (RuntimeError, ValueError):
            return {}

    # --- CSI volumes through kubelet ------------------------------------------------------
    def pv(self, name, gen):
        spec = self.csi_volumes[name]
        attrs = {"type": "local", "path": self.disks[spec["serial"]]}
        pv = {"name": "%s-%d" % (name, gen), "handle": "%s-%d" % (name, gen),
              "fsType": "ext4", "volumeAttributes": attrs}
        if spec["encrypted"]:
            attrs["encrypted"] = "true"
            pv["nodeStageSecret"] = {"encryptionPassphrase": SECRET}
        return pv

    def csi_up(self, name, v):
        pv = self.pv(name, v["gen"])
        staging = self.kubelet.mount_device(pv)
        target = self.kubelet.set_up(pv, {"uid": v["pod"], "name": v["pod"]})
        return staging, target

    def csi_down(self, name, v):
        pv = self.pv(name, v["gen"])
        if v["pod"] and os.path.lexists(self.kubelet.target_path(pv, v["pod"])):
            self.kubelet.tear_down(pv, v["pod"])
        data_dir = os.path.dirname(self.kubelet.staging_path(pv))
        if not os.path.exists(os.path.join(data_dir, "vol_data.json")):
            return
        try:
            kubelet.load_volume_data(data_dir)
        except ValueError:
            # Kubelet writes it without an fsync, so a cut can leave it empty; kubelet itself
            # would retry UnmountDevice forever.  This kubelet knows the volume from the
            # ledger and writes it again, as MountDevice did.
            counts["kubelet_files_torn"] += 1
            kubelet.save_volume_data(data_dir, {"volumeHandle": pv["handle"],
                                                "driverName": self.kubelet.driver})
        self.kubelet.unmount_device(pv)

    # --- spec-file volumes ---------------------------------------------------------------
    def spec_file(self, name):
        return os.path.join(PODS_DIR, name + ".json")

    def pod_path(self, name, v):
        return os.path.join(ROOT_DIR, "pods", v["pod"], "volumes", "kubernetes.io~local",
                            "data")

    def spec_up(self, name, v):
        spec = self.spec_volumes[name]
        local = ({"path": self.disks[spec["serial"]], "fsType": spec["fsType"]}
                 if "serial" in spec else {"path": spec["dir"], "size": spec["size"]})
        doc = {"pod": {"uid": v["pod"], "name": name, "namespace": "pc"},
               "volumes": [{"name": "data", "local": local}]}
        tmp = os.path.join(PODS_DIR, ".%s.tmp" % name)
        with open(tmp, "w") as f:
            json.dump(doc, f)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, self.spec_file(name))
        path = self.pod_path(name, v)
        if not wait_for(lambda: os.path.ismount(path), 60):
            raise RuntimeError("%s: not mounted at %s after its spec file" % (name, path))
        return path, path

    def spec_down(self, name, v):
        try:
            os.remove(self.spec_file(name))
        except FileNotFoundError:
            pass
        if v["pod"]:
            path = self.pod_path(name, v)
            if not wait_for(lambda: not os.path.ismount(path), 60):
                raise RuntimeError("%s: still mounted at %s" % (name, path))

    # --- either kind --------------------------------------------------------------------
    def up(self, name, v):
        return (self.csi_up if name in self.csi_volumes else self.spec_up)(name, v)

    def down(self, name, v):
        (self.csi_down if name in self.csi_volumes else self.spec_down)(name, v)

    def raw_disk(self, name):
        spec = self.csi_volumes.get(name) or self.spec_volumes[name]
        return self.disks[spec["serial"]] if "serial" in spec else None

    def note_uuid(self, name, v, staging):
        """The filesystem the volume carries now against the one of its first set-up."""
        if self.raw_disk(name) is None:
            return
        uuid = signature(mount_source(staging) or "/nonexistent")
        if v["uuid"] is None:
            self.ledger.add(ev="uuid", vol=name, gen=v["gen"], uuid=uuid)
            v["uuid"] = uuid
        elif uuid != v["uuid"]:
            counts["double_formats"] += 1
            check(False, "boot %d: %s-%d keeps its filesystem" % (self.args.boot, name, v["gen"]),
                  "UUID %s, was %s" % (uuid, v["uuid"]))

    def write_canary(self, name, v, target, n):
        path = os.path.join(target, "canary-%d-%d" % (self.args.boot, n))
        text = "boot %d seed %d n %d" % (self.args.boot, self.args.seed, n)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, text.encode())
        os.fsync(fd)
        os.close(fd)
        dfd = os.open(target, os.O_RDONLY | os.O_DIRECTORY)
        os.fsync(dfd)
        os.close(dfd)
        self.ledger.add(ev="canary", vol=name, gen=v["gen"], file=os.path.basename(path),
                        text=text)
        v["canaries"].append((os.path.basename(path), text))

    def check_canaries(self, name, v, target):
        for fname, text in v["canaries"]:
            try:
                with open(os.path.join(target, fname)) as f:
                    got = f.read()
            except OSError as e:
                got = "(%s)" % e.strerror
            counts["canaries"] += 1
            if got != text:
                check(False, "boot %d: %s canary %s reads back" % (self.args.boot, name, fname),
                      "read %r" % got)

    # --- a boot's checks ------------------------------------------------------------------
    def start(self):
        """The agent started and ready, and kubelet registered with it."""
        ready = self.start_agent()
        self.kubelet = kubelet.Kubelet(KUBELET_ROOT, self.args.stub_dir, "pc-node",
                                       retry_for=120 * SCALE, log=lambda m: None)
        self.kubelet.register(wait_s=30 * SCALE)
        return ready

    def recover(self):
        boot = self.args.boot
        journal = self.journal_before_start()
        check(self.start(), "boot %d: the agent starts and is ready" % boot)
        vols = self.ledger.volumes(list(self.csi_volumes) + list(self.spec_volumes))
        for name in list(self.csi_volumes) + list(self.spec_volumes):
            v = vols[name]
            try:
                if v["want"] == "up":
                    staging, target = self.up(name, v)
                    self.note_uuid(name, v, staging)
                    self.check_canaries(name, v, target)
                else:
                    self.down(name, v)
            except (kubelet.CallError, OSError, RuntimeError) as e:
                check(False, "boot %d: %s-%d back to %s" % (boot, name, v["gen"], v["want"]),
                      str(e))
        for e in journal:
            where, dev = e.get("mount_path", ""), e.get("device", "")
            if os.path.ismount(where):
                counts["adopted"] += 1
            elif dev and (mounted_anywhere(dev) or (dev.startswith("/dev/mapper/")
                                                    and os.path.exists(dev))):
                counts["lost_records"] += 1
                check(False, "boot %d: recorded %s adopted or released" % (boot, e["volume"]),
                      "%s is neither mounted at %s nor free" % (dev, where))
            else:
                counts["released"] += 1
        st = self.status()
        check(st.get("ready") and st.get("journal", {}).get("healthy"),
              "boot %d: status ready, journal healthy" % boot,
              json.dumps(st.get("journal")))
        check(counts["double_formats"] == 0 and counts["lost_records"] == 0,
              "boot %d: %d recorded devices, %d adopted, %d released; %d canaries read back" %
              (boot, len(journal), counts["adopted"], counts["released"], counts["canaries"]))
        return vols

    def churn(self, vols, steps=None):
        """Random changes (seeded) until the power goes, or for that many steps."""
        rng = random.Random("churn-%d" % self.args.seed)  # a string: seeds apart by one differ
        self.ledger.add(ev="churn", boot=self.args.boot, seed=self.args.seed)
        with open(self.args.ledger + ".churning", "w") as f:
            f.write("%d\n" % self.args.boot)
        n = 0
        while steps is None or n < steps:
            name = rng.choice(sorted(vols))
            v = vols[name]
            n += 1
            if v["want"] == "up":
                if rng.random() < 0.5:
                    self.write_canary(name, v, self.target_of(name, v), n)
                    continue
                self.take_down(name, v)
            else:
                if self.raw_disk(name) and v["uuid"] and rng.random() < 0.3:
                    self.recycle(name, v)
                    continue
                self.bring_up(name, v, "%s-%d-%d" % (name, self.args.boot, n))
            time.sleep(rng.uniform(0, 0.2))

    def take_down(self, name, v):
        self.ledger.add(ev="want", vol=name, gen=v["gen"], state="down", pod=v["pod"])
        v["want"] = "down"
        self.down(name, v)
        self.ledger.add(ev="done", vol=name, gen=v["gen"], state="down")

    def bring_up(self, name, v, pod):
        self.ledger.add(ev="want", vol=name, gen=v["gen"], state="up", pod=pod)
        v.update(want="up", pod=pod)
        staging, _ = self.up(name, v)
        self.note_uuid(name, v, staging)
        self.ledger.add(ev="done", vol=name, gen=v["gen"], state="up")

    def recycle(self, name, v):
        """The volume (down) deleted, its disk zeroed for a new one (a new PV; wipefs would
        leave ext4's backup superblocks, which the agent refuses)."""
        self.ledger.add(ev="want", vol=name, gen=v["gen"] + 1, state="down", pod=None)
        v.update(gen=v["gen"] + 1, uuid=None, canaries=[])
        run("blkdiscard", "-z", self.raw_disk(name))
        run("sync")

    def target_of(self, name, v):
        if name in self.csi_volumes:
            return self.kubelet.target_path(self.pv(name, v["gen"]), v["pod"])
        return self.pod_path(name, v)

    def tear_down_all(self, vols):
        for name, v in sorted(vols.items()):
            if v["want"] == "up":
                self.down(name, v)
                self.ledger.add(ev="want", vol=name, gen=v["gen"], state="down", pod=v["pod"])
        st = self.status()
        left = [m for m in kubelet.mounts()
                if m["target"].startswith((ROOT_DIR, KUBELET_ROOT))]
        check(not left, "last boot: nothing of the volumes is mounted after teardown",
              " ".join(m["target"] for m in left))
        mappings = run("dmsetup", "ls", check_rc=False)
        check("No devices found" in mappings or not mappings.strip(),
              "last boot: no dm-crypt mapping is left", mappings)
        check(st.get("counts", {}).get("devices", 1) == 0, "last boot: the agent holds no device",
              json.dumps(st.get("counts")))
        self.agent.terminate()
        check(self.agent.wait(timeout=60 * SCALE) == 0, "last boot: the agent stops cleanly")



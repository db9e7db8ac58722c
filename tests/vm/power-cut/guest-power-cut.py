#!/usr/bin/python3
"""guest-power-cut.py - one boot of the power-cut test (tests/vm/test-power-cut.sh), in the VM.

The node: a state disk (the agent's state dir, its root dir, the pod spec files and kubelet's
root dir, all on one ext4, as /var/lib on a real node), a disk for a plain CSI volume, one for
an encrypted CSI volume, one for a pod spec file's block volume (xfs) and an ext4 with project
quotas for a pod spec file's sized directory.  The host cuts the power (kills qemu) at a random
moment of the churn; the next boot checks what the last one left:

  - before the agent starts: the journal as the disk holds it (read with Python's json), and
    the raw disks' signatures;
  - the agent starts and is ready; kubelet (tests/kubelet/kubelet.py, kubelet's own calls and
    paths) registers it and brings every CSI volume to what it last wanted (the call that was
    in flight at the cut is made again: stage + publish, or unpublish + unstage), the spec
    files are made to say what was last wanted and the agent converges them;
  - no volume was formatted twice: each volume's filesystem UUID (read from the mounted
    device) is the one it had after its first set-up; every canary file written, fsynced and
    noted before the cut reads back;
  - nothing recorded was forgotten: every device entry of that journal is either mounted at
    its mount path again (adopted) or released (its device mounted nowhere, no mapping);
  - `volagent status` says ready and the journal healthy.

Then it writes "churn" to the ledger and churns (stage with format, publish, canaries,
unpublish, unstage, a volume deleted and its disk wiped for a new one; spec files written and
removed) until the power goes.  With --last it checks, tears everything down, checks that
nothing is left, and stops the agent.

The ledger (--ledger, on the host's shared dir, each line fsynced) is what the test's kubelet
and operator knew: JSON lines, an intent before each change and its outcome after.

    guest-power-cut.py --ledger FILE --boot K --seed N [--last]

Prints PASS:/FAIL: lines, and a "counts" line; exits 1 when a check failed.
"""
import argparse
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

failed = 0
counts = {"checks": 0, "canaries": 0, "double_formats": 0, "lost_records": 0,
          "adopted": 0, "released": 0, "journal_from_previous_copy": 0}


def say(msg):
    print(msg, flush=True)


def check(ok, name, why=""):
    global failed
    counts["checks"] += 1
    if ok:
        say("PASS: " + name)
    else:
        failed += 1
        say("FAIL: %s%s" % (name, " (%s)" % why if why else ""))
    return ok


def run(*argv, check_rc=True):
    return subprocess.run(argv, check=check_rc, capture_output=True, text=True).stdout.strip()


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


def signature(dev):
    """The raw device's filesystem or LUKS UUID as libblkid probes it, "" when blank."""
    return run("blkid", "-p", "-s", "UUID", "-o", "value", dev, check_rc=False)


def mount_source(path):
    return run("findmnt", "-n", "-o", "SOURCE", "--mountpoint", path, check_rc=False)


def mounted_anywhere(dev):
    return bool(run("findmnt", "-rn", "-o", "TARGET", "-S", dev, check_rc=False))


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

    def volumes(self):
        """name -> {want: up/down/wipe, gen, pod, uuid (after the gen's first set-up),
        canaries [(path, text)]} folded from the events."""
        vols = {}
        for ev in self.events:
            v = vols.setdefault(ev.get("vol"), {"want": "down", "gen": 0, "pod": None,
                                                "uuid": None, "canaries": []})
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
    def __init__(self, args):
        self.args = args
        self.ledger = Ledger(args.ledger)
        self.agent = None
        self.kubelet = None
        self.disks = {s: disk(s) for s in ("pc-state", "pc-plain", "pc-crypt", "pc-spec",
                                           "pc-quota")}

    # --- the node's own set-up (an operator's fstab) ---------------------------------------
    def mount_disks(self):
        for serial, where, mkfs, opts in (
                ("pc-state", STATE, ["mkfs.ext4", "-q", "-F"], "defaults"),
                ("pc-quota", QUOTA, ["mkfs.ext4", "-q", "-F", "-O", "project,quota"],
                 "prjquota")):
            dev = self.disks[serial]
            if not signature(dev):
                run(*mkfs, dev)
                run("sync")
            os.makedirs(where, exist_ok=True)
            run("mount", "-o", opts, dev, where)
        for d in (STATE_DIR, ROOT_DIR, PODS_DIR, KUBELET_ROOT, SPEC_VOLUMES["sizedpod"]["dir"]):
            os.makedirs(d, exist_ok=True)

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
        except (subprocess.CalledProcessError, ValueError):
            return {}

    # --- CSI volumes through kubelet ------------------------------------------------------
    def pv(self, name, gen):
        spec = CSI_VOLUMES[name]
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
        staging = self.kubelet.staging_path(pv)
        if os.path.exists(os.path.join(os.path.dirname(staging), "vol_data.json")):
            self.kubelet.unmount_device(pv)

    # --- spec-file volumes ---------------------------------------------------------------
    def spec_file(self, name):
        return os.path.join(PODS_DIR, name + ".json")

    def pod_path(self, name, v):
        return os.path.join(ROOT_DIR, "pods", v["pod"], "volumes", "kubernetes.io~local",
                            "data")

    def spec_up(self, name, v):
        spec = SPEC_VOLUMES[name]
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
        return (self.csi_up if name in CSI_VOLUMES else self.spec_up)(name, v)

    def down(self, name, v):
        (self.csi_down if name in CSI_VOLUMES else self.spec_down)(name, v)

    def raw_disk(self, name):
        spec = CSI_VOLUMES.get(name) or SPEC_VOLUMES[name]
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
    def recover(self):
        boot = self.args.boot
        journal = self.journal_before_start()
        check(self.start_agent(), "boot %d: the agent starts and is ready" % boot)
        self.kubelet = kubelet.Kubelet(KUBELET_ROOT, self.args.stub_dir, "pc-node",
                                       retry_for=120 * SCALE, log=lambda m: None)
        self.kubelet.register(wait_s=30 * SCALE)
        vols = self.ledger.volumes()
        for name in list(CSI_VOLUMES) + list(SPEC_VOLUMES):
            v = vols.setdefault(name, {"want": "down", "gen": 0, "pod": None, "uuid": None,
                                       "canaries": []})
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

    def churn(self, vols):
        rng = random.Random(self.args.seed)
        self.ledger.add(ev="churn", boot=self.args.boot, seed=self.args.seed)
        with open(self.args.ledger + ".churning", "w") as f:
            f.write("%d\n" % self.args.boot)
        n = 0
        while True:
            name = rng.choice(sorted(vols))
            v = vols[name]
            n += 1
            if v["want"] == "up":
                if rng.random() < 0.5:
                    self.write_canary(name, v, self.target_of(name, v), n)
                    continue
                self.ledger.add(ev="want", vol=name, gen=v["gen"], state="down", pod=v["pod"])
                v["want"] = "down"
                self.down(name, v)
                self.ledger.add(ev="done", vol=name, gen=v["gen"], state="down")
            else:
                disk_dev = self.raw_disk(name)
                if disk_dev and v["uuid"] and rng.random() < 0.3:
                    # The volume deleted, its disk wiped for a new one (a new PV).
                    self.ledger.add(ev="want", vol=name, gen=v["gen"] + 1, state="down",
                                    pod=None)
                    v.update(gen=v["gen"] + 1, uuid=None, canaries=[])
                    run("wipefs", "-a", "-q", disk_dev)
                    run("sync")
                    continue
                pod = "%s-%d-%d" % (name, self.args.boot, n)
                self.ledger.add(ev="want", vol=name, gen=v["gen"], state="up", pod=pod)
                v.update(want="up", pod=pod)
                staging, target = self.up(name, v)
                self.note_uuid(name, v, staging)
                self.ledger.add(ev="done", vol=name, gen=v["gen"], state="up")
            time.sleep(rng.uniform(0, 0.2))

    def target_of(self, name, v):
        if name in CSI_VOLUMES:
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ledger", required=True)
    ap.add_argument("--boot", type=int, required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--stub-dir", required=True)
    ap.add_argument("--last", action="store_true")
    args = ap.parse_args()
    node = Node(args)
    node.mount_disks()
    vols = node.recover()
    say("counts " + json.dumps(counts, sort_keys=True))
    if failed:
        sys.exit(1)
    if args.last:
        node.tear_down_all(vols)
        sys.exit(1 if failed else 0)
    node.churn(vols)


if __name__ == "__main__":
    main()

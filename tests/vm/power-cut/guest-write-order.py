#!/usr/bin/python3
"""guest-write-order.py - the write order under replay (tests/vm/test-write-order.sh), in the VM.

One dm-log-writes device logs every write to a data disk, in the order the disk completed
them; three dm-linear devices over it are the node's state disk (the agent's state dir, root
dir, spec files, kubelet's root), a plain CSI volume's disk and a spec file's block volume's
disk, so that the log keeps the order of the journal's writes relative to the volumes' own.
The churn of pcnode.Node (stage with format, publish, canaries, unpublish, unstage, disks
wiped for new volumes; a spec file written and removed) runs for --steps steps; the agent is
then killed and the devices taken down.  The log is replayed onto a zeroed disk
(replay_log.py) and at every point where the disk had flushed:

  - the state filesystem, copied and mounted (its own journal recovered), holds a journal
    that parses (and so does its previous copy, when there is one);
  - every device that journal records with a filesystem UUID shows that filesystem on the
    replayed disk: a power cut there could not make the agent trust a format that is not on
    the disk (or refuse, as blank, one it made).

At the last point the journal is the one the agent left: the replay reproduced the disk.

    guest-write-order.py --ledger FILE --stub-dir DIR --seed N --steps N

Prints PASS:/FAIL: lines and a "replay" line with the counts; exits 1 when a check failed.
"""
import argparse
import json
import os
import subprocess
import sys

import pcnode
import replay_log

MIB = 1 << 20
# The regions of the logged device, in order: (name, MiB).
REGIONS = [("state", 32), ("plain", 32), ("spec", 32)]
COPY = "/tmp/wo-state.img"
MNT = "/tmp/wo-state"


def dmsetup(*argv):
    # No udev in the guest: libdevmapper makes the /dev/mapper nodes itself.
    os.environ["DM_DISABLE_UDEV"] = "1"
    pcnode.run("dmsetup", *argv)


def set_up_devices(data, log):
    """wo-log over data (logging to log) and one dm-linear per region over it; returns
    {device path: (offset, size)}."""
    total = sum(size for _, size in REGIONS) * MIB
    dmsetup("create", "wo-log", "--table", "0 %d log-writes %s %s" % (total // 512, data, log))
    regions, off = {}, 0
    for name, size in REGIONS:
        dmsetup("create", "wo-" + name, "--table",
                "0 %d linear /dev/mapper/wo-log %d" % (size * MIB // 512, off // 512))
        regions["/dev/mapper/wo-" + name] = (off, size * MIB)
        off += size * MIB
    # The kernel's names of the same devices, should a record hold one.
    for dm in os.listdir("/sys/block"):
        try:
            with open("/sys/block/%s/dm/name" % dm) as f:
                alias = "/dev/mapper/" + f.read().strip()
        except OSError:
            continue
        if alias in regions:
            regions["/dev/" + dm] = regions[alias]
    return regions


def take_down(regions):
    pcnode.run("umount", "-R", pcnode.STATE)  # the volumes' mounts are all below it
    for name, _ in reversed(REGIONS):
        dmsetup("remove", "wo-" + name)
    dmsetup("remove", "wo-log")


class Checker:
    """The checks at each flush point of the replay."""

    def __init__(self, replay_dev, regions, final_journal):
        self.replay_dev = replay_dev
        self.regions = regions
        self.state_off, self.state_size = regions["/dev/mapper/wo-state"]
        self.final_journal = final_journal
        self.state_changed = True
        self.last = None  # (journal text, its devices) at the last point checked
        self.n = {"points": 0, "points with a journal": 0, "filesystems checked": 0,
                  "torn journals": 0, "wrong filesystems": 0}

    def on_write(self, off, size):
        if off < self.state_off + self.state_size and off + size > self.state_off:
            self.state_changed = True

    def read_journal(self, index):
        """The journal text and its previous copy's as the state disk holds them at this
        point: (None, None) before the state filesystem exists."""
        with open(self.replay_dev, "rb") as src, open(COPY, "wb") as dst:
            src.seek(self.state_off)
            left = self.state_size
            while left:
                chunk = src.read(min(left, 4 * MIB))
                dst.write(chunk)
                left -= len(chunk)
        if not pcnode.signature(COPY):
            return None, None
        os.makedirs(MNT, exist_ok=True)
        r = subprocess.run(["mount", "-o", "loop", COPY, MNT], capture_output=True, text=True)
        if r.returncode != 0:
            pcnode.check(False, "point %d: the state filesystem mounts" % index, r.stderr.strip())
            return None, None
        try:
            texts = []
            for name in ("journal.json", "journal.json.prev"):
                try:
                    with open(os.path.join(MNT, "volagent", name)) as f:
                        texts.append(f.read())
                except FileNotFoundError:
                    texts.append(None)
            return texts
        finally:
            pcnode.run("umount", MNT)

    def at_flush(self, index, mark):
        self.n["points"] += 1
        if self.state_changed:
            self.state_changed = False
            text, prev = self.read_journal(index)
            devices = []
            for what, t in (("journal", text), ("its previous copy", prev)):
                if t is None:
                    continue
                try:
                    doc = json.loads(t)
                except ValueError as e:
                    self.n["torn journals"] += 1
                    pcnode.check(False, "point %d (after mark %r): the %s parses" %
                                 (index, mark, what), str(e))
                    continue
                if what == "journal":
                    devices = doc.get("devices", [])
            self.last = (text, devices)
        text, devices = self.last
        if text is not None:
            self.n["points with a journal"] += 1
        for dev, want, got in self.compare(devices):
            self.n["filesystems checked"] += 1
            if got != want:
                self.n["wrong filesystems"] += 1
                pcnode.check(False, "point %d (after mark %r): %s carries the recorded filesystem"
                             % (index, mark, dev), "journal says %s, the disk shows %r" %
                             (want, got))

    def compare(self, devices):
        """(device, recorded UUID, UUID on the replayed disk) of each device recorded with a
        filesystem."""
        for d in devices:
            off, size = self.regions.get(d.get("device"), (None, None))
            if not d.get("fs_uuid") or off is None:
                continue
            got = pcnode.signature(self.replay_dev, off, size)
            yield d["device"], d["fs_uuid"], got

    def tells_old_filesystems(self, ledger, devices):
        """The comparison is not vacuous: the filesystems the test saw made on a disk for an
        earlier volume, since zeroed and formatted again (the ledger's uuid events of older
        generations), are told apart from what the replayed disk holds at the end.  Returns
        how many were, or -1 when one was taken for the disk's."""
        last_gen = {}
        for ev in ledger.events:
            if ev["ev"] == "uuid":
                last_gen[ev["vol"]] = max(last_gen.get(ev["vol"], 0), ev["gen"])
        old = [{"device": devices[ev["vol"]], "fs_uuid": ev["uuid"]} for ev in ledger.events
               if ev["ev"] == "uuid" and ev["gen"] < last_gen[ev["vol"]]]
        told = sum(1 for _, want, got in self.compare(old) if want != got)
        return told if told == len(old) else -1


def reformat_one_if_none(node, vols):
    """The replay's check of old filesystems (tells_old_filesystems) needs a disk that carried
    the filesystem of an earlier volume.  When the churn's dice made none (seed 1796465441,
    30 steps), one disk volume is taken down, its disk zeroed and a new volume set up on it."""
    gens = {}
    for ev in node.ledger.events:
        if ev["ev"] == "uuid":
            gens.setdefault(ev["vol"], set()).add(ev["gen"])
    if any(len(g) > 1 for g in gens.values()):
        return
    name = next(n for n in sorted(vols) if node.raw_disk(n))
    v = vols[name]
    if v["uuid"] is None:  # never set up in this generation: once, for a filesystem to zero
        node.bring_up(name, v, "%s-reformat-first" % name)
    if v["want"] == "up":
        node.take_down(name, v)
    node.recycle(name, v)
    node.bring_up(name, v, "%s-reformat" % name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ledger", required=True)
    ap.add_argument("--stub-dir", required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    args = ap.parse_args()
    args.boot = 1
    data, log, replay_dev = (pcnode.disk(s) for s in ("wo-data", "wo-log", "wo-replay"))
    regions = set_up_devices(data, log)
    dmsetup("message", "wo-log", "0", "mark", "devices")
    node = pcnode.Node(args, disks={"pc-state": "/dev/mapper/wo-state",
                                    "pc-plain": "/dev/mapper/wo-plain",
                                    "pc-spec": "/dev/mapper/wo-spec"},
                       csi=["plain"], spec={"blockpod": {"serial": "pc-spec", "fsType": "ext4"}})
    node.mount_disks()
    dmsetup("message", "wo-log", "0", "mark", "agent")
    pcnode.check(node.start(), "the agent starts on the logged state disk")
    vols = node.ledger.volumes(("plain", "blockpod"))
    node.churn(vols, steps=args.steps)
    reformat_one_if_none(node, vols)
    node.agent.kill()
    node.agent.wait()
    with open(pcnode.STATE_DIR + "/journal.json") as f:
        final_journal = f.read()
    take_down(regions)

    checker = Checker(replay_dev, regions, final_journal)
    entries, points = replay_log.replay(log, replay_dev, checker.at_flush, checker.on_write)
    told = checker.tells_old_filesystems(node.ledger, {"plain": "/dev/mapper/wo-plain",
                                                       "blockpod": "/dev/mapper/wo-spec"})
    pcnode.check(told > 0, "the check tells %d records of earlier filesystems from the disk "
                 "that now carries others" % told)
    pcnode.check(checker.last is not None and checker.last[0] == final_journal,
                 "the replay's last point holds the journal the agent left")
    pcnode.check(checker.n["filesystems checked"] > 0 and checker.n["wrong filesystems"] == 0 and
                 checker.n["torn journals"] == 0,
                 "%d flush points of %d logged writes: every journal parses and names only "
                 "filesystems the disk shows (%d checked)" %
                 (points, entries, checker.n["filesystems checked"]))
    pcnode.say("replay " + json.dumps(dict(checker.n, entries=entries), sort_keys=True))
    sys.exit(1 if pcnode.failed() else 0)


if __name__ == "__main__":
    main()
